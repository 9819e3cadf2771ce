package agent

// poweroff: the engine-side lifetime of instances whose PID 1 is not the
// agent (Incus system containers and VMs keep their image's init). A
// detached `poweroff --at DEADLINE` sleeps until the deadline and powers the
// instance off: inside a container's PID namespace reboot(POWER_OFF) ends
// the namespace (the container stops); in a VM it powers the machine off.
//
// Also here: the argv file of `init --argv-file`, which carries a command
// whose arguments hold spaces (LXC's lxc.init.cmd splits at spaces, so such
// a command cannot be written there directly).

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"
)

// poweroffConfig is the parsed `poweroff` command line.
type poweroffConfig struct {
	at     time.Time
	dryRun bool // print what would happen at the deadline instead (tests)
}

func parsePoweroff(args []string, stderr io.Writer) (poweroffConfig, error) {
	fs := flag.NewFlagSet("poweroff", flag.ContinueOnError)
	fs.SetOutput(stderr)
	at := fs.String("at", "", "RFC 3339 time at which the instance is powered off")
	cfg := poweroffConfig{}
	fs.BoolVar(&cfg.dryRun, "dry-run", false, "at the deadline, print and exit instead of powering off")
	if err := fs.Parse(args); err != nil {
		return cfg, err
	}
	if fs.NArg() > 0 {
		return cfg, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if *at == "" {
		return cfg, errors.New("--at is required")
	}
	t, err := time.Parse(time.RFC3339Nano, *at)
	if err != nil {
		return cfg, fmt.Errorf("--at: %w", err)
	}
	cfg.at = t
	return cfg, nil
}

// startSettle is how long poweroff lets an instance run at least, from the
// watcher's start.
const startSettle = 2 * time.Second

// PoweroffCommand is the argv that powers the instance off at deadline.
// Drivers start it detached (ServiceCommand) so it outlives the exec.
func PoweroffCommand(deadline time.Time) []string {
	return []string{PathInInstance, "poweroff", "--at", deadline.UTC().Format(DeadlineLayout)}
}

func runPoweroff(args []string, stdout, stderr io.Writer) int {
	cfg, err := parsePoweroff(args, stderr)
	if err != nil {
		return usageError(stderr, "poweroff: %v", err)
	}
	// A deadline already past powers off too (an expired instance that was
	// started again stops again), but not before its engine is done
	// starting it: incusd failed such starts with "no such file or
	// directory" when the container was gone before its start returned.
	time.Sleep(max(time.Until(cfg.at), startSettle))
	if cfg.dryRun {
		fmt.Fprintf(stdout, "poweroff at %s\n", cfg.at.UTC().Format(time.RFC3339))
		return 0
	}
	fmt.Fprintf(stderr, "sandbox-agent: lifetime ended at %s; powering off\n", cfg.at.UTC().Format(time.RFC3339))
	if err := powerOff(); err != nil {
		fmt.Fprintf(stderr, "sandbox-agent: poweroff: %v\n", err)
		return 1
	}
	return 0 // not reached when the power-off succeeds
}

// ArgvFileContent encodes argv for `init --argv-file`: a JSON list.
func ArgvFileContent(argv []string) []byte {
	b, _ := json.Marshal(argv)
	return append(b, '\n')
}

// parseArgvFile reads an argv file: a JSON list of strings, or words each
// ended by a NUL byte as in /proc/PID/cmdline (the last NUL may be left out).
func parseArgvFile(b []byte) ([]string, error) {
	var argv []string
	if trimmed := bytes.TrimSpace(b); len(trimmed) > 0 && trimmed[0] == '[' {
		if err := json.Unmarshal(trimmed, &argv); err != nil {
			return nil, fmt.Errorf("argv file: not a JSON list of strings: %w", err)
		}
	} else if len(b) > 0 {
		argv = strings.Split(strings.TrimSuffix(string(b), "\x00"), "\x00")
	}
	if len(argv) == 0 || argv[0] == "" {
		return nil, errors.New("argv file: no command")
	}
	return argv, nil
}

// readArgvFile is parseArgvFile on a file.
func readArgvFile(path string) ([]string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return parseArgvFile(b)
}
