package market

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/bits"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Duration is a span of time in milliseconds.
//
// market keeps its own type instead of time.Duration so that the package
// never imports time: instants and spans are plain integers that every peer
// computes the same way, and a millisecond is finer than anything a batch
// job or an epoch needs.
type Duration int64

// Common durations.
const (
	Millisecond Duration = 1
	Second               = 1000 * Millisecond
	Minute               = 60 * Second
	Hour                 = 60 * Minute
	Day                  = 24 * Hour
)

// ErrBadDuration is returned, wrapped, for text that is not a duration.
var ErrBadDuration = errors.New("bad duration")

type durationUnit struct {
	name string
	ms   uint64
}

// durationUnits is ordered so that "ms" is tried before "m". It is a
// function rather than a variable so that the table cannot be changed.
func durationUnits() [5]durationUnit {
	return [5]durationUnit{
		{"ms", 1},
		{"s", 1000},
		{"m", 60 * 1000},
		{"h", 60 * 60 * 1000},
		{"d", 24 * 60 * 60 * 1000},
	}
}

// ParseDuration reads Go-style durations ("90s", "10m", "8h", "1h30m",
// "500ms") with "d" added for days of 24 hours. A fraction is allowed
// ("1.5h") as long as the result is a whole number of milliseconds. A lone
// "0" is zero. Negative values, missing units, unknown units and values that
// do not fit in an int64 of milliseconds are errors.
func ParseDuration(s string) (Duration, error) {
	orig := s
	if s == "" {
		return 0, fmt.Errorf("%w: empty", ErrBadDuration)
	}
	if s[0] == '-' {
		return 0, fmt.Errorf("%w %q: must not be negative", ErrBadDuration, orig)
	}
	if s == "0" {
		return 0, nil
	}
	var total uint64
	for s != "" {
		whole, frac, rest, ok := splitNumber(s)
		if !ok {
			return 0, fmt.Errorf("%w %q: want a number followed by ms, s, m, h or d, such as 8h or 1h30m", ErrBadDuration, orig)
		}
		unit, n := matchDurationUnit(rest)
		if n == 0 {
			if rest == "" {
				return 0, fmt.Errorf("%w %q: missing unit (ms, s, m, h or d)", ErrBadDuration, orig)
			}
			return 0, fmt.Errorf("%w %q: unknown unit in %q (want ms, s, m, h or d)", ErrBadDuration, orig, rest)
		}
		v, exact, ok := scaleDecimal(whole, frac, unit)
		if !ok {
			return 0, fmt.Errorf("%w %q: too large", ErrBadDuration, orig)
		}
		if !exact {
			return 0, fmt.Errorf("%w %q: finer than a millisecond", ErrBadDuration, orig)
		}
		sum, carry := bits.Add64(total, v, 0)
		if carry != 0 || sum > math.MaxInt64 {
			return 0, fmt.Errorf("%w %q: too large", ErrBadDuration, orig)
		}
		total = sum
		s = rest[n:]
	}
	return Duration(total), nil
}

func matchDurationUnit(s string) (ms uint64, n int) {
	for _, u := range durationUnits() {
		if strings.HasPrefix(s, u.name) {
			return u.ms, len(u.name)
		}
	}
	return 0, 0
}

// splitNumber cuts a leading unsigned decimal number ("12", "1.5", ".5")
// off s. ok is false when s does not start with one.
func splitNumber(s string) (whole, frac, rest string, ok bool) {
	i := 0
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i++
	}
	whole = s[:i]
	if i < len(s) && s[i] == '.' {
		j := i + 1
		for j < len(s) && s[j] >= '0' && s[j] <= '9' {
			j++
		}
		frac = s[i+1 : j]
		if frac == "" {
			return "", "", "", false
		}
		i = j
	}
	if whole == "" && frac == "" {
		return "", "", "", false
	}
	return whole, frac, s[i:], true
}

// scaleDecimal computes (whole.frac) × unit in integers. exact is false when
// the fraction leaves a remainder below one unit of the result; ok is false
// on overflow. Working in 128 bits keeps "1.5EiB" or "0.001s" exact without
// floating point, whose rounding could differ from one peer to another.
func scaleDecimal(whole, frac string, unit uint64) (v uint64, exact, ok bool) {
	var w uint64
	for _, c := range whole {
		hi, lo := bits.Mul64(w, 10)
		if hi != 0 {
			return 0, false, false
		}
		var carry uint64
		w, carry = bits.Add64(lo, uint64(c-'0'), 0)
		if carry != 0 {
			return 0, false, false
		}
	}
	hi, v := bits.Mul64(w, unit)
	if hi != 0 {
		return 0, false, false
	}
	frac = strings.TrimRight(frac, "0")
	if frac == "" {
		return v, true, true
	}
	if len(frac) > 19 {
		// More digits than any exact product of a uint64 unit could use.
		return 0, false, true
	}
	f, err := strconv.ParseUint(frac, 10, 64)
	if err != nil {
		return 0, false, false
	}
	den := uint64(1)
	for range len(frac) {
		den *= 10
	}
	fhi, flo := bits.Mul64(f, unit)
	q, r := bits.Div64(fhi, flo, den) // f < den, so fhi < den and Div64 cannot panic.
	if r != 0 {
		return 0, false, true
	}
	sum, carry := bits.Add64(v, q, 0)
	if carry != 0 {
		return 0, false, false
	}
	return sum, true, true
}

// String writes d in the form ParseDuration reads back, largest unit first:
// "8h", "1d12h", "1m30s", "500ms", "0s".
func (d Duration) String() string {
	if d == 0 {
		return "0s"
	}
	var b strings.Builder
	u := uint64(d)
	if d < 0 {
		b.WriteByte('-')
		u = uint64(-(d + 1)) + 1 // Negating MinInt64 directly would overflow.
	}
	units := durationUnits()
	for i := len(units) - 1; i >= 0; i-- {
		unit := units[i]
		if q := u / unit.ms; q > 0 {
			b.WriteString(strconv.FormatUint(q, 10))
			b.WriteString(unit.name)
			u -= q * unit.ms
		}
	}
	return b.String()
}

// MarshalText implements encoding.TextMarshaler.
func (d Duration) MarshalText() ([]byte, error) { return []byte(d.String()), nil }

// UnmarshalText implements encoding.TextUnmarshaler.
func (d *Duration) UnmarshalText(b []byte) error {
	v, err := ParseDuration(string(b))
	if err != nil {
		return err
	}
	*d = v
	return nil
}

// MarshalJSON writes the duration as a string such as "8h".
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(d.String()) }

// UnmarshalJSON reads a string such as "8h". A bare number is refused: it
// would be unclear whether it counts seconds or milliseconds.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("%w: want a string such as \"8h\"", ErrBadDuration)
	}
	return d.UnmarshalText([]byte(s))
}

// MarshalYAML writes the duration as a string such as 8h.
func (d Duration) MarshalYAML() (any, error) { return d.String(), nil }

// UnmarshalYAML reads a scalar such as 8h.
func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.ScalarNode {
		return fmt.Errorf("%w: want a scalar such as 8h", ErrBadDuration)
	}
	return d.UnmarshalText([]byte(n.Value))
}
