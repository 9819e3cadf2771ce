package docker

import (
	"archive/tar"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"sort"
	"strings"
	"time"

	"github.com/sandboxfleet/terraform-provider-sandbox/internal/driver"
)

// tarEntry is one in-memory regular file.
type tarEntry struct {
	data []byte
	mode fs.FileMode
}

// epoch is the fixed mtime of generated entries, so identical content makes
// identical tar streams.
var epoch = time.Unix(0, 0)

// tarFiles writes regular files by relative name, in name order. Parent
// directories are not written: the engine creates missing ones (0755) and
// existing ones such as /tmp keep their modes.
func tarFiles(w io.Writer, files map[string]tarEntry) error {
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	tw := tar.NewWriter(w)
	for _, n := range names {
		e := files[n]
		hdr := &tar.Header{Typeflag: tar.TypeReg, Name: n, Mode: tarMode(e.mode), Size: int64(len(e.data)), ModTime: epoch, Format: tar.FormatPAX}
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		if _, err := tw.Write(e.data); err != nil {
			return err
		}
	}
	return tw.Close()
}

// tarMode converts fs.FileMode permission and special bits to tar's c_mode.
func tarMode(m fs.FileMode) int64 {
	mode := int64(m.Perm())
	if m&fs.ModeSetuid != 0 {
		mode |= 0o4000
	}
	if m&fs.ModeSetgid != 0 {
		mode |= 0o2000
	}
	if m&fs.ModeSticky != 0 {
		mode |= 0o1000
	}
	return mode
}

// tarDirEntry writes one directory entry (0755) for an absolute path.
func tarDirEntry(w io.Writer, dir string) error {
	name := strings.TrimPrefix(path.Clean(dir), "/")
	if name == "" || !path.IsAbs(dir) {
		return fmt.Errorf("directory %q: path must be absolute", dir)
	}
	tw := tar.NewWriter(w)
	if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: name + "/", Mode: 0o755, ModTime: epoch}); err != nil {
		return err
	}
	return tw.Close()
}

// tarAgentVolume writes the agent file plus an empty directory, the mount
// point of the writable state directory inside the read-only volume.
func tarAgentVolume(w io.Writer, name string, data []byte, dir string) error {
	tw := tar.NewWriter(w)
	hdrs := []*tar.Header{
		{Typeflag: tar.TypeDir, Name: dir + "/", Mode: 0o755, ModTime: epoch},
		{Typeflag: tar.TypeReg, Name: name, Mode: 0o755, Size: int64(len(data)), ModTime: epoch},
	}
	for _, h := range hdrs {
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
	}
	if _, err := tw.Write(data); err != nil {
		return err
	}
	return tw.Close()
}

// tarInstanceFiles packs driver.Files for a copy to "/" of an instance.
func tarInstanceFiles(files []driver.File) (*bytes.Buffer, error) {
	entries := make(map[string]tarEntry, len(files))
	for _, f := range files {
		if !path.IsAbs(f.Path) {
			return nil, fmt.Errorf("file %q: path must be absolute", f.Path)
		}
		name := strings.TrimPrefix(path.Clean(f.Path), "/")
		if name == "" {
			return nil, fmt.Errorf("file %q: not a file path", f.Path)
		}
		data := f.Content
		mode := f.Mode
		if f.Source != "" {
			b, err := os.ReadFile(f.Source)
			if err != nil {
				return nil, fmt.Errorf("file %q: %w", f.Path, err)
			}
			data = b
			if mode == 0 {
				if st, err := os.Stat(f.Source); err == nil {
					mode = st.Mode()
				}
			}
		}
		if mode == 0 {
			mode = 0o644
		}
		entries[name] = tarEntry{data: data, mode: mode}
	}
	var buf bytes.Buffer
	if err := tarFiles(&buf, entries); err != nil {
		return nil, err
	}
	return &buf, nil
}

// streamMessage is one line of the engine's JSON progress stream.
type streamMessage struct {
	Stream      string `json:"stream"`
	Status      string `json:"status"`
	ErrorDetail *struct {
		Message string `json:"message"`
	} `json:"errorDetail"`
	Error string           `json:"error"`
	Aux   *json.RawMessage `json:"aux"`
}

// logTail keeps the last lines of a build or pull log for error messages.
type logTail struct {
	lines []string
	max   int
}

func (t *logTail) add(s string) {
	for _, l := range strings.Split(strings.TrimRight(s, "\n"), "\n") {
		if strings.TrimSpace(l) == "" {
			continue
		}
		t.lines = append(t.lines, l)
		if len(t.lines) > t.max {
			t.lines = t.lines[1:]
		}
	}
}

func (t *logTail) String() string { return strings.Join(t.lines, "\n") }

// readBuildStream consumes a build/pull/load stream to the end. It returns
// the image ID announced in aux messages and an error that carries the
// engine's message plus the tail of the log.
func readBuildStream(r io.Reader) (string, error) {
	return readStream(r, nil)
}

// readStream is readBuildStream that also hands every text line to onText.
func readStream(r io.Reader, onText func(string)) (string, error) {
	dec := json.NewDecoder(r)
	tail := &logTail{max: 30}
	var id string
	for {
		var m streamMessage
		if err := dec.Decode(&m); err != nil {
			if errors.Is(err, io.EOF) {
				return id, nil
			}
			return id, fmt.Errorf("reading engine output: %w\n%s", err, tail)
		}
		tail.add(m.Stream)
		tail.add(m.Status)
		if onText != nil && m.Stream != "" {
			onText(m.Stream)
		}
		if m.Aux != nil {
			var aux struct{ ID string }
			if json.Unmarshal(*m.Aux, &aux) == nil && aux.ID != "" {
				id = aux.ID
			}
		}
		msg := m.Error
		if m.ErrorDetail != nil && m.ErrorDetail.Message != "" {
			msg = m.ErrorDetail.Message
		}
		if msg != "" {
			return id, fmt.Errorf("%s\n--- last lines of output ---\n%s", msg, tail)
		}
	}
}
