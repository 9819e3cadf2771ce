// Package tarball walks local directory trees as an engine receives them (a
// build context minus its .dockerignore matches, a volume's seed directory)
// and writes them as tar streams: paths, file types, modes, symlink targets
// and contents are kept, owners are not. The docker driver sends what it
// writes, the local driver copies volume seeds with Walk, and
// internal/sourcehash fingerprints what Walk yields, so a plan sees exactly
// the files a build would send.
package tarball

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"

	"github.com/moby/patternmatcher"
	"github.com/moby/patternmatcher/ignorefile"
)

// ReadDockerignore loads dir/.dockerignore; a missing file, or one without
// patterns, gives nil: nothing is ignored.
func ReadDockerignore(dir string) (*patternmatcher.PatternMatcher, error) {
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

// Walk calls fn for every entry below dir, in lexical order, with its path
// and its slash-separated name relative to dir. Entries that ignore matches
// (nil: none) are left out, except the names in keep, as `docker build`
// applies .dockerignore: a directory excluded with no "!" pattern is skipped
// whole; otherwise each path is checked so that exceptions can win. A
// symlink as dir itself is followed (links below it are entries).
func Walk(dir string, ignore *patternmatcher.PatternMatcher, keep map[string]bool, fn func(path, rel string) error) error {
	dir, err := resolveTop(dir)
	if err != nil {
		return err
	}
	return filepath.WalkDir(dir, func(p string, de fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil || rel == "." {
			return err
		}
		rel = filepath.ToSlash(rel)
		if ignore != nil && !keep[rel] {
			skip, err := ignore.MatchesOrParentMatches(rel)
			if err != nil {
				return err
			}
			if skip {
				if de.IsDir() && !ignore.Exclusions() {
					return filepath.SkipDir
				}
				return nil
			}
		}
		return fn(p, rel)
	})
}

// WriteDir streams dir as a tar, leaving out what ignore matches except the
// names in keep (see Walk).
func WriteDir(w io.Writer, dir string, ignore *patternmatcher.PatternMatcher, keep map[string]bool) error {
	tw := tar.NewWriter(w)
	err := Walk(dir, ignore, keep, func(p, rel string) error {
		return writeEntry(tw, p, rel)
	})
	if err != nil {
		return err
	}
	return tw.Close()
}

// AddDir writes dir itself as prefix/ and everything below it under prefix,
// as WriteDir does (nothing left out), into tw, which stays open.
func AddDir(tw *tar.Writer, dir, prefix string) error {
	dir, err := resolveTop(dir)
	if err != nil {
		return err
	}
	if err := writeEntry(tw, dir, prefix); err != nil {
		return err
	}
	return Walk(dir, nil, nil, func(p, rel string) error {
		return writeEntry(tw, p, path.Join(prefix, rel))
	})
}

// resolveTop follows dir when it is a symlink: a volume source or build
// context given as a link to a directory means that directory (walked as
// the link itself, it would yield nothing).
func resolveTop(dir string) (string, error) {
	resolved, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return "", err
	}
	st, err := os.Stat(resolved)
	if err != nil {
		return "", err
	}
	if !st.IsDir() {
		return "", fmt.Errorf("%s is not a directory", dir)
	}
	return resolved, nil
}

// writeEntry writes the file at p as name: its header (owner root, PAX
// format), then its content if it is a regular file.
func writeEntry(tw *tar.Writer, p, name string) error {
	st, err := os.Lstat(p)
	if err != nil {
		return err
	}
	link := ""
	if st.Mode()&fs.ModeSymlink != 0 {
		if link, err = os.Readlink(p); err != nil {
			return err
		}
	}
	hdr, err := tar.FileInfoHeader(st, link)
	if err != nil {
		return err
	}
	hdr.Name = name
	if st.IsDir() {
		hdr.Name += "/"
	}
	hdr.Uid, hdr.Gid, hdr.Uname, hdr.Gname = 0, 0, "", ""
	hdr.Format = tar.FormatPAX
	if err := tw.WriteHeader(hdr); err != nil {
		return err
	}
	if !st.Mode().IsRegular() {
		return nil
	}
	f, err := os.Open(p)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = io.Copy(tw, f)
	return err
}
