package local

import (
	"archive/tar"
	"bufio"
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// openArchive opens a tar file, decompressing gzip when the magic says so.
func openArchive(p string) (io.ReadCloser, error) {
	f, err := os.Open(p)
	if err != nil {
		return nil, err
	}
	return maybeGzip(f, f)
}

// maybeGzip wraps r in a gzip reader when it starts with the gzip magic.
func maybeGzip(r io.Reader, c io.Closer) (io.ReadCloser, error) {
	br := bufio.NewReader(r)
	magic, _ := br.Peek(2)
	if len(magic) == 2 && magic[0] == 0x1f && magic[1] == 0x8b {
		zr, err := gzip.NewReader(br)
		if err != nil {
			c.Close()
			return nil, err
		}
		return struct {
			io.Reader
			io.Closer
		}{zr, c}, nil
	}
	return struct {
		io.Reader
		io.Closer
	}{br, c}, nil
}

// dockerManifest is one entry of a `docker save` manifest.json.
type dockerManifest struct {
	Layers []string `json:"Layers"`
}

// extractArchive unpacks an archive into dest: a plain rootfs tarball as
// is, or a `docker save` image tarball (manifest.json + layers) flattened
// layer by layer with whiteouts applied.
func extractArchive(archive, dest string) error {
	layers, err := dockerLayers(archive)
	if err != nil {
		return err
	}
	if layers == nil {
		r, err := openArchive(archive)
		if err != nil {
			return err
		}
		defer r.Close()
		return extractTar(r, dest, false)
	}
	for _, layer := range layers {
		if err := extractLayer(archive, layer, dest); err != nil {
			return fmt.Errorf("layer %s: %w", layer, err)
		}
	}
	return nil
}

// dockerLayers returns the layer paths of an image tarball, or nil for a
// plain rootfs tarball.
func dockerLayers(archive string) ([]string, error) {
	r, err := openArchive(archive)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil, nil
		}
		if err != nil {
			return nil, err
		}
		if path.Clean(h.Name) != "manifest.json" {
			continue
		}
		var m []dockerManifest
		if err := json.NewDecoder(tr).Decode(&m); err != nil {
			return nil, fmt.Errorf("manifest.json: %w", err)
		}
		if len(m) == 0 || len(m[0].Layers) == 0 {
			return nil, fmt.Errorf("manifest.json lists no image layers")
		}
		return m[0].Layers, nil
	}
}

// extractLayer finds one layer in the image tarball and applies it.
func extractLayer(archive, layer, dest string) error {
	r, err := openArchive(archive)
	if err != nil {
		return err
	}
	defer r.Close()
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return fmt.Errorf("not found in the archive")
		}
		if err != nil {
			return err
		}
		if path.Clean(h.Name) != path.Clean(layer) {
			continue
		}
		lr, err := maybeGzip(tr, io.NopCloser(nil))
		if err != nil {
			return err
		}
		return extractTar(lr, dest, true)
	}
}

// extractTar unpacks a tar stream below dest; with layer set, OCI
// whiteouts (.wh.NAME, .wh..wh..opq) delete what earlier layers made.
func extractTar(r io.Reader, dest string, layer bool) error {
	rootfd, err := unix.Open(dest, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(rootfd)
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		if err := extractEntry(rootfd, tr, h, layer); err != nil {
			return fmt.Errorf("entry %q: %w", h.Name, err)
		}
	}
}

