package local

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/sandboxfleet/terraform-provider-sandbox/internal/driver"
)

type entry struct {
	name, body, link string
	typ              byte
}

func tarBytes(t *testing.T, entries []entry, gz bool) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		typ := e.typ
		if typ == 0 {
			typ = tar.TypeReg
		}
		h := &tar.Header{Name: e.name, Typeflag: typ, Mode: 0o644, Size: int64(len(e.body)), Linkname: e.link}
		if typ == tar.TypeDir {
			h.Mode, h.Size = 0o755, 0
		}
		if typ != tar.TypeReg {
			h.Size = 0
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if typ == tar.TypeReg {
			_, _ = tw.Write([]byte(e.body))
		}
	}
	_ = tw.Close()
	if !gz {
		return buf.Bytes()
	}
	var zbuf bytes.Buffer
	zw := gzip.NewWriter(&zbuf)
	_, _ = zw.Write(buf.Bytes())
	_ = zw.Close()
	return zbuf.Bytes()
}

func extractTo(t *testing.T, archive []byte) string {
	t.Helper()
	dir := t.TempDir()
	p := filepath.Join(dir, "a.tar")
	if err := os.WriteFile(p, archive, 0o644); err != nil {
		t.Fatal(err)
	}
	dest := filepath.Join(dir, "rootfs")
	if err := os.Mkdir(dest, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := extractArchive(p, dest); err != nil {
		t.Fatalf("extract: %v", err)
	}
	return dest
}

func readIn(t *testing.T, root, p string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, p))
	if err != nil {
		return "<missing>"
	}
	return string(b)
}

func TestExtractPlainGzip(t *testing.T) {
	root := extractTo(t, tarBytes(t, []entry{
		{name: "bin/", typ: tar.TypeDir},
		{name: "bin/tool", body: "tool"},
		{name: "bin/alias", link: "tool", typ: tar.TypeSymlink},
		{name: "bin/hard", link: "bin/tool", typ: tar.TypeLink},
		{name: "deep/er/file", body: "implicit parents"},
	}, true))
	if readIn(t, root, "bin/alias") != "tool" || readIn(t, root, "bin/hard") != "tool" || readIn(t, root, "deep/er/file") != "implicit parents" {
		t.Errorf("extracted tree is wrong")
	}
}

// TestExtractStaysInside: neither "..", absolute names nor symlinks to "/"
// let an archive write outside its root.
func TestExtractStaysInside(t *testing.T) {
	outside := filepath.Join(t.TempDir(), "outside")
	root := extractTo(t, tarBytes(t, []entry{
		{name: "../../escape-dotdot", body: "a"},
		{name: "/abs", body: "b"},
		{name: "up", link: "/", typ: tar.TypeSymlink},
		{name: "up" + outside, body: "c"},
		{name: "rel", link: "../../../..", typ: tar.TypeSymlink},
		{name: "rel/escape-rel", body: "d"},
	}, false))
	if _, err := os.Stat(outside); err == nil {
		t.Fatalf("a write through a symlink to / escaped to %s", outside)
	}
	if readIn(t, root, "escape-dotdot") != "a" || readIn(t, root, "abs") != "b" || readIn(t, root, outside) != "c" || readIn(t, root, "escape-rel") != "d" {
		t.Errorf("entries were not confined to the root")
	}
}

// TestExtractDockerSave flattens a `docker save` tarball, applying whiteouts.
func TestExtractDockerSave(t *testing.T) {
	layer1 := tarBytes(t, []entry{
		{name: "etc/", typ: tar.TypeDir},
		{name: "etc/gone", body: "x"},
		{name: "etc/kept", body: "kept"},
		{name: "opaque/", typ: tar.TypeDir},
		{name: "opaque/old", body: "old"},
	}, false)
	layer2 := tarBytes(t, []entry{
		{name: "etc/.wh.gone", body: ""},
		{name: "opaque/.wh..wh..opq", body: ""},
		{name: "opaque/new", body: "new"},
	}, true)
	manifest, _ := json.Marshal([]dockerManifest{{Layers: []string{"l1/layer.tar", "l2/layer.tar"}}})
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, f := range []struct {
		name string
		body []byte
	}{{"l1/layer.tar", layer1}, {"l2/layer.tar", layer2}, {"manifest.json", manifest}} {
		_ = tw.WriteHeader(&tar.Header{Name: f.name, Mode: 0o644, Size: int64(len(f.body)), Typeflag: tar.TypeReg})
		_, _ = tw.Write(f.body)
	}
	_ = tw.Close()
	root := extractTo(t, buf.Bytes())
	if readIn(t, root, "etc/kept") != "kept" || readIn(t, root, "etc/gone") != "<missing>" ||
		readIn(t, root, "opaque/old") != "<missing>" || readIn(t, root, "opaque/new") != "new" {
		t.Errorf("layers were not flattened with their whiteouts")
	}
	if _, err := os.Stat(filepath.Join(root, "manifest.json")); err == nil {
		t.Error("the image tarball was extracted as a rootfs")
	}
}

