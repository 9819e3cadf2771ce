package local

import (
	"archive/tar"
	"compress/gzip"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	"github.com/sandboxfleet/terraform-provider-sandbox/internal/driver"
	"github.com/sandboxfleet/terraform-provider-sandbox/internal/sourcehash"
)

// HostImage is the image reference (also "") that means "no rootfs": the
// host's /usr, /bin, /sbin, /lib* and /etc are bound read-only.
const HostImage = "host"

// Images live in <backend>/images: "<hex>/rootfs" holds an extracted archive,
// named by the sha256 of the archive's bytes (the image ID), and
// "refs/<escaped name>.json" maps a name to an ID. Two names for the same
// archive share one rootfs.

type imageRef struct {
	Name   string            `json:"name"`
	ID     string            `json:"id"`
	Labels map[string]string `json:"labels,omitempty"`
}

func (d *Driver) refPath(name string) string {
	return filepath.Join(d.imagesDir(), "refs", url.PathEscape(name)+".json")
}

func (d *Driver) imageRootfs(id string) string {
	return filepath.Join(d.imagesDir(), strings.TrimPrefix(id, "sha256:"), "rootfs")
}

// EnsureImage stores an archive's rootfs under its name. Pull and build need
// a registry and a builder, which a daemonless backend has not.
func (d *Driver) EnsureImage(_ context.Context, spec driver.ImageSpec) (driver.Image, error) {
	switch {
	case spec.Pull != nil:
		return driver.Image{}, d.errf("image %q: pulling needs a registry client; build a rootfs tarball and use `archive` instead: %w", spec.Name, driver.ErrUnsupported)
	case spec.Build != nil:
		return driver.Image{}, d.errf("image %q: building needs an image builder; build a rootfs tarball and use `archive` instead: %w", spec.Name, driver.ErrUnsupported)
	case spec.Archive == nil:
		return driver.Image{}, d.errf("image %q: one of archive, pull or build is required", spec.Name)
	}
	if spec.Name == "" || spec.Name == HostImage {
		return driver.Image{}, d.errf("image name %q is reserved for the host's file system", spec.Name)
	}
	id, err := sourcehash.File(spec.Archive.Path)
	if err != nil {
		return driver.Image{}, d.errf("image %q: read archive: %w", spec.Name, err)
	}
	if err := d.extractOnce(id, spec.Archive.Path); err != nil {
		if formatError(err) {
			err = fmt.Errorf("not a tar archive (plain or gzip-compressed) or a damaged one: %v: %w", err, driver.ErrInvalid)
		}
		return driver.Image{}, d.errf("image %q: extract %s: %w", spec.Name, spec.Archive.Path, err)
	}
	ref := imageRef{Name: spec.Name, ID: id, Labels: driver.ObjectLabels(d.backend, d.cfg.Labels, spec.Labels)}
	b, _ := json.MarshalIndent(ref, "", "  ")
	if err := os.MkdirAll(filepath.Dir(d.refPath(spec.Name)), 0o755); err != nil {
		return driver.Image{}, d.errf("image %q: %w", spec.Name, err)
	}
	if err := writeFileAtomic(d.refPath(spec.Name), b, 0o644); err != nil {
		return driver.Image{}, d.errf("image %q: %w", spec.Name, err)
	}
	return driver.Image{Name: ref.Name, ID: ref.ID, Labels: ref.Labels}, nil
}

