package docker

import (
	"archive/tar"
	"bufio"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"

	"github.com/docker/docker/api/types/build"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/client"

	"github.com/sandboxfleet/terraform-provider-sandbox/internal/driver"
	"github.com/sandboxfleet/terraform-provider-sandbox/internal/tarball"
)

// imageDefaults is what instance creation needs from an image.
type imageDefaults struct {
	id         string
	entrypoint []string
	cmd        []string
}

// imageCache remembers image defaults by image ID: an ID names immutable
// content, so a cached entry never goes stale.
type imageCache struct {
	mu   sync.Mutex
	byID map[string]imageDefaults
}

func (c *imageCache) get(id string) (imageDefaults, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	v, ok := c.byID[id]
	return v, ok
}

func (c *imageCache) put(v imageDefaults) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.byID[v.id] = v
}

// EnsureImage builds, pulls or imports spec and tags it spec.Name.
func (d *Driver) EnsureImage(ctx context.Context, spec driver.ImageSpec) (driver.Image, error) {
	if spec.Name == "" {
		return driver.Image{}, fmt.Errorf("docker backend %q: image name is required", d.backend)
	}
	cli, err := d.api()
	if err != nil {
		return driver.Image{}, err
	}
	switch {
	case spec.Build != nil:
		err = d.buildImage(ctx, cli, spec)
	case spec.Pull != nil:
		err = d.pullImage(ctx, cli, spec)
	case spec.Archive != nil:
		err = d.archiveImage(ctx, cli, spec)
	default:
		return driver.Image{}, fmt.Errorf("docker backend %q: image %q: one of build, pull, archive is required", d.backend, spec.Name)
	}
	if err != nil {
		return driver.Image{}, err
	}
	return d.InspectImage(ctx, spec.Name)
}

// buildImage sends the context directory (minus .dockerignore matches) to
// the classic builder, which every engine version and Podman accept.
func (d *Driver) buildImage(ctx context.Context, cli *client.Client, spec driver.ImageSpec) error {
	b := spec.Build
	dockerfile := b.Dockerfile
	if dockerfile == "" {
		dockerfile = "Dockerfile"
	}
	if _, err := os.Stat(filepath.Join(b.ContextDir, dockerfile)); err != nil {
		return fmt.Errorf("docker backend %q: build image %q: %w", d.backend, spec.Name, err)
	}
	pm, err := tarball.ReadDockerignore(b.ContextDir)
	if err != nil {
		return fmt.Errorf("docker backend %q: build image %q: %w", d.backend, spec.Name, err)
	}
	// The Dockerfile and .dockerignore are always sent, as the docker CLI does.
	keep := map[string]bool{filepath.ToSlash(filepath.Clean(dockerfile)): true, ".dockerignore": true}
	pr, pw := io.Pipe()
	go func() { pw.CloseWithError(tarball.WriteDir(pw, b.ContextDir, pm, keep)) }()
	defer pr.Close()

	args := make(map[string]*string, len(b.Args))
	for k, v := range b.Args {
		args[k] = &v
	}
	resp, err := cli.ImageBuild(ctx, pr, build.ImageBuildOptions{
		Tags:        []string{spec.Name},
		Dockerfile:  filepath.ToSlash(dockerfile),
		BuildArgs:   args,
		Target:      b.Target,
		Labels:      driver.ObjectLabels(d.backend, nil, spec.Labels),
		Remove:      true,
		ForceRemove: true,
		Version:     build.BuilderV1,
	})
	if err != nil {
		return d.wrap(err, "build image %q", spec.Name)
	}
	defer resp.Body.Close()
	if _, err := readBuildStream(resp.Body); err != nil {
		return fmt.Errorf("docker backend %q: build image %q from %s: %w", d.backend, spec.Name, b.ContextDir, err)
	}
	return nil
}

// pullImage pulls the reference and tags it with the image's name.
func (d *Driver) pullImage(ctx context.Context, cli *client.Client, spec driver.ImageSpec) error {
	ref := spec.Pull.Ref
	rc, err := cli.ImagePull(ctx, ref, image.PullOptions{})
	if err == nil {
		_, err = readBuildStream(rc)
		rc.Close()
	}
	if err != nil {
		return fmt.Errorf("docker backend %q: pull %q (is the registry reachable from the engine?): %w", d.backend, ref, d.unwrapEngine(err))
	}
	if ref != spec.Name {
		if err := cli.ImageTag(ctx, ref, spec.Name); err != nil {
			return d.wrap(err, "tag %q as %q", ref, spec.Name)
		}
	}
	return nil
}

// unwrapEngine keeps sentinel mapping for errors returned to callers that
// add their own context.
func (d *Driver) unwrapEngine(err error) error {
	if terr := d.transportError(err); terr != nil {
		return terr
	}
	if errUnreachable(err) {
		return fmt.Errorf("%w (%v)", driver.ErrUnavailable, err)
	}
	return err
}

