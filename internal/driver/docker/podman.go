package docker

// Podman's Docker-compatible API (`podman system service`) as a Docker
// backend. Podman is recognised by its Version component "Podman Engine"
// (isPodman); everything else the driver does is the same on both engines,
// except where Podman answers differently. Those places, and only those,
// call into this file:
//
//   - Errors. Docker answers 409 Conflict for a name already in use; Podman
//     answers 500 with a libpod "cause" ("that name is already in use",
//     "network already exists"). podmanError gives such answers the
//     conflict type, so wrap and isConflict map them as for Docker (e.g. the
//     cross-process race in EnsureScope). Not-found answers are 404 on both.
//   - Limits in place. Podman 4 has no POST /containers/{id}/update (404);
//     podmanUpdate uses libpod's own /libpod/containers/{id}/update instead.
//     Podman 4.3 applies it to the running container's cgroup only: it is
//     refused for a stopped container, and a restart of the container brings
//     back the limits it was created with (Podman does not record the
//     change). Newer Podman versions that answer the Docker endpoint use it.
//   - Limits. Rootless Podman on cgroup v1 cannot set any cgroup limit, and
//     a Podman whose host lacks a controller cannot set that limit; it then
//     creates the container anyway with a warning. podmanCapabilities leaves
//     such limits out of Info's capabilities (so sandbox_backend shows it
//     and the provider refuses them at plan time) and planPodman refuses
//     them at create instead of running an unlimited sandbox.
//   - Observed image and labels. Podman reports a container's image as the
//     name it resolved (e.g. docker.io/<tag> for an image ID given at
//     create), where Docker reports the reference as given, and its builds
//     label every image io.buildah.version, which containers inherit. The
//     driver records the reference in the sandbox.image label at create
//     (planPodman) and podmanObserved reports it, without the build label.
//   - Network create. Podman picks a free subnet from the host's routes and
//     looks up each route's interface; a bridge deleted in between (another
//     backend's network going away) fails the create with "route ip+net: no
//     such network interface". podmanInterfaceRace recognises it and
//     EnsureScope tries again.
//   - exec in a missing working directory exits 127 (Docker: 126);
//     missingWorkdir accepts both.
//   - Rootful Podman raises RLIMIT_NOFILE/NPROC of containers to 1048576/
//     4194304 by default, which fails on hosts with lower hard limits
//     ("error setting rlimit type 7"): an engine-side setting
//     (containers.conf default_ulimits; scripts/setup-podman.sh sets it).
//
// What works unchanged (the conformance suite runs against Podman, locally
// and over SSH; internal/driver/docker/podman_test.go): labelled networks,
// volumes and containers with label-filtered lists, internal networks,
// published ports (dynamic and loopback_ip), exec with stdin and separate
// streams, copying files into containers and, through the never-started
// helper container, into volumes, the agent as PID 1 (bind mount locally,
// volume remotely), classic builds from a context, memory, CPU and pids
// limits at create (tested with rootful Podman 4.3 on cgroup v1), status
// and exit codes.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/system"

	"github.com/sandboxfleet/terraform-provider-sandbox/internal/driver"
)

// podmanConflictCauses are the libpod causes that Docker would have
// answered with 409 Conflict.
var podmanConflictCauses = []string{
	"that name is already in use",
	"network already exists",
	"volume already exists",
	"network is being used", // removing a network that containers are on
}

// podmanError returns err marked as a conflict when it is one of Podman's
// 500 answers that mean one; other errors are returned as they are. It is
// safe on Docker's errors: none carry these causes with another meaning.
func podmanError(err error) error {
	if err == nil || cerrdefs.IsConflict(err) || !cerrdefs.IsInternal(err) {
		return err
	}
	msg := err.Error()
	for _, c := range podmanConflictCauses {
		if strings.Contains(msg, c) {
			return fmt.Errorf("%w: %w", cerrdefs.ErrConflict, err)
		}
	}
	return err
}

