package incus

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/lxc/incus/v6/shared/api"

	"github.com/sandboxfleet/terraform-provider-sandbox/internal/driver"
)

func TestLabelKeys(t *testing.T) {
	for label, key := range map[string]string{
		"role":                   "user.role",
		"app.kubernetes.io/name": "user.app.kubernetes.io/name",
		"a b=c%":                 "user.a%20b%3Dc%25",
		"sandbox.managed-by":     "user.sandbox.managed-by",
	} {
		if got := labelKey(label); got != key {
			t.Errorf("labelKey(%q) = %q, want %q", label, got, key)
		}
		if back, ok := labelFromKey(key); !ok || back != label {
			t.Errorf("labelFromKey(%q) = %q, %v", key, back, ok)
		}
	}
	cfg := map[string]string{"user.role": "w", keyUser: "1000", "limits.cpu": "1", "volatile.x": "y"}
	if got := labelsFromConfig(cfg); !reflect.DeepEqual(got, map[string]string{"role": "w"}) {
		t.Errorf("labelsFromConfig = %v (internal and non-user keys must not be labels)", got)
	}
}

// The pull request: parsed reference and copy arguments (no network here).
func TestParsePullRef(t *testing.T) {
	cases := map[string]pullRef{
		"images:debian/12":         {Server: DefaultImageServer, Protocol: protoSimpleStreams, Alias: "debian/12", Type: "container"},
		"debian/12?type=vm":        {Server: DefaultImageServer, Protocol: protoSimpleStreams, Alias: "debian/12", Type: "virtual-machine"},
		"https://img.example/s:al": {Server: "https://img.example/s", Protocol: protoSimpleStreams, Alias: "al", Type: "container"},
		"incus+https://h:8443:alpine/3.20": {
			Server: "https://h:8443", Protocol: protoIncus, Alias: "alpine/3.20", Type: "container"},
	}
	for ref, want := range cases {
		got, err := parsePullRef(ref)
		if err != nil || got != want {
			t.Errorf("parsePullRef(%q) = %+v, %v; want %+v", ref, got, err, want)
		}
	}
	for _, bad := range []string{"images:", "x?arch=arm", "https://host"} {
		if _, err := parsePullRef(bad); err == nil {
			t.Errorf("parsePullRef(%q) succeeded", bad)
		}
	}
	args := copyArgs(cases["debian/12?type=vm"])
	if args.Type != "virtual-machine" || args.Mode != "pull" || args.AutoUpdate || len(args.Aliases) != 0 {
		t.Errorf("copyArgs = %+v", args)
	}
}

func TestParseFingerprint(t *testing.T) {
	hexfp := "4f3c5e2b8a1d9c7e6f5a4b3c2d1e0f9a8b7c6d5e4f3a2b1c0d9e8f7a6b5c4d3e"
	for _, s := range []string{hexfp, "SHA256:" + hexfp, "4F:3C:5E:2B:8A:1D:9C:7E:6F:5A:4B:3C:2D:1E:0F:9A:8B:7C:6D:5E:4F:3A:2B:1C:0D:9E:8F:7A:6B:5C:4D:3E"} {
		if b, err := parseFingerprint(s); err != nil || len(b) != 32 {
			t.Errorf("parseFingerprint(%q) = %x, %v", s, b, err)
		}
	}
	if _, err := parseFingerprint("abcd"); err == nil {
		t.Error("short fingerprint accepted")
	}
}

func TestRemoteNeedsClientCert(t *testing.T) {
	_, _, err := remoteArgs(driver.IncusConfig{Address: "https://h:8443"})
	if err == nil {
		t.Fatal("remote without client certificate accepted")
	}
	if _, err := isRemote("tcp://h:8443"); err == nil {
		t.Error("tcp:// address accepted")
	}
}

func TestParseListenAndPortsLabel(t *testing.T) {
	ip, port, ok := parseListen("tcp:127.0.0.5:8080")
	if !ok || ip != "127.0.0.5" || port != "8080" {
		t.Errorf("parseListen = %q %q %v", ip, port, ok)
	}
	ports := []driver.PortSpec{{Name: "web", Port: 80, Protocol: "tcp"}, {Name: "dns", Port: 53, Protocol: "udp"}}
	got := parsePortsLabel(portsLabel(ports))
	if len(got) != 2 || got[0].Name != "dns" || got[1].Port != 80 {
		t.Errorf("ports label round trip = %+v", got)
	}
}

