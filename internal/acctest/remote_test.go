package acctest

import (
	"os"
	"path/filepath"
	"testing"
)

// The set-up's env files are read without a shell: env.sh, then env.d/*.sh,
// `export K=V` lines only, quotes removed.
func TestReadEnvFiles(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "env.d"), 0o755); err != nil {
		t.Fatal(err)
	}
	write := func(name, content string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("env.sh", "# loader\nfor f in env.d/*.sh; do . \"$f\"; done\nexport A=from-env-sh\n")
	write("env.d/ssh.sh", "export A=overridden\nexport B=\"quoted value\"\nexport C='single'\nD=not-exported\n")
	got := readEnvFiles(dir)
	want := map[string]string{"A": "overridden", "B": "quoted value", "C": "single"}
	if len(got) != len(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %q, want %q", k, got[k], v)
		}
	}
}
