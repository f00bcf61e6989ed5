package message

import (
	"fmt"
	"unicode/utf8"
)

// Validate checks m against the rules a message must meet before a node
// accepts it for sending: a known kind, a priority of 0 to 9, a destination
// that parses, a TTL that is not negative, a timestamp the codec carries,
// header strings, properties and body within lim (zero fields mean the
// defaults), and property keys that are non-empty, valid UTF-8 and unique,
// with values of a known type.
//
// A message that passes can always be encoded. Validate reports the first
// problem it finds; errors wrap the matching sentinel (ErrKind, ErrPriority,
// ErrDestination, ErrHeaderTooLarge, ErrTooManyProperties,
// ErrPropertyTooLarge, ErrPropertyType, ErrDuplicateProperty,
// ErrBodyTooLarge). A negative TTL, an empty or non-UTF-8 key and an
// unencodable timestamp have no sentinel of their own.
func (m *Message) Validate(lim Limits) error {
	lim = lim.effective()
	if !m.Kind.valid() {
		return fmt.Errorf("kind %s: %w", m.Kind, ErrKind)
	}
	if m.Priority > MaxPriority {
		return fmt.Errorf("priority %d: %w", m.Priority, ErrPriority)
	}
	if err := checkHeaderString("destination", m.Destination, lim); err != nil {
		return err
	}
	if _, _, err := ParseDestination(m.Destination); err != nil {
		return err
	}
	if m.TTL < 0 {
		return fmt.Errorf("ttl %v: negative; use 0 for a message that never expires: %w", m.TTL, ErrTTL)
	}
	if !encodableTime(m.Timestamp) {
		return fmt.Errorf("timestamp %v: outside the years 1678 to 2262 that the codec carries: %w", m.Timestamp, ErrTimestamp)
	}
	ptrs, nk := m.kindStrings()
	for i, p := range ptrs[:nk] {
		if err := checkHeaderString(kindFieldNames[m.Kind][i], *p, lim); err != nil {
			return err
		}
	}
	if err := m.Properties.validate(lim); err != nil {
		return err
	}
	if len(m.Body) > lim.MaxBody {
		return fmt.Errorf("body of %d bytes exceeds limit %d: %w", len(m.Body), lim.MaxBody, ErrBodyTooLarge)
	}
	return nil
}

func checkHeaderString(what, s string, lim Limits) error {
	if len(s) > lim.MaxHeaderString {
		return fmt.Errorf("%s of %d bytes exceeds limit %d: %w", what, len(s), lim.MaxHeaderString, ErrHeaderTooLarge)
	}
	return nil
}

// validate checks the properties against lim, which is already effective.
func (p Properties) validate(lim Limits) error {
	if len(p) > lim.MaxProperties {
		return fmt.Errorf("%d properties exceed limit %d: %w", len(p), lim.MaxProperties, ErrTooManyProperties)
	}
	for i := range p {
		if err := p[i].validate(i, lim); err != nil {
			return err
		}
	}
	if key, dup := p.duplicate(); dup {
		return fmt.Errorf("property %s: %w", clip(key), ErrDuplicateProperty)
	}
	return nil
}

func (q *Property) validate(i int, lim Limits) error {
	switch {
	case q.Key == "":
		return fmt.Errorf("property %d has an empty key; give every property a name: %w", i, ErrPropertyKey)
	case !utf8.ValidString(q.Key):
		return fmt.Errorf("property %s: key is not valid UTF-8: %w", clip(q.Key), ErrPropertyKey)
	case len(q.Key) > wireMaxString:
		return fmt.Errorf("property %s: key of %d bytes is longer than the codec's %d: %w",
			clip(q.Key), len(q.Key), wireMaxString, ErrPropertyTooLarge)
	case !q.Value.t.valid():
		return fmt.Errorf("property %s: %s: %w", clip(q.Key), q.Value.t, ErrPropertyType)
	}
	if n := len(q.Key) + q.Value.size(); n > lim.MaxPropertyBytes {
		return fmt.Errorf("property %s: key and value of %d bytes exceed limit %d: %w",
			clip(q.Key), n, lim.MaxPropertyBytes, ErrPropertyTooLarge)
	}
	return nil
}
