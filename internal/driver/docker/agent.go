package docker

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path"
	"strings"
	"sync"
	"time"

	"github.com/docker/docker/api/types/build"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/mount"

	"github.com/sandboxfleet/terraform-provider-sandbox/internal/agent"
	"github.com/sandboxfleet/terraform-provider-sandbox/internal/driver"
)

// seedImage is a tiny image FROM scratch used only to create never-started
// containers that files are copied through into volumes. No registry is
// needed: it is built from a one-file context, once per engine.
const seedImage = "sandbox-seed:v1"

// stateDir is where the agent's services keep logs and pid files
// (initplan.StateDir). It must be writable even where /.sandbox is not: on a
// read-only root filesystem, or under the read-only agent volume.
const stateDir = "/.sandbox/run"

// stateMount gives stateDir its own anonymous volume (removed with the
// instance) when the place it would otherwise live is read-only.
func (d *Driver) stateMount(readOnlyRootfs bool) (mount.Mount, bool) {
	if d.ep.local && !readOnlyRootfs {
		return mount.Mount{}, false
	}
	labels := driver.ObjectLabels(d.backend, nil, nil)
	return mount.Mount{Type: mount.TypeVolume, Target: stateDir, VolumeOptions: &mount.VolumeOptions{Labels: labels}}, true
}

