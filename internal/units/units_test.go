package units

import (
	"fmt"
	"math"
	"strings"
	"testing"
	"time"
)

func TestParseSize(t *testing.T) {
	const Ki, Mi, Gi = int64(1) << 10, int64(1) << 20, int64(1) << 30
	good := map[string]int64{
		"0":                   0,
		"1":                   1,
		"1048576":             Mi,
		"512b":                512,
		"512B":                512,
		"1k":                  Ki,
		"1K":                  Ki,
		"1KB":                 Ki,
		"1KiB":                Ki,
		"256MiB":              256 * Mi,
		"256M":                256 * Mi,
		"256m":                256 * Mi,
		"256mb":               256 * Mi,
		"256 MiB":             256 * Mi,
		" 64m ":               64 * Mi,
		"1GiB":                Gi,
		"1g":                  Gi,
		"1G":                  Gi,
		"2gib":                2 * Gi,
		"1.5GiB":              3 * Gi / 2,
		".5g":                 Gi / 2,
		"1TiB":                Gi << 10,
		"1p":                  Gi << 20,
		"8191PiB":             8191 << 50,
		"9223372036854775807": math.MaxInt64,
	}
	for in, want := range good {
		got, err := ParseSize(in)
		if err != nil || got != want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	bad := []string{
		"", "  ", "MiB", "-1", "-1MiB", "1x", "1MiBs", "1 mega", "1.2.3M", ".", "1.5",
		"0.1k", "1e6", "0x10", "8192PiB", "9223372036854775808", "1,5G", "1 G B",
	}
	for _, in := range bad {
		if got, err := ParseSize(in); err == nil {
			t.Errorf("ParseSize(%q) = %d, want an error", in, got)
		}
	}
}

func TestFormatSize(t *testing.T) {
	cases := map[int64]string{
		0: "0", 1: "1", 1000: "1000", 1024: "1KiB", 1536: "1536",
		256 << 20: "256MiB", 1 << 30: "1GiB", 3 << 29: "1536MiB", 5 << 40: "5TiB", 1 << 60: "1024PiB",
	}
	for in, want := range cases {
		if got := FormatSize(in); got != want {
			t.Errorf("FormatSize(%d) = %q, want %q", in, got, want)
		}
		if back, err := ParseSize(FormatSize(in)); err != nil || back != in {
			t.Errorf("ParseSize(FormatSize(%d)) = %d, %v", in, back, err)
		}
	}
}

func TestParseDuration(t *testing.T) {
	good := map[string]time.Duration{
		"0":            0,
		"0s":           0,
		"90s":          90 * time.Second,
		"2h":           2 * time.Hour,
		"1h30m":        90 * time.Minute,
		"1.5h":         90 * time.Minute,
		"15m":          15 * time.Minute,
		"500ms":        500 * time.Millisecond,
		"1.5s":         1500 * time.Millisecond,
		"0.001s":       time.Millisecond,
		"1s500ms":      1500 * time.Millisecond,
		"1d2h3m4s5ms":  26*time.Hour + 3*time.Minute + 4*time.Second + 5*time.Millisecond,
		" 10s ":        10 * time.Second,
		"7d":           7 * 24 * time.Hour,
		"1d12h":        36 * time.Hour,
		"1d0s":         24 * time.Hour,
		"2562047h":     2562047 * time.Hour,
		"106751d":      106751 * 24 * time.Hour,
		"0010m":        10 * time.Minute,
		"1.000000000h": time.Hour,
		"2562047.5h":   2562047*time.Hour + 30*time.Minute,
		"9223372036s":  9223372036 * time.Second,
	}
	for in, want := range good {
		got, err := ParseDuration(in)
		if err != nil || got != want {
			t.Errorf("ParseDuration(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	// Each bad input with a piece of the message that says what is wrong.
	bad := map[string]string{
		"":                      "empty",
		" ":                     "empty",
		"10":                    "10 has no unit",
		"0.0":                   "has no unit",
		"-1s":                   "expected a number",
		"+1s":                   "expected a number",
		"1h-1m":                 `unknown unit "h-"`,
		"1d+1h":                 `unknown unit "d+"`,
		"1d-1h":                 `unknown unit "d-"`,
		"abc":                   "expected a number",
		"h":                     "expected a number",
		"1x":                    `unknown unit "x"`,
		"1ns":                   `unknown unit "ns"`,
		"1us":                   `unknown unit "us"`,
		"1µs":                   `unknown unit "µs"`,
		"5µs":                   `unknown unit "µs"`,
		"1H":                    `unknown unit "H"`,
		"1.5d":                  "not a whole number of days",
		"d":                     "expected a number",
		"d1h":                   "expected a number",
		"1h1d":                  "after a smaller one",
		"1m1h":                  "after a smaller one",
		"1h1h":                  "repeated",
		"1s1s":                  "repeated",
		"1dd":                   `unknown unit "dd"`,
		"1.0000000001s":         "finer than a millisecond",
		"0.5ms":                 "finer than a millisecond",
		"1.0001s":               "finer than a millisecond",
		"2562048h":              "too large",
		"106752d":               "too large",
		"106751d24h":            "too large",
		"99999999999999999999d": "too large",
		"1 h":                   `unknown unit " h"`,
		"1h 30m":                `unknown unit "h "`,
		"1.s":                   `unknown unit ".s"`,
		".5s":                   "expected a number",
		"1.5.5s":                `unknown unit "."`,
		"1e3s":                  `unknown unit "e"`,
	}
	for in, want := range bad {
		got, err := ParseDuration(in)
		if err == nil {
			t.Errorf("ParseDuration(%q) = %v, want an error", in, got)
			continue
		}
		if !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), fmt.Sprintf("%q", in)) {
			t.Errorf("ParseDuration(%q): error %q, want it to name the value and say %q", in, err, want)
		}
	}
}
