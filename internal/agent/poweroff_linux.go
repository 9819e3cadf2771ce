//go:build linux

package agent

import "syscall"

// powerOff flushes file systems and powers off: the PID namespace's end in a
// container, the machine's in a VM. It needs CAP_SYS_BOOT in the instance.
func powerOff() error {
	syscall.Sync()
	return syscall.Reboot(syscall.LINUX_REBOOT_CMD_POWER_OFF)
}
