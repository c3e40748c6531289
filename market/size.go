package market

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Size is an amount of memory or storage in bytes.
type Size uint64

// Binary and decimal multiples. GPU memory is sold in binary units ("80GB"
// on an H100 means about 80 GiB) while disks and some programs use decimal
// ones, so both are spelled out and neither is guessed.
const (
	Byte Size = 1
	KiB       = 1 << 10
	MiB       = 1 << 20
	GiB       = 1 << 30
	TiB       = 1 << 40
	PiB       = 1 << 50
	EiB       = 1 << 60
	KB        = 1000
	MB        = 1000 * KB
	GB        = 1000 * MB
	TB        = 1000 * GB
	PB        = 1000 * TB
	EB        = 1000 * PB
)

// ErrBadSize is returned, wrapped, for text that is not a size.
var ErrBadSize = errors.New("bad size")

type sizeUnit struct {
	name  string
	bytes uint64
}

// sizeUnits lists binary units before decimal ones, largest first, which is
// the order String prefers when two spellings are equally short.
func sizeUnits() [13]sizeUnit {
	return [13]sizeUnit{
		{"EiB", EiB}, {"PiB", PiB}, {"TiB", TiB}, {"GiB", GiB}, {"MiB", MiB}, {"KiB", KiB},
		{"EB", EB}, {"PB", PB}, {"TB", TB}, {"GB", GB}, {"MB", MB}, {"KB", KB},
		{"B", 1},
	}
}

// ParseSize reads a byte count with an optional unit: "40GiB", "512MiB",
// "1.5GiB", "80GB", "4096", "4096B". Units are case-sensitive (KiB, MiB, GiB,
// TiB, PiB, EiB, KB, MB, GB, TB, PB, EB, B) so that "Mb" is never taken for
// megabytes; one space may separate number and unit. A fraction must come
// to a whole number of bytes.
func ParseSize(s string) (Size, error) {
	orig := s
	if s == "" {
		return 0, fmt.Errorf("%w: empty", ErrBadSize)
	}
	if s[0] == '-' {
		return 0, fmt.Errorf("%w %q: must not be negative", ErrBadSize, orig)
	}
	whole, frac, rest, ok := splitNumber(s)
	if !ok {
		return 0, fmt.Errorf("%w %q: want a number with an optional unit, such as 40GiB or 80GB", ErrBadSize, orig)
	}
	rest = strings.TrimPrefix(rest, " ")
	unit := uint64(1)
	if rest != "" {
		unit = 0
		for _, u := range sizeUnits() {
			if rest == u.name {
				unit = u.bytes
				break
			}
		}
		if unit == 0 {
			return 0, fmt.Errorf("%w %q: unknown unit %q (want B, KiB, MiB, GiB, TiB, PiB, EiB, KB, MB, GB, TB, PB or EB)", ErrBadSize, orig, rest)
		}
	}
	v, exact, ok := scaleDecimal(whole, frac, unit)
	if !ok {
		return 0, fmt.Errorf("%w %q: too large", ErrBadSize, orig)
	}
	if !exact {
		return 0, fmt.Errorf("%w %q: not a whole number of bytes", ErrBadSize, orig)
	}
	return Size(v), nil
}

// String writes the shortest exact spelling ParseSize reads back: "40GiB",
// "80GB", "1536MiB", "0B".
func (s Size) String() string {
	best := strconv.FormatUint(uint64(s), 10) + "B"
	if s == 0 {
		return best
	}
	for _, u := range sizeUnits() {
		if uint64(s)%u.bytes != 0 {
			continue
		}
		c := strconv.FormatUint(uint64(s)/u.bytes, 10) + u.name
		if len(c) < len(best) {
			best = c
		}
	}
	return best
}

// MarshalText implements encoding.TextMarshaler.
func (s Size) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// UnmarshalText implements encoding.TextUnmarshaler.
func (s *Size) UnmarshalText(b []byte) error {
	v, err := ParseSize(string(b))
	if err != nil {
		return err
	}
	*s = v
	return nil
}

// MarshalJSON writes the size as a string such as "40GiB".
func (s Size) MarshalJSON() ([]byte, error) { return json.Marshal(s.String()) }

// UnmarshalJSON reads a string such as "40GiB", or a plain JSON integer of
// bytes, which is unambiguous and what other tools tend to write.
func (s *Size) UnmarshalJSON(b []byte) error {
	var str string
	if err := json.Unmarshal(b, &str); err != nil {
		var n json.Number
		if json.Unmarshal(b, &n) != nil {
			return fmt.Errorf("%w: want a string such as \"40GiB\" or a byte count", ErrBadSize)
		}
		str = n.String()
	}
	return s.UnmarshalText([]byte(str))
}

// MarshalYAML writes the size as a string such as 40GiB.
func (s Size) MarshalYAML() (any, error) { return s.String(), nil }

// UnmarshalYAML reads a scalar such as 40GiB or a plain byte count.
func (s *Size) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.ScalarNode {
		return fmt.Errorf("%w: want a scalar such as 40GiB", ErrBadSize)
	}
	return s.UnmarshalText([]byte(n.Value))
}
