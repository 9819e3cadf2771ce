package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

const providerBinary = "terraform-provider-sandbox"

// bench holds what every scenario shares: the provider build, the CLI
// config, the table and the clean-up stack.
type bench struct {
	o       options
	repo    string
	tmp     string // removed at the end
	pluginD string // holds the provider binary (dev_overrides)
	rcFile  string
	table   *table
	runID   string // short random tag in every name the bench creates

	mu       sync.Mutex
	cleanups []cleanupStep
}

type cleanupStep struct {
	name string
	fn   func(context.Context) error
}

func newBench(ctx context.Context, o options) (*bench, error) {
	repo, err := os.Getwd()
	if err != nil {
		return nil, err
	}
	if _, err := os.Stat(filepath.Join(repo, "go.mod")); err != nil {
		return nil, fmt.Errorf("run from the repository root (go run ./bench): %w", err)
	}
	if _, err := exec.LookPath("terraform"); err != nil {
		return nil, fmt.Errorf("terraform is not on PATH: %w", err)
	}
	tmp, err := os.MkdirTemp("", "sandbox-bench.")
	if err != nil {
		return nil, err
	}
	b := &bench{o: o, repo: repo, tmp: tmp, table: &table{}, runID: randomTag()}
	b.onCleanup("remove "+tmp, func(context.Context) error { return os.RemoveAll(tmp) })
	b.pluginD = filepath.Join(tmp, "plugins")
	if err := os.MkdirAll(b.pluginD, 0o755); err != nil {
		return b, err
	}
	logf("building the provider (CGO_ENABLED=0) into %s", b.pluginD)
	build := exec.CommandContext(ctx, "go", "build", "-trimpath", "-o", filepath.Join(b.pluginD, providerBinary), ".")
	build.Dir = repo
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		return b, fmt.Errorf("go build: %v\n%s", err, out)
	}
	b.rcFile = filepath.Join(tmp, "terraformrc")
	rc := fmt.Sprintf(`provider_installation {
  dev_overrides {
    "sandboxfleet/sandbox" = %q
    "sandboxfleet/noop"    = %q
    "kreuzwerker/docker"   = %q
  }
  direct {}
}
`, b.pluginD, b.pluginD, b.pluginD)
	if err := os.WriteFile(b.rcFile, []byte(rc), 0o644); err != nil {
		return b, err
	}
	return b, nil
}

// onCleanup pushes a step; cleanup runs them last-in first-out.
func (b *bench) onCleanup(name string, fn func(context.Context) error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.cleanups = append(b.cleanups, cleanupStep{name, fn})
}

// cleanup runs every registered step with a fresh context (the run's may
// be cancelled), reporting but not stopping at failures.
func (b *bench) cleanup() {
	b.mu.Lock()
	steps := b.cleanups
	b.cleanups = nil
	b.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	for i := len(steps) - 1; i >= 0; i-- {
		if err := steps[i].fn(ctx); err != nil {
			logf("clean-up %s: %v", steps[i].name, err)
		}
	}
}

// workdir is one Terraform configuration with its state.
type workdir struct {
	b       *bench
	dir     string
	applied bool // state may hold objects
}

