package seccomp

import "golang.org/x/sys/unix"

const (
	supported     = true
	auditArch     = unix.AUDIT_ARCH_X86_64
	x32Bit        = 0x40000000 // __X32_SYSCALL_BIT
	nrClone       = unix.SYS_CLONE
	nrClone3      = unix.SYS_CLONE3
	nrUnshare     = unix.SYS_UNSHARE
	nrIoctl       = unix.SYS_IOCTL
	nrPersonality = unix.SYS_PERSONALITY
)

// denied follows Docker's default profile: what it never allows, and what it
// allows only with a capability (ptrace, process_vm_* and kcmp are allowed,
// as Docker does on kernels from 4.8 on).
var denied = []rule{
	{"keyctl", unix.SYS_KEYCTL, alwaysDenied}, // the keyring is not namespaced
	{"add_key", unix.SYS_ADD_KEY, alwaysDenied},
	{"request_key", unix.SYS_REQUEST_KEY, alwaysDenied},
	{"userfaultfd", unix.SYS_USERFAULTFD, alwaysDenied},
	{"uselib", unix.SYS_USELIB, alwaysDenied},
	{"ustat", unix.SYS_USTAT, alwaysDenied},
	{"sysfs", unix.SYS_SYSFS, alwaysDenied},
	{"_sysctl", unix.SYS__SYSCTL, alwaysDenied},
	{"nfsservctl", unix.SYS_NFSSERVCTL, alwaysDenied},
	{"create_module", unix.SYS_CREATE_MODULE, alwaysDenied},
	{"get_kernel_syms", unix.SYS_GET_KERNEL_SYMS, alwaysDenied},
	{"query_module", unix.SYS_QUERY_MODULE, alwaysDenied},
	{"io_uring_setup", unix.SYS_IO_URING_SETUP, alwaysDenied},
	{"io_uring_enter", unix.SYS_IO_URING_ENTER, alwaysDenied},
	{"io_uring_register", unix.SYS_IO_URING_REGISTER, alwaysDenied},
	{"mount", unix.SYS_MOUNT, capSysAdmin},
	{"umount2", unix.SYS_UMOUNT2, capSysAdmin},
	{"pivot_root", unix.SYS_PIVOT_ROOT, capSysAdmin},
	{"setns", unix.SYS_SETNS, capSysAdmin},
	{"open_by_handle_at", unix.SYS_OPEN_BY_HANDLE_AT, capSysAdmin}, // the "shocker" escape
	{"name_to_handle_at", unix.SYS_NAME_TO_HANDLE_AT, capSysAdmin},
	{"lookup_dcookie", unix.SYS_LOOKUP_DCOOKIE, capSysAdmin},
	{"quotactl", unix.SYS_QUOTACTL, capSysAdmin},
	{"quotactl_fd", unix.SYS_QUOTACTL_FD, capSysAdmin},
	{"fanotify_init", unix.SYS_FANOTIFY_INIT, capSysAdmin},
	{"fsopen", unix.SYS_FSOPEN, capSysAdmin},
	{"fsconfig", unix.SYS_FSCONFIG, capSysAdmin},
	{"fsmount", unix.SYS_FSMOUNT, capSysAdmin},
	{"fspick", unix.SYS_FSPICK, capSysAdmin},
	{"move_mount", unix.SYS_MOVE_MOUNT, capSysAdmin},
	{"open_tree", unix.SYS_OPEN_TREE, capSysAdmin},
	{"mount_setattr", unix.SYS_MOUNT_SETATTR, capSysAdmin},
	{"swapon", unix.SYS_SWAPON, capSysAdmin},
	{"swapoff", unix.SYS_SWAPOFF, capSysAdmin},
	{"bpf", unix.SYS_BPF, capBPF},
	{"perf_event_open", unix.SYS_PERF_EVENT_OPEN, capPerfmon},
	{"reboot", unix.SYS_REBOOT, capSysBoot},
	{"kexec_load", unix.SYS_KEXEC_LOAD, capSysBoot},
	{"kexec_file_load", unix.SYS_KEXEC_FILE_LOAD, capSysBoot},
	{"init_module", unix.SYS_INIT_MODULE, capSysModule},
	{"finit_module", unix.SYS_FINIT_MODULE, capSysModule},
	{"delete_module", unix.SYS_DELETE_MODULE, capSysModule},
	{"acct", unix.SYS_ACCT, capSysPacct},
	{"settimeofday", unix.SYS_SETTIMEOFDAY, capSysTime},
	{"clock_settime", unix.SYS_CLOCK_SETTIME, capSysTime},
	{"clock_adjtime", unix.SYS_CLOCK_ADJTIME, capSysTime},
	{"syslog", unix.SYS_SYSLOG, capSyslog},
	{"vhangup", unix.SYS_VHANGUP, capSysTTY},
	{"iopl", unix.SYS_IOPL, capSysRawio},
	{"ioperm", unix.SYS_IOPERM, capSysRawio},
	{"get_mempolicy", unix.SYS_GET_MEMPOLICY, capSysNice},
	{"set_mempolicy", unix.SYS_SET_MEMPOLICY, capSysNice},
	{"mbind", unix.SYS_MBIND, capSysNice},
	{"move_pages", unix.SYS_MOVE_PAGES, capSysNice},
	{"migrate_pages", unix.SYS_MIGRATE_PAGES, capSysNice},
}
