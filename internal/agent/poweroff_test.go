package agent

import (
	"io"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestParsePoweroff(t *testing.T) {
	at := "2030-01-02T03:04:05.500Z"
	cfg, err := parsePoweroff([]string{"--at", at}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if want, _ := time.Parse(time.RFC3339Nano, at); !cfg.at.Equal(want) || cfg.dryRun {
		t.Errorf("parsePoweroff = %+v", cfg)
	}
	for _, bad := range [][]string{
		nil,                          // --at missing
		{"--at", "tomorrow"},         // not RFC 3339
		{"--at", at, "extra"},        // stray argument
		{"--at", at, "--unknown"},    // unknown flag
		{"--at", "2030-01-02 03:04"}, // not RFC 3339 either
	} {
		if _, err := parsePoweroff(bad, io.Discard); err == nil {
			t.Errorf("parsePoweroff(%q) accepted", bad)
		}
	}
}

func TestPoweroffCommandRoundTrip(t *testing.T) {
	deadline := time.Date(2030, 1, 2, 3, 4, 5, 250e6, time.UTC)
	argv := PoweroffCommand(deadline)
	if argv[0] != PathInInstance || argv[1] != "poweroff" {
		t.Fatalf("PoweroffCommand = %q", argv)
	}
	cfg, err := parsePoweroff(argv[2:], io.Discard)
	if err != nil || !cfg.at.Equal(deadline) {
		t.Errorf("round trip: %+v, %v", cfg, err)
	}
}

func TestParseArgvFile(t *testing.T) {
	want := []string{"sh", "-c", "echo a  b; exit 3", ""}
	for name, content := range map[string]string{
		"json":          string(ArgvFileContent(want)),
		"nul-ended":     strings.Join(want, "\x00") + "\x00",
		"last nul left": "sh\x00-c\x00echo a  b; exit 3\x00\x00",
	} {
		got, err := parseArgvFile([]byte(content))
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("%s: parseArgvFile = %q, %v; want %q", name, got, err, want)
		}
	}
	if got, err := parseArgvFile([]byte("sleep\x00infinity")); err != nil || !reflect.DeepEqual(got, []string{"sleep", "infinity"}) {
		t.Errorf("unterminated last word: %q, %v", got, err)
	}
	for _, bad := range []string{"", "\x00", "[]", "[1, 2]", "[\"a\"", "[\"\", \"x\"]"} {
		if got, err := parseArgvFile([]byte(bad)); err == nil {
			t.Errorf("parseArgvFile(%q) = %q, want an error", bad, got)
		}
	}
}
