package agent

import (
	"debug/elf"
	"fmt"
	"os"
	"runtime"
)

// EnvBinary names a file to use as the agent instead of the running
// executable (e.g. a static cmd/sandbox-agent build for another arch).
const EnvBinary = "SANDBOX_AGENT_BINARY"

// BinaryPath returns the host file drivers put into instances: the file
// named by $SANDBOX_AGENT_BINARY if set, else this executable. It must be a
// static Linux ELF for the host's architecture, since it runs in images
// that may have no libc.
func BinaryPath() (string, error) {
	path := os.Getenv(EnvBinary)
	if path == "" {
		exe, err := os.Executable()
		if err != nil {
			return "", fmt.Errorf("sandbox agent: cannot locate this executable (%w); set %s to a static build of cmd/sandbox-agent", err, EnvBinary)
		}
		path = exe
	}
	if err := CheckBinary(path, runtime.GOARCH); err != nil {
		return "", err
	}
	return path, nil
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

// CheckBinary verifies that path is a statically linked Linux ELF
// executable for goarch, with an error that says how to get one.
func CheckBinary(path, goarch string) error {
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
