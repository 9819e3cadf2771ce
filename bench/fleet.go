package main

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"
)

// engine is the same work as the provider's, done directly against the
// engine with its Go client (or processes, for local).
type engine interface {
	// capture learns the exact objects to create from the provider's
	// running fleet, so both sides create the same thing.
	capture(ctx context.Context) error
	// create makes the backend's scope and n running instances,
	// parallelism at a time.
	create(ctx context.Context, n int) error
	// list is what a refresh needs: the backend's instances, filtered.
	list(ctx context.Context) (int, error)
	// remove deletes the n instances and the scope.
	remove(ctx context.Context, n int) error
}

// fleet is one backend's configuration and its engine-side counterpart.
type fleet struct {
	label string // table's backend column
	wd    *workdir
	eng   engine // nil: no engine-side column
	// afterReplan runs once per repetition while the fleet of n exists.
	afterReplan func(ctx context.Context, n, rep int) error
}

// measurement holds every repetition of one fleet size.
type measurement struct {
	apply, replan, destroy          []time.Duration
	engApply, engList, engDestroy   []time.Duration
	replanEmpty                     []bool
	replanDiff                      string // the first non-empty plan, abridged
	rssApply, rssReplan, rssDestroy int64
	cpuApply, cpuReplan, cpuDestroy []time.Duration
}

// measure applies, re-plans and destroys a fleet of n, then does the same
// on the engine, repeat times.
func (b *bench) measure(ctx context.Context, f *fleet, n int) (*measurement, error) {
	m := &measurement{}
	for rep := 0; rep < b.o.repeat; rep++ {
		logf("%s n=%d (run %d/%d): terraform apply", f.label, n, rep+1, b.o.repeat)
		r, err := f.wd.run(ctx, "apply", n, "-auto-approve")
		if err == nil {
			err = r.must("apply")
		}
		if err != nil {
			return m, err
		}
		m.apply = append(m.apply, r.wall)
		m.cpuApply = append(m.cpuApply, r.cpu)
		m.rssApply = max(m.rssApply, r.peakRSS)
		if rep == 0 && f.eng != nil {
			if err := f.eng.capture(ctx); err != nil {
				return m, fmt.Errorf("capture the provider's objects: %w", err)
			}
		}

		logf("%s n=%d: terraform plan (re-plan with refresh)", f.label, n)
		r, err = f.wd.run(ctx, "plan", n, "-detailed-exitcode")
		if err != nil {
			return m, err
		}
		switch r.exitCode {
		case 0, 2:
		default:
			return m, r.must("plan")
		}
		m.replan = append(m.replan, r.wall)
		m.cpuReplan = append(m.cpuReplan, r.cpu)
		m.rssReplan = max(m.rssReplan, r.peakRSS)
		m.replanEmpty = append(m.replanEmpty, r.exitCode == 0)
		if r.exitCode == 2 && m.replanDiff == "" {
			m.replanDiff = planSummary(r.output)
			logf("%s n=%d: the re-plan is NOT empty:\n%s", f.label, n, tail(r.output, 4000))
		}
		if f.afterReplan != nil {
			if err := f.afterReplan(ctx, n, rep); err != nil {
				return m, err
			}
		}

		logf("%s n=%d: terraform destroy", f.label, n)
		r, err = f.wd.run(ctx, "destroy", n, "-auto-approve")
		if err == nil && r.exitCode != 0 && strings.Contains(r.output, "moby#42119") {
			// dockerd kept a stale endpoint on the backend network after
			// every container was removed: the instances are gone, the
			// time counts; the network is leaked (only a daemon restart
			// clears it), the backend is dropped from state.
			logf("WARNING: %s: dockerd refused to remove the backend network (stale endpoint); every instance was destroyed", f.label)
			stale.Add(1)
			_, _ = f.wd.run(ctx, "state", 0, "rm", "sandbox_backend.b")
		} else if err == nil {
			err = r.must("destroy")
		}
		if err != nil {
			return m, err
		}
		m.destroy = append(m.destroy, r.wall)
		m.cpuDestroy = append(m.cpuDestroy, r.cpu)
		m.rssDestroy = max(m.rssDestroy, r.peakRSS)

		if f.eng == nil {
			continue
		}
		logf("%s n=%d: engine create+start", f.label, n)
		d, err := timed(func() error { return f.eng.create(ctx, n) })
		if err != nil {
			return m, fmt.Errorf("engine create: %w", err)
		}
		m.engApply = append(m.engApply, d)
		var got int
		d, err = timed(func() (err error) { got, err = f.eng.list(ctx); return err })
		if err == nil && got != n {
			err = fmt.Errorf("listed %d instances, want %d", got, n)
		}
		if err != nil {
			return m, fmt.Errorf("engine list: %w", err)
		}
		m.engList = append(m.engList, d)
		logf("%s n=%d: engine remove", f.label, n)
		d, err = timed(func() error { return f.eng.remove(ctx, n) })
		if err != nil {
			return m, fmt.Errorf("engine remove: %w", err)
		}
		m.engDestroy = append(m.engDestroy, d)
	}
	return m, nil
}

