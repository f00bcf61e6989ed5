package conf

import (
	"fmt"
	"math"
	"math/big"
	"strings"
	"time"
)

// Size is a count of bytes. YAML may write it as a plain integer (1048576) or
// as a number with a unit ("1MiB", "64 KiB", "1.5GB", "512k"). Units are
// case-insensitive:
//
//	B                  1
//	K,  KiB, Ki        1024            (binary: K alone means KiB)
//	KB                 1000            (decimal, as disks are sold)
//	M,  MiB, Mi        1024²           MB  1000²
//	G,  GiB, Gi        1024³           GB  1000³
//	T,  TiB, Ti        1024⁴           TB  1000⁴
//	P,  PiB, Pi        1024⁵           PB  1000⁵
//
// A bare K, M, G, T or P is binary because that is what an operator writing
// "512k" for a buffer means. A fraction is allowed if the result is a whole
// number of bytes ("1.5KiB" is 1536, "0.5B" is an error). A size is never
// negative.
type Size int64

// sizeUnits maps a lower-cased unit to its multiplier.
var sizeUnits = map[string]int64{
	"": 1, "b": 1,
	"k": 1 << 10, "ki": 1 << 10, "kib": 1 << 10, "kb": 1e3,
	"m": 1 << 20, "mi": 1 << 20, "mib": 1 << 20, "mb": 1e6,
	"g": 1 << 30, "gi": 1 << 30, "gib": 1 << 30, "gb": 1e9,
	"t": 1 << 40, "ti": 1 << 40, "tib": 1 << 40, "tb": 1e12,
	"p": 1 << 50, "pi": 1 << 50, "pib": 1 << 50, "pb": 1e15,
}

// maxSizeText bounds the text ParseSize looks at, so that a hostile file with
// a million-digit number costs nothing to refuse.
const maxSizeText = 64

// ParseSize parses a size as written in the configuration file; see Size for
// the accepted forms.
func ParseSize(s string) (Size, error) {
	text := strings.TrimSpace(s)
	if strings.HasPrefix(text, "-") {
		return 0, reasonf(nil, "size %q is negative", s)
	}
	bad := reasonf(nil, "invalid size %q (want bytes, or a number and a unit such as 512KiB, 64MiB or 10GB)", s)
	if text == "" || len(text) > maxSizeText {
		return 0, bad
	}
	num, unit := splitNumber(text)
	mult, ok := sizeUnits[strings.ToLower(strings.TrimSpace(unit))]
	if !ok || num == "" || num == "." {
		return 0, bad
	}
	r, ok := new(big.Rat).SetString(num)
	if !ok {
		return 0, bad
	}
	r.Mul(r, new(big.Rat).SetInt64(mult))
	if !r.IsInt() {
		return 0, reasonf(nil, "size %q is not a whole number of bytes", s)
	}
	n := r.Num()
	if !n.IsInt64() {
		return 0, reasonf(nil, "size %q is too large (the most is %d bytes)", s, int64(math.MaxInt64))
	}
	return Size(n.Int64()), nil
}

// splitNumber splits "1.5 GiB" into "1.5" and " GiB". Only digits and one dot
// count as the number, so big.Rat never sees its other syntaxes ("1/2",
// "1e9").
func splitNumber(s string) (num, unit string) {
	dot := false
	for i, c := range s {
		switch {
		case c >= '0' && c <= '9':
		case c == '.' && !dot:
			dot = true
		default:
			return s[:i], s[i:]
		}
	}
	return s, ""
}

// String returns the size in the unit that gives the smallest whole number,
// so ParseSize reads back the same value: 1048576 is "1MiB", 10000000000 is
// "10GB", 1536 is "1536B".
func (s Size) String() string {
	best, unit := int64(s), "B"
	if s > 0 {
		for _, u := range []struct {
			name string
			mult int64
		}{
			{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"TiB", 1 << 40}, {"PiB", 1 << 50},
			{"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"TB", 1e12}, {"PB", 1e15},
		} {
			if int64(s)%u.mult == 0 && int64(s)/u.mult < best {
				best, unit = int64(s)/u.mult, u.name
			}
		}
	}
	return fmt.Sprintf("%d%s", best, unit)
}

// UnmarshalText parses a size, so Size also works with flag.TextVar and with
// text-based decoders.
func (s *Size) UnmarshalText(b []byte) error {
	v, err := ParseSize(string(b))
	if err != nil {
		return err
	}
	*s = v
	return nil
}

// MarshalText writes the size as String does; ParseSize reads it back.
func (s Size) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// Duration is a time.Duration that YAML writes as a Go duration string:
// "30s", "1m30s", "250ms", "24h". A bare number is refused, because "30"
// could mean seconds or milliseconds and guessing wrong is silent.
type Duration time.Duration

// String returns the duration as time.Duration does ("1m30s").
func (d Duration) String() string { return time.Duration(d).String() }

// UnmarshalText parses a Go duration string.
func (d *Duration) UnmarshalText(b []byte) error {
	s := string(b)
	v, err := time.ParseDuration(strings.TrimSpace(s))
	if err != nil {
		return reasonf(err, "invalid duration %q (want a number and a unit, such as 500ms, 30s, 5m or 1h30m)", s)
	}
	*d = Duration(v)
	return nil
}

// MarshalText writes the duration as String does; UnmarshalText reads it
// back.
func (d Duration) MarshalText() ([]byte, error) { return []byte(d.String()), nil }