// TestImages: content-addressed IDs, lookups by name and ID, unsupported
// sources, and removal once unused. Needs no bwrap.
func TestImages(t *testing.T) {
	ctx := context.Background()
	dr, err := Open(ctx, driver.Config{Driver: driver.Local, Name: "img", Local: &driver.LocalConfig{Root: t.TempDir(), Isolation: driver.IsolationNone}})
	if err != nil {
		t.Fatal(err)
	}
	d := dr.(*Driver)
	archive := filepath.Join(t.TempDir(), "rootfs.tar")
	if err := os.WriteFile(archive, tarBytes(t, []entry{{name: "hello", body: "hi"}}, false), 0o644); err != nil {
		t.Fatal(err)
	}
	a, err := d.EnsureImage(ctx, driver.ImageSpec{Name: "eval/a:1", Archive: &driver.ArchiveSource{Path: archive}})
	if err != nil {
		t.Fatal(err)
	}
	b, err := d.EnsureImage(ctx, driver.ImageSpec{Name: "eval/b:1", Archive: &driver.ArchiveSource{Path: archive}})
	if err != nil || a.ID != b.ID || !isImageID(a.ID) {
		t.Fatalf("same archive, IDs %q %q (%v)", a.ID, b.ID, err)
	}
	if got, err := d.InspectImage(ctx, a.ID); err != nil || got.ID != a.ID {
		t.Errorf("inspect by ID: %+v %v", got, err)
	}
	if _, err := d.EnsureImage(ctx, driver.ImageSpec{Name: "x", Pull: &driver.PullSource{Ref: "busybox"}}); !errors.Is(err, driver.ErrUnsupported) {
		t.Errorf("pull: %v", err)
	}
	if err := d.DeleteImage(ctx, "eval/a:1", a.ID); err != nil {
		t.Fatal(err)
	}
	if readIn(t, d.imageRootfs(a.ID), "hello") != "hi" {
		t.Error("the rootfs went while another name still used it")
	}
	if _, err := d.InspectImage(ctx, "eval/a:1"); !driver.IsNotFound(err) {
		t.Errorf("deleted name: %v", err)
	}
	if err := d.DeleteImage(ctx, "eval/b:1", b.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(d.imageRootfs(a.ID)); !os.IsNotExist(err) {
		t.Error("the rootfs stayed after its last name went")
	}
	if err := d.DeleteScope(ctx); err != nil {
		t.Fatal(err)
	}
}

func TestResolveUser(t *testing.T) {
	etc := t.TempDir()
	writeTestFile(t, filepath.Join(etc, "passwd"), "root:x:0:0::/root:/bin/sh\napp:x:1000:1001::/home/app:/bin/sh\n")
	writeTestFile(t, filepath.Join(etc, "group"), "root:x:0:\nstaff:x:50:\n")
	for in, want := range map[string][2]int{"": {0, 0}, "app": {1000, 1001}, "1000": {1000, 1001}, "app:staff": {1000, 50}, "42": {42, 42}, "42:7": {42, 7}} {
		uid, gid, err := resolveUser(in, etc)
		if err != nil || uid != want[0] || gid != want[1] {
			t.Errorf("resolveUser(%q) = %d:%d %v, want %v", in, uid, gid, err, want)
		}
	}
	if _, _, err := resolveUser("ghost", etc); err == nil {
		t.Error("an unknown user name resolved")
	}
}

func TestLastExitAndRelUnder(t *testing.T) {
	dir := t.TempDir()
	writeTestFile(t, filepath.Join(dir, exitFile), `{ "child-pid": 12 }`+"\n"+`{ "exit-code": 124 }`+"\n")
	if code, ok := lastExit(dir); !ok || code != 124 {
		t.Errorf("lastExit = %d %v", code, ok)
	}
	for _, c := range []struct {
		dir, p, rel string
		ok          bool
	}{{"/workspace", "/workspace/a/b", "a/b", true}, {"/workspace", "/workspace", ".", true}, {"/workspace", "/workspacex", "", false}, {"/", "/etc", "etc", true}} {
		rel, ok := relUnder(c.dir, c.p)
		if rel != c.rel || ok != c.ok {
			t.Errorf("relUnder(%q, %q) = %q %v", c.dir, c.p, rel, ok)
		}
	}
	if _, ok := procStart(os.Getpid()); !ok {
		t.Error("procStart of this process failed")
	}
}
