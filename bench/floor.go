package main

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"time"
)

// noopBinary is the do-nothing provider (bench/noopprovider), built next to
// the sandbox provider so the same dev_overrides directory serves both.
const noopBinary = "terraform-provider-noop"

// floorLabel is the table's backend column for the no-op provider's rows.
const floorLabel = "no-op provider"

// floorHCL is a fleet of the no-op provider in the shape of a sandbox
// fleet: one scope, n items that reference it.
const floorHCL = `resource "noop_scope" "b" {
  name = "scope"
}

resource "noop_item" "w" {
  count  = var.n
  name   = "w${count.index}"
  parent = noop_scope.b.id
}
`

// runFloor applies, re-plans and destroys fleets of the no-op provider:
// Terraform's and the plugin protocol's own time for each command, which
// no provider can go below. Every other backend's apply and destroy rows
// then name the ratio this floor leaves reachable (floorNote).
func runFloor(ctx context.Context, b *bench) error {
	build := exec.CommandContext(ctx, "go", "build", "-trimpath", "-o", filepath.Join(b.pluginD, noopBinary), "./bench/noopprovider")
	build.Dir = b.repo
	if out, err := build.CombinedOutput(); err != nil {
		return fmt.Errorf("go build ./bench/noopprovider: %v\n%s", err, out)
	}
	wd, err := b.newWorkdir("noop", floorHCL)
	if err != nil {
		return err
	}
	f := &fleet{label: floorLabel, wd: wd}
	for _, n := range b.floorSizes() {
		m, err := b.measure(ctx, f, n)
		if err != nil {
			return err
		}
		b.addRows(floorLabel, n, m, "", "")
	}
	return nil
}

// floorSizes are every fleet size the other backends measure.
func (b *bench) floorSizes() []int {
	return b.sizes(10, 30, 50)
}

// floorNote says how close to the engine any provider could come on a
// row: the engine's time plus the no-op provider's for the same command
// and fleet size, over the engine's. It overstates the floor a little (some
// of Terraform's per-resource work overlaps the engine's in a real run);
// empty when the floor was not measured.
func (t *table) floorNote(n int, op string, engine time.Duration) string {
	floor, ok := t.find(floorLabel, n, op)
	if !ok || engine <= 0 {
		return ""
	}
	return fmt.Sprintf("; no-op floor %s: ~%.2fx at best", secs(floor), float64(engine+floor)/float64(engine))
}
