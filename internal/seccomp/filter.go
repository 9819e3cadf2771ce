// Package seccomp builds the default seccomp filter of local sandboxes: a
// classic BPF program, assembled here in pure Go (the provider and the agent
// are static binaries without libseccomp), that refuses with EPERM the
// system calls Docker's default profile refuses to a container, and lets
// everything else through. bwrap installs it on a sandbox's PID 1
// (--seccomp FD); the agent's exec installs the same program on commands
// entering a running sandbox.
//
// The program is a deny-list, where Docker's profile is an allow-list: a
// system call newer than this list is allowed. It checks the architecture
// first, so no other system call table (i386 through int 0x80, x32) can be
// used to get around it.
package seccomp

import (
	"encoding/binary"
	"errors"
	"fmt"
	"runtime"
	"sort"
)

// ErrUnsupportedArch: this architecture has no filter (only x86-64 has one).
var ErrUnsupportedArch = errors.New("the default seccomp filter exists for x86-64 (amd64) only; on " + runtime.GOARCH + " sandboxes run without one")

// Instruction is one struct sock_filter.
type Instruction struct {
	Code   uint16
	Jt, Jf uint8
	K      uint32
}

// Classic BPF and seccomp constants (linux/filter.h, linux/seccomp.h).
const (
	bpfLdWAbs  = 0x20 // BPF_LD | BPF_W | BPF_ABS
	bpfJeqK    = 0x15 // BPF_JMP | BPF_JEQ | BPF_K
	bpfJgeK    = 0x35 // BPF_JMP | BPF_JGE | BPF_K
	bpfJsetK   = 0x45 // BPF_JMP | BPF_JSET | BPF_K
	bpfRetK    = 0x06 // BPF_RET | BPF_K
	RetAllow   = 0x7fff0000
	RetErrno   = 0x00050000
	errnoEPERM = 1
	errnoNOSYS = 38

	// Offsets in struct seccomp_data; an argument's low 32 bits (little endian).
	offNr   = 0
	offArch = 4
	offArg0 = 16
	offArg1 = 24
)

// Capabilities that lift a rule, as in Docker's profile (bit numbers of
// linux/capability.h).
const (
	capSysModule   = 16
	capSysRawio    = 17
	capSysPacct    = 19
	capSysAdmin    = 21
	capSysBoot     = 22
	capSysNice     = 23
	capSysTime     = 25
	capSysTTY      = 26
	capSyslog      = 34
	capPerfmon     = 38
	capBPF         = 39
	alwaysDenied   = -1
	cloneNewFlags  = 0x7E020080 // CLONE_NEW{TIME,NS,CGROUP,UTS,IPC,USER,PID,NET}
	personaLinux   = 0x0
	personaLinux32 = 0x8
	personaUname26 = 0x20000
	personaQuery   = 0xffffffff
	tiocsti        = 0x5412
	tioclinux      = 0x541c
)

// rule refuses the system call nr unless the sandbox holds capability cap.
type rule struct {
	name string
	nr   uint32
	cap  int
}

// Rules names the system calls refused by number on this architecture
// (clone and unshare with namespace flags, clone3, the TIOCSTI and
// TIOCLINUX ioctls and unusual personalities are refused besides).
func Rules() []string {
	out := make([]string, 0, len(denied))
	for _, r := range denied {
		out = append(out, r.name)
	}
	sort.Strings(out)
	return out
}

// Program is the filter for a sandbox whose processes may hold the
// capabilities in caps (a bit mask as in /proc/PID/status): like Docker, a
// capability granted on purpose lifts the rules that would defeat it.
func Program(caps uint64) ([]Instruction, error) {
	if !supported {
		return nil, ErrUnsupportedArch
	}
	has := func(c int) bool { return c >= 0 && caps&(1<<uint(c)) != 0 }
	var a assembler
	a.ld(offArch)
	a.jeq(auditArch, "", "eperm")
	a.ld(offNr)
	a.jge(x32Bit, "eperm", "") // the x32 table: the same calls under other numbers
	for _, r := range denied {
		if !has(r.cap) {
			a.jeq(r.nr, "eperm", "")
		}
	}
	a.jeq(nrClone3, "enosys", "") // its flags are in memory, out of reach: callers fall back to clone
	if !has(capSysAdmin) {
		a.jeq(nrClone, "nsflags", "")
		a.jeq(nrUnshare, "nsflags", "")
	}
	a.jeq(nrIoctl, "ioctl", "")
	a.jeq(nrPersonality, "personality", "")
	a.ret(RetAllow)

	a.label("nsflags") // new namespaces, a user namespace above all
	a.ld(offArg0)
	a.jset(cloneNewFlags, "eperm", "")
	a.ret(RetAllow)

	a.label("ioctl") // pushing input into a terminal
	a.ld(offArg1)
	a.jeq(tiocsti, "eperm", "")
	a.jeq(tioclinux, "eperm", "")
	a.ret(RetAllow)

	a.label("personality") // only the personalities Docker allows
	a.ld(offArg0)
	for _, p := range []uint32{personaLinux, personaLinux32, personaUname26, personaUname26 | personaLinux32, personaQuery} {
		a.jeq(p, "allow", "")
	}
	a.label("eperm")
	a.ret(RetErrno | errnoEPERM)
	a.label("enosys")
	a.ret(RetErrno | errnoNOSYS)
	a.label("allow")
	a.ret(RetAllow)
	return a.assemble()
}

