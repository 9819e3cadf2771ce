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
const DurationDoc = "a duration such as `90s`, `15m`, `2h`, `1h30m`, `1.5h` or `7d`: numbers with units, largest " +
	"first and each once, from `d` (24 hours, a whole number), `h`, `m`, `s` and `ms`, to the millisecond; `0` alone is zero"

// durationUnits are the units of DurationDoc, largest first.
var durationUnits = []struct {
	name string
	size time.Duration
}{{"d", 24 * time.Hour}, {"h", time.Hour}, {"m", time.Minute}, {"s", time.Second}, {"ms", time.Millisecond}}

// ParseDuration parses a non-negative duration written as DurationDoc says
// ("1h30m", "90s", "1.5h", "7d", "1d12h", surrounding spaces allowed) and
// refuses anything else: other units, signs, repeated or misordered units,
// a fraction of a day, and values finer than a millisecond, which would
// otherwise be cut without a word. A bare number other than "0" is an
// error: the unit is never guessed.
func ParseDuration(s string) (time.Duration, error) {
	t := strings.TrimSpace(s)
	if t == "" {
		return 0, fmt.Errorf("invalid duration %q: empty; %s", s, durationHint)
	}
	if t == "0" {
		return 0, nil
	}
	var total time.Duration
	next := 0 // index of the largest unit still allowed
	for t != "" {
		num, rest := cutNumber(t)
		if num == "" {
			return 0, fmt.Errorf("invalid duration %q: expected a number at %q; %s", s, t, durationHint)
		}
		unit, after := cutUnit(rest)
		u := unitIndex(unit)
		switch {
		case unit == "":
			return 0, fmt.Errorf("invalid duration %q: %s has no unit; %s", s, num, durationHint)
		case u < 0:
			return 0, fmt.Errorf("invalid duration %q: unknown unit %q; %s", s, unit, durationHint)
		case u < next:
			return 0, fmt.Errorf("invalid duration %q: unit %q repeated or after a smaller one; write the largest unit first, e.g. 1d12h or 1h30m", s, unit)
		}
		d, err := unitValue(num, durationUnits[u].size, unit == "d")
		if err != nil {
			return 0, fmt.Errorf("invalid duration %q: %s%s %w", s, num, unit, err)
		}
		if total > math.MaxInt64-d {
			return 0, fmt.Errorf("invalid duration %q: too large", s)
		}
		total += d
		next, t = u+1, after
	}
	return total, nil
}

const durationHint = "use numbers with units d, h, m, s or ms, largest first, such as 90s, 15m, 1h30m, 1.5h or 7d"

// cutNumber splits t after a leading decimal number (digits, optionally
// a point and more digits).
func cutNumber(t string) (string, string) {
	i := 0
	for i < len(t) && t[i] >= '0' && t[i] <= '9' {
		i++
	}
	if i > 0 && i+1 < len(t) && t[i] == '.' && t[i+1] >= '0' && t[i+1] <= '9' {
		i++
		for i < len(t) && t[i] >= '0' && t[i] <= '9' {
			i++
		}
	}
	return t[:i], t[i:]
}

// cutUnit splits t after a leading unit: the letters before the next digit.
func cutUnit(t string) (string, string) {
	i := 0
	for i < len(t) && (t[i] < '0' || t[i] > '9') {
		i++
	}
	return t[:i], t[i:]
}

func unitIndex(unit string) int {
	for i, u := range durationUnits {
		if u.name == unit {
			return i
		}
	}
	return -1
}

// unitValue is num units of size, exactly: a value that is not a whole
// number of milliseconds, or too large, is an error (whole: no fraction).
func unitValue(num string, size time.Duration, whole bool) (time.Duration, error) {
	r, ok := new(big.Rat).SetString(num)
	if !ok {
		return 0, fmt.Errorf("is not a number")
	}
	if whole && !r.IsInt() {
		return 0, fmt.Errorf("is not a whole number of days; write the rest in hours, e.g. 1d12h")
	}
	ms := new(big.Rat).Mul(r, big.NewRat(int64(size/time.Millisecond), 1))
	if !ms.IsInt() {
		return 0, fmt.Errorf("is finer than a millisecond, the smallest unit")
	}
	n := ms.Num()
	if !n.IsInt64() || n.Int64() > math.MaxInt64/int64(time.Millisecond) {
		return 0, fmt.Errorf("is too large")
	}
	return time.Duration(n.Int64()) * time.Millisecond, nil
}
