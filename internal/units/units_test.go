package units

import (
	"math"
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
		"0":        0,
		"0s":       0,
		"90s":      90 * time.Second,
		"2h":       2 * time.Hour,
		"1h30m":    90 * time.Minute,
		"1.5h":     90 * time.Minute,
		"15m":      15 * time.Minute,
		"500ms":    500 * time.Millisecond,
		" 10s ":    10 * time.Second,
		"7d":       7 * 24 * time.Hour,
		"1d12h":    36 * time.Hour,
		"1d0s":     24 * time.Hour,
		"2562047h": 2562047 * time.Hour,
	}
	for in, want := range good {
		got, err := ParseDuration(in)
		if err != nil || got != want {
			t.Errorf("ParseDuration(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	bad := []string{
		"", " ", "10", "-1s", "-1h", "1h-1m", "1d-1h", "abc", "h", "1x", "1.5d", "d", "d1h",
		"1h1d", "1dd", "2562048h", "106752d", "106751d24h", "99999999999999999999d", "1 h",
	}
	for _, in := range bad {
		if got, err := ParseDuration(in); err == nil {
			t.Errorf("ParseDuration(%q) = %v, want an error", in, got)
		}
	}
}
