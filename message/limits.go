package message

import "math"

// Default limits. They bound what one message may cost a node in memory:
// with the defaults a decoded message holds at most about 8 MiB of body,
// 4 MiB of properties and a few tens of KiB of header strings.
const (
	defaultMaxBody          = 8 << 20
	defaultMaxProperties    = 64
	defaultMaxPropertyBytes = 64 << 10
	defaultMaxHeaderString  = 4096
)

// What the wire format can carry at all (see codec.go): strings and keys
// have uint16 lengths, bytes and string values and the body uint32 lengths,
// the property count is a uint16.
const (
	wireMaxString = math.MaxUint16
	wireMaxCount  = math.MaxUint16
	wireMaxLen    = math.MaxUint32
)

// Limits bound the size of a message. Decode checks every declared length
// against them before it allocates, so a peer cannot make a node allocate
// more than the limits allow, whatever it sends. Validate applies the same
// limits to a message about to be sent.
//
// A field that is zero (or negative) means the default. A field above what
// the wire format can carry is lowered to that.
type Limits struct {
	MaxBody          int // bytes of Body; default 8 MiB
	MaxProperties    int // count of application properties; default 64
	MaxPropertyBytes int // key+value bytes of one property; default 64 KiB
	MaxHeaderString  int // any header/kind-property string (destination, command, filenames, ...); default 4096
}

// DefaultLimits returns the limits used when none are configured.
func DefaultLimits() Limits {
	return Limits{
		MaxBody:          defaultMaxBody,
		MaxProperties:    defaultMaxProperties,
		MaxPropertyBytes: defaultMaxPropertyBytes,
		MaxHeaderString:  defaultMaxHeaderString,
	}
}

// effective returns l with defaults filled in and every field clamped to the
// wire format, so that a message within the result is always encodable.
func (l Limits) effective() Limits {
	return Limits{
		MaxBody:          clampLimit(l.MaxBody, defaultMaxBody, wireMaxLen),
		MaxProperties:    clampLimit(l.MaxProperties, defaultMaxProperties, wireMaxCount),
		MaxPropertyBytes: clampLimit(l.MaxPropertyBytes, defaultMaxPropertyBytes, wireMaxLen),
		MaxHeaderString:  clampLimit(l.MaxHeaderString, defaultMaxHeaderString, wireMaxString),
	}
}

// clampLimit works in int64 so that wireMaxLen also compiles where int is
// 32 bits (there the clamp never triggers).
func clampLimit(v, def int, wire int64) int {
	if v <= 0 {
		return def
	}
	return int(min(int64(v), wire))
}
