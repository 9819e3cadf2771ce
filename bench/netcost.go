package main

import (
	"context"
	"fmt"
	"time"

	"github.com/docker/docker/api/types/container"
)

// The engine's own price of a backend network. A sandbox with network =
// "isolated" (the default) runs on its backend's user-defined bridge
// network, which no other backend's sandbox can reach. dockerd 20.10 pays
// for such a network at every container start with its embedded DNS
// server: it re-executes itself ("setup-resolver") inside the container's
// network namespace, which runs iptables eleven times to redirect
// 127.0.0.11:53 (libnetwork resolver_unix.go). On the default bridge it
// does not (daemon/network.go: CreateOptionDisableResolution for every
// network that is not user-defined), and on the default bridge every
// container can reach every other one. This row creates and starts the
// provider's containers through the Docker API on a network of their own
// and on the default bridge, in the same run, so the price of the
// isolation is shown apart from the provider's.

// netCostLabel is the row's backend column: the row has no goal, it
// documents the engine.
const netCostLabel = "docker engine only"

// variant is the engine side creating the same containers under
// another scope: on a network of its own like the provider's (own), or
// on the engine's default bridge.
func (e *dockerEngine) variant(b *bench, suffix string, own bool) *dockerEngine {
	v := *e
	v.engBack = e.engBack + "-" + suffix
	v.network = "sandbox-" + v.engBack
	if !own {
		v.provNet = ""
		host := *e.host
		host.NetworkMode = container.NetworkMode("bridge")
		v.host = &host
	}
	b.onCleanup("engine-side containers of "+v.engBack, v.sweep)
	return &v
}

// netCost creates and starts n containers on a network of their own and
// n on the default bridge (the order alternating between repetitions, so
// a machine getting busier does not favour one side), removing each fleet
// before the next, and adds a row with both times and their ratio.
func (b *bench) netCost(ctx context.Context, e *dockerEngine, n int) error {
	if e.provNet == "" {
		b.table.skip(netCostLabel, "the provider's containers are not on a network of their own")
		return nil
	}
	own, def := e.variant(b, "net", true), e.variant(b, "def", false)
	var ownT, defT []time.Duration
	for rep := 0; rep < b.o.repeat; rep++ {
		sides := []struct {
			eng *dockerEngine
			out *[]time.Duration
		}{{own, &ownT}, {def, &defT}}
		if rep%2 == 1 {
			sides[0], sides[1] = sides[1], sides[0]
		}
		for _, s := range sides {
			where := "the default bridge"
			if s.eng.provNet != "" {
				where = "network " + s.eng.network
			}
			logf("%s n=%d: create+start on %s", netCostLabel, n, where)
			d, err := timed(func() error { return s.eng.create(ctx, n) })
			if err != nil {
				return fmt.Errorf("engine-only create on %s: %w", where, err)
			}
			*s.out = append(*s.out, d)
			if err := s.eng.remove(ctx, n); err != nil {
				return fmt.Errorf("engine-only remove on %s: %w", where, err)
			}
		}
	}
	o, d := median(ownT), median(defT)
	b.table.add(row{backend: netCostLabel, n: n, op: "create+start, own network", prov: o, eng: d, engWhat: "default bridge",
		note: fmt.Sprintf("the engine's price of isolation, no provider involved: %+.0f ms of wall time per container (network creation included; embedded DNS set up at each start)",
			float64(o-d)/float64(time.Millisecond)/float64(n))})
	return nil
}
