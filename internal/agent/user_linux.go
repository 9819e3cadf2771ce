//go:build linux

package agent

import (
	"fmt"
	"strconv"
	"strings"
	"syscall"
)

// userCredential parses init's --user "uid[:gid]" (numeric: names are
// resolved by the driver against the image's /etc/passwd). Init itself stays
// root so it can still signal and reap everything; only the command drops
// to the user, with no supplementary groups. "" means no change.
const maxID32 = 1<<32 - 1

func userCredential(spec string) (*syscall.Credential, error) {
	if spec == "" {
		return nil, nil
	}
	u, g, hasGID := strings.Cut(spec, ":")
	uid, err := strconv.ParseUint(u, 10, 32)
	if err != nil {
		return nil, fmt.Errorf("--user %q: the uid must be a number", spec)
	}
	gid := uid
	if hasGID {
		if gid, err = strconv.ParseUint(g, 10, 32); err != nil {
			return nil, fmt.Errorf("--user %q: the gid must be a number", spec)
		}
	}
	if uid == maxID32 || gid == maxID32 {
		// (uid_t)-1 means "no change" to setuid and setgid: the command would stay root.
		return nil, fmt.Errorf("--user %q: %d is not a valid id", spec, maxID32)
	}
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), Groups: []uint32{}}, nil
}