// The seeded volume is a custom-volume backup: index first, files under
// backup/volume/.
func TestWriteVolumeBackup(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "sub", "f.txt"), []byte("hello"), 0o640); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := writeVolumeBackup(&buf, "default", "vol", map[string]string{"user.a": "b"}, dir); err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(&buf)
	var names []string
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, h.Name)
		if h.Name == "backup/index.yaml" {
			var idx backupIndex
			if err := json.NewDecoder(tr).Decode(&idx); err != nil {
				t.Fatal(err)
			}
			if idx.Type != "custom" || idx.Config.Volume.Config["user.a"] != "b" || idx.Pool != "default" {
				t.Errorf("index %+v", idx)
			}
		}
		if h.Name == "backup/volume/sub/f.txt" && h.Mode&0o777 != 0o640 {
			t.Errorf("mode %o", h.Mode)
		}
	}
	want := []string{"backup/index.yaml", "backup/volume/", "backup/volume/sub/", "backup/volume/sub/f.txt"}
	if !reflect.DeepEqual(names, want) {
		t.Errorf("entries %v, want %v", names, want)
	}
}

func TestArchiveDetection(t *testing.T) {
	dir := t.TempDir()
	unified := filepath.Join(dir, "unified.tar.gz")
	rootfs := filepath.Join(dir, "rootfs.tar.gz")
	writeTarGz(t, unified, "metadata.yaml", "rootfs/bin/x")
	writeTarGz(t, rootfs, "./bin/x", "./etc/passwd")
	if ok, err := hasMetadata(unified); err != nil || !ok {
		t.Errorf("unified: %v %v", ok, err)
	}
	if ok, err := hasMetadata(rootfs); err != nil || ok {
		t.Errorf("rootfs: %v %v", ok, err)
	}
	a, _ := metadataTar("x86_64", time.Unix(1700000000, 0), "img")
	b, _ := metadataTar("x86_64", time.Unix(1700000000, 0), "img")
	if !bytes.Equal(a, b) {
		t.Error("generated metadata is not deterministic (the fingerprint would change)")
	}
	split := t.TempDir()
	for _, n := range []string{"metadata.yaml", "rootfs.squashfs"} {
		if err := os.WriteFile(filepath.Join(split, n), []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	meta, rfs, vm, err := findSplitFiles(split)
	if err != nil || filepath.Base(meta) != "metadata.yaml" || filepath.Base(rfs) != "rootfs.squashfs" || vm {
		t.Errorf("findSplitFiles = %s %s %v %v", meta, rfs, vm, err)
	}
}

func writeTarGz(t *testing.T, path string, names ...string) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zw := gzip.NewWriter(f)
	tw := tar.NewWriter(zw)
	for _, n := range names {
		if err := tw.WriteHeader(&tar.Header{Name: n, Mode: 0o644, Size: 1}); err != nil {
			t.Fatal(err)
		}
		_, _ = tw.Write([]byte("x"))
	}
	_ = tw.Close()
	_ = zw.Close()
}

func TestTranslate(t *testing.T) {
	nf := api.StatusErrorf(404, "Instance not found")
	if err := translate(nf); !errors.Is(err, driver.ErrNotFound) {
		t.Errorf("404 -> %v", err)
	}
	if err := translate(api.StatusErrorf(409, "exists")); !errors.Is(err, driver.ErrAlreadyExists) {
		t.Errorf("409 -> %v", err)
	}
	if err := translate(errors.New("boom")); driver.IsNotFound(err) {
		t.Errorf("plain error became not found")
	}
}

func TestOpenDefaults(t *testing.T) {
	d, err := Open(context.Background(), driver.Config{Driver: driver.Incus, Name: "b1", Incus: &driver.IncusConfig{}})
	if err != nil {
		t.Fatal(err)
	}
	c := d.(*Driver).cfg
	if c.Project != "b1" || c.StoragePool != DefaultStoragePool || c.Network != DefaultNetwork || c.PortStrategy != driver.PortStrategyLoopbackIP {
		t.Errorf("defaults %+v", c)
	}
}
