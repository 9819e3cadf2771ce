// Package units parses the sizes and durations users write in configuration
// ("256MiB", "1g", "90s", "1h30m"). It is pure: no engine, no framework.
//
// Sizes follow the Docker CLI: every unit is binary, whatever its spelling.
// "256M", "256m", "256MB" and "256MiB" all mean 256 * 2^20 bytes, because
// `docker run --memory 256m` means 256 MiB and users copy such values from
// Docker. A value without a unit is a number of bytes.
package units

import (
	"fmt"
	"math"
	"math/big"
	"strings"
	"time"
)

// sizeUnits maps a lower-cased unit suffix to its power of 1024.
var sizeUnits = map[string]uint{
	"": 0, "b": 0,
	"k": 1, "kb": 1, "kib": 1,
	"m": 2, "mb": 2, "mib": 2,
	"g": 3, "gb": 3, "gib": 3,
	"t": 4, "tb": 4, "tib": 4,
	"p": 5, "pb": 5, "pib": 5,
}

// SizeUnitsDoc describes the accepted size syntax, for schema descriptions.
const SizeUnitsDoc = "a number of bytes, or a number with a unit: `k`, `m`, `g`, `t` " +
	"(any case, optionally followed by `b` or `ib`). Units are binary as in the Docker CLI: " +
	"`256m`, `256M`, `256MB` and `256MiB` all mean 256 × 2^20 bytes. Decimals such as `1.5GiB` " +
	"are accepted when they come to a whole number of bytes"

// ParseSize parses a size into bytes. Surrounding spaces and a space between
// the number and the unit are tolerated; negative values, unknown units and
// values that overflow int64 are errors.
func ParseSize(s string) (int64, error) {
	t := strings.TrimSpace(s)
	if t == "" {
		return 0, fmt.Errorf("invalid size %q: empty", s)
	}
	i := strings.IndexFunc(t, func(r rune) bool { return (r < '0' || r > '9') && r != '.' })
	if i < 0 {
		i = len(t)
	}
	num, unit := t[:i], strings.ToLower(strings.TrimSpace(t[i:]))
	if num == "" {
		return 0, fmt.Errorf("invalid size %q: expected a number such as 256MiB", s)
	}
	pow, ok := sizeUnits[unit]
	if !ok {
		return 0, fmt.Errorf("invalid size %q: unknown unit %q (use k, m, g, t, p, optionally with b or ib)", s, t[i:])
	}
	r, ok := decimal(num)
	if !ok {
		return 0, fmt.Errorf("invalid size %q: %q is not a number", s, num)
	}
	r.Mul(r, new(big.Rat).SetInt(new(big.Int).Lsh(big.NewInt(1), 10*pow)))
	if !r.IsInt() {
		return 0, fmt.Errorf("invalid size %q: not a whole number of bytes", s)
	}
	n := r.Num()
	if !n.IsInt64() {
		return 0, fmt.Errorf("invalid size %q: too large", s)
	}
	return n.Int64(), nil
}

// decimal parses digits with at most one dot ("1", "1.5", ".5") exactly.
func decimal(s string) (*big.Rat, bool) {
	if s == "." || strings.Count(s, ".") > 1 {
		return nil, false
	}
	return new(big.Rat).SetString(s)
}

// FormatSize renders bytes with the largest binary unit that divides them
// exactly: 268435456 -> "256MiB", 1000 -> "1000".
func FormatSize(n int64) string {
	names := []string{"", "KiB", "MiB", "GiB", "TiB", "PiB"}
	if n == 0 {
		return "0"
	}
	p := 0
	for p+1 < len(names) && n%(int64(1)<<(10*(p+1))) == 0 {
		p++
	}
	return fmt.Sprintf("%d%s", n>>(10*p), names[p])
}

// DurationDoc describes the accepted duration syntax, for schema descriptions.
const DurationDoc = "a duration such as `90s`, `15m`, `2h`, `1h30m` or `7d` " +
	"(units `d`, `h`, `m`, `s`, `ms`; `d` is 24 hours)"

// ParseDuration parses a non-negative duration: Go's syntax ("1h30m", "90s",
// "1.5h") plus a leading whole number of days ("7d", "1d12h"). A bare number
// other than "0" is an error: the unit is never guessed.
func ParseDuration(s string) (time.Duration, error) {
	t := strings.TrimSpace(s)
	if t == "" {
		return 0, fmt.Errorf("invalid duration %q: empty", s)
	}
	if strings.HasPrefix(t, "-") {
		return 0, fmt.Errorf("invalid duration %q: negative", s)
	}
	var days time.Duration
	if i := strings.IndexByte(t, 'd'); i >= 0 {
		n, ok := digits(t[:i])
		if !ok {
			return 0, fmt.Errorf("invalid duration %q: days must be a whole number before the other units, e.g. 1d12h", s)
		}
		if n > math.MaxInt64/int64(24*time.Hour) {
			return 0, fmt.Errorf("invalid duration %q: too large", s)
		}
		days, t = time.Duration(n)*24*time.Hour, t[i+1:]
		if t == "" {
			return days, nil
		}
	}
	d, err := time.ParseDuration(t)
	if err != nil {
		return 0, fmt.Errorf("invalid duration %q: use a number with a unit such as 90s, 15m, 2h, 1h30m or 7d", s)
	}
	if d < 0 || days > math.MaxInt64-d {
		return 0, fmt.Errorf("invalid duration %q: out of range", s)
	}
	return days + d, nil
}

// digits parses a non-empty run of ASCII digits.
func digits(s string) (int64, bool) {
	if s == "" || len(s) > 18 {
		return 0, false
	}
	var n int64
	for _, r := range s {
		if r < '0' || r > '9' {
			return 0, false
		}
		n = n*10 + int64(r-'0')
	}
	return n, true
}
