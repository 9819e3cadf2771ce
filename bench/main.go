// Command bench times the provider against the engines it drives (`make
// bench`): `terraform apply`, a re-plan (`terraform plan` with refresh, which
// must be empty) and `terraform destroy` of a fleet, each beside the same
// work done directly against the engine, and prints a table with the goals.
//
//	go run ./bench [-backends floor,docker,local,ssh,tls,incus,peer] [-repeat N] [-sizes 10,50]
//	               [-unrelated 600] [-net-cost=false] [-peer-docker BINARY] [-quick] [-trace N] [-v]
//
// Environment: BENCH_BACKENDS, BENCH_REPEAT (runs per measurement, median
// printed; default 1), BENCH_SIZES, BENCH_QUICK=1 (fleets of 3 and 5, to
// check the harness), BENCH_TRACE=N, BENCH_VERBOSE=1. SSH and TLS read the
// test set-up's /var/lib/sandbox-test/env.sh (scripts/setup-sshd.sh,
// scripts/setup-docker-tls.sh); Incus uses the image alias of
// scripts/setup-incus.sh. A backend whose engine is not there is listed as
// not measured.
//
// How: the provider is built with CGO_ENABLED=0 into a temporary directory
// and run by the real terraform through dev_overrides (a temporary
// TF_CLI_CONFIG_FILE, CHECKPOINT_DISABLE=1, -parallelism=10). The engine
// side repeats exactly what the provider made: it copies the configuration
// of one of the provider's containers (Docker: inspect; Incus: config and
// devices; local: the bwrap argv and environment read from /proc) and
// creates and starts the same objects parallelism at a time, on a client
// that keeps connections alive, then removes them. "re-plan (floor)" is a
// re-plan of the backend alone: what terraform and the plugin cost before
// any instance. The "floor" backend (run first) is a provider that does
// nothing (bench/noopprovider) applying, re-planning and destroying fleets
// of every measured size: Terraform's and the plugin protocol's own time,
// which no provider can go below; the other backends' apply and destroy
// rows then say which ratio to the engine that floor leaves reachable. The
// "docker engine only" rows create and start each Docker fleet through the
// engine alone on a network of its own and on the default bridge: the
// engine's own price of isolation, apart from the provider's. The "peer"
// backend (not in the default list) runs the same Docker fleet through a
// build of the published kreuzwerker/docker provider (peer.go). The notes give the CPU terraform and its plugin processes
// used and the plugin's peak RSS (VmHWM, polled from /proc). -trace runs a
// fleet through a counting proxy on the engine's socket and lists the API
// calls of each command.
//
// Everything it creates (work directories, containers, networks, images,
// instances, processes, cgroups) is named or labelled for it and removed
// at the end, also after a failure or an interrupt (SIGINT/SIGTERM).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// options are the command-line settings.
type options struct {
	backends    []string
	repeat      int
	parallelism int
	unrelated   int
	quick       bool
	keep        bool
	verbose     bool
	trace       int
	netCost     bool
	peerDocker  string
	sizes       []int
	traceKinds  []string
}

