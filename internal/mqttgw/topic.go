package mqttgw

import (
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/petrelmq/petrel/address"
)

// Mapping MQTT topics to Petrel topics.
//
// An MQTT topic is '/'-separated levels of any UTF-8 but NUL, '+' and
// '#', and a level may be empty. A Petrel topic is '.'-separated words of
// letters, digits, '_' and '-', none empty, none starting with '-', at
// most 128 bytes. So each level is escaped into a word:
//
//	MQTT level            Petrel word
//	letters, digits, '-'  themselves ('-' first in a level: _2D)
//	'_'                   itself, unless "_" + two upper-case hex digits
//	                      follow it in the level, or the level is "_":
//	                      then _5F
//	any other byte        '_' and its two upper-case hex digits: '.' is _2E,
//	                      ' ' is _20, 'é' (C3 A9) is _C3_A9
//	the empty level       _
//
// and the levels are joined with '.'. In a filter, '+' is '*' and '#' is
// '#'. Decoding turns "_" alone into the empty level and every '_' with
// two upper-case hex digits into that byte; any other '_' is itself. So
// every MQTT topic maps to one Petrel name and back to itself
// (FuzzTopicRoundTrip), and every Petrel topic maps to an MQTT topic, so
// a Petrel producer's publish reaches MQTT subscribers ("orders.eu_west"
// is "orders/eu_west"). A name whose escaped form passes 128 bytes, or
// that starts with '$' (the broker's own topics, such as $SYS), is
// refused.

// isSys reports whether an MQTT topic or filter is one of the broker's
// $SYS topics, which mochi publishes and delivers itself.
func isSys(topic string) bool { return topic == "$SYS" || strings.HasPrefix(topic, "$SYS/") }

// ErrTopic is returned when an MQTT topic name or filter has no Petrel
// form: empty, '$'-prefixed, malformed, or too long once escaped.
var ErrTopic = errors.New("mqtt topic not mappable to a petrel topic")

const hexDigits = "0123456789ABCDEF"

// TopicToPetrel maps an MQTT topic name (no wildcards) to a Petrel topic.
func TopicToPetrel(topic string) (string, error) {
	if err := checkMQTT(topic); err != nil {
		return "", err
	}
	if strings.ContainsAny(topic, "+#") {
		return "", fmt.Errorf("topic name %q holds a wildcard: %w", clip(topic), ErrTopic)
	}
	return joinLevels(topic, false)
}

// topicMemo maps MQTT topic names to Petrel's, remembering the last: a
// device publishes to the same topic again and again, and mapping it
// anew, checks, split and join, was 3% of the node's CPU under a QoS 1
// load. A nil memo maps every time.
type topicMemo struct {
	mqtt, petrel string
}

func (t *topicMemo) toPetrel(topic string) (string, error) {
	if t == nil {
		return TopicToPetrel(topic)
	}
	if t.mqtt != "" && topic == t.mqtt {
		return t.petrel, nil
	}
	p, err := TopicToPetrel(topic)
	if err == nil {
		t.mqtt, t.petrel = topic, p
	}
	return p, err
}

// FilterToPetrel maps an MQTT topic filter to a Petrel pattern.
func FilterToPetrel(filter string) (string, error) {
	if err := checkMQTT(filter); err != nil {
		return "", err
	}
	if err := checkFilter(filter); err != nil {
		return "", err
	}
	return joinLevels(filter, true)
}

// errWildcard marks a filter whose wildcards break MQTT-4.7.1.
var errWildcard = fmt.Errorf("'+' and '#' must be whole levels, '#' the last: %w", ErrTopic)

func checkFilter(filter string) error {
	levels := strings.Split(filter, "/")
	for i, l := range levels {
		if strings.ContainsAny(l, "+#") && len(l) > 1 || l == "#" && i != len(levels)-1 {
			return fmt.Errorf("topic filter %q: %w", clip(filter), errWildcard)
		}
	}
	return nil
}

