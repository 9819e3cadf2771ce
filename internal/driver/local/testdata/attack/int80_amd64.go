package main

import (
	"runtime/debug"
	"syscall"
)

// int80 makes a system call through the i386 table (int 0x80).
func int80(nr uintptr) uintptr

// i386Getpid calls getpid (20 in the i386 table), which any process may. A
// kernel without i386 emulation answers int 0x80 with a fault: "no-ia32".
func i386Getpid() (res string) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if recover() != nil {
			res = "no-ia32"
		}
	}()
	r := int80(20)
	if int(r) < 0 && int(r) > -4096 {
		return errnoName(syscall.Errno(-int(r)))
	}
	return "ok"
}