// podmanCapabilities removes from caps the limits this Podman cannot set.
func podmanCapabilities(sys system.Info, caps []string) []string {
	rootless := false
	for _, o := range sys.SecurityOptions {
		if strings.Contains(o, "name=rootless") {
			rootless = true
		}
	}
	drop := map[string]bool{}
	if rootless && sys.CgroupVersion == "1" {
		// Without systemd delegation there is no cgroup of its own to limit.
		drop[driver.CapCPULimit], drop[driver.CapMemoryLimit], drop[driver.CapPidsLimit] = true, true, true
	}
	if !sys.PidsLimit {
		drop[driver.CapPidsLimit] = true
	}
	if !sys.CPUCfsQuota {
		drop[driver.CapCPULimit] = true
	}
	out := make([]string, 0, len(caps))
	for _, c := range caps {
		if !drop[c] {
			out = append(out, c)
		}
	}
	return out
}

// labelImageRef records, on Podman, the image reference a container was
// created from.
const labelImageRef = "sandbox.image"

// podmanInjectedLabels are labels Podman's builds put on every image, which
// its containers then carry although nobody set them.
var podmanInjectedLabels = []string{"io.buildah.version"}

// podmanObserved corrects what toInstance reports of a container this driver
// made on Podman (it carries labelImageRef); others are left as they are.
func podmanObserved(inst *driver.Instance) {
	ref, ok := inst.Labels[labelImageRef]
	if !ok {
		return
	}
	inst.Image = ref
	labels := make(map[string]string, len(inst.Labels))
	for k, v := range inst.Labels {
		labels[k] = v
	}
	for _, k := range podmanInjectedLabels {
		delete(labels, k)
	}
	inst.Labels = labels
}

// planPodman records the image reference and refuses limits the engine
// cannot enforce: Podman would create the container with a warning and no
// limit.
func (d *Driver) planPodman(ctx context.Context, p *createPlan, spec driver.InstanceSpec) error {
	ei, err := d.engine(ctx)
	if err != nil || !ei.podman {
		return err
	}
	p.cfg.Labels[labelImageRef] = spec.Image
	for _, l := range []struct {
		attr, capability string
		set              bool
	}{
		{"cpus", driver.CapCPULimit, spec.CPUs > 0},
		{"memory", driver.CapMemoryLimit, spec.MemoryBytes > 0},
		{"pids_limit", driver.CapPidsLimit, spec.PidsLimit > 0},
	} {
		if l.set && !ei.info.Has(l.capability) {
			return fmt.Errorf("docker backend %q: instance %q: %s: this Podman engine (%s) cannot enforce it (rootless on cgroup v1, or the cgroup controller is missing); remove it or use a rootful engine on cgroup v2: %w",
				d.backend, spec.Name, l.attr, ei.info.EngineVersion, driver.ErrUnsupported)
		}
	}
	return nil
}

// libpodAPIVersion is the oldest libpod API the libpod calls here need; the
// service accepts any version prefix it supports.
const libpodAPIVersion = "v4.0.0"

// ociResources is the subset of the OCI runtime spec's LinuxResources that
// libpod's update endpoint takes.
type ociResources struct {
	Memory *ociMemory `json:"memory,omitempty"`
	CPU    *ociCPU    `json:"cpu,omitempty"`
	Pids   *ociPids   `json:"pids,omitempty"`
}

type ociMemory struct {
	Limit *int64 `json:"limit,omitempty"`
	Swap  *int64 `json:"swap,omitempty"`
}

type ociCPU struct {
	Quota  *int64  `json:"quota,omitempty"`
	Period *uint64 `json:"period,omitempty"`
}

type ociPids struct {
	Limit int64 `json:"limit"`
}

// cpuPeriod is the CFS period the CPU quota is expressed in (Docker's too).
const cpuPeriod = 100000

