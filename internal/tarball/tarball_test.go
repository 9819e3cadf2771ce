package tarball

import (
	"archive/tar"
	"bytes"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

// entries lists the names and link targets of a tar stream.
func entries(t *testing.T, b []byte) []string {
	t.Helper()
	var out []string
	tr := tar.NewReader(bytes.NewReader(b))
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, hdr.Name+">"+hdr.Linkname)
	}
}

// TestTopLevelLinkIsFollowed: a directory given as a symlink is written
// as the directory (the link alone wrote an empty stream), links inside
// it stay links.
func TestTopLevelLinkIsFollowed(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "sub", "f"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("sub/f", filepath.Join(dir, "l")); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(t.TempDir(), "link")
	if err := os.Symlink(dir, link); err != nil {
		t.Fatal(err)
	}
	want := []string{"l>sub/f", "sub/>", "sub/f>"}
	var viaLink, viaDir bytes.Buffer
	if err := WriteDir(&viaLink, link, nil, nil); err != nil {
		t.Fatal(err)
	}
	if err := WriteDir(&viaDir, dir, nil, nil); err != nil {
		t.Fatal(err)
	}
	if got := entries(t, viaLink.Bytes()); !reflect.DeepEqual(got, want) || !reflect.DeepEqual(got, entries(t, viaDir.Bytes())) {
		t.Errorf("WriteDir through a link: %q, want %q as for the directory", got, want)
	}

	var added bytes.Buffer
	tw := tar.NewWriter(&added)
	if err := AddDir(tw, link, "vol"); err != nil {
		t.Fatal(err)
	}
	_ = tw.Close()
	if got := entries(t, added.Bytes()); !reflect.DeepEqual(got, []string{"vol/>", "vol/l>sub/f", "vol/sub/>", "vol/sub/f>"}) {
		t.Errorf("AddDir through a link: %q", got)
	}
	if err := WriteDir(io.Discard, filepath.Join(dir, "l"), nil, nil); err == nil {
		t.Error("a link to a file was written as a directory")
	}
}
