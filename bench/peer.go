package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
)

// The peer: the published Docker provider (kreuzwerker/docker), built by
// whoever runs the bench from its public source outside this repository
// and named by -peer-docker. It applies, re-plans and destroys the same
// fleet as the "docker" rows (same image, same command), once in its
// default configuration (the engine's default bridge, where every
// container reaches every other one) and once on a network of its own
// (networks_advanced), which is what network = "isolated" does. Run it
// after "docker" (-backends docker,peer) to get the side-by-side ratios.

const peerLabel = "peer docker"

// peerHCL is the peer's fleet; own puts it on a network of its own.
func peerHCL(prefix, imageID string, own bool) string {
	network, attach := "", ""
	if own {
		network = fmt.Sprintf("resource \"docker_network\" \"b\" {\n  name = %q\n}\n\n", prefix+"-net")
		attach = "\n  networks_advanced {\n    name    = docker_network.b.id\n    aliases = [\"w${count.index}\"]\n  }"
	}
	return network + fmt.Sprintf(`resource "docker_container" "w" {
  count   = var.n
  name    = "%s-w${count.index}"
  image   = %q
  command = ["sleep", %q]%s
}
`, prefix, imageID, sleepSeconds, attach)
}

func runPeer(ctx context.Context, b *bench) error {
	if b.o.peerDocker == "" {
		return skipf("no peer provider binary (-peer-docker or $BENCH_PEER_DOCKER: build kreuzwerker/terraform-provider-docker outside this repository)")
	}
	if _, err := os.Stat(b.o.peerDocker); err != nil {
		return skipf("peer provider binary: %v", err)
	}
	link := filepath.Join(b.pluginD, "terraform-provider-docker")
	if err := os.Symlink(b.o.peerDocker, link); err != nil && !os.IsExist(err) {
		return err
	}
	cli, err := dockerClient(ctx, localSocket)
	if err != nil {
		return skipf("dockerd does not answer on %s: %v", localSocket, err)
	}
	if err := b.ensureDockerImage(ctx, cli, "the local dockerd"); err != nil {
		return err
	}
	img, err := cli.ImageInspect(ctx, dockerImage)
	if err != nil {
		return err
	}
	for _, own := range []bool{false, true} {
		where := "default bridge"
		if own {
			where = "own network"
		}
		prefix := fmt.Sprintf("peer-%s-%t", b.runID, own)
		b.onCleanup("peer containers "+prefix, func(ctx context.Context) error {
			l, err := cli.ContainerList(ctx, container.ListOptions{All: true, Filters: filters.NewArgs(filters.Arg("name", prefix+"-w"))})
			if err != nil {
				return err
			}
			for _, c := range l {
				_ = cli.ContainerRemove(ctx, c.ID, container.RemoveOptions{Force: true})
			}
			return removeNetwork(ctx, cli, prefix+"-net")
		})
		wd, err := b.newWorkdir("peer-"+strings.ReplaceAll(where, " ", "-"), peerHCL(prefix, img.ID, own))
		if err != nil {
			return err
		}
		f := &fleet{label: peerLabel + ", " + where, wd: wd}
		for _, n := range b.sizes(10, 50) {
			m, err := b.measure(ctx, f, n)
			if err != nil {
				return err
			}
			b.addPeerRows(f.label, n, m)
		}
	}
	return nil
}

// addPeerRows lists the peer's times beside the sandbox provider's from
// this run (ratio = sandbox provider / peer).
func (b *bench) addPeerRows(label string, n int, m *measurement) {
	for _, op := range []struct {
		name string
		v    []time.Duration
	}{{"apply", m.apply}, {"re-plan", m.replan}, {"destroy", m.destroy}} {
		peer := median(op.v)
		r := row{backend: label, n: n, op: op.name + " (sandbox vs peer)", eng: peer, engWhat: "peer", note: "peer: " + b.o.peerDocker}
		if ours, ok := b.table.find("docker", n, op.name); ok {
			r.prov = ours
		} else {
			r.prov, r.eng, r.engWhat = peer, 0, ""
			r.op = op.name + " (peer alone)"
			r.note += "; no sandbox row to compare (run with -backends docker,peer)"
		}
		if op.name == "re-plan" {
			r.note += "; peer's re-plan empty: " + emptyNote(m.replanEmpty)
		}
		b.table.add(r)
	}
}