func checkMQTT(s string) error {
	switch {
	case s == "":
		return fmt.Errorf("empty topic: %w", ErrTopic)
	case s[0] == '$':
		return fmt.Errorf("topic %q: topics starting with '$' are the broker's own: %w", clip(s), ErrTopic)
	case strings.IndexByte(s, 0) >= 0 || !utf8.ValidString(s):
		return fmt.Errorf("topic %q holds NUL or is not UTF-8: %w", clip(s), ErrTopic)
	}
	return nil
}

func joinLevels(s string, filter bool) (string, error) {
	var b strings.Builder
	for i, l := range strings.Split(s, "/") {
		if i > 0 {
			b.WriteByte('.')
		}
		switch {
		case filter && l == "+":
			b.WriteByte('*')
		case filter && l == "#":
			b.WriteByte('#')
		default:
			escapeLevel(&b, l)
		}
		if b.Len() > maxPetrelTopic {
			return "", fmt.Errorf("topic %q is longer than %d bytes once escaped for petrel: %w", clip(s), maxPetrelTopic, ErrTopic)
		}
	}
	out := b.String()
	if filter {
		if _, err := address.ParsePattern(out); err != nil {
			return "", fmt.Errorf("topic filter %q: %w: %w", clip(s), ErrTopic, err)
		}
	} else if err := address.ValidTopic(out); err != nil {
		return "", fmt.Errorf("topic %q: %w: %w", clip(s), ErrTopic, err)
	}
	return out, nil
}

// maxPetrelTopic is address's bound on topic names and patterns.
const maxPetrelTopic = 128

func escapeLevel(b *strings.Builder, l string) {
	if l == "" {
		b.WriteByte('_')
		return
	}
	if l == "_" {
		b.WriteString("_5F")
		return
	}
	for i := 0; i < len(l); i++ {
		c := l[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
			b.WriteByte(c)
		case c == '-' && i > 0:
			b.WriteByte(c)
		case c == '_' && !(i+2 < len(l) && isHex(l[i+1]) && isHex(l[i+2])):
			b.WriteByte(c)
		default:
			b.WriteByte('_')
			b.WriteByte(hexDigits[c>>4])
			b.WriteByte(hexDigits[c&15])
		}
	}
}

func isHex(c byte) bool { return c >= '0' && c <= '9' || c >= 'A' && c <= 'F' }

func unhex(c byte) byte {
	if c <= '9' {
		return c - '0'
	}
	return c - 'A' + 10
}

// TopicFromPetrel maps a Petrel topic name to the MQTT topic delivered to
// subscribers. It refuses only what is not a Petrel topic name.
func TopicFromPetrel(name string) (string, error) {
	if err := address.ValidTopic(name); err != nil {
		return "", fmt.Errorf("%w: %w", ErrTopic, err)
	}
	var b strings.Builder
	for i, w := range strings.Split(name, ".") {
		if i > 0 {
			b.WriteByte('/')
		}
		if w == "_" {
			continue
		}
		for j := 0; j < len(w); j++ {
			if w[j] == '_' && j+2 < len(w) && isHex(w[j+1]) && isHex(w[j+2]) {
				c := unhex(w[j+1])<<4 | unhex(w[j+2])
				if c == 0 || c == '/' || c == '+' || c == '#' {
					return "", fmt.Errorf("topic %q escapes %q, which an MQTT topic level cannot hold: %w", name, c, ErrTopic)
				}
				b.WriteByte(c)
				j += 2
				continue
			}
			b.WriteByte(w[j])
		}
	}
	out := b.String()
	if out == "" || !utf8.ValidString(out) || out[0] == '$' {
		return "", fmt.Errorf("topic %q is not valid UTF-8 once unescaped, or starts with '$': %w", name, ErrTopic)
	}
	return out, nil
}

func clip(s string) string {
	if len(s) > 64 {
		return s[:64] + "..."
	}
	return s
}
