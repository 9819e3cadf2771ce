package incus

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	incus "github.com/lxc/incus/v6/client"

	"github.com/sandboxfleet/terraform-provider-sandbox/internal/driver"
)

// importArchive imports spec.Archive.Path (see images.go for the forms).
func (d *Driver) importArchive(ctx context.Context, c incus.InstanceServer, spec driver.ImageSpec) (string, error) {
	path := spec.Archive.Path
	st, err := os.Stat(path)
	if err != nil {
		return "", err
	}
	if st.IsDir() {
		return d.importSplitDir(ctx, c, spec, path)
	}
	unified, err := hasMetadata(path)
	if err != nil {
		return "", err
	}
	if !unified {
		return d.importRootfs(ctx, c, spec, path, st.ModTime())
	}
	fp, err := fileSHA256(path)
	if err != nil {
		return "", err
	}
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	return d.upload(ctx, c, spec, fp, f, nil, false)
}

// importRootfs imports a plain rootfs tarball with generated metadata.
func (d *Driver) importRootfs(ctx context.Context, c incus.InstanceServer, spec driver.ImageSpec, rootfs string, mtime time.Time) (string, error) {
	arch, err := d.serverArch(ctx)
	if err != nil {
		return "", err
	}
	meta, err := metadataTar(arch, mtime, spec.Name)
	if err != nil {
		return "", err
	}
	return d.uploadSplit(ctx, c, spec, meta, rootfs, false)
}

// importSplitDir imports a directory holding metadata and rootfs files.
func (d *Driver) importSplitDir(ctx context.Context, c incus.InstanceServer, spec driver.ImageSpec, dir string) (string, error) {
	metaPath, rootfsPath, vm, err := findSplitFiles(dir)
	if err != nil {
		return "", err
	}
	var meta []byte
	if filepath.Base(metaPath) == "metadata.yaml" {
		meta, err = tarOne("metadata.yaml", metaPath)
	} else {
		meta, err = os.ReadFile(metaPath)
	}
	if err != nil {
		return "", err
	}
	return d.uploadSplit(ctx, c, spec, meta, rootfsPath, vm)
}

// uploadSplit fingerprints meta+rootfs and uploads them if missing.
func (d *Driver) uploadSplit(ctx context.Context, c incus.InstanceServer, spec driver.ImageSpec, meta []byte, rootfsPath string, vm bool) (string, error) {
	h := sha256.New()
	h.Write(meta)
	f, err := os.Open(rootfsPath)
	if err != nil {
		return "", err
	}
	defer f.Close()
	if _, err := io.Copy(h, f); err != nil {
		return "", fmt.Errorf("read %s: %w", rootfsPath, err)
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return "", err
	}
	return d.upload(ctx, c, spec, hex.EncodeToString(h.Sum(nil)), bytes.NewReader(meta), f, vm)
}

// findSplitFiles locates the metadata and rootfs files of a split image.
func findSplitFiles(dir string) (meta, rootfs string, vm bool, err error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return "", "", false, err
	}
	for _, e := range entries {
		n := e.Name()
		switch {
		case n == "metadata.yaml" && meta == "",
			strings.HasPrefix(n, "metadata.tar"), strings.HasPrefix(n, "meta.tar"), strings.HasPrefix(n, "incus.tar"):
			meta = filepath.Join(dir, n)
		case n == "rootfs.squashfs", strings.HasPrefix(n, "rootfs.tar"):
			rootfs = filepath.Join(dir, n)
		case n == "rootfs.img", n == "disk.qcow2":
			rootfs, vm = filepath.Join(dir, n), true
		}
	}
	if meta == "" || rootfs == "" {
		return "", "", false, fmt.Errorf("%s: a split image directory needs a metadata file (metadata.yaml or metadata.tar*) and a rootfs file (rootfs.squashfs, rootfs.tar*, rootfs.img or disk.qcow2)", dir)
	}
	return meta, rootfs, vm, nil
}

// hasMetadata reports whether a tarball holds metadata.yaml at its top
// (a unified image). Only plain and gzip tarballs can be looked into here;
// other compressions are taken to be unified images.
func hasMetadata(path string) (bool, error) {
	f, err := os.Open(path)
	if err != nil {
		return false, err
	}
	defer f.Close()
	var r io.Reader = f
	if zr, err := gzip.NewReader(f); err == nil {
		defer zr.Close()
		r = zr
	} else if _, err := f.Seek(0, io.SeekStart); err != nil {
		return false, err
	}
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return false, nil
		}
		if err != nil {
			// Not a tar we can read (xz, zstd, squashfs): let Incus decide.
			return true, nil
		}
		if strings.TrimPrefix(h.Name, "./") == "metadata.yaml" {
			return true, nil
		}
	}
}

// metadataTar builds a deterministic metadata tarball (same input, same
// bytes, so the same fingerprint).
func metadataTar(arch string, created time.Time, name string) ([]byte, error) {
	yaml := fmt.Sprintf("architecture: %q\ncreation_date: %d\nproperties:\n  description: %q\n",
		arch, created.Unix(), "imported by terraform-provider-sandbox: "+name)
	return tarBytes("metadata.yaml", []byte(yaml), created)
}

// tarOne wraps one file in a tarball under name.
func tarOne(name, path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	st, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	return tarBytes(name, b, st.ModTime())
}

func tarBytes(name string, content []byte, mtime time.Time) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	hdr := &tar.Header{Name: name, Mode: 0o644, Size: int64(len(content)), ModTime: mtime.Truncate(time.Second), Format: tar.FormatPAX}
	if err := tw.WriteHeader(hdr); err != nil {
		return nil, err
	}
	if _, err := tw.Write(content); err != nil {
		return nil, err
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
