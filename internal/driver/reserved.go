package driver

// MaxUserID is the largest uid or gid a sandbox's `user` may name: (uid_t)-1
// (4294967295) means "no change" to setuid and setgid, which would leave
// the command root.
const MaxUserID = 1<<32 - 2

// ReservedEnvPrefix starts the environment variables of the local backend's
// launch and exec wrappers (SBX_EXIT, SBX_CGROUPS, ...). They run as root
// and write where these variables say, so a sandbox's `env` may not set
// them, on any backend (a configuration stays portable between backends).
const ReservedEnvPrefix = "SBX_"