// prepareStateDir creates stateDir before the first start where it lives in
// the container's own file system (a local engine, writable rootfs), as
// /tmp is made: world-writable and sticky. The engine would otherwise make
// /.sandbox (the agent's mount point) root's, and a service started as the
// sandbox's non-root user could not keep its log and pid file there.
func (d *Driver) prepareStateDir(ctx context.Context, id string, spec driver.InstanceSpec) error {
	if _, own := d.stateMount(spec.Security.ReadOnlyRootfs); own || !nonRootUser(spec.User) {
		return nil
	}
	cli, err := d.api()
	if err != nil {
		return err
	}
	dest, headers := "/", []*tar.Header{
		{Typeflag: tar.TypeDir, Name: strings.TrimPrefix(path.Dir(stateDir), "/") + "/", Mode: 0o755, ModTime: time.Unix(0, 0)},
		{Typeflag: tar.TypeDir, Name: strings.TrimPrefix(stateDir, "/") + "/", Mode: 0o1777, ModTime: time.Unix(0, 0)},
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, h := range headers {
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	return d.wrap(cli.CopyToContainer(ctx, id, dest, &buf, container.CopyToContainerOptions{}), "create %s in instance %q", stateDir, id)
}

// nonRootUser reports whether a Docker user spec ("name", "uid", "uid:gid")
// names someone other than root.
func nonRootUser(user string) bool {
	u, _, _ := strings.Cut(user, ":")
	return u != "" && u != "0" && u != "root"
}

// labelAgentDigest marks a volume filled with the agent of that SHA-256.
const labelAgentDigest = "sandbox.agent-sha256"

// agentState caches, per driver, how the agent reaches instances.
type agentState struct {
	binOnce sync.Once
	bin     string // host path of a usable agent, or ""
	binErr  error

	mu       sync.Mutex // guards volume (held while uploading)
	volume   string     // remote engines: the volume holding the agent
	seedMu   sync.Mutex // guards seedDone (held while building)
	seedDone bool
}

// agentBinary returns the host path of the agent for an engine of arch:
// $SANDBOX_AGENT_BINARY, else this executable (the provider binary doubles
// as the agent). It must be a static Linux ELF for that architecture.
func agentBinary(arch string) (string, error) {
	p := os.Getenv(agent.EnvBinary)
	if p == "" {
		exe, err := os.Executable()
		if err != nil {
			return "", fmt.Errorf("sandbox agent: %w", err)
		}
		p = exe
	}
	if err := agent.CheckBinary(p, arch); err != nil {
		return "", err
	}
	return p, nil
}

// agentMount returns the mount that puts the agent at agent.PathInInstance:
// a read-only bind of the host file on a local engine, or a read-only volume
// (filled once through the seed image) on a remote one, where host paths
// mean nothing.
func (d *Driver) agentMount(ctx context.Context, arch string) (mount.Mount, error) {
	// Checked once per driver: the ELF check reads the file.
	d.agent.binOnce.Do(func() { d.agent.bin, d.agent.binErr = agentBinary(arch) })
	bin, err := d.agent.bin, d.agent.binErr
	if err != nil {
		return mount.Mount{}, err
	}
	if d.ep.local {
		return mount.Mount{Type: mount.TypeBind, Source: bin, Target: agent.PathInInstance, ReadOnly: true}, nil
	}
	vol, err := d.ensureAgentVolume(ctx, bin)
	if err != nil {
		return mount.Mount{}, err
	}
	return mount.Mount{Type: mount.TypeVolume, Source: vol, Target: path.Dir(agent.PathInInstance), ReadOnly: true}, nil
}

// ensureAgentVolume uploads the agent into a volume named after its content
// hash, so a new agent version gets a new volume and old instances keep theirs.
func (d *Driver) ensureAgentVolume(ctx context.Context, bin string) (string, error) {
	d.agent.mu.Lock()
	defer d.agent.mu.Unlock()
	if d.agent.volume != "" {
		return d.agent.volume, nil
	}
	// Hashed as a stream: the binary (tens of MiB) is read into memory only
	// when it has to be uploaded, not on every run that finds the volume.
	sum, err := fileSHA256(bin)
	if err != nil {
		return "", fmt.Errorf("read sandbox agent: %w", err)
	}
	// v2: the volume also holds an empty run/ (the mount point of stateDir).
	name := "sandbox-agent-v2-" + hex.EncodeToString(sum[:6])
	cli, err := d.api()
	if err != nil {
		return "", err
	}
	digest := hex.EncodeToString(sum[:])
	if v, err := cli.VolumeInspect(ctx, name); err == nil {
		if v.Labels[labelAgentDigest] == digest {
			d.agent.volume = name
			return name, nil
		}
		// Not ours: an empty volume the engine made when an instance
		// mounted the name after ours was removed. Replace it.
		if err := cli.VolumeRemove(ctx, name, false); err != nil {
			return "", d.wrap(err, "replace agent volume %q", name)
		}
	}
	data, err := os.ReadFile(bin)
	if err != nil {
		return "", fmt.Errorf("read sandbox agent: %w", err)
	}
	if sha256.Sum256(data) != sum {
		return "", fmt.Errorf("read sandbox agent: %s changed while it was read", bin)
	}
	labels := map[string]string{driver.LabelManagedBy: driver.ManagedByValue, labelAgentDigest: digest}
	if err := d.createVolume(ctx, name, labels); err != nil {
		return "", err
	}
	var buf bytes.Buffer
	if err := tarAgentVolume(&buf, path.Base(agent.PathInInstance), data, path.Base(stateDir)); err != nil {
		return "", err
	}
	if err := d.seedVolume(ctx, name, &buf); err != nil {
		_ = cli.VolumeRemove(context.WithoutCancel(ctx), name, true)
		return "", err
	}
	d.agent.volume = name
	return name, nil
}

// fileSHA256 hashes a file without holding it in memory.
func fileSHA256(path string) ([sha256.Size]byte, error) {
	var sum [sha256.Size]byte
	f, err := os.Open(path)
	if err != nil {
		return sum, err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return sum, err
	}
	copy(sum[:], h.Sum(nil))
	return sum, nil
}

// forgetAgentVolume drops the cached volume name, so the next use checks
// the engine again.
func (d *Driver) forgetAgentVolume() {
	d.agent.mu.Lock()
	d.agent.volume = ""
	d.agent.mu.Unlock()
}

// ensureSeedImage builds seedImage if the engine lacks it.
func (d *Driver) ensureSeedImage(ctx context.Context) error {
	d.agent.seedMu.Lock()
	defer d.agent.seedMu.Unlock()
	if d.agent.seedDone {
		return nil
	}
	cli, err := d.api()
	if err != nil {
		return err
	}
	if _, err := cli.ImageInspect(ctx, seedImage); err != nil {
		var ctxTar bytes.Buffer
		if err := tarFiles(&ctxTar, map[string]tarEntry{
			"Dockerfile": {data: []byte("FROM scratch\nCOPY seed /.sandbox-seed\n"), mode: 0o644},
			"seed":       {data: []byte("sandbox seed image\n"), mode: 0o644},
		}); err != nil {
			return err
		}
		labels := map[string]string{driver.LabelManagedBy: driver.ManagedByValue}
		resp, err := cli.ImageBuild(ctx, &ctxTar, build.ImageBuildOptions{
			Tags: []string{seedImage}, Labels: labels, Remove: true, ForceRemove: true,
			Version: build.BuilderV1,
		})
		if err != nil {
			return d.wrap(err, "build helper image %s", seedImage)
		}
		_, err = readBuildStream(resp.Body)
		resp.Body.Close()
		if err != nil {
			return d.wrap(err, "build helper image %s", seedImage)
		}
	}
	d.agent.seedDone = true
	return nil
}

// seedVolume copies a tar stream into a volume. It creates (never starts) a
// container of the seed image with the volume at /seed and copies into it:
// the engine mounts the volume for the copy, which works without a running
// process, without a registry and without any tool in an image.
func (d *Driver) seedVolume(ctx context.Context, volume string, content io.Reader) error {
	id, err := d.createSeedContainer(ctx, volume)
	if d.errIsNotFound(err) {
		// The helper image was removed since we built it (e.g. a prune).
		d.agent.seedMu.Lock()
		d.agent.seedDone = false
		d.agent.seedMu.Unlock()
		id, err = d.createSeedContainer(ctx, volume)
	}
	if err != nil {
		return err
	}
	cli, err := d.api()
	if err != nil {
		return err
	}
	defer func() {
		_ = cli.ContainerRemove(context.WithoutCancel(ctx), id, container.RemoveOptions{Force: true})
	}()
	if err := cli.CopyToContainer(ctx, id, "/seed", content, container.CopyToContainerOptions{}); err != nil {
		return d.wrap(err, "seed volume %q: copy files", volume)
	}
	return nil
}

// createSeedContainer creates the never-started helper with volume at /seed.
func (d *Driver) createSeedContainer(ctx context.Context, volume string) (string, error) {
	if err := d.ensureSeedImage(ctx); err != nil {
		return "", err
	}
	cli, err := d.api()
	if err != nil {
		return "", err
	}
	created, err := cli.ContainerCreate(ctx,
		&container.Config{
			Image:  seedImage,
			Cmd:    []string{"/.sandbox-seed"},
			Labels: driver.ScopeLabels(d.backend),
		},
		&container.HostConfig{
			NetworkMode: "none",
			Mounts:      []mount.Mount{{Type: mount.TypeVolume, Source: volume, Target: "/seed"}},
		}, nil, nil, "")
	if err != nil {
		return "", d.wrap(err, "seed volume %q: create helper container", volume)
	}
	return created.ID, nil
}
