package units

import (
	"fmt"
	"math"
	"regexp"
	"strings"
	"testing"
	"time"
)

// sizeGrammar is SizeUnitsDoc as a pattern, applied to the trimmed input;
// the space before the unit is any that strings.TrimSpace removes.
var sizeGrammar = regexp.MustCompile(`(?i)^(\d+\.?\d*|\.\d+)[\s\v\p{Z}\x{85}]*([kmgtp](i?b)?|b)?$`)

// FuzzParseSize: an accepted size follows the documented grammar, is never
// negative and round-trips through FormatSize; a refused one is named.
func FuzzParseSize(f *testing.F) {
	for _, s := range []string{
		"0", "1", "512b", "1k", "1KiB", "256MiB", "256m", "256 MB", " 64m ", "1.5GiB", ".5k", "1.", "8pib",
		"", " ", "-1", "+1", "1e3", "0x10", "1..5k", "1.5", "1kb2", "1 k b", "9223372036854775807",
		"9223372036854775808", "8388608TiB", "8192PiB", "1\u00a0k", "１k", "1K\x00",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, err := ParseSize(s)
		if err != nil {
			if !strings.Contains(err.Error(), fmt.Sprintf("%q", s)) {
				t.Fatalf("ParseSize(%q): error %q does not name the value", s, err)
			}
			return
		}
		if n < 0 {
			t.Fatalf("ParseSize(%q) = %d, negative", s, n)
		}
		if !sizeGrammar.MatchString(strings.TrimSpace(s)) {
			t.Fatalf("ParseSize(%q) = %d, but the input is outside the documented grammar", s, n)
		}
		back, err := ParseSize(FormatSize(n))
		if err != nil || back != n {
			t.Fatalf("ParseSize(FormatSize(%d) = %q) = %d, %v", n, FormatSize(n), back, err)
		}
	})
}

// FuzzFormatSize: every non-negative byte count formats to a size that
// parses back to itself.
func FuzzFormatSize(f *testing.F) {
	for _, n := range []int64{0, 1, 1000, 1024, 1536, 1 << 20, 256 << 20, 1 << 50, 3 << 50, math.MaxInt64} {
		f.Add(n)
	}
	f.Fuzz(func(t *testing.T, n int64) {
		if n < 0 {
			n = -(n + 1)
		}
		s := FormatSize(n)
		back, err := ParseSize(s)
		if err != nil || back != n {
			t.Fatalf("ParseSize(FormatSize(%d) = %q) = %d, %v", n, s, back, err)
		}
	})
}

// durationGrammar is DurationDoc as a pattern: units largest first, each
// once, whole days ("1.0d" is a whole number too); applied to the trimmed input.
var durationGrammar = regexp.MustCompile(`^(0|(\d+(\.0+)?d)?(\d+(\.\d+)?h)?(\d+(\.\d+)?m)?(\d+(\.\d+)?s)?(\d+(\.\d+)?ms)?)$`)

// FuzzParseDuration: an accepted duration follows the documented grammar,
// is a non-negative whole number of milliseconds and round-trips through
// its canonical spelling; a refused one is named in the error.
func FuzzParseDuration(f *testing.F) {
	for _, s := range []string{
		"0", "90s", "15m", "2h", "1h30m", "1.5h", "7d", "1d12h", "250ms", "1d2h3m4s5ms", " 10s ", "0.001s",
		"", "0s", "10", "-1s", "+1s", "1.5d", "1s1h", "1h1h", "1m1ms", "1ms1m", "1us", "1ns", "0.0001s", "1.s",
		".5s", "1e3s", "1H", "1 h", "106751991167d", "106751d23h47m16s854ms", "9223372036854775807ms", "1d\x00",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, err := ParseDuration(s)
		if err != nil {
			if !strings.Contains(err.Error(), fmt.Sprintf("%q", s)) {
				t.Fatalf("ParseDuration(%q): error %q does not name the value", s, err)
			}
			return
		}
		if d < 0 || d%time.Millisecond != 0 {
			t.Fatalf("ParseDuration(%q) = %v: negative or finer than a millisecond", s, d)
		}
		trimmed := strings.TrimSpace(s)
		if trimmed == "" || !durationGrammar.MatchString(trimmed) {
			t.Fatalf("ParseDuration(%q) = %v, but the input is outside the documented grammar", s, d)
		}
		spelled := spellDuration(d)
		back, err := ParseDuration(spelled)
		if err != nil || back != d {
			t.Fatalf("ParseDuration(%q) = %v; its spelling %q parses to %v, %v", s, d, spelled, back, err)
		}
	})
}

// spellDuration writes d in DurationDoc's units, largest first.
func spellDuration(d time.Duration) string {
	if d == 0 {
		return "0"
	}
	var b strings.Builder
	for _, u := range durationUnits {
		if n := d / u.size; n > 0 {
			fmt.Fprintf(&b, "%d%s", n, u.name)
			d -= time.Duration(int64(n) * int64(u.size))
		}
	}
	return b.String()
}