// archiveImage loads an image tarball (docker save / OCI layout, which has
// a manifest.json) or imports a plain root filesystem tarball.
func (d *Driver) archiveImage(ctx context.Context, cli *client.Client, spec driver.ImageSpec) error {
	p := spec.Archive.Path
	isImage, err := isImageTarball(p)
	if err != nil {
		return fmt.Errorf("docker backend %q: image %q: archive %s: %w", d.backend, spec.Name, p, err)
	}
	f, err := os.Open(p)
	if err != nil {
		return fmt.Errorf("docker backend %q: image %q: %w", d.backend, spec.Name, err)
	}
	defer f.Close()
	if !isImage {
		rc, err := cli.ImageImport(ctx, image.ImportSource{Source: f, SourceName: "-"}, spec.Name,
			image.ImportOptions{Changes: labelChanges(driver.ObjectLabels(d.backend, nil, spec.Labels))})
		if err == nil {
			_, err = readBuildStream(rc)
			rc.Close()
		}
		return d.wrap(err, "import root filesystem %s as %q", p, spec.Name)
	}
	resp, err := cli.ImageLoad(ctx, f, client.ImageLoadWithQuiet(true))
	if err != nil {
		return d.wrap(err, "load image archive %s", p)
	}
	defer resp.Body.Close()
	loaded, err := readLoadStream(resp.Body)
	if err != nil {
		return fmt.Errorf("docker backend %q: load image archive %s: %w", d.backend, p, err)
	}
	if len(loaded) == 0 {
		return fmt.Errorf("docker backend %q: load image archive %s: the engine reported no image", d.backend, p)
	}
	return d.wrap(cli.ImageTag(ctx, loaded[0], spec.Name), "tag loaded image %s as %q", loaded[0], spec.Name)
}

// labelChanges turns labels into Dockerfile LABEL instructions for import.
func labelChanges(labels map[string]string) []string {
	out := make([]string, 0, len(labels))
	for k, v := range labels {
		out = append(out, fmt.Sprintf("LABEL %q=%q", k, v))
	}
	return out
}

var loadedRE = regexp.MustCompile(`Loaded image(?: ID)?: (\S+)`)

// readLoadStream returns the references the engine reports as loaded.
func readLoadStream(r io.Reader) ([]string, error) {
	var out []string
	_, err := readStream(r, func(text string) {
		for _, m := range loadedRE.FindAllStringSubmatch(text, -1) {
			out = append(out, m[1])
		}
	})
	return out, err
}

// isImageTarball reports whether the (optionally gzipped) tar at p holds a
// manifest.json at its root, i.e. is an image archive rather than a rootfs.
func isImageTarball(p string) (bool, error) {
	f, err := os.Open(p)
	if err != nil {
		return false, err
	}
	defer f.Close()
	br := bufio.NewReader(f)
	var r io.Reader = br
	if magic, _ := br.Peek(2); len(magic) == 2 && magic[0] == 0x1f && magic[1] == 0x8b {
		gz, err := gzip.NewReader(br)
		if err != nil {
			return false, err
		}
		defer gz.Close()
		r = gz
	}
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return false, nil
		}
		if err != nil {
			return false, fmt.Errorf("not a tar archive (%v): %w", err, driver.ErrInvalid)
		}
		if strings.TrimPrefix(h.Name, "./") == "manifest.json" {
			return true, nil
		}
	}
}

// InspectImage finds an image by name or ID.
func (d *Driver) InspectImage(ctx context.Context, ref string) (driver.Image, error) {
	cli, err := d.api()
	if err != nil {
		return driver.Image{}, err
	}
	ii, err := cli.ImageInspect(ctx, ref)
	if err != nil {
		return driver.Image{}, d.wrap(err, "image %q", ref)
	}
	d.images.put(defaultsOf(ii))
	img := driver.Image{Name: ref, ID: ii.ID}
	if ii.Config != nil {
		img.Labels = ii.Config.Labels
	}
	return img, nil
}

func defaultsOf(ii image.InspectResponse) imageDefaults {
	v := imageDefaults{id: ii.ID}
	if ii.Config != nil {
		v.entrypoint = ii.Config.Entrypoint
		v.cmd = ii.Config.Cmd
	}
	return v
}

// imageDefaultsFor returns an image's Entrypoint and Cmd. A reference that
// is an ID is served from the cache; a tag is inspected, since it can move.
func (d *Driver) imageDefaultsFor(ctx context.Context, ref string) (imageDefaults, error) {
	if v, ok := d.images.get(ref); ok {
		return v, nil
	}
	cli, err := d.api()
	if err != nil {
		return imageDefaults{}, err
	}
	ii, err := cli.ImageInspect(ctx, ref)
	if err != nil {
		return imageDefaults{}, d.wrap(err, "image %q", ref)
	}
	v := defaultsOf(ii)
	d.images.put(v)
	return v, nil
}

// DeleteImage removes the name; the engine deletes the image itself when
// that was its last name. If the name has moved to another image since, only
// our image is removed, and only if nothing else still uses it. Not found
// counts as done.
func (d *Driver) DeleteImage(ctx context.Context, name, id string) error {
	cli, err := d.api()
	if err != nil {
		return err
	}
	if id == "" || name != "" && tagPointsAt(ctx, cli, name, id) {
		ref := name
		if ref == "" {
			ref = id
		}
		_, err = cli.ImageRemove(ctx, ref, image.RemoveOptions{PruneChildren: true})
		if err != nil && !d.errIsNotFound(err) {
			return d.wrap(err, "delete image %q", ref)
		}
		return nil
	}
	// The tag moved to another image (another backend built the same tag on
	// this engine) or is gone already (that image's destroy removed it):
	// this image goes by its ID. A conflict means something else still
	// holds it (another tag, a container), which is not ours to remove.
	_, err = cli.ImageRemove(ctx, id, image.RemoveOptions{PruneChildren: true})
	if err != nil && !d.errIsNotFound(err) && !isConflict(err) {
		return d.wrap(err, "delete image %s", id)
	}
	return nil
}

// tagPointsAt reports whether tag names the image id on the engine.
func tagPointsAt(ctx context.Context, cli *client.Client, tag, id string) bool {
	ii, err := cli.ImageInspect(ctx, tag)
	return err == nil && ii.ID == id
}
