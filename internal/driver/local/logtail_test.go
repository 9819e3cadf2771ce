package local

import (
	"os"
	"path/filepath"
	"runtime"
	"testing"
)

// TestLogTailReadsOnlyTheEnd: a sandbox's console log can be of any size
// (here a sparse 1 GiB); explaining a failed start reads only its end.
func TestLogTailReadsOnlyTheEnd(t *testing.T) {
	path := filepath.Join(t.TempDir(), "console.log")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(1 << 30); err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte("\nthe last words"), 1<<30); err != nil {
		t.Fatal(err)
	}
	_ = f.Close()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	got := logTail(path)
	runtime.ReadMemStats(&after)
	if len(got) > len(": ")+2000 {
		t.Errorf("logTail = %d bytes, want at most the last 2000 of the log", len(got))
	}
	if len(got) < len("the last words") || got[len(got)-len("the last words"):] != "the last words" {
		t.Errorf("logTail lost the end: %q", got[max(0, len(got)-40):])
	}
	if n := after.TotalAlloc - before.TotalAlloc; n > 1<<20 {
		t.Errorf("logTail of a 1 GiB log allocated %d bytes", n)
	}
	if b := readTail(path, 64<<10); len(b) != 64<<10 {
		t.Errorf("readTail kept %d bytes, want %d", len(b), 64<<10)
	}
}
