// Command attack is a test helper copied into local sandboxes: it tries what
// untrusted code would try and prints what the kernel answered. Tests build
// it statically (CGO_ENABLED=0); it is never part of the provider.
//
//	attack euid       print the effective uid (a set-uid copy shows 0)
//	attack tty        open /dev/tty, the controlling terminal
//	attack keyring    print the session keyring's serial
//	attack syscalls   try each system call the seccomp filter refuses
package main

import (
	"errors"
	"fmt"
	"os"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: attack euid|tty|keyring|syscalls")
		os.Exit(2)
	}
	switch os.Args[1] {
	case "euid":
		fmt.Println(os.Geteuid())
	case "tty":
		tty()
	case "keyring":
		id, err := unix.KeyctlGetKeyringID(unix.KEY_SPEC_SESSION_KEYRING, false)
		if err != nil {
			fmt.Println("keyring", result(err))
			return
		}
		fmt.Println("keyring", id)
	case "syscalls":
		for _, c := range calls() {
			fmt.Println(c.name, c.try())
		}
	default:
		os.Exit(2)
	}
}

// result is "ok" or the errno's name.
func result(err error) string {
	var e syscall.Errno
	if errors.As(err, &e) && e != 0 {
		return errnoName(e)
	}
	if err != nil {
		return err.Error()
	}
	return "ok"
}

func errnoName(e syscall.Errno) string {
	if n := unix.ErrnoName(e); n != "" {
		return n
	}
	return fmt.Sprintf("errno%d", int(e))
}

func tty() {
	sid, _ := unix.Getsid(0)
	fmt.Println("sid", sid, "pid", os.Getpid())
	f, err := os.OpenFile("/dev/tty", os.O_RDWR, 0)
	if err != nil {
		fmt.Println("open /dev/tty", result(err))
		return
	}
	defer f.Close()
	fmt.Println("open /dev/tty ok")
	c := byte('#')
	_, _, e := unix.Syscall(unix.SYS_IOCTL, f.Fd(), unix.TIOCSTI, uintptr(unsafe.Pointer(&c)))
	fmt.Println("TIOCSTI", result(errnoOrNil(e)))
}

func errnoOrNil(e syscall.Errno) error {
	if e == 0 {
		return nil
	}
	return e
}

type call struct {
	name string
	try  func() string
}

func raw(nr uintptr, args ...uintptr) func() string {
	return func() string {
		var a [6]uintptr
		copy(a[:], args)
		_, _, e := unix.Syscall6(nr, a[0], a[1], a[2], a[3], a[4], a[5])
		return result(errnoOrNil(e))
	}
}

