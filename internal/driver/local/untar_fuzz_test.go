package local

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// untarTokens are the path components a fuzzed entry is built from: the
// names that matter to confinement ("..", ".", "", whiteouts) and a few
// plain ones that let entries refer to each other.
var untarTokens = []string{"a", "b", "..", ".", "", "up", "dev", ".wh.a", ".wh..wh..opq", ".wh..", ".wh...", "victim", "a b", `x\y`, "c", "..."}

// untarTypes are the entry types a fuzzed entry can have.
var untarTypes = []byte{tar.TypeReg, tar.TypeDir, tar.TypeSymlink, tar.TypeLink, tar.TypeFifo, tar.TypeChar, tar.TypeBlock, tar.TypeReg}

// Each fuzzed entry takes untarEntrySize bytes: type, flags, four name
// components and four link components (0xff ends a path early).
const (
	untarEntrySize  = 10
	untarMaxEntries = 16
	untarMaxComps   = 4
	// untarDepth bounds how far an escape could climb if confinement broke:
	// 40 symlinks per lookup (ELOOP) times four ".." each, plus the name's
	// own components. The root sits that deep below the watched directory,
	// so a broken confinement shows there and never reaches the real system.
	untarDepth = 40*untarMaxComps + untarMaxComps + 2
)

const (
	flagNameAbs     = 1 << iota // name starts with "/"
	flagLinkAbs                 // link starts with "/" (rewritten below the watched directory)
	flagNameDir                 // name ends with "/"
	flagLinkOutside             // link is the absolute path of the outside directory
)

// untarArena is the directory layout every fuzzed extraction runs in, made
// once per fuzzing process: watch/d/d/.../ (untarDepth deep), where each
// extraction gets a fresh root, and watch/outside holding a victim file.
type untarArena struct {
	watch, outside, victim, parent string
	before                         []string
}

func newUntarArena(f *testing.F) untarArena {
	a := untarArena{watch: f.TempDir()}
	a.outside = filepath.Join(a.watch, "outside")
	a.victim = filepath.Join(a.outside, "victim")
	a.parent = filepath.Join(append([]string{a.watch}, strings.Split(strings.Repeat("d/", untarDepth), "/")...)...)
	err := os.MkdirAll(a.parent, 0o755)
	if err == nil {
		err = os.Mkdir(a.outside, 0o755)
	}
	if err == nil {
		err = os.WriteFile(a.victim, []byte("victim"), 0o644)
	}
	if err == nil {
		a.before, err = snapshotOutside(a, "")
	}
	if err != nil {
		f.Fatal(err)
	}
	return a
}

// snapshotOutside lists everything under the watched directory except the
// extraction root, with type, size, mode and link count.
func snapshotOutside(a untarArena, root string) ([]string, error) {
	var out []string
	err := filepath.WalkDir(a.watch, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if root != "" && p == root {
			return filepath.SkipDir
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		nlink := uint64(0)
		if st, ok := info.Sys().(*syscall.Stat_t); ok && !info.IsDir() {
			nlink = st.Nlink
		}
		out = append(out, fmt.Sprintf("%s %v %d %d", p, info.Mode(), info.Size(), nlink))
		return nil
	})
	return out, err
}

// untarEntries decodes the fuzzer's bytes into tar entries.
func untarEntries(script []byte, a untarArena) []*tar.Header {
	var hs []*tar.Header
	for len(script) >= untarEntrySize && len(hs) < untarMaxEntries {
		e := script[:untarEntrySize]
		script = script[untarEntrySize:]
		typ, flags := untarTypes[e[0]%byte(len(untarTypes))], e[1]
		name := untarPath(e[2:6])
		if flags&flagNameAbs != 0 {
			name = "/" + name
		}
		if typ != tar.TypeDir {
			name = strings.TrimRight(name, "/") // the tar writer refuses "x/" for anything but a directory
		} else if flags&flagNameDir != 0 {
			name += "/"
		}
		link := untarPath(e[6:10])
		switch {
		case flags&flagLinkOutside != 0:
			link = filepath.Join(a.outside, link)
		case flags&flagLinkAbs != 0:
			// An absolute target, as "/" would be, but below the watched
			// directory, so an escape through it is seen.
			link = filepath.Join(a.watch, link)
		}
		h := &tar.Header{Name: name, Typeflag: typ, Mode: 0o755, Linkname: link, Devmajor: 1, Devminor: 3}
		if typ == tar.TypeReg {
			h.Size = int64(len("data"))
		}
		hs = append(hs, h)
	}
	return hs
}

func untarPath(comps []byte) string {
	var parts []string
	for _, c := range comps[:untarMaxComps] {
		if c == 0xff {
			break
		}
		parts = append(parts, untarTokens[int(c)%len(untarTokens)])
	}
	return strings.Join(parts, "/")
}