// podmanResources translates limits as resources() does for Docker: memory
// swap equal to memory, CPUs as a CFS quota; zero leaves a limit alone.
func podmanResources(l driver.Limits) ociResources {
	var r ociResources
	if l.MemoryBytes > 0 {
		m, s := l.MemoryBytes, l.MemoryBytes
		r.Memory = &ociMemory{Limit: &m, Swap: &s}
	}
	if l.CPUs > 0 {
		q, p := int64(l.CPUs*cpuPeriod), uint64(cpuPeriod)
		r.CPU = &ociCPU{Quota: &q, Period: &p}
	}
	if l.PidsLimit != 0 { // -1 (driver.PidsUnlimited) lifts a limit
		r.Pids = &ociPids{Limit: l.PidsLimit}
	}
	return r
}

// podmanUpdate changes the limits of a running container on Podman: the
// Docker endpoint where Podman has it, else libpod's.
func (d *Driver) podmanUpdate(ctx context.Context, id string, limits driver.Limits) error {
	cli, err := d.api()
	if err != nil {
		return err
	}
	c, err := cli.ContainerInspect(ctx, id)
	if err != nil {
		return d.wrap(err, "update instance %q", id)
	}
	if c.State == nil || !c.State.Running {
		return fmt.Errorf("docker backend %q: update instance %q: Podman changes the limits of a running container only (this one is %s); start it first, or replace it: %w",
			d.backend, id, stateOf(c.State), driver.ErrUnsupported)
	}
	_, err = cli.ContainerUpdate(ctx, c.ID, container.UpdateConfig{Resources: resources(limits)})
	if err == nil || !d.errIsNotFound(err) {
		return d.wrap(err, "update instance %q", id)
	}
	// 404 for a container that exists: the endpoint is missing (Podman 4).
	body, err := json.Marshal(podmanResources(limits))
	if err != nil {
		return err
	}
	return d.wrap(d.libpodPost(ctx, "/containers/"+url.PathEscape(c.ID)+"/update", body), "update instance %q", id)
}

func stateOf(s *container.State) string {
	if s == nil || s.Status == "" {
		return "not running"
	}
	return s.Status
}

// libpodPost sends a JSON POST to libpod's API over the client's own
// connection (unix socket, TLS or the SSH channel). An error answer becomes
// an error of the type its status means, as the Docker client does.
func (d *Driver) libpodPost(ctx context.Context, path string, body []byte) error {
	cli, err := d.api()
	if err != nil {
		return err
	}
	base, err := d.requestBase(cli)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/"+libpodAPIVersion+"/libpod"+path, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := cli.HTTPClient().Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 == 2 {
		_, _ = io.Copy(io.Discard, resp.Body)
		return nil
	}
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	var e struct {
		Message string `json:"message"`
	}
	if json.Unmarshal(msg, &e) == nil && e.Message != "" {
		msg = []byte(e.Message)
	}
	err = fmt.Errorf("podman: %s", strings.TrimSpace(string(msg)))
	switch resp.StatusCode {
	case http.StatusNotFound:
		return fmt.Errorf("%w: %w", cerrdefs.ErrNotFound, err)
	case http.StatusConflict:
		return fmt.Errorf("%w: %w", cerrdefs.ErrConflict, err)
	}
	return err
}

// requestBase is the scheme and host of URLs sent through the client's HTTP
// client: its transport dials the socket or SSH channel whatever the host.
func (d *Driver) requestBase(cli interface{ DaemonHost() string }) (string, error) {
	u, err := url.Parse(cli.DaemonHost())
	if err != nil {
		return "", err
	}
	switch {
	case u.Scheme == "unix" || u.Scheme == "npipe":
		return "http://podman", nil
	case u.Scheme == "tcp" && d.ep.u.Scheme == "tcp" && d.dc.TLSCAFile != "":
		return "https://" + u.Host, nil
	default:
		return "http://" + u.Host, nil
	}
}

// podmanInterfaceRace reports Podman's network create failing because a
// host interface vanished while it chose a subnet (see the header).
func podmanInterfaceRace(err error) bool {
	return err != nil && strings.Contains(err.Error(), "no such network interface")
}
