package sourcehash

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func write(t *testing.T, dir, rel, content string) {
	t.Helper()
	p := filepath.Join(dir, rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func mustDir(t *testing.T, dir string, ignore bool, keep ...string) string {
	t.Helper()
	h, err := Dir(dir, ignore, keep...)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(h, Prefix) {
		t.Fatalf("hash %q lacks prefix", h)
	}
	return h
}

func TestDirChangesWithContentNameAndMode(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, "Dockerfile", "FROM scratch\n")
	write(t, dir, "sub/a.txt", "a")
	base := mustDir(t, dir, true)

	if again := mustDir(t, dir, true); again != base {
		t.Fatal("hash is not stable")
	}
	// mtime alone does not count
	later := time.Now().Add(time.Hour)
	_ = os.Chtimes(filepath.Join(dir, "sub/a.txt"), later, later)
	if h := mustDir(t, dir, true); h != base {
		t.Fatal("mtime changed the hash")
	}
	write(t, dir, "sub/a.txt", "b")
	changed := mustDir(t, dir, true)
	if changed == base {
		t.Fatal("content change not seen")
	}
	_ = os.Chmod(filepath.Join(dir, "sub/a.txt"), 0o755)
	if h := mustDir(t, dir, true); h == changed {
		t.Fatal("mode change not seen")
	}
	_ = os.Rename(filepath.Join(dir, "sub/a.txt"), filepath.Join(dir, "sub/c.txt"))
	if h := mustDir(t, dir, true); h == changed {
		t.Fatal("rename not seen")
	}
}

func TestDirHonoursDockerignore(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, "Dockerfile", "FROM scratch\n")
	write(t, dir, ".dockerignore", "logs\n*.tmp\n!keep.tmp\nDockerfile\n")
	write(t, dir, "app", "v1")
	base := mustDir(t, dir, true, "Dockerfile")

	write(t, dir, "logs/x.log", "noise")
	write(t, dir, "scratch.tmp", "noise")
	if h := mustDir(t, dir, true, "Dockerfile"); h != base {
		t.Fatal("ignored files changed the hash")
	}
	write(t, dir, "keep.tmp", "kept by an exception")
	withKeep := mustDir(t, dir, true, "Dockerfile")
	if withKeep == base {
		t.Fatal("a ! exception was ignored")
	}
	write(t, dir, "Dockerfile", "FROM scratch\nCOPY app /\n")
	if h := mustDir(t, dir, true, "Dockerfile"); h == withKeep {
		t.Fatal("the Dockerfile is always sent, even when .dockerignore lists it")
	}
	// Without dockerignore, everything counts.
	plain := mustDir(t, dir, false)
	write(t, dir, "logs/x.log", "more noise")
	if h := mustDir(t, dir, false); h == plain {
		t.Fatal("without dockerignore every file counts")
	}
}

func TestDirSymlink(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, "a", "x")
	if err := os.Symlink("a", filepath.Join(dir, "l")); err != nil {
		t.Fatal(err)
	}
	base := mustDir(t, dir, false)
	_ = os.Remove(filepath.Join(dir, "l"))
	_ = os.Symlink("b", filepath.Join(dir, "l"))
	if h := mustDir(t, dir, false); h == base {
		t.Fatal("symlink target change not seen")
	}
}

func TestErrors(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, "f", "x")
	if _, err := Dir(filepath.Join(dir, "missing"), false); err == nil {
		t.Error("missing dir: want error")
	}
	if _, err := Dir(filepath.Join(dir, "f"), false); err == nil {
		t.Error("file as dir: want error")
	}
	if _, err := File(dir); err == nil {
		t.Error("dir as file: want error")
	}
	a, err := File(filepath.Join(dir, "f"))
	if err != nil {
		t.Fatal(err)
	}
	write(t, dir, "f", "y")
	if b, _ := File(filepath.Join(dir, "f")); a == b {
		t.Error("file content change not seen")
	}
}

// TestDirFollowsATopLevelLink: a source given as a symlink to a directory
// hashes as that directory (walked as the link, it hashed as empty), while
// a link below the top stays a link.
func TestDirFollowsATopLevelLink(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, "a.txt", "a")
	if err := os.Symlink("a.txt", filepath.Join(dir, "inner")); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(t.TempDir(), "link")
	if err := os.Symlink(dir, link); err != nil {
		t.Fatal(err)
	}
	empty := mustDir(t, t.TempDir(), false)
	if got, want := mustDir(t, link, false), mustDir(t, dir, false); got != want || got == empty {
		t.Errorf("hash through the link %s, of the directory %s (empty: %s)", got, want, empty)
	}
	write(t, dir, "a.txt", "changed")
	if got, want := mustDir(t, link, false), mustDir(t, dir, false); got != want {
		t.Errorf("after a change: hash through the link %s, of the directory %s", got, want)
	}
	if _, err := Dir(filepath.Join(dir, "inner"), false); err == nil {
		t.Error("a link to a file hashed as a directory")
	}
}