// newWorkdir writes main.tf; the configuration takes var.n (fleet size).
// Its clean-up destroys whatever the state still holds.
func (b *bench) newWorkdir(name, config string) (*workdir, error) {
	dir := filepath.Join(b.tmp, name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	// Only the provider the configuration uses: Terraform starts every
	// required provider for its schema.
	local, source := "sandbox", "sandboxfleet/sandbox"
	switch {
	case strings.Contains(config, `"noop_`):
		local, source = "noop", "sandboxfleet/noop"
	case strings.Contains(config, `"docker_`): // the peer provider (peer.go)
		local, source = "docker", "kreuzwerker/docker"
	}
	hcl := `terraform {
  required_providers {
    ` + local + ` = { source = "` + source + `" }
  }
}

variable "n" {
  type    = number
  default = 0
}

` + config
	if err := os.WriteFile(filepath.Join(dir, "main.tf"), []byte(hcl), 0o644); err != nil {
		return nil, err
	}
	w := &workdir{b: b, dir: dir}
	b.onCleanup("terraform destroy in "+dir, func(ctx context.Context) error {
		if !w.applied {
			return nil
		}
		_, err := w.run(ctx, "destroy", 0, "-auto-approve")
		return err
	})
	return w, nil
}

// tfResult is one terraform command's outcome.
type tfResult struct {
	wall     time.Duration
	exitCode int
	output   string
	peakRSS  int64         // bytes, provider plugin's VmHWM; 0 if not seen
	cpu      time.Duration // user+system of terraform and the plugins it reaped
}

// run runs `terraform CMD -var n=N ARGS...` in the work directory.
func (w *workdir) run(ctx context.Context, cmd string, n int, args ...string) (tfResult, error) {
	argv := []string{"-chdir=" + w.dir, cmd, "-input=false", "-no-color",
		"-parallelism=" + strconv.Itoa(w.b.o.parallelism), "-var", "n=" + strconv.Itoa(n)}
	if cmd == "state" {
		argv = []string{"-chdir=" + w.dir, cmd}
	}
	argv = append(argv, args...)
	c := exec.CommandContext(ctx, "terraform", argv...)
	c.Env = append(filteredEnv(), "TF_CLI_CONFIG_FILE="+w.b.rcFile, "CHECKPOINT_DISABLE=1", "TF_IN_AUTOMATION=1")
	// Its own process group, so a Ctrl-C reaches only the bench, which
	// sends one interrupt (a second would make terraform stop at once
	// without saving its state).
	c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	c.Cancel = func() error { return c.Process.Signal(os.Interrupt) }
	c.WaitDelay = 2 * time.Minute
	var out bytes.Buffer
	c.Stdout, c.Stderr = &out, &out
	if w.b.o.verbose {
		logf("terraform %s", strings.Join(argv, " "))
	}
	if cmd == "apply" || cmd == "destroy" {
		w.applied = true
	}
	start := time.Now()
	if err := c.Start(); err != nil {
		return tfResult{}, err
	}
	rss := watchRSS(c.Process.Pid)
	err := c.Wait()
	res := tfResult{wall: time.Since(start), output: out.String(), peakRSS: rss()}
	if ps := c.ProcessState; ps != nil {
		res.cpu = ps.UserTime() + ps.SystemTime()
	}
	var exit *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &exit):
		res.exitCode = exit.ExitCode()
	default:
		return res, err
	}
	if ctx.Err() != nil {
		return res, ctx.Err()
	}
	return res, nil
}

// must turns a non-zero exit into an error carrying the output's tail.
func (r tfResult) must(what string) error {
	if r.exitCode == 0 {
		return nil
	}
	return fmt.Errorf("terraform %s exited %d:\n%s", what, r.exitCode, tail(r.output, 3000))
}

// filteredEnv drops variables that would change terraform's behaviour.
func filteredEnv() []string {
	var out []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(k, "TF_") || k == "CHECKPOINT_DISABLE" {
			continue
		}
		out = append(out, kv)
	}
	return out
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "..." + s[len(s)-n:]
}

// watchRSS polls the children of pid (terraform) for the provider plugin
// and keeps the highest VmHWM seen; the returned func stops and reports.
// It reads a few small /proc files every 100 ms.
func watchRSS(pid int) func() int64 {
	done := make(chan struct{})
	var peak int64
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for {
			for _, child := range childrenOf(pid) {
				if hwm := pluginHWM(child); hwm > peak {
					peak = hwm
				}
			}
			select {
			case <-done:
				return
			case <-t.C:
			}
		}
	}()
	return func() int64 {
		close(done)
		wg.Wait()
		return peak
	}
}

func childrenOf(pid int) []int {
	tasks, _ := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	var out []int
	for _, t := range tasks {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/children", pid, t.Name()))
		if err != nil {
			continue
		}
		for _, f := range strings.Fields(string(b)) {
			if n, err := strconv.Atoi(f); err == nil {
				out = append(out, n)
			}
		}
	}
	return out
}

// pluginHWM is VmHWM of pid in bytes if it is the provider plugin.
func pluginHWM(pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	s := string(b)
	if !strings.HasPrefix(s, "Name:\t"+providerBinary[:15]) {
		return 0
	}
	for _, line := range strings.Split(s, "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb * 1024
		}
	}
	return 0
}

func randomTag() string {
	b := make([]byte, 3)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