// Bytes is the program as bwrap --seccomp reads it: struct sock_filter
// after struct sock_filter, in the host's byte order.
func Bytes(prog []Instruction) []byte {
	b := make([]byte, 0, 8*len(prog))
	for _, in := range prog {
		b = binary.LittleEndian.AppendUint16(b, in.Code)
		b = append(b, in.Jt, in.Jf)
		b = binary.LittleEndian.AppendUint32(b, in.K)
	}
	return b
}

// assembler lays out instructions whose jumps name labels, resolved to
// the 8-bit forward offsets of classic BPF by assemble.
type assembler struct {
	prog   []Instruction
	jumps  []jump
	labels map[string]int
}

type jump struct {
	at     int
	jt, jf string // "" falls through to the next instruction
}

func (a *assembler) emit(in Instruction) { a.prog = append(a.prog, in) }
func (a *assembler) ld(off uint32)       { a.emit(Instruction{Code: bpfLdWAbs, K: off}) }
func (a *assembler) ret(k uint32)        { a.emit(Instruction{Code: bpfRetK, K: k}) }
func (a *assembler) jeq(k uint32, jt, jf string) {
	a.jumpTo(Instruction{Code: bpfJeqK, K: k}, jt, jf)
}
func (a *assembler) jge(k uint32, jt, jf string) {
	a.jumpTo(Instruction{Code: bpfJgeK, K: k}, jt, jf)
}
func (a *assembler) jset(k uint32, jt, jf string) {
	a.jumpTo(Instruction{Code: bpfJsetK, K: k}, jt, jf)
}

func (a *assembler) jumpTo(in Instruction, jt, jf string) {
	a.jumps = append(a.jumps, jump{len(a.prog), jt, jf})
	a.emit(in)
}

func (a *assembler) label(name string) {
	if a.labels == nil {
		a.labels = map[string]int{}
	}
	a.labels[name] = len(a.prog)
}

func (a *assembler) assemble() ([]Instruction, error) {
	offset := func(from int, name string) (uint8, error) {
		if name == "" {
			return 0, nil
		}
		to, ok := a.labels[name]
		d := to - from - 1
		if !ok || d < 0 || d > 255 {
			return 0, fmt.Errorf("seccomp: jump from %d to %q (%d) is out of reach", from, name, to)
		}
		return uint8(d), nil
	}
	var err error
	for _, j := range a.jumps {
		in := &a.prog[j.at]
		if in.Jt, err = offset(j.at, j.jt); err != nil {
			return nil, err
		}
		if in.Jf, err = offset(j.at, j.jf); err != nil {
			return nil, err
		}
	}
	return a.prog, nil
}

// capBits are the capabilities that lift a rule, by name.
var capBits = map[string]int{"CAP_SYS_MODULE": capSysModule, "CAP_SYS_RAWIO": capSysRawio, "CAP_SYS_PACCT": capSysPacct,
	"CAP_SYS_ADMIN": capSysAdmin, "CAP_SYS_BOOT": capSysBoot, "CAP_SYS_NICE": capSysNice, "CAP_SYS_TIME": capSysTime,
	"CAP_SYS_TTY_CONFIG": capSysTTY, "CAP_SYSLOG": capSyslog, "CAP_PERFMON": capPerfmon, "CAP_BPF": capBPF}

// CapMask turns capability names ("CAP_SYS_ADMIN") into the mask Program
// takes; names that lift no rule are left out.
func CapMask(names []string) uint64 {
	var m uint64
	for _, n := range names {
		if b, ok := capBits[n]; ok {
			m |= 1 << uint(b)
		}
	}
	return m
}