func main() {
	var o options
	defBackends := "floor,docker,local,ssh,tls,incus"
	if v, ok := os.LookupEnv("BENCH_BACKENDS"); ok {
		defBackends = v
	}
	defTrace, _ := strconv.Atoi(os.Getenv("BENCH_TRACE"))
	backends := flag.String("backends", defBackends,
		"backends to measure (floor, docker, local, ssh, tls, incus; default $BENCH_BACKENDS); ones whose engine does not answer are reported as not measured; floor is a provider that does nothing (run it first)")
	defRepeat := 1
	if v, err := strconv.Atoi(os.Getenv("BENCH_REPEAT")); err == nil && v > 0 {
		defRepeat = v
	}
	flag.IntVar(&o.repeat, "repeat", defRepeat, "runs per measurement; the median is printed (default $BENCH_REPEAT, else 1)")
	flag.IntVar(&o.parallelism, "parallelism", 10, "terraform -parallelism and the engine-side concurrency")
	flag.IntVar(&o.unrelated, "unrelated", 600, "unrelated containers on the host for the Docker re-plan row (0: skip)")
	flag.BoolVar(&o.quick, "quick", os.Getenv("BENCH_QUICK") != "", "small fleets (3 and 5) to check the harness ($BENCH_QUICK)")
	flag.BoolVar(&o.netCost, "net-cost", os.Getenv("BENCH_NET_COST") != "0",
		"Docker: also create and start each fleet through the engine alone on a network of its own and on the default bridge, to show the engine's price of isolation ($BENCH_NET_COST=0 skips)")
	flag.StringVar(&o.peerDocker, "peer-docker", os.Getenv("BENCH_PEER_DOCKER"),
		"backend peer: a kreuzwerker/docker provider binary built outside this repository, run on the same fleet as docker ($BENCH_PEER_DOCKER)")
	flag.BoolVar(&o.keep, "keep-going", true, "continue with the next backend after a failure")
	flag.IntVar(&o.trace, "trace", defTrace, "also run a Docker fleet of this size through a counting API proxy and print the calls per command (default $BENCH_TRACE)")
	traceKinds := flag.String("trace-engines", "docker,incus", "engines -trace runs against")
	sizes := flag.String("sizes", os.Getenv("BENCH_SIZES"), "fleet sizes for every backend, e.g. 10,50 (default: 10,50; Incus 10,30; SSH and TLS 50; $BENCH_SIZES)")
	flag.BoolVar(&o.verbose, "v", os.Getenv("BENCH_VERBOSE") != "", "log every command ($BENCH_VERBOSE)")
	flag.Parse()
	for _, b := range strings.Split(*backends, ",") {
		if b = strings.TrimSpace(b); b != "" {
			o.backends = append(o.backends, b)
		}
	}

	o.traceKinds = strings.Split(*traceKinds, ",")
	for _, f := range strings.Split(*sizes, ",") {
		if n, err := strconv.Atoi(strings.TrimSpace(f)); err == nil && n > 0 {
			o.sizes = append(o.sizes, n)
		}
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(run(ctx, o))
}

func run(ctx context.Context, o options) int {
	b, err := newBench(ctx, o)
	if err != nil {
		logf("set-up failed: %v", err)
		if b != nil {
			b.cleanup()
		}
		return 1
	}
	// Cleanup runs whatever happens: on return, and (through ctx) on
	// SIGINT/SIGTERM, which cancels the running step first.
	defer b.cleanup()

	failed := false
	for _, name := range o.backends {
		if ctx.Err() != nil {
			break
		}
		sc, ok := scenarios[name]
		if !ok {
			logf("unknown backend %q (floor, docker, local, ssh, tls, incus, peer)", name)
			failed = true
			continue
		}
		if err := sc(ctx, b); err != nil {
			failed = true
			var skip skipError
			if errors.As(err, &skip) {
				b.table.skip(name, skip.Error())
				logf("%s: skipped: %v", name, err)
				failed = false
			} else {
				b.table.skip(name, "FAILED: "+oneLine(err.Error()))
				logf("%s: FAILED: %v", name, err)
			}
			if !o.keep {
				break
			}
		}
	}
	b.table.print(os.Stdout, b)
	for _, kind := range []string{"docker", "incus"} {
		if o.trace <= 0 || ctx.Err() != nil || !contains(o.traceKinds, kind) {
			continue
		}
		if err := traceFleet(ctx, b, kind, o.trace, os.Stdout); err != nil {
			logf("trace %s: %v", kind, err)
		}
	}
	if ctx.Err() != nil {
		logf("interrupted")
		return 130
	}
	if failed {
		return 1
	}
	return 0
}

// skipError marks a backend whose engine is not there.
type skipError struct{ msg string }

func (e skipError) Error() string { return e.msg }

func skipf(format string, a ...any) error { return skipError{fmt.Sprintf(format, a...)} }

// scenarios run the measurements of one backend and add rows to the table.
var scenarios = map[string]func(context.Context, *bench) error{
	"floor":  runFloor,
	"docker": runDocker,
	"ssh":    runSSH,
	"tls":    runTLS,
	"local":  runLocal,
	"incus":  runIncus,
	"peer":   runPeer,
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if strings.TrimSpace(v) == s {
			return true
		}
	}
	return false
}

func logf(format string, a ...any) {
	fmt.Fprintf(os.Stderr, "[bench %s] %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(format, a...))
}

func oneLine(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > 160 {
		s = s[:160] + "..."
	}
	return s
}
