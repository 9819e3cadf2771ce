package local

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/sandboxfleet/terraform-provider-sandbox/internal/driver"
)

// Files of an instance directory.
const (
	stateFile   = "state.json"
	lockFile    = "lock"
	exitFile    = "exit.json" // bwrap --json-status-fd, or the none-mode wrapper's exit code
	logFile     = "console.log"
	workspace   = "workspace"
	pendingDir  = "pending" // files waiting for the next start
	upperDir    = "upper"   // overlay upper (the instance's writable rootfs layer)
	overlayWork = "overlay-work"
	mergedDir   = "rootfs" // overlay mount point, inside the sandbox's private mount namespace only
)

// instanceState is state.json: everything needed to run, observe and remove
// an instance, read by any provider process.
type instanceState struct {
	Spec      driver.InstanceSpec `json:"spec"` // Files are not kept: they are applied once
	Isolation string              `json:"isolation"`
	ImageID   string              `json:"image_id"`
	Lower     string              `json:"lower"` // host directory of the image rootfs ("" for the host image)
	Labels    map[string]string   `json:"labels"`
	UID       int                 `json:"uid"` // the command's user; the agent drops to it
	GID       int                 `json:"gid"`
	Cgroups   []string            `json:"cgroups,omitempty"`
	CreatedAt time.Time           `json:"created_at"`
	ExpiresAt time.Time           `json:"expires_at,omitempty"`

	// The tracked process: bwrap's child (PID 1 of the sandbox) or, without
	// isolation, the launch wrapper. PidStart is its start time in clock
	// ticks since boot so a recycled pid is never taken for ours.
	Pid       int       `json:"pid,omitempty"`
	PidStart  uint64    `json:"pid_start,omitempty"`
	StartedAt time.Time `json:"started_at,omitempty"`
}

// exitRecord is the last exit status written by the launcher.
type exitRecord struct {
	ExitCode *int `json:"exit-code"`
}

// readState loads an instance's state.json (by ID or name); ErrNotFound if
// there is none.
func (d *Driver) readState(id string) (*instanceState, error) {
	name, ok := d.nameOf(id)
	if !ok {
		return nil, d.errf("instance %q: %w", id, driver.ErrNotFound)
	}
	b, err := os.ReadFile(filepath.Join(d.instanceDir(name), stateFile))
	if errors.Is(err, os.ErrNotExist) {
		return nil, d.errf("instance %q: %w", name, driver.ErrNotFound)
	}
	if err != nil {
		return nil, d.errf("instance %q: %w", name, err)
	}
	var st instanceState
	if err := json.Unmarshal(b, &st); err != nil {
		return nil, d.errf("instance %q: corrupt %s: %w", name, stateFile, err)
	}
	return &st, nil
}

// writeState replaces state.json atomically (temp file + rename), so a
// reader never sees a half-written file.
func (d *Driver) writeState(st *instanceState) error {
	b, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return err
	}
	return writeFileAtomic(filepath.Join(d.instanceDir(st.Spec.Name), stateFile), b, 0o600)
}

func writeFileAtomic(path string, data []byte, mode os.FileMode) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // no-op after a successful rename
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Chmod(mode); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// lockInstance takes the instance's exclusive flock, shared by every
// provider process on this host, and returns its release function.
func (d *Driver) lockInstance(id string) (func(), error) {
	name, ok := d.nameOf(id)
	if !ok {
		return nil, d.errf("instance %q: %w", id, driver.ErrNotFound)
	}
	f, err := os.OpenFile(filepath.Join(d.instanceDir(name), lockFile), os.O_RDWR, 0)
	if errors.Is(err, os.ErrNotExist) {
		return nil, d.errf("instance %q: %w", name, driver.ErrNotFound)
	}
	if err != nil {
		return nil, d.errf("instance %q: lock: %w", name, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return nil, d.errf("instance %q: lock: %w", name, err)
	}
	return func() { f.Close() }, nil // closing releases the flock
}

// lockedState takes the instance lock and loads the state; the caller
// releases the lock with unlock (already released on error).
func (d *Driver) lockedState(id string) (st *instanceState, unlock func(), err error) {
	if unlock, err = d.lockInstance(id); err != nil {
		return nil, nil, err
	}
	if st, err = d.readState(id); err != nil {
		unlock()
		return nil, nil, err
	}
	return st, unlock, nil
}

// lastExit reads the exit status recorded for the last run, if any.
func lastExit(dir string) (int, bool) {
	b, err := os.ReadFile(filepath.Join(dir, exitFile))
	if err != nil {
		return 0, false
	}
	code, found := 0, false
	// bwrap writes several JSON documents; the exit code is in the last one.
	dec := json.NewDecoder(strings.NewReader(string(b)))
	for {
		var r exitRecord
		if dec.Decode(&r) != nil {
			break
		}
		if r.ExitCode != nil {
			code, found = *r.ExitCode, true
		}
	}
	return code, found
}

// procStat returns the fields of /proc/PID/stat from the third (state) on;
// none when the process is gone.
func procStat(pid int) []string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return nil
	}
	// The command name may hold spaces and parentheses: fields start after the last ')'.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return nil
	}
	return strings.Fields(s[i+1:])
}

// procStart returns the start time (clock ticks after boot) of a live,
// non-zombie process, or ok=false.
func procStart(pid int) (uint64, bool) {
	if pid <= 0 {
		return 0, false
	}
	f := procStat(pid)
	// f[0] is field 3 (state); starttime is field 22.
	if len(f) < 20 || f[0] == "Z" || f[0] == "X" {
		return 0, false
	}
	start, err := strconv.ParseUint(f[19], 10, 64)
	return start, err == nil
}

// procSession returns the session id of a process.
func procSession(pid int) (int, bool) {
	f := procStat(pid)
	if len(f) < 4 { // state, ppid, pgrp, session
		return 0, false
	}
	sid, err := strconv.Atoi(f[3])
	return sid, err == nil
}

// alive reports whether the tracked process is still the one we started.
func (st *instanceState) alive() bool {
	start, ok := procStart(st.Pid)
	return ok && start == st.PidStart
}

// signal sends sig to the tracked process, only if it is still ours.
func (st *instanceState) signal(sig syscall.Signal) error {
	if !st.alive() {
		return nil
	}
	if err := syscall.Kill(st.Pid, sig); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("signal pid %d: %w", st.Pid, err)
	}
	return nil
}
