package incus

// Images live in the backend's project under the alias spec.Name; the ID is
// the fingerprint. Labels are stored as image properties "user.<key>".
//
// archive.path may be:
//   - a unified image tarball (metadata.yaml and rootfs/ at the top);
//   - a plain rootfs tarball (no metadata.yaml): the driver generates the
//     metadata (server architecture, the file's mtime as creation date) and
//     imports it as a split image;
//   - a directory holding a split image: a metadata file (metadata.yaml, or
//     a tarball named metadata.tar*, meta.tar* or incus.tar*) and a rootfs
//     file (rootfs.squashfs or rootfs.tar*; rootfs.img or disk.qcow2 for a
//     virtual-machine image).
// The fingerprint is computed locally first, so an image already present is
// never uploaded again.

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	incus "github.com/lxc/incus/v6/client"
	"github.com/lxc/incus/v6/shared/api"

	"github.com/sandboxfleet/terraform-provider-sandbox/internal/driver"
)

// EnsureImage imports or pulls the image and points the alias at it.
func (d *Driver) EnsureImage(ctx context.Context, spec driver.ImageSpec) (driver.Image, error) {
	c, err := d.client(ctx)
	if err != nil {
		return driver.Image{}, err
	}
	var fp string
	switch {
	case spec.Archive != nil:
		fp, err = d.importArchive(ctx, c, spec)
	case spec.Pull != nil:
		fp, err = d.pullImage(ctx, c, spec)
	case spec.Build != nil:
		err = fmt.Errorf("building images (a Dockerfile) is not possible on Incus; use archive or pull: %w", driver.ErrUnsupported)
	default:
		err = fmt.Errorf("no image source given: %w", driver.ErrUnsupported)
	}
	if err != nil {
		return driver.Image{}, d.errf(err, "image %q", spec.Name)
	}
	if err := setAlias(c, spec.Name, fp); err != nil {
		return driver.Image{}, d.errf(err, "image alias %q", spec.Name)
	}
	d.images.forget(spec.Name)
	return d.InspectImage(ctx, spec.Name)
}

// imageProperties are the labels as image properties.
func (d *Driver) imageProperties(spec driver.ImageSpec) map[string]string {
	props := map[string]string{}
	labelsToConfig(props, d.objectLabels(spec.Labels))
	return props
}

// haveImage reports whether the project already holds fingerprint fp.
func haveImage(c incus.InstanceServer, fp string) (bool, error) {
	_, _, err := c.GetImage(fp)
	if err == nil {
		return true, nil
	}
	if api.StatusErrorCheck(err, 404) {
		return false, nil
	}
	return false, err
}

// upload sends an image (unified when rootfs is nil) and waits for it.
func (d *Driver) upload(ctx context.Context, c incus.InstanceServer, spec driver.ImageSpec, fp string, meta, rootfs io.Reader, vm bool) (string, error) {
	if ok, err := haveImage(c, fp); err != nil || ok {
		return fp, err
	}
	args := &incus.ImageCreateArgs{MetaFile: meta, MetaName: "metadata.tar", RootfsFile: rootfs, RootfsName: "rootfs"}
	if vm {
		args.Type = string(api.InstanceTypeVM)
	}
	op, err := c.CreateImage(api.ImagesPost{ImagePut: api.ImagePut{Properties: d.imageProperties(spec)}}, args)
	if err == nil {
		err = op.WaitContext(ctx)
	}
	if err != nil {
		return "", fmt.Errorf("import: %w", err)
	}
	if got, _ := op.Get().Metadata["fingerprint"].(string); got != "" {
		return got, nil
	}
	return fp, nil
}

// setAlias creates the alias or moves it to fp.
func setAlias(c incus.InstanceServer, name, fp string) error {
	cur, etag, err := c.GetImageAlias(name)
	switch {
	case err == nil && cur.Target == fp:
		return nil
	case err == nil:
		return c.UpdateImageAlias(name, api.ImageAliasesEntryPut{Target: fp, Description: cur.Description}, etag)
	case api.StatusErrorCheck(err, 404):
		return c.CreateImageAlias(api.ImageAliasesPost{ImageAliasesEntry: api.ImageAliasesEntry{
			Name: name, ImageAliasesEntryPut: api.ImageAliasesEntryPut{Target: fp},
		}})
	}
	return err
}

// InspectImage finds an image by alias or fingerprint (prefix) in the project.
func (d *Driver) InspectImage(ctx context.Context, ref string) (driver.Image, error) {
	c, err := d.client(ctx)
	if err != nil {
		return driver.Image{}, err
	}
	name, fp := ref, ref
	if alias, _, err := c.GetImageAlias(ref); err == nil {
		fp = alias.Target
	} else if !api.StatusErrorCheck(err, 404) {
		return driver.Image{}, d.errf(err, "image %q", ref)
	}
	img, _, err := c.GetImage(fp)
	if err != nil {
		return driver.Image{}, d.errf(err, "image %q", ref)
	}
	if name == fp && len(img.Aliases) > 0 {
		name = img.Aliases[0].Name
	}
	return driver.Image{Name: name, ID: img.Fingerprint, Labels: labelsFromConfig(img.Properties)}, nil
}

