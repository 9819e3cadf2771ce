//go:build !linux || !amd64

package seccomp

// No filter off Linux on x86-64: Program returns ErrUnsupportedArch.
const (
	supported     = false
	auditArch     = 0
	x32Bit        = 0
	nrClone       = 0
	nrClone3      = 0
	nrUnshare     = 0
	nrIoctl       = 0
	nrPersonality = 0
)

var denied []rule
