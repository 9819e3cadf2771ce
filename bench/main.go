// Command bench times the provider against the engines it drives: `terraform
// apply`, an empty re-plan and `terraform destroy` of a fleet, each beside
// the same work done directly against the engine, and prints a table.
//
//	go run ./bench [-backends docker,local,ssh,tls,incus] [-repeat N] [-quick]
//
// It builds the provider into a temporary directory and runs the real
// terraform binary through dev_overrides. Everything it creates (work
// directories, containers, networks, images, instances, processes) is
// labelled or named for it and removed at the end, also after a failure or
// an interrupt.
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
}

func main() {
	var o options
	backends := flag.String("backends", "docker,local,ssh,tls,incus",
		"backends to measure (docker, local, ssh, tls, incus); ones whose engine does not answer are reported as skipped")
	defRepeat := 1
	if v, err := strconv.Atoi(os.Getenv("BENCH_REPEAT")); err == nil && v > 0 {
		defRepeat = v
	}
	flag.IntVar(&o.repeat, "repeat", defRepeat, "runs per measurement; the median is printed (default $BENCH_REPEAT, else 1)")
	flag.IntVar(&o.parallelism, "parallelism", 10, "terraform -parallelism and the engine-side concurrency")
	flag.IntVar(&o.unrelated, "unrelated", 600, "unrelated containers on the host for the Docker re-plan row (0: skip)")
	flag.BoolVar(&o.quick, "quick", os.Getenv("BENCH_QUICK") != "", "small fleets (3 and 5) to check the harness ($BENCH_QUICK)")
	flag.BoolVar(&o.keep, "keep-going", true, "continue with the next backend after a failure")
	flag.BoolVar(&o.verbose, "v", os.Getenv("BENCH_VERBOSE") != "", "log every command ($BENCH_VERBOSE)")
	flag.Parse()
	for _, b := range strings.Split(*backends, ",") {
		if b = strings.TrimSpace(b); b != "" {
			o.backends = append(o.backends, b)
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
			logf("unknown backend %q (docker, local, ssh, tls, incus)", name)
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
	"docker": runDocker,
	"ssh":    runSSH,
	"tls":    runTLS,
	"local":  runLocal,
	"incus":  runIncus,
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
