package agent

import (
	"bytes"
	"context"
	"debug/buildinfo"
	"debug/elf"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"time"
)

// EnvBinary names a file to use as the agent instead of the running
// executable (e.g. a static cmd/sandbox-agent build for another arch).
const EnvBinary = "SANDBOX_AGENT_BINARY"

// BinaryPath returns the host file drivers put into instances: the file
// named by $SANDBOX_AGENT_BINARY if set, else this executable. It must be a
// static Linux ELF for the host's architecture, since it runs in images
// that may have no libc.
func BinaryPath() (string, error) {
	path, err := binaryFile()
	if err != nil {
		return "", err
	}
	if err := CheckBinary(path, runtime.GOARCH); err != nil {
		return "", err
	}
	return path, nil
}

// binaryFile is the file BinaryPath checks.
func binaryFile() (string, error) {
	if path := os.Getenv(EnvBinary); path != "" {
		return path, nil
	}
	exe, err := os.Executable()
	if err != nil {
		return "", fmt.Errorf("sandbox agent: cannot locate this executable (%w); set %s to a static build of cmd/sandbox-agent", err, EnvBinary)
	}
	return exe, nil
}

// Check reports why the agent binary cannot serve in any sandbox: it is
// missing, dynamically linked (a cgo build of the provider), or not the
// agent. Unlike BinaryPath it accepts a build for another architecture
// (an agent for a remote engine); drivers check the engine's architecture.
// The provider asks it at plan time, so that whatever needs the agent fails
// before anything is made.
func Check() error {
	path, err := binaryFile()
	if err != nil {
		return err
	}
	goarch := runtime.GOARCH
	if f, err := elf.Open(path); err == nil {
		for arch, m := range elfMachines {
			if f.Machine == m {
				goarch = arch
			}
		}
		f.Close()
	}
	return CheckBinary(path, goarch)
}

// elfMachines maps GOARCH values to ELF machine types.
var elfMachines = map[string]elf.Machine{
	"amd64":   elf.EM_X86_64,
	"arm64":   elf.EM_AARCH64,
	"386":     elf.EM_386,
	"arm":     elf.EM_ARM,
	"riscv64": elf.EM_RISCV,
	"ppc64le": elf.EM_PPC64,
	"s390x":   elf.EM_S390,
}

// CheckBinary verifies that path is the agent: a statically linked Linux
// ELF executable for goarch that answers `version` with VersionMagic (asked
// when this host can run it). The error says how to get one.
func CheckBinary(path, goarch string) error {
	if err := checkELF(path, goarch); err != nil {
		return err
	}
	return checkIdentity(path, goarch)
}

// checkELF verifies that path is a statically linked Linux ELF executable
// for goarch.
func checkELF(path, goarch string) error {
	const fix = "build it with CGO_ENABLED=0 GOOS=linux GOARCH=%s (e.g. go build ./cmd/sandbox-agent) and point %s at it"
	hint := fmt.Sprintf(fix, goarch, EnvBinary)
	f, err := elf.Open(path)
	if err != nil {
		return fmt.Errorf("sandbox agent %s is not a Linux ELF executable (%w): %s", path, err, hint)
	}
	defer f.Close()
	if want, ok := elfMachines[goarch]; !ok || f.Machine != want {
		return fmt.Errorf("sandbox agent %s is built for %s, not %s: %s", path, f.Machine, goarch, hint)
	}
	if f.Type != elf.ET_EXEC && f.Type != elf.ET_DYN {
		return fmt.Errorf("sandbox agent %s is not an executable (ELF type %s): %s", path, f.Type, hint)
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return fmt.Errorf("sandbox agent %s is dynamically linked and cannot run in images without libc: %s", path, hint)
		}
	}
	return nil
}

// VersionMagic starts the output of `sandbox-agent version`; CheckBinary
// asks for it to tell the agent from any other static binary (a Go test
// binary above all, which would run its tests as the sandbox's PID 1).
const VersionMagic = "sandbox-agent protocol 1"

// identities caches checkIdentity per file version: the answer costs a
// process start.
var identities sync.Map // "path|size|mtime" -> error (nil: the agent)

// checkIdentity refuses a Go test binary outright (running one would run
// its tests) and, when this host can run path, runs `version` and expects
// VersionMagic.
func checkIdentity(path, goarch string) error {
	fi, err := os.Stat(path)
	if err != nil {
		return fmt.Errorf("sandbox agent: %w", err)
	}
	key := fmt.Sprintf("%s|%d|%d", path, fi.Size(), fi.ModTime().UnixNano())
	if v, ok := identities.Load(key); ok {
		err, _ := v.(error)
		return err
	}
	err = identify(path, goarch)
	identities.Store(key, err)
	return err
}

func identify(path, goarch string) error {
	hint := fmt.Sprintf("build the agent with CGO_ENABLED=0 GOOS=linux GOARCH=%s go build ./cmd/sandbox-agent (or use the provider binary) and point %s at it", goarch, EnvBinary)
	if bi, err := buildinfo.ReadFile(path); err == nil && strings.HasSuffix(bi.Path, ".test") {
		return fmt.Errorf("sandbox agent %s is a Go test binary (%s), not the agent: %s", path, bi.Path, hint)
	}
	if runtime.GOOS != "linux" || goarch != runtime.GOARCH {
		return nil // cannot run it here; the ELF checks must do
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, path)
	cmd.Args = []string{BinaryName, "version"} // the name alone selects the agent
	cmd.Env = []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin"}
	cmd.WaitDelay = time.Second
	out, err := cmd.Output()
	if !bytes.HasPrefix(out, []byte(VersionMagic)) {
		if err == nil {
			err = fmt.Errorf("printed %q", firstLine(out))
		}
		return fmt.Errorf("sandbox agent %s does not answer as the agent (`%s version`: %v): %s", path, BinaryName, err, hint)
	}
	return nil
}

func firstLine(b []byte) string {
	line, _, _ := strings.Cut(string(b), "\n")
	if len(line) > 80 {
		line = line[:80]
	}
	return line
}
