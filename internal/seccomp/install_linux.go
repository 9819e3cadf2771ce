package seccomp

import (
	"fmt"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Install applies prog to the calling thread, which must hold no_new_privs
// (or CAP_SYS_ADMIN); the filter is inherited across execve and fork.
// Callers lock the goroutine to its thread until they exec.
func Install(prog []Instruction) error {
	if len(prog) == 0 {
		return fmt.Errorf("install the seccomp filter: empty program")
	}
	filters := make([]unix.SockFilter, len(prog))
	for i, in := range prog {
		filters[i] = unix.SockFilter{Code: in.Code, Jt: in.Jt, Jf: in.Jf, K: in.K}
	}
	fprog := unix.SockFprog{Len: uint16(len(filters)), Filter: &filters[0]}
	if err := unix.Prctl(unix.PR_SET_SECCOMP, unix.SECCOMP_MODE_FILTER, uintptr(unsafe.Pointer(&fprog)), 0, 0); err != nil {
		return fmt.Errorf("install the seccomp filter: %w", err)
	}
	return nil
}
