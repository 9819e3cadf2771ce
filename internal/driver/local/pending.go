package local

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
)

// Files for a bwrap sandbox that is not running wait in pending/: data files
// plus manifest.json. The next start writes them through /proc/<pid>/root
// while bwrap holds the command back (--block-fd), so they land exactly where
// the sandbox sees the path (workspace, a volume, the overlay rootfs) and are
// in place before the command runs.

type pendingFile struct {
	Path string      `json:"path"`
	Mode os.FileMode `json:"mode"`
	Data string      `json:"data"` // file name in pending/
}

const pendingManifest = "manifest.json"

func (d *Driver) pendingPath(st *instanceState) string {
	return filepath.Join(d.instanceDir(st.Spec.Name), pendingDir)
}

func readPending(dir string) ([]pendingFile, error) {
	b, err := os.ReadFile(filepath.Join(dir, pendingManifest))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var list []pendingFile
	if err := json.Unmarshal(b, &list); err != nil {
		return nil, fmt.Errorf("corrupt %s: %w", pendingManifest, err)
	}
	return list, nil
}

// addPending stages one file; a later file for the same path wins.
func (d *Driver) addPending(st *instanceState, p string, content []byte, mode os.FileMode) error {
	dir := d.pendingPath(st)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	list, err := readPending(dir)
	if err != nil {
		return err
	}
	data := strconv.Itoa(len(list))
	if err := os.WriteFile(filepath.Join(dir, data), content, 0o600); err != nil {
		return err
	}
	list = append(list, pendingFile{Path: p, Mode: mode, Data: data})
	b, _ := json.Marshal(list)
	return writeFileAtomic(filepath.Join(dir, pendingManifest), b, 0o600)
}

// applyPending writes the staged files into the sandbox of st.Pid, in order,
// and forgets them.
func (d *Driver) applyPending(st *instanceState) error {
	dir := d.pendingPath(st)
	list, err := readPending(dir)
	if err != nil || len(list) == 0 {
		return err
	}
	for _, f := range list {
		in, err := os.Open(filepath.Join(dir, f.Data))
		if err != nil {
			return err
		}
		uid, gid := st.fileOwner()
		err = writeFileInRoot(procRoot(st.Pid), f.Path, in, f.Mode, uid, gid)
		in.Close()
		if err != nil {
			return fmt.Errorf("file %s: %w", f.Path, err)
		}
	}
	return os.RemoveAll(dir)
}
