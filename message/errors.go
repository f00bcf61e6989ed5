package message

import "errors"

// Sentinel errors. Functions return them wrapped with what was wrong and
// where, for example `property "color": value of 70000 bytes exceeds limit
// 65536: property too large`. Test for them with errors.Is.
var (
	// ErrPriority is returned when a priority is above MaxPriority, by
	// Validate, AppendBinary and Decode.
	ErrPriority = errors.New("priority out of range 0-9")

	// ErrDestination is returned when a destination, address name or node
	// name does not follow the name syntax (see ValidName).
	ErrDestination = errors.New("invalid destination")

	// ErrKind is returned when a kind is not command, data or file: by
	// ParseKind, Validate, AppendBinary and Decode.
	ErrKind = errors.New("unknown message kind")

	// ErrTooManyProperties is returned when a message holds more application
	// properties than Limits.MaxProperties (or than the codec's 65535).
	ErrTooManyProperties = errors.New("too many properties")

	// ErrPropertyTooLarge is returned when one property's key plus value is
	// longer than Limits.MaxPropertyBytes, or its key is longer than 65535
	// bytes.
	ErrPropertyTooLarge = errors.New("property too large")

	// ErrBodyTooLarge is returned when a body is longer than Limits.MaxBody
	// (or than the codec's 4 GiB - 1).
	ErrBodyTooLarge = errors.New("body too large")

	// ErrHeaderTooLarge is returned when the destination or a kind property
	// string is longer than Limits.MaxHeaderString (or than the codec's
	// 65535).
	ErrHeaderTooLarge = errors.New("header string too large")

	// ErrTruncated is returned by Decode when the input ends before a field
	// it declares, including when a declared length exceeds what remains.
	ErrTruncated = errors.New("message truncated")

	// ErrVersion is returned by Decode when the leading version byte is not
	// CodecVersion.
	ErrVersion = errors.New("unsupported codec version")

	// ErrCorrupt is returned by Decode when the input is not a canonical
	// encoding: unknown flag bits, a timestamp without its flag, a bool that
	// is neither 0 nor 1, or bytes left over after the body.
	ErrCorrupt = errors.New("corrupt message encoding")

	// ErrDuplicateProperty is returned when two application properties share
	// a key, by Validate, AppendBinary and Decode.
	ErrDuplicateProperty = errors.New("duplicate property key")

	// ErrPropertyType is returned when a property type is unknown (including
	// the zero Value), or when ParseValue cannot read a value as its type.
	ErrPropertyType = errors.New("invalid property type or value")

	// ErrTTL is returned by Validate when the TTL is negative.
	ErrTTL = errors.New("invalid ttl")

	// ErrTimestamp is returned by Validate and AppendBinary when the
	// timestamp is outside the years 1678 to 2262 that the codec carries.
	ErrTimestamp = errors.New("timestamp out of range")

	// ErrPropertyKey is returned by Validate when a property key is empty or
	// not valid UTF-8.
	ErrPropertyKey = errors.New("invalid property key")

	// ErrNodeID is returned by ParseNodeID when the text is not 32 hex
	// digits.
	ErrNodeID = errors.New("invalid node id")
)
