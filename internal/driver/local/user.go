package local

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/sandboxfleet/terraform-provider-sandbox/internal/driver"
)

// resolveUser turns "uid", "uid:gid", "name" or "name:group" into numbers,
// looking names up in the sandbox's own /etc/passwd and /etc/group (etc is
// the host directory holding them). "" is root.
func resolveUser(spec, etc string) (uid, gid int, err error) {
	if spec == "" {
		return 0, 0, nil
	}
	u, g, hasGroup := strings.Cut(spec, ":")
	uid, pwGID, err := lookupID(u, filepath.Join(etc, "passwd"), 3)
	if err != nil {
		return 0, 0, fmt.Errorf("user %q: %w", spec, err)
	}
	gid = uid
	if pwGID >= 0 {
		gid = pwGID
	}
	if hasGroup {
		if gid, _, err = lookupID(g, filepath.Join(etc, "group"), -1); err != nil {
			return 0, 0, fmt.Errorf("user %q: %w", spec, err)
		}
	}
	return uid, gid, nil
}

// isNumber tells a number too large for int from a name.
func isNumber(s string) bool {
	s = strings.TrimPrefix(s, "-")
	return s != "" && strings.Trim(s, "0123456789") == ""
}

// lookupID resolves a number or a name in a passwd/group style file; the
// second result is the field at extra (passwd's primary gid) or -1.
func lookupID(s, file string, extra int) (int, int, error) {
	if n, err := strconv.Atoi(s); err == nil || isNumber(s) {
		if err != nil || n < 0 || n > driver.MaxUserID {
			return 0, 0, fmt.Errorf("id %s is out of range: ids go from 0 to %d", s, driver.MaxUserID)
		}
		_, more, _ := findEntry(file, func(f []string) bool { return f[2] == s }, extra)
		return n, more, nil
	}
	id, more, ok := findEntry(file, func(f []string) bool { return f[0] == s }, extra)
	if !ok {
		return 0, 0, fmt.Errorf("%q is not in the sandbox's %s; use a numeric id", s, filepath.Base(file))
	}
	return id, more, nil
}

func findEntry(file string, match func([]string) bool, extra int) (int, int, bool) {
	f, err := os.Open(file)
	if err != nil {
		return 0, -1, false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Split(sc.Text(), ":")
		if len(fields) < 3 || !match(fields) {
			continue
		}
		id, err := strconv.Atoi(fields[2])
		if err != nil {
			continue
		}
		more := -1
		if extra > 0 && len(fields) > extra {
			if n, err := strconv.Atoi(fields[extra]); err == nil {
				more = n
			}
		}
		return id, more, true
	}
	return 0, -1, false
}