func extractEntry(rootfd int, tr *tar.Reader, h *tar.Header, layer bool) error {
	rel := cleanRel(h.Name)
	if rel == "" {
		return nil // the root directory itself keeps our permissions
	}
	pfd, base, err := openParent(rootfd, rel, true)
	if err != nil {
		return err
	}
	defer unix.Close(pfd)
	if layer && strings.HasPrefix(base, ".wh.") {
		return whiteout(pfd, base)
	}
	if h.Typeflag != tar.TypeDir {
		removeAt(pfd, base)
	}
	mode := uint32(h.Mode) & 0o7777
	switch h.Typeflag {
	case tar.TypeDir:
		if err := mkdirAt(pfd, base); err != nil {
			return err
		}
	case tar.TypeReg: // Go's reader reports old-style regular files (TypeRegA) as TypeReg
		if err := writeEntry(pfd, base, tr, mode); err != nil {
			return err
		}
	case tar.TypeSymlink:
		if err := unix.Symlinkat(h.Linkname, pfd, base); err != nil {
			return err
		}
	case tar.TypeLink:
		tfd, tbase, err := openParent(rootfd, cleanRel(h.Linkname), false)
		if err != nil {
			return fmt.Errorf("hard link target %q: %w", h.Linkname, err)
		}
		err = unix.Linkat(tfd, tbase, pfd, base, 0)
		unix.Close(tfd)
		return err // a hard link shares its target's owner, mode and times
	case tar.TypeFifo:
		if err := unix.Mknodat(pfd, base, unix.S_IFIFO|mode, 0); err != nil {
			return err
		}
	default:
		// Device nodes are skipped: sandboxes get a private /dev.
		return nil
	}
	return setMeta(pfd, base, h, mode)
}

// mkdirAt makes a directory, keeping an existing one (later layers and
// repeated entries refer to it) but replacing anything else.
func mkdirAt(pfd int, base string) error {
	err := unix.Mkdirat(pfd, base, 0o700)
	if !errors.Is(err, unix.EEXIST) {
		return err
	}
	var st unix.Stat_t
	if err := unix.Fstatat(pfd, base, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return err
	}
	if st.Mode&unix.S_IFMT == unix.S_IFDIR {
		return nil
	}
	removeAt(pfd, base)
	return unix.Mkdirat(pfd, base, 0o700)
}

// writeEntry writes a regular file's content.
func writeEntry(pfd int, base string, r io.Reader, mode uint32) error {
	fd, err := unix.Openat(pfd, base, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, mode&0o777)
	if err != nil {
		return err
	}
	f := os.NewFile(uintptr(fd), base)
	defer f.Close()
	if _, err := io.Copy(f, r); err != nil {
		return err
	}
	return f.Close()
}

// setMeta applies owner, mode and mtime; ownership only works as root and is
// skipped otherwise.
func setMeta(pfd int, base string, h *tar.Header, mode uint32) error {
	if os.Geteuid() == 0 {
		if err := unix.Fchownat(pfd, base, h.Uid, h.Gid, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			return err
		}
	}
	if h.Typeflag != tar.TypeSymlink {
		// After chown, which clears the set-id bits.
		if err := unix.Fchmodat(pfd, base, mode, 0); err != nil {
			return err
		}
	}
	mt := h.ModTime
	if mt.IsZero() {
		mt = time.Unix(0, 0)
	}
	ts := []unix.Timespec{unix.NsecToTimespec(mt.UnixNano()), unix.NsecToTimespec(mt.UnixNano())}
	_ = unix.UtimesNanoAt(pfd, base, ts, unix.AT_SYMLINK_NOFOLLOW)
	return nil
}

// removeAt removes whatever is at base (a file, a link, or a whole tree).
func removeAt(pfd int, base string) {
	if err := unix.Unlinkat(pfd, base, 0); err == nil || errors.Is(err, unix.ENOENT) {
		return
	}
	_ = os.RemoveAll(filepath.Join(fdPath(pfd), base))
}

// whiteout applies an OCI whiteout entry of a layer.
func whiteout(pfd int, base string) error {
	if base == ".wh..wh..opq" {
		// Opaque directory: nothing from earlier layers shows through.
		entries, err := os.ReadDir(fdPath(pfd))
		if err != nil {
			return err
		}
		for _, e := range entries {
			removeAt(pfd, e.Name())
		}
		return nil
	}
	removeAt(pfd, strings.TrimPrefix(base, ".wh."))
	return nil
}
