package agent

import (
	"bytes"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"
)

// FuzzParseArgvFile: whatever an argv file holds, an accepted one names a
// command; the JSON form the provider writes (ArgvFileContent) and the NUL
// form of /proc/PID/cmdline both give back exactly the words written. The
// input is read as an argv file and, split at NULs, as the words to write.
func FuzzParseArgvFile(f *testing.F) {
	for _, s := range []string{
		`["sh","-c","echo a  b; exit 3",""]`, " [\"x\"]\n", "sleep\x00infinity", "sleep\x00infinity\x00",
		"a\x00\x00", "\x00", "", "[]", "[1, 2]", `["a"`, `["", "x"]`, `[null]`, `["\u0000"]`, "[\"a\"] junk",
		"\xff\x00\xfe", " \x00[", "[\x00x", "\t\n", `["a\"b", "\\", "é", "\u2028"]`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, content []byte) {
		if argv, err := parseArgvFile(content); err == nil {
			if len(argv) == 0 || argv[0] == "" {
				t.Fatalf("parseArgvFile(%q) = %q: accepted without a command", content, argv)
			}
			if allValidUTF8(argv) {
				roundTrip(t, argv)
			}
		} else if !strings.HasPrefix(err.Error(), "argv file: ") {
			t.Fatalf("parseArgvFile(%q): error %q does not say it is about the argv file", content, err)
		}

		words := strings.Split(string(content), "\x00")
		if words[0] == "" {
			return // no command: nothing a caller would write
		}
		if allValidUTF8(words) { // Terraform strings are UTF-8, so the JSON form needs it
			roundTrip(t, words)
		}
		nul := []byte(strings.Join(words, "\x00") + "\x00")
		if trimmed := bytes.TrimSpace(nul); trimmed[0] == '[' {
			return // read as JSON, as documented: a NUL form cannot start with '['
		}
		got, err := parseArgvFile(nul)
		if err != nil || !reflect.DeepEqual(got, words) {
			t.Fatalf("NUL form of %q parses to %q, %v", words, got, err)
		}
	})
}

func roundTrip(t *testing.T, argv []string) {
	t.Helper()
	got, err := parseArgvFile(ArgvFileContent(argv))
	if err != nil || !reflect.DeepEqual(got, argv) {
		t.Fatalf("parseArgvFile(ArgvFileContent(%q)) = %q, %v", argv, got, err)
	}
}

func allValidUTF8(words []string) bool {
	for _, w := range words {
		if !utf8.ValidString(w) {
			return false
		}
	}
	return true
}