// DeleteImage removes the alias, then the image if no alias is left and we
// created it.
func (d *Driver) DeleteImage(ctx context.Context, name, id string) error {
	c, err := d.client(ctx)
	if err != nil {
		return err
	}
	d.images.forget(name)
	fp := id
	alias, _, aerr := c.GetImageAlias(name)
	switch {
	case aerr == nil && (id == "" || alias.Target == id):
		fp = alias.Target
		if err := c.DeleteImageAlias(name); err != nil && !api.StatusErrorCheck(err, 404) {
			return d.errf(err, "delete image alias %q", name)
		}
	case aerr != nil && !api.StatusErrorCheck(aerr, 404):
		return d.errf(aerr, "image alias %q", name)
	}
	if fp == "" {
		return d.errf(aerr, "image %q", name)
	}
	img, _, err := c.GetImage(fp)
	if err != nil {
		if aerr == nil {
			return nil // the alias was ours; the image is already gone
		}
		return d.errf(err, "image %q (%s)", name, fp)
	}
	if len(img.Aliases) > 0 || !d.ours(img.Properties) {
		return nil
	}
	op, err := c.DeleteImage(img.Fingerprint)
	if err == nil {
		err = op.WaitContext(ctx)
	}
	if err != nil && !api.StatusErrorCheck(err, 404) {
		return d.errf(err, "delete image %q (%s)", name, fp)
	}
	return nil
}

// imageCache remembers which image a reference resolved to for a short
// while, so a burst of instances from one image costs one lookup.
type imageCache struct {
	mu      sync.Mutex
	entries map[string]imageEntry
}

type imageEntry struct {
	fp string
	at time.Time
}

const imageCacheTTL = 30 * time.Second

func (ic *imageCache) get(ref string) (imageEntry, bool) {
	ic.mu.Lock()
	defer ic.mu.Unlock()
	e, ok := ic.entries[ref]
	if !ok || time.Since(e.at) > imageCacheTTL {
		return imageEntry{}, false
	}
	return e, true
}

func (ic *imageCache) put(ref string, e imageEntry) {
	ic.mu.Lock()
	defer ic.mu.Unlock()
	if ic.entries == nil {
		ic.entries = map[string]imageEntry{}
	}
	e.at = time.Now()
	ic.entries[ref] = e
}

func (ic *imageCache) forget(ref string) {
	ic.mu.Lock()
	defer ic.mu.Unlock()
	delete(ic.entries, ref)
}

// resolveImage returns the fingerprint of ref (alias or fingerprint) in the
// backend's project. An image found only in the default project, where
// shared images usually live, is first copied into the project (a database
// entry: the server already has the files), because Incus creates
// instances only from images of their own project. Resolution is
// serialised so concurrent creates copy once.
func (d *Driver) resolveImage(ctx context.Context, c incus.InstanceServer, ref string) (string, error) {
	if e, ok := d.images.get(ref); ok {
		return e.fp, nil
	}
	d.imageMu.Lock()
	defer d.imageMu.Unlock()
	if e, ok := d.images.get(ref); ok {
		return e.fp, nil
	}
	fp, err := lookupImage(c, ref)
	if err == nil && fp == "" && d.cfg.Project != "default" {
		if fp, err = lookupImage(c.UseProject("default"), ref); err == nil && fp != "" {
			err = copyFromDefault(ctx, c, fp)
		}
	}
	if err != nil {
		return "", err
	}
	if fp == "" {
		return "", fmt.Errorf("image %q: no alias or fingerprint in project %q or %q: %w", ref, d.cfg.Project, "default", driver.ErrNotFound)
	}
	d.images.put(ref, imageEntry{fp: fp})
	return fp, nil
}

// copyFromDefault adds image fp of the default project to c's project,
// marked so DeleteScope removes it again.
func copyFromDefault(ctx context.Context, c incus.InstanceServer, fp string) error {
	req := api.ImagesPost{
		ImagePut: api.ImagePut{Properties: map[string]string{keyCopied: "1"}},
		Source: &api.ImagesPostSource{
			ImageSource: api.ImageSource{Protocol: protoIncus},
			Type:        "image", Mode: "pull", Fingerprint: fp, Project: "default",
		},
	}
	op, err := c.CreateImage(req, nil)
	if err == nil {
		err = op.WaitContext(ctx)
	}
	if err != nil {
		return fmt.Errorf("copy image %s from the default project: %w", fp, err)
	}
	return nil
}

// lookupImage returns the fingerprint of ref in c's project, or "".
func lookupImage(c incus.InstanceServer, ref string) (string, error) {
	alias, _, err := c.GetImageAlias(ref)
	if err == nil {
		return alias.Target, nil
	}
	if !api.StatusErrorCheck(err, 404) {
		return "", err
	}
	img, _, err := c.GetImage(ref)
	if err == nil {
		return img.Fingerprint, nil
	}
	if api.StatusErrorCheck(err, 404) {
		return "", nil
	}
	return "", err
}

// fileSHA256 hashes files in order, as Incus fingerprints split images.
func fileSHA256(paths ...string) (string, error) {
	h := sha256.New()
	for _, p := range paths {
		f, err := os.Open(p)
		if err != nil {
			return "", err
		}
		_, err = io.Copy(h, f)
		_ = f.Close()
		if err != nil {
			return "", fmt.Errorf("read %s: %w", p, err)
		}
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

func (ic *imageCache) clear() {
	ic.mu.Lock()
	defer ic.mu.Unlock()
	ic.entries = nil
}
