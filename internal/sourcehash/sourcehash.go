// Package sourcehash fingerprints local inputs (a build context, a volume's
// seed directory, an archive) so that a plan can tell, before anything is
// sent to an engine, whether their content changed. Only what the engine
// would receive counts: paths, file types, permission bits, symlink targets
// and contents; owners and modification times do not.
package sourcehash

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/moby/patternmatcher"
	"github.com/moby/patternmatcher/ignorefile"
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
		if pm, err = readDockerignore(dir); err != nil {
			return "", err
		}
	}
	kept := map[string]bool{".dockerignore": true}
	for _, k := range keep {
		kept[filepath.ToSlash(filepath.Clean(k))] = true
	}
	h := sha256.New()
	err = filepath.WalkDir(dir, func(p string, de fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil || rel == "." {
			return err
		}
		rel = filepath.ToSlash(rel)
		if pm != nil && !kept[rel] {
			skip, err := pm.MatchesOrParentMatches(rel)
			if err != nil {
				return err
			}
			if skip {
				if de.IsDir() && !pm.Exclusions() {
					return filepath.SkipDir
				}
				return nil
			}
		}
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

// readDockerignore loads dir/.dockerignore; a missing file means no patterns.
func readDockerignore(dir string) (*patternmatcher.PatternMatcher, error) {
	f, err := os.Open(filepath.Join(dir, ".dockerignore"))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	patterns, err := ignorefile.ReadAll(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", f.Name(), err)
	}
	if len(patterns) == 0 {
		return nil, nil
	}
	return patternmatcher.New(patterns)
}
