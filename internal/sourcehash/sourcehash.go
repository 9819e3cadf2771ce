// Package sourcehash fingerprints local inputs (a build context, a volume's
// seed directory, an archive) so that a plan can tell, before anything is
// sent to an engine, whether their content changed. Only what the engine
// would receive counts: paths, file types, permission bits, symlink targets
// and contents; owners and modification times do not.
package sourcehash

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/moby/patternmatcher"

	"github.com/sandboxfleet/terraform-provider-sandbox/internal/tarball"
)

// Prefix starts every hash this package returns.
const Prefix = "sha256:"

// File hashes one regular file's content.
func File(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return "", err
	}
	if !st.Mode().IsRegular() {
		return "", fmt.Errorf("%s is not a regular file", path)
	}
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return Prefix + hex.EncodeToString(h.Sum(nil)), nil
}

// Dir hashes a directory tree. With dockerignore, dir/.dockerignore applies
// as `docker build` applies it, and the names in keep (the Dockerfile, the
// .dockerignore itself) are always included, as docker always sends them.
func Dir(dir string, dockerignore bool, keep ...string) (string, error) {
	st, err := os.Stat(dir)
	if err != nil {
		return "", err
	}
	if !st.IsDir() {
		return "", fmt.Errorf("%s is not a directory", dir)
	}
	var pm *patternmatcher.PatternMatcher
	if dockerignore {
		if pm, err = tarball.ReadDockerignore(dir); err != nil {
			return "", err
		}
	}
	kept := map[string]bool{".dockerignore": true}
	for _, k := range keep {
		kept[filepath.ToSlash(filepath.Clean(k))] = true
	}
	h := sha256.New()
	err = tarball.Walk(dir, pm, kept, func(p, rel string) error {
		return hashEntry(h, p, rel)
	})
	if err != nil {
		return "", err
	}
	return Prefix + hex.EncodeToString(h.Sum(nil)), nil
}

// hashEntry writes one entry's record: its path, kind and mode, then its
// symlink target or content. WalkDir's lexical order makes the stream stable.
func hashEntry(h hash.Hash, p, rel string) error {
	st, err := os.Lstat(p)
	if err != nil {
		return err
	}
	mode := st.Mode()
	fmt.Fprintf(h, "%q %s %o\n", rel, mode.Type(), mode.Perm())
	switch {
	case mode&fs.ModeSymlink != 0:
		target, err := os.Readlink(p)
		if err != nil {
			return err
		}
		fmt.Fprintf(h, "-> %q\n", target)
	case mode.IsRegular():
		fmt.Fprintf(h, "%d\n", st.Size())
		f, err := os.Open(p)
		if err != nil {
			return err
		}
		defer f.Close()
		if _, err := io.Copy(h, f); err != nil {
			return fmt.Errorf("read %s: %w", p, err)
		}
	}
	return nil
}
