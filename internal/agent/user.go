package agent

import "strconv"

// InitAsUser adds --user to an InitCommand argv: the command (not init)
// runs as uid:gid. Drivers use it when the sandbox has no user namespace
// to map the user, so the command is dropped to it for real.
func InitAsUser(argv []string, uid, gid int) []string {
	if len(argv) < 2 || (uid == 0 && gid == 0) {
		return argv
	}
	out := append([]string{}, argv[:2]...)
	out = append(out, "--user", strconv.Itoa(uid)+":"+strconv.Itoa(gid))
	return append(out, argv[2:]...)
}
