package seccomp

import (
	"encoding/binary"
	"testing"

	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// run executes prog on a seccomp_data record, as the kernel would (the x/net
// VM loads big-endian: the record is laid out so each load sees the value
// the kernel's native load sees).
func run(t *testing.T, prog []Instruction, arch, nr uint32, args ...uint64) uint32 {
	t.Helper()
	raw := make([]bpf.RawInstruction, len(prog))
	for i, in := range prog {
		raw[i] = bpf.RawInstruction{Op: in.Code, Jt: in.Jt, Jf: in.Jf, K: in.K}
	}
	insns, ok := bpf.Disassemble(raw)
	if !ok {
		t.Fatalf("the program does not disassemble")
	}
	vm, err := bpf.NewVM(insns)
	if err != nil {
		t.Fatalf("the program is not valid BPF: %v", err)
	}
	data := make([]byte, 64)
	binary.BigEndian.PutUint32(data[offNr:], nr)
	binary.BigEndian.PutUint32(data[offArch:], arch)
	for i, a := range args {
		binary.BigEndian.PutUint32(data[offArg0+8*i:], uint32(a))
		binary.BigEndian.PutUint32(data[offArg0+8*i+4:], uint32(a>>32))
	}
	out, err := vm.Run(data)
	if err != nil {
		t.Fatal(err)
	}
	return uint32(out)
}

const eperm = RetErrno | errnoEPERM

func TestProgramRefusesDockersDeniedCalls(t *testing.T) {
	prog, err := Program(0)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range denied {
		if got := run(t, prog, auditArch, r.nr); got != eperm {
			t.Errorf("%s: %#x, want EPERM", r.name, got)
		}
		if got := run(t, prog, auditArch, r.nr|x32Bit); got != eperm {
			t.Errorf("%s through the x32 table: %#x, want EPERM", r.name, got)
		}
	}
	cases := []struct {
		what string
		nr   uint32
		args []uint64
		want uint32
	}{
		{"read", unix.SYS_READ, nil, RetAllow},
		{"ptrace (Docker allows it from kernel 4.8)", unix.SYS_PTRACE, nil, RetAllow},
		{"clone of a thread", unix.SYS_CLONE, []uint64{unix.CLONE_VM | unix.CLONE_THREAD}, RetAllow},
		{"clone of a user namespace", unix.SYS_CLONE, []uint64{unix.CLONE_NEWUSER}, eperm},
		{"unshare of a user namespace", unix.SYS_UNSHARE, []uint64{unix.CLONE_NEWUSER}, eperm},
		{"unshare of a mount namespace, high bits set", unix.SYS_UNSHARE, []uint64{1<<40 | unix.CLONE_NEWNS}, eperm},
		{"unshare of the file table", unix.SYS_UNSHARE, []uint64{unix.CLONE_FILES}, RetAllow},
		{"clone3", unix.SYS_CLONE3, nil, RetErrno | errnoNOSYS},
		{"TIOCSTI", unix.SYS_IOCTL, []uint64{0, unix.TIOCSTI}, eperm},
		{"TIOCSTI with high bits (the tty layer ignores them)", unix.SYS_IOCTL, []uint64{0, 1<<32 | unix.TIOCSTI}, eperm},
		{"TIOCLINUX", unix.SYS_IOCTL, []uint64{0, unix.TIOCLINUX}, eperm},
		{"TCGETS", unix.SYS_IOCTL, []uint64{0, unix.TCGETS}, RetAllow},
		{"personality query", unix.SYS_PERSONALITY, []uint64{0xffffffff}, RetAllow},
		{"personality ADDR_NO_RANDOMIZE", unix.SYS_PERSONALITY, []uint64{0x0040000}, eperm},
		{"an x32 read", x32Bit | unix.SYS_READ, nil, eperm},
	}
	for _, c := range cases {
		if got := run(t, prog, auditArch, c.nr, c.args...); got != c.want {
			t.Errorf("%s: %#x, want %#x", c.what, got, c.want)
		}
	}
	// i386 (int 0x80 from a 64-bit process): getpid is 20 there.
	if got := run(t, prog, unix.AUDIT_ARCH_I386, 20); got != eperm {
		t.Errorf("an i386 system call: %#x, want EPERM", got)
	}
}

func TestProgramCapabilitiesLiftTheirRules(t *testing.T) {
	prog, err := Program(1<<capSysAdmin | 1<<capSysTime)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		nr   uint32
		args []uint64
		want uint32
	}{
		{unix.SYS_MOUNT, nil, RetAllow},
		{unix.SYS_UNSHARE, []uint64{unix.CLONE_NEWNS}, RetAllow},
		{unix.SYS_CLOCK_SETTIME, nil, RetAllow},
		{unix.SYS_KEYCTL, nil, eperm},
		{unix.SYS_INIT_MODULE, nil, eperm},
	} {
		if got := run(t, prog, auditArch, c.nr, c.args...); got != c.want {
			t.Errorf("syscall %d with CAP_SYS_ADMIN and CAP_SYS_TIME: %#x, want %#x", c.nr, got, c.want)
		}
	}
}