// calls tries each call with arguments that do no harm where it is allowed
// (a null or invalid argument, a flag that changes nothing), so the errno
// tells the filter's EPERM from the kernel's own answer.
func calls() []call {
	var perfAttr unix.PerfEventAttr
	perfAttr.Type = unix.PERF_TYPE_SOFTWARE
	perfAttr.Size = uint32(unsafe.Sizeof(perfAttr))
	perfAttr.Config = unix.PERF_COUNT_SW_TASK_CLOCK
	perfAttr.Bits = unix.PerfBitDisabled | unix.PerfBitExcludeKernel | unix.PerfBitExcludeHv
	return []call{
		{"keyctl", raw(unix.SYS_KEYCTL, unix.KEYCTL_GET_KEYRING_ID, uintptr(negOne(unix.KEY_SPEC_SESSION_KEYRING)), 0)},
		{"add_key", func() string {
			_, err := unix.AddKey("user", "sandbox-test", []byte("x"), unix.KEY_SPEC_PROCESS_KEYRING)
			return result(err)
		}},
		{"request_key", func() string {
			_, err := unix.RequestKey("user", "sandbox-test-absent", "", 0)
			return result(err)
		}},
		{"unshare(CLONE_NEWUSER)", raw(unix.SYS_UNSHARE, unix.CLONE_NEWUSER)},
		{"clone3", raw(unix.SYS_CLONE3, 0, 0)},
		{"personality(ADDR_NO_RANDOMIZE)", raw(unix.SYS_PERSONALITY, 0x0040000 /* ADDR_NO_RANDOMIZE */)},
		{"perf_event_open", raw(unix.SYS_PERF_EVENT_OPEN, uintptr(unsafe.Pointer(&perfAttr)), 0, uintptr(negOne(1)), uintptr(negOne(1)), 0)},
		{"userfaultfd", raw(unix.SYS_USERFAULTFD, 1 /* UFFD_USER_MODE_ONLY */)},
		{"io_uring_setup", raw(unix.SYS_IO_URING_SETUP, 1, 0)},
		{"x32 getpid", raw(0x40000000 | unix.SYS_GETPID)},
		{"i386 getpid", func() string { return i386Getpid() }},
		{"mount", raw(unix.SYS_MOUNT, 0, 0, 0, 0, 0)},
		{"umount2", raw(unix.SYS_UMOUNT2, 0, 0)},
		{"pivot_root", raw(unix.SYS_PIVOT_ROOT, 0, 0)},
		{"setns", raw(unix.SYS_SETNS, uintptr(negOne(1)), 0)},
		{"open_by_handle_at", raw(unix.SYS_OPEN_BY_HANDLE_AT, uintptr(negOne(1)), 0, 0)},
		{"bpf", raw(unix.SYS_BPF, uintptr(negOne(1)), 0, 0)},
		{"swapon", raw(unix.SYS_SWAPON, 0, 0)},
		{"swapoff", raw(unix.SYS_SWAPOFF, 0)},
		{"reboot", raw(unix.SYS_REBOOT, 0, 0, 0, 0)},            // wrong magic: EINVAL where allowed
		{"kexec_load", raw(unix.SYS_KEXEC_LOAD, 0, 1000, 0, 0)}, // too many segments: EINVAL where allowed
		{"kexec_file_load", raw(unix.SYS_KEXEC_FILE_LOAD, uintptr(negOne(1)), uintptr(negOne(1)), 0, 0, 0)},
		{"init_module", raw(unix.SYS_INIT_MODULE, 0, 0, 0)},
		{"finit_module", raw(unix.SYS_FINIT_MODULE, uintptr(negOne(1)), 0, 0)},
		{"delete_module", raw(unix.SYS_DELETE_MODULE, 0, 0)},
		{"acct", raw(unix.SYS_ACCT, 1)}, // a bad pointer: EFAULT where allowed, never a change
		{"settimeofday", raw(unix.SYS_SETTIMEOFDAY, 1, 0)},
		{"clock_settime", raw(unix.SYS_CLOCK_SETTIME, uintptr(negOne(1)), 0)},
		{"lookup_dcookie", raw(unix.SYS_LOOKUP_DCOOKIE, 0, 0, 0)},
		{"quotactl", raw(unix.SYS_QUOTACTL, 0, 0, 0, 0)},
		{"syslog", raw(unix.SYS_SYSLOG, 10 /* SYSLOG_ACTION_SIZE_BUFFER */, 0, 0)},
		{"vhangup", raw(unix.SYS_VHANGUP)},
		{"iopl", raw(unix.SYS_IOPL, 0)},
		{"ioperm", raw(unix.SYS_IOPERM, 0, 0, 0)},
		{"nfsservctl", raw(unix.SYS_NFSSERVCTL)},
		{"uselib", raw(unix.SYS_USELIB, 0)},
		{"ustat", raw(unix.SYS_USTAT, 0, 0)},
		{"sysfs", raw(unix.SYS_SYSFS, 3)},
		{"_sysctl", raw(unix.SYS__SYSCTL, 0)},
	}
}

// negOne is -n as a register value (file descriptors, clock ids).
func negOne(n int) int { return -n }