func untarArchive(t *testing.T, hs []*tar.Header) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, h := range hs {
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if h.Size > 0 {
			_, _ = tw.Write([]byte("data"))
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// FuzzExtractTar: whatever entries an engine's tar stream holds (names with
// "..", absolute names, symlinks to "/" or out of the root, hard links to
// them, whiteouts, device nodes), extraction writes only below its root:
// nothing outside changes, the outside file gains no hard link, and no
// device node appears in the root.
func FuzzExtractTar(f *testing.F) {
	const none = 0xff
	seeds := [][]byte{
		// A file, a directory, a symlink and a hard link to the file.
		{0, 0, 0, none, none, none, none, none, none, none, 1, 0, 1, none, none, none, none, none, none, none,
			2, 0, 14, none, none, none, 0, none, none, none, 3, 0, 5, none, none, none, 0, none, none, none},
		// "../../victim" and "/victim".
		{0, 0, 2, 2, 11, none, none, none, none, none, 0, flagNameAbs, 11, none, none, none, none, none, none, none},
		// up -> "/" (below the watched directory), then up/outside/victim.
		{2, 0, 5, none, none, none, none, none, none, none, 0, 0, 5, 11, none, none, none, none, none, none},
		{2, flagLinkAbs, 5, none, none, none, 4, none, none, none, 0, 0, 5, 11, none, none, none, none, none, none},
		// up -> the outside directory itself, then write and hard-link through it.
		{2, flagLinkOutside, 5, none, none, none, none, none, none, none, 0, 0, 5, 11, none, none, none, none, none, none,
			3, 0, 0, none, none, none, 5, 11, none, none},
		// rel -> "../../../..", then rel/c.
		{2, 0, 0, none, none, none, 2, 2, 2, 2, 0, 0, 0, 14, none, none, none, none, none, none},
		// A symlink to the victim, then a regular file and a hard link over it.
		{2, flagLinkOutside, 11, none, none, none, 11, none, none, none, 0, 0, 11, none, none, none, none, none, none, none},
		{2, flagLinkOutside, 11, none, none, none, 11, none, none, none, 3, 0, 0, none, none, none, 11, none, none, none},
		// Device nodes and a FIFO.
		{5, 0, 6, 0, none, none, none, none, none, none, 6, 0, 6, 1, none, none, none, none, none, none,
			4, 0, 6, 14, none, none, none, none, none, none},
		// Whiteouts, in and out of layer mode.
		{0, 0, 0, none, none, none, none, none, none, none, 0, 0, 7, none, none, none, none, none, none, none,
			0, 0, 8, none, none, none, none, none, none, none, 0, 0, 9, none, none, none, none, none, none, none,
			0, 0, 10, none, none, none, none, none, none, none},
		// A directory over a symlink to the outside directory.
		{2, flagLinkOutside, 0, none, none, none, none, none, none, none, 1, flagNameDir, 0, none, none, none, none, none, none, none,
			0, 0, 0, 11, none, none, none, none, none, none},
	}
	for _, s := range seeds {
		f.Add(s, false)
		f.Add(s, true)
	}
	a := newUntarArena(f)
	f.Fuzz(func(t *testing.T, script []byte, layer bool) {
		root, err := os.MkdirTemp(a.parent, "root-")
		if err != nil {
			t.Fatal(err)
		}
		defer os.RemoveAll(root)
		hs := untarEntries(script, a)
		err = extractTar(bytes.NewReader(untarArchive(t, hs)), root, layer)

		after, serr := snapshotOutside(a, root)
		if serr != nil {
			t.Fatal(serr)
		}
		if got, want := strings.Join(after, "\n"), strings.Join(a.before, "\n"); got != want {
			t.Fatalf("extracting %s (layer %v, err %v) changed what is outside the root:\nbefore:\n%s\nafter:\n%s", describe(hs), layer, err, want, got)
		}
		if b, rerr := os.ReadFile(a.victim); rerr != nil || string(b) != "victim" {
			t.Fatalf("extracting %s changed the outside file: %q, %v", describe(hs), b, rerr)
		}
		info, serr := os.Lstat(root)
		if serr != nil || !info.IsDir() || info.Mode().Perm() != 0o700 {
			t.Fatalf("extracting %s replaced the root or its permissions: %v, %v", describe(hs), info, serr)
		}
		_ = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err == nil && d.Type()&(fs.ModeDevice|fs.ModeCharDevice) != 0 {
				t.Fatalf("extracting %s made a device node %s", describe(hs), p)
			}
			return nil
		})
	})
}

func describe(hs []*tar.Header) string {
	var b strings.Builder
	for _, h := range hs {
		fmt.Fprintf(&b, "[%c %q -> %q] ", h.Typeflag, h.Name, h.Linkname)
	}
	return b.String()
}
