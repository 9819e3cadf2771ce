package local

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"strings"

	"golang.org/x/sys/unix"
)

// Paths inside a sandbox are resolved with openat2(RESOLVE_IN_ROOT): symlinks,
// absolute ones included, resolve as if the root directory were "/", exactly
// as they do for processes in the sandbox. So neither an archive entry nor a
// file written into a running sandbox (through /proc/<pid>/root) can reach the
// host through a symlink.

// cleanRel turns a sandbox path into a path relative to the root ("" for "/").
func cleanRel(p string) string {
	return strings.TrimPrefix(path.Clean("/"+p), "/")
}

// openInRoot opens rel below the root directory fd, resolving within it.
func openInRoot(rootfd int, rel string, flags int, mode uint32) (int, error) {
	if rel == "" {
		rel = "."
	}
	how := unix.OpenHow{Flags: uint64(flags | unix.O_CLOEXEC), Mode: uint64(mode), Resolve: unix.RESOLVE_IN_ROOT | unix.RESOLVE_NO_MAGICLINKS}
	for {
		fd, err := unix.Openat2(rootfd, rel, &how)
		if err == unix.EINTR || err == unix.EAGAIN {
			continue
		}
		return fd, err
	}
}

// openParent opens the directory that holds rel, creating missing directories
// (mode 0755) when create is set, and returns its fd and rel's base name.
func openParent(rootfd int, rel string, create bool) (int, string, error) {
	dir, base := path.Split(rel)
	dir = strings.TrimSuffix(dir, "/")
	if base == "" {
		return -1, "", fmt.Errorf("%q names the root directory", "/"+rel)
	}
	fd, err := openInRoot(rootfd, dir, unix.O_PATH|unix.O_DIRECTORY, 0)
	if err == nil || !create || !errors.Is(err, unix.ENOENT) {
		return fd, base, err
	}
	// Create the missing components one by one, each resolved from the root.
	parts := strings.Split(dir, "/")
	for i := range parts {
		sub := strings.Join(parts[:i+1], "/")
		fd, err = openInRoot(rootfd, sub, unix.O_PATH|unix.O_DIRECTORY, 0)
		if err == nil {
			unix.Close(fd)
			continue
		}
		if !errors.Is(err, unix.ENOENT) {
			return -1, "", err
		}
		pfd, name, err := openParent(rootfd, sub, false)
		if err != nil {
			return -1, "", err
		}
		err = unix.Mkdirat(pfd, name, 0o755)
		unix.Close(pfd)
		if err != nil && !errors.Is(err, unix.EEXIST) {
			return -1, "", err
		}
	}
	fd, err = openInRoot(rootfd, dir, unix.O_PATH|unix.O_DIRECTORY, 0)
	return fd, base, err
}

// writeFileInRoot writes a regular file at the sandbox path p below root,
// creating its parent directories; an existing file is replaced.
func writeFileInRoot(root, p string, r io.Reader, mode os.FileMode, uid, gid int) error {
	rootfd, err := unix.Open(root, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(rootfd)
	rel := cleanRel(p)
	pfd, base, err := openParent(rootfd, rel, true)
	if err != nil {
		return fmt.Errorf("%s: %w", p, err)
	}
	defer unix.Close(pfd)
	fd, err := openInRoot(pfd, base, unix.O_WRONLY|unix.O_CREAT|unix.O_TRUNC|unix.O_NOFOLLOW, uint32(mode.Perm()))
	if errors.Is(err, unix.ELOOP) {
		// The target is a symlink: replace the link, never write through it.
		_ = unix.Unlinkat(pfd, base, 0)
		fd, err = openInRoot(pfd, base, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW, uint32(mode.Perm()))
	}
	if err != nil {
		return fmt.Errorf("%s: %w", p, err)
	}
	f := os.NewFile(uintptr(fd), p)
	defer f.Close()
	if _, err := io.Copy(f, r); err != nil {
		return fmt.Errorf("%s: %w", p, err)
	}
	if uid >= 0 {
		if err := f.Chown(uid, gid); err != nil {
			return fmt.Errorf("%s: %w", p, err)
		}
	}
	// After chown, which clears set-id bits, and regardless of the umask.
	if err := f.Chmod(fileMode(mode)); err != nil {
		return fmt.Errorf("%s: %w", p, err)
	}
	return f.Close()
}

// fileMode converts permission and set-id bits to an os.FileMode.
func fileMode(m os.FileMode) os.FileMode {
	return m & (os.ModePerm | os.ModeSetuid | os.ModeSetgid | os.ModeSticky)
}

// fdPath is a host path that reaches an open directory fd.
func fdPath(fd int) string { return fmt.Sprintf("/proc/self/fd/%d", fd) }

// findInRoot reports whether name resolves, inside root, to an executable
// regular file.
func findInRoot(root, name string) bool {
	rootfd, err := unix.Open(root, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return false
	}
	defer unix.Close(rootfd)
	fd, err := openInRoot(rootfd, cleanRel(name), unix.O_PATH, 0)
	if err != nil {
		return false
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	return unix.Fstat(fd, &st) == nil && st.Mode&unix.S_IFMT == unix.S_IFREG && st.Mode&0o111 != 0
}