// floor re-plans the backend alone (no instances): terraform's start, the
// plugin's start and the backend's own refresh, which every command pays.
func (b *bench) floor(ctx context.Context, f *fleet) error {
	logf("%s: floor (re-plan of the backend alone)", f.label)
	r, err := f.wd.run(ctx, "apply", 0, "-auto-approve")
	if err == nil {
		err = r.must("apply")
	}
	if err != nil {
		return err
	}
	var walls, cpus []time.Duration
	for rep := 0; rep < b.o.repeat; rep++ {
		r, err = f.wd.run(ctx, "plan", 0, "-detailed-exitcode")
		if err != nil {
			return err
		}
		if r.exitCode != 0 && r.exitCode != 2 {
			return r.must("plan")
		}
		walls, cpus = append(walls, r.wall), append(cpus, r.cpu)
	}
	b.table.add(row{backend: f.label, n: 0, op: "re-plan (floor)", prov: median(walls),
		note: "backend only: terraform + plugin start + backend refresh; " + cpuNote(cpus)})
	r, err = f.wd.run(ctx, "destroy", 0, "-auto-approve")
	if err == nil {
		err = r.must("destroy")
	}
	return err
}

// warmUp applies and destroys one instance on a remote engine, so the
// one-time agent upload (a volume per engine and provider build, kept for
// later backends) is reported on its own row instead of inside the fleet.
func (b *bench) warmUp(ctx context.Context, f *fleet) error {
	logf("%s: first instance on the engine (uploads the agent)", f.label)
	r, err := f.wd.run(ctx, "apply", 1, "-auto-approve")
	if err == nil {
		err = r.must("apply")
	}
	if err != nil {
		return err
	}
	b.table.add(row{backend: f.label, n: 1, op: "apply (cold engine)", prov: r.wall,
		note: "once per engine and provider build: agent upload; " + rssNote(r.peakRSS)})
	r, err = f.wd.run(ctx, "destroy", 1, "-auto-approve")
	if err == nil {
		err = r.must("destroy")
	}
	return err
}

// planSummary keeps the lines of a plan that say what would change.
func planSummary(out string) string {
	var keep []string
	for _, line := range strings.Split(out, "\n") {
		t := strings.TrimSpace(line)
		if strings.HasPrefix(t, "#") || strings.HasPrefix(t, "~") || strings.HasPrefix(t, "-/+") ||
			strings.HasPrefix(t, "Plan:") || strings.Contains(t, "forces replacement") {
			keep = append(keep, t)
		}
		if len(keep) >= 12 {
			break
		}
	}
	return strings.Join(keep, " | ")
}

func timed(fn func() error) (time.Duration, error) {
	start := time.Now()
	err := fn()
	return time.Since(start), err
}

func median(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// parallel runs fn(0..n-1), at most par at a time, and returns the first error.
func parallel(ctx context.Context, n, par int, fn func(ctx context.Context, i int) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	sem := make(chan struct{}, par)
	var wg sync.WaitGroup
	var once sync.Once
	var first error
	for i := 0; i < n; i++ {
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			break
		}
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			defer func() { <-sem }()
			if err := fn(ctx, i); err != nil {
				once.Do(func() { first = err; cancel() })
			}
		}(i)
	}
	wg.Wait()
	if first == nil && ctx.Err() != nil {
		return ctx.Err()
	}
	return first
}

// addRows puts a measurement into the table.
func (b *bench) addRows(label string, n int, m *measurement, goalApply, goalDestroy string) {
	t := b.table
	t.add(row{backend: label, n: n, op: "apply", prov: median(m.apply), eng: median(m.engApply), goal: goalApply,
		note: cpuNote(m.cpuApply) + rssSuffix(m.rssApply) + t.floorNote(n, "apply", median(m.engApply))})
	note := "empty: " + emptyNote(m.replanEmpty)
	if m.replanDiff != "" {
		note += " (" + oneLine(m.replanDiff) + ")"
	}
	goal := ""
	if n == 50 && goalApply != "" {
		goal = "< 0.5 s"
	}
	t.add(row{backend: label, n: n, op: "re-plan", prov: median(m.replan), eng: median(m.engList), engWhat: "list", noRatio: true,
		goal: goal, note: note + "; " + cpuNote(m.cpuReplan) + rssSuffix(m.rssReplan)})
	t.add(row{backend: label, n: n, op: "destroy", prov: median(m.destroy), eng: median(m.engDestroy), goal: goalDestroy,
		note: cpuNote(m.cpuDestroy) + rssSuffix(m.rssDestroy) + t.floorNote(n, "destroy", median(m.engDestroy))})
}

func emptyNote(e []bool) string {
	yes := 0
	for _, v := range e {
		if v {
			yes++
		}
	}
	switch {
	case len(e) == 0:
		return "?"
	case yes == len(e):
		return "yes"
	case yes == 0:
		return "NO"
	default:
		return fmt.Sprintf("%d/%d runs", yes, len(e))
	}
}

func rssNote(rss int64) string {
	if rss == 0 {
		return ""
	}
	return fmt.Sprintf("plugin RSS %d MiB", rss>>20)
}

// cpuNote is the CPU terraform and its plugins used (the client side).
func cpuNote(cpu []time.Duration) string {
	return fmt.Sprintf("tf+plugin CPU %.2fs", median(cpu).Seconds())
}

func rssSuffix(rss int64) string {
	if rss == 0 {
		return ""
	}
	return "; " + rssNote(rss)
}
