package docker_test

import (
	"archive/tar"
	"compress/gzip"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sandboxfleet/terraform-provider-sandbox/internal/driver"
)

// imageName returns a unique test tag removed from the engine at cleanup.
func imageName(t *testing.T, kind string) string {
	name := "sandbox-test/" + kind + ":" + randName()
	t.Cleanup(func() { removeImage(name) })
	return name
}

func writeFiles(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func TestBuildWithIgnoreArgsTarget(t *testing.T) {
	d := openBackend(t, driver.DockerConfig{})
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{
		"build/Containerfile": "FROM " + fixture.tag + " AS base\nARG GREETING=none\nRUN echo $GREETING > /greeting\nCOPY . /ctx\n" +
			"FROM base AS other\nRUN touch /other\n",
		".dockerignore":    "secret.txt\nignored\n!ignored/kept.txt\n",
		"keep.txt":         "k",
		"secret.txt":       "s",
		"ignored/a.txt":    "a",
		"ignored/kept.txt": "kept",
	})
	name := imageName(t, "build")
	img, err := d.EnsureImage(ctxT(t), driver.ImageSpec{Name: name, Labels: map[string]string{"purpose": "test"},
		Build: &driver.BuildSource{ContextDir: dir, Dockerfile: "build/Containerfile", Args: map[string]string{"GREETING": "hello"}, Target: "base"}})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(img.ID, "sha256:") || img.Labels["purpose"] != "test" || img.Labels[driver.LabelManagedBy] == "" {
		t.Fatalf("image %+v", img)
	}
	inst, err := d.CreateInstance(ctxT(t), driver.InstanceSpec{Name: "b", Image: img.ID, Command: []string{"sleep", "60"}, Running: true})
	if err != nil {
		t.Fatal(err)
	}
	got := mustExec(t, d, inst.ID, "sh", "-c", "cat /greeting; cd /ctx && find . -type f | sort; test -e /other && echo other-stage; true")
	want := "hello\n./.dockerignore\n./build/Containerfile\n./ignored/kept.txt\n./keep.txt\n"
	if got != want {
		t.Fatalf("context in image:\n%s\nwant:\n%s", got, want)
	}
	if err := d.DeleteInstance(ctxT(t), inst.ID); err != nil {
		t.Fatal(err)
	}
	if err := d.DeleteImage(ctxT(t), name, img.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := d.InspectImage(ctxT(t), name); !driver.IsNotFound(err) {
		t.Fatalf("after delete: %v", err)
	}
	if err := d.DeleteImage(ctxT(t), name, img.ID); err != nil {
		t.Fatalf("second delete: %v", err)
	}
}

func TestBuildFailureShowsLog(t *testing.T) {
	d := openBackend(t, driver.DockerConfig{})
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"Dockerfile": "FROM " + fixture.tag + "\nRUN echo marker-before-failure && false\n"})
	_, err := d.EnsureImage(ctxT(t), driver.ImageSpec{Name: imageName(t, "broken"), Build: &driver.BuildSource{ContextDir: dir}})
	t.Log(err)
	if err == nil || !strings.Contains(err.Error(), "marker-before-failure") || !strings.Contains(err.Error(), "non-zero code") {
		t.Fatalf("err = %v", err)
	}
}

func TestPullUnreachableRegistry(t *testing.T) {
	d := openBackend(t, driver.DockerConfig{})
	_, err := d.EnsureImage(ctxT(t), driver.ImageSpec{Name: imageName(t, "pulled"), Pull: &driver.PullSource{Ref: "127.0.0.1:1/nothing:latest"}})
	t.Log(err)
	if err == nil || !strings.Contains(err.Error(), "registry reachable") {
		t.Fatalf("err = %v", err)
	}
}

