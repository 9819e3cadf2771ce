package main

import (
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"
	"text/tabwriter"
	"time"
)

type row struct {
	backend string
	n       int
	op      string
	prov    time.Duration
	eng     time.Duration // 0: none
	engWhat string        // what the engine column measured, if not the same work
	noRatio bool          // the engine column is a reference, not the same work
	goal    string
	note    string
}

type table struct {
	rows    []row
	skipped []string
}

func (t *table) add(r row) { t.rows = append(t.rows, r) }

func (t *table) skip(backend, why string) {
	t.skipped = append(t.skipped, fmt.Sprintf("%s: %s", backend, why))
}

// find returns the provider time of a row, for cross-row ratios (SSH vs socket).
func (t *table) find(backend string, n int, op string) (time.Duration, bool) {
	for _, r := range t.rows {
		if r.backend == backend && r.n == n && r.op == op {
			return r.prov, true
		}
	}
	return 0, false
}

func (t *table) print(w io.Writer, b *bench) {
	fmt.Fprintf(w, "\nterraform-provider-sandbox bench, %s, %d CPU(s), load %s, median of %d run(s), terraform -parallelism=%d\n",
		time.Now().UTC().Format("2006-01-02 15:04 MST"), runtime.NumCPU(), loadAvg(), b.o.repeat, b.o.parallelism)
	fmt.Fprintln(w, "provider = wall time of the terraform command; engine = the same work through the engine's client"+
		" (create+start / remove, parallelism at a time); ratio = provider / engine.")
	fmt.Fprintln(w, "Noisy when other work shares the machine: compare ratios within one run, not across runs.")
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "BACKEND\tN\tOPERATION\tPROVIDER\tENGINE\tRATIO\tGOAL\tMET\tNOTES")
	for _, r := range t.rows {
		eng, ratio := "-", "-"
		if r.eng > 0 {
			eng = secs(r.eng)
			if r.engWhat != "" {
				eng += " (" + r.engWhat + ")"
			}
			if !r.noRatio {
				ratio = fmt.Sprintf("%.2fx", float64(r.prov)/float64(r.eng))
			}
		}
		goal := r.goal
		if goal == "" {
			goal = "-"
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.backend, r.n, r.op, secs(r.prov), eng, ratio, goal, r.met(), r.note)
	}
	tw.Flush()
	if n := stale.Load(); n > 0 {
		fmt.Fprintf(w, "note: dockerd kept stale endpoints on %d network(s) after all their containers were removed (dockerd 20.10 race under load, seen on the provider's and on the direct path alike); those networks leak until dockerd restarts.\n", n)
	}
	for _, s := range t.skipped {
		fmt.Fprintf(w, "not measured: %s\n", s)
	}
}

// met checks the goal: "<= 1.10x ..." against the ratio, "< 0.5 s" against
// the provider's time.
func (r row) met() string {
	var limit float64
	switch {
	case strings.HasPrefix(r.goal, "<= ") && r.eng > 0 && !r.noRatio:
		if _, err := fmt.Sscanf(r.goal, "<= %fx", &limit); err != nil {
			return "-"
		}
		return yesNo(float64(r.prov)/float64(r.eng) <= limit)
	case strings.HasPrefix(r.goal, "< ") && strings.Contains(r.goal, " s"):
		if _, err := fmt.Sscanf(r.goal, "< %f s", &limit); err != nil {
			return "-"
		}
		return yesNo(r.prov.Seconds() < limit)
	}
	return "-"
}

func yesNo(ok bool) string {
	if ok {
		return "yes"
	}
	return "NO"
}

func secs(d time.Duration) string { return fmt.Sprintf("%.2fs", d.Seconds()) }

func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}