// extractOnce extracts the archive into the ID's directory unless it is
// there; concurrent callers each extract into a temporary directory and the
// first rename wins.
func (d *Driver) extractOnce(id, archive string) error {
	final := filepath.Dir(d.imageRootfs(id))
	if _, err := os.Stat(final); err == nil {
		return nil
	}
	if err := os.MkdirAll(d.imagesDir(), 0o711); err != nil {
		return err
	}
	tmp, err := os.MkdirTemp(d.imagesDir(), ".extract-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	rootfs := filepath.Join(tmp, "rootfs")
	if err := os.Mkdir(rootfs, 0o755); err != nil {
		return err
	}
	if err := extractArchive(archive, rootfs); err != nil {
		return err
	}
	if err := os.Rename(tmp, final); err != nil {
		if _, statErr := os.Stat(final); statErr == nil {
			return nil // another process won the race with the same content
		}
		return err
	}
	return nil
}

// InspectImage finds an image by name, by ID ("sha256:<hex>"), or the host
// pseudo-image.
func (d *Driver) InspectImage(_ context.Context, ref string) (driver.Image, error) {
	if ref == "" || ref == HostImage {
		return driver.Image{Name: HostImage, ID: HostImage}, nil
	}
	if isImageID(ref) {
		if _, err := os.Stat(d.imageRootfs(ref)); err != nil {
			return driver.Image{}, d.errf("image %q: %w", ref, driver.ErrNotFound)
		}
		for _, r := range d.refs() {
			if r.ID == ref {
				return driver.Image{Name: r.Name, ID: r.ID, Labels: r.Labels}, nil
			}
		}
		return driver.Image{ID: ref}, nil
	}
	r, err := d.readRef(ref)
	if err != nil {
		return driver.Image{}, err
	}
	if _, err := os.Stat(d.imageRootfs(r.ID)); err != nil {
		return driver.Image{}, d.errf("image %q: its rootfs %s is gone: %w", ref, d.imageRootfs(r.ID), driver.ErrNotFound)
	}
	return driver.Image{Name: r.Name, ID: r.ID, Labels: r.Labels}, nil
}

func isImageID(ref string) bool {
	h := strings.TrimPrefix(ref, "sha256:")
	if len(h) != 64 || h == ref {
		return false
	}
	_, err := hex.DecodeString(h)
	return err == nil
}

func (d *Driver) readRef(name string) (imageRef, error) {
	var r imageRef
	b, err := os.ReadFile(d.refPath(name))
	if errors.Is(err, os.ErrNotExist) {
		return r, d.errf("image %q: %w", name, driver.ErrNotFound)
	}
	if err != nil {
		return r, d.errf("image %q: %w", name, err)
	}
	if err := json.Unmarshal(b, &r); err != nil {
		return r, d.errf("image %q: corrupt reference: %w", name, err)
	}
	return r, nil
}

// refs lists every image name of the backend.
func (d *Driver) refs() []imageRef {
	entries, _ := os.ReadDir(filepath.Join(d.imagesDir(), "refs"))
	var out []imageRef
	for _, e := range entries {
		name, err := url.PathUnescape(strings.TrimSuffix(e.Name(), ".json"))
		if err != nil || !strings.HasSuffix(e.Name(), ".json") {
			continue
		}
		if r, err := d.readRef(name); err == nil {
			out = append(out, r)
		}
	}
	return out
}

// DeleteImage removes the name, then the rootfs once no other name and no
// instance uses it.
func (d *Driver) DeleteImage(_ context.Context, name, id string) error {
	if name != "" && name != HostImage {
		r, err := d.readRef(name)
		switch {
		case err == nil:
			id = r.ID
			if err := os.Remove(d.refPath(name)); err != nil && !errors.Is(err, os.ErrNotExist) {
				return d.errf("image %q: %w", name, err)
			}
		case !driver.IsNotFound(err):
			return err
		case id == "":
			return err
		}
	}
	if !isImageID(id) {
		return d.errf("image %q: %w", name, driver.ErrNotFound)
	}
	if d.imageInUse(id) {
		return nil // the rootfs stays for the names and instances still using it
	}
	if err := os.RemoveAll(filepath.Dir(d.imageRootfs(id))); err != nil {
		return d.errf("image %q: remove rootfs: %w", id, err)
	}
	return nil
}

// imageInUse reports whether a name or an instance still refers to id.
func (d *Driver) imageInUse(id string) bool {
	for _, r := range d.refs() {
		if r.ID == id {
			return true
		}
	}
	states, _ := d.allStates()
	for _, st := range states {
		if st.ImageID == id {
			return true
		}
	}
	return false
}

// resolveImage turns an instance's image reference into the image ID and
// the host directory of its rootfs ("" for the host image).
func (d *Driver) resolveImage(ref string) (id, lower string, err error) {
	if ref == "" || ref == HostImage {
		return HostImage, "", nil
	}
	img, err := d.InspectImage(context.Background(), ref)
	if err != nil {
		return "", "", fmt.Errorf("image %q: %w", ref, err)
	}
	return img.ID, d.imageRootfs(img.ID), nil
}

// formatError reports an archive that is not a (gzip) tar file at all.
func formatError(err error) bool {
	return errors.Is(err, tar.ErrHeader) || errors.Is(err, gzip.ErrHeader) || errors.Is(err, io.ErrUnexpectedEOF) ||
		strings.Contains(err.Error(), "invalid tar header")
}