func TestArchiveRootfsAndImageTarball(t *testing.T) {
	d := openBackend(t, driver.DockerConfig{})
	dir := t.TempDir()

	// A plain rootfs (gzip): imported.
	rootfs := filepath.Join(dir, "rootfs.tar.gz")
	writeRootfs(t, rootfs)
	name := imageName(t, "rootfs")
	img, err := d.EnsureImage(ctxT(t), driver.ImageSpec{Name: name, Archive: &driver.ArchiveSource{Path: rootfs}, Labels: map[string]string{"k": "v"}})
	if err != nil {
		t.Fatal(err)
	}
	if img.Labels["k"] != "v" {
		t.Errorf("labels %v", img.Labels)
	}
	inst, err := d.CreateInstance(ctxT(t), driver.InstanceSpec{Name: "r", Image: name, Command: []string{"/bin/busybox", "sleep", "60"}, Running: true})
	if err != nil {
		t.Fatal(err)
	}
	if got := mustExec(t, d, inst.ID, "/bin/busybox", "echo", "imported"); got != "imported\n" {
		t.Fatalf("%q", got)
	}

	// An image tarball (docker save): loaded and tagged.
	saved := filepath.Join(dir, "image.tar")
	rc, err := rawClient(t).ImageSave(ctxT(t), []string{fixture.tag})
	if err != nil {
		t.Fatal(err)
	}
	f, _ := os.Create(saved)
	_, err = io.Copy(f, rc)
	rc.Close()
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	loaded := imageName(t, "loaded")
	img2, err := d.EnsureImage(ctxT(t), driver.ImageSpec{Name: loaded, Archive: &driver.ArchiveSource{Path: saved}})
	if err != nil {
		t.Fatal(err)
	}
	if img2.ID != fixture.image {
		t.Fatalf("loaded %s, want %s", img2.ID, fixture.image)
	}
	if err := d.DeleteImage(ctxT(t), loaded, img2.ID); err != nil {
		t.Fatal(err)
	}
	// The fixture's own tag keeps the image.
	if _, err := d.InspectImage(ctxT(t), fixture.image); err != nil {
		t.Fatalf("fixture image gone: %v", err)
	}
}

func writeRootfs(t *testing.T, path string) {
	t.Helper()
	bb, err := os.ReadFile("/bin/busybox")
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	gz := gzip.NewWriter(f)
	tw := tar.NewWriter(gz)
	_ = tw.WriteHeader(&tar.Header{Name: "bin/", Typeflag: tar.TypeDir, Mode: 0o755})
	_ = tw.WriteHeader(&tar.Header{Name: "bin/busybox", Typeflag: tar.TypeReg, Mode: 0o755, Size: int64(len(bb))})
	_, _ = tw.Write(bb)
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := gz.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestDeleteImageAfterTagMoved(t *testing.T) {
	d := openBackend(t, driver.DockerConfig{})
	name := imageName(t, "moved")
	first := buildVersion(t, d, name, "1")
	second := buildVersion(t, d, name, "2")
	if first.ID == second.ID {
		t.Fatal("builds gave the same image")
	}
	if err := d.DeleteImage(ctxT(t), name, first.ID); err != nil {
		t.Fatal(err)
	}
	if got, err := d.InspectImage(ctxT(t), name); err != nil || got.ID != second.ID {
		t.Fatalf("tag after deleting the old image: %+v %v", got, err)
	}
	if _, err := d.InspectImage(ctxT(t), first.ID); !driver.IsNotFound(err) {
		t.Fatalf("old image: %v, want not found", err)
	}
}

// The other order: the image holding the tag goes first and takes the tag
// with it; the older image is still removed, by its ID.
func TestDeleteImageAfterTagGone(t *testing.T) {
	d := openBackend(t, driver.DockerConfig{})
	name := imageName(t, "gone")
	first := buildVersion(t, d, name, "1")
	second := buildVersion(t, d, name, "2")
	for _, img := range []driver.Image{second, first} {
		if err := d.DeleteImage(ctxT(t), name, img.ID); err != nil {
			t.Fatal(err)
		}
		if _, err := d.InspectImage(ctxT(t), img.ID); !driver.IsNotFound(err) {
			t.Fatalf("image %s after its delete: %v, want not found", img.ID, err)
		}
	}
}

// buildVersion builds tag name from a Dockerfile that writes v, so each
// version is a different image.
func buildVersion(t *testing.T, d driver.Driver, name, v string) driver.Image {
	t.Helper()
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"Dockerfile": "FROM " + fixture.tag + "\nRUN echo " + v + " > /v\n"})
	img, err := d.EnsureImage(ctxT(t), driver.ImageSpec{Name: name, Build: &driver.BuildSource{ContextDir: dir}})
	if err != nil {
		t.Fatal(err)
	}
	return img
}
