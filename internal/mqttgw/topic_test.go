package mqttgw

import (
	"errors"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/petrelmq/petrel/address"
)

func TestTopicMapping(t *testing.T) {
	for _, tc := range []struct{ mqtt, petrel string }{
		{"a/b/c", "a.b.c"},
		{"orders/eu_west", "orders.eu_west"},
		{"a.b", "a_2Eb"},
		{"/a", "_.a"},
		{"a//b/", "a._.b._"},
		{"_", "_5F"},
		{"x/_2E", "x._5F2E"},
		{"-a/b-c", "_2Da.b-c"},
		{"h é", "h_20_C3_A9"},
		{"a_b_C", "a_b_C"},
		{"sensor 1/temp.c", "sensor_201.temp_2Ec"},
	} {
		got, err := TopicToPetrel(tc.mqtt)
		if err != nil || got != tc.petrel {
			t.Errorf("TopicToPetrel(%q) = %q, %v; want %q", tc.mqtt, got, err, tc.petrel)
			continue
		}
		back, err := TopicFromPetrel(got)
		if err != nil || back != tc.mqtt {
			t.Errorf("TopicFromPetrel(%q) = %q, %v; want %q", got, back, err, tc.mqtt)
		}
	}
}

func TestFilterMapping(t *testing.T) {
	for _, tc := range []struct{ mqtt, petrel string }{
		{"a/+/c", "a.*.c"},
		{"a/#", "a.#"},
		{"#", "#"},
		{"+", "*"},
		{"+/+", "*.*"},
		{"a.b/#", "a_2Eb.#"},
		{"/+", "_.*"},
	} {
		got, err := FilterToPetrel(tc.mqtt)
		if err != nil || got != tc.petrel {
			t.Errorf("FilterToPetrel(%q) = %q, %v; want %q", tc.mqtt, got, err, tc.petrel)
		}
	}
}

func TestTopicRefused(t *testing.T) {
	for _, s := range []string{"", "$SYS/x", "a/+", "a/#", "a\x00b", strings.Repeat("é", 30)} {
		if _, err := TopicToPetrel(s); !errors.Is(err, ErrTopic) {
			t.Errorf("TopicToPetrel(%q) = %v; want ErrTopic", s, err)
		}
	}
	for _, s := range []string{"a/#/b", "a+/b", "a/b#", "$share/g/x", ""} {
		if _, err := FilterToPetrel(s); !errors.Is(err, ErrTopic) {
			t.Errorf("FilterToPetrel(%q) = %v; want ErrTopic", s, err)
		}
	}
	for _, s := range []string{"a._2F", "a._00", "_FF", "_24SYS"} {
		if _, err := TopicFromPetrel(s); !errors.Is(err, ErrTopic) {
			t.Errorf("TopicFromPetrel(%q) = %v; want ErrTopic", s, err)
		}
	}
}

// FuzzTopicRoundTrip: every MQTT topic the mapping takes comes back as
// itself, is a valid Petrel topic, and its filter form matches it; every
// Petrel topic maps to an MQTT topic that maps to a Petrel name that
// decodes the same.
func FuzzTopicRoundTrip(f *testing.F) {
	for _, s := range []string{"a/b/c", "a.b", "/", "_", "_2E", "x/_5F/y", "-", "é/ü", "a//b", "a_5F", "orders.eu_west"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if p, err := TopicToPetrel(s); err == nil {
			if address.ValidTopic(p) != nil {
				t.Fatalf("TopicToPetrel(%q) = %q, not a petrel topic", s, p)
			}
			back, err := TopicFromPetrel(p)
			if err != nil || back != s {
				t.Fatalf("round trip %q -> %q -> %q, %v", s, p, back, err)
			}
			pat, err := FilterToPetrel(s)
			if err != nil || pat != p {
				t.Fatalf("FilterToPetrel(%q) = %q, %v; want %q", s, pat, err, p)
			}
		} else if !errors.Is(err, ErrTopic) {
			t.Fatalf("TopicToPetrel(%q): %v does not wrap ErrTopic", s, err)
		}
		if p, err := FilterToPetrel(s); err == nil {
			if _, err := address.ParsePattern(p); err != nil {
				t.Fatalf("FilterToPetrel(%q) = %q: %v", s, p, err)
			}
		}
		if address.ValidTopic(s) == nil {
			m, err := TopicFromPetrel(s)
			if err != nil {
				return
			}
			if !utf8.ValidString(m) {
				t.Fatalf("TopicFromPetrel(%q) = %q, not UTF-8", s, m)
			}
			p2, err := TopicToPetrel(m)
			if err != nil {
				return // too long once escaped canonically
			}
			m2, err := TopicFromPetrel(p2)
			if err != nil || m2 != m {
				t.Fatalf("petrel %q -> %q -> %q -> %q, %v", s, m, p2, m2, err)
			}
		}
	})
}

// A connection's memo maps the topic it saw last without mapping it again,
// and a new topic, or a bad one, as TopicToPetrel does.
func TestTopicMemo(t *testing.T) {
	var m topicMemo
	for _, tc := range []struct{ in, want string }{
		{"a/b", "a.b"}, {"a/b", "a.b"}, {"a/c", "a.c"}, {"a/+", ""}, {"a/c", "a.c"}, {"", ""}, {"a/b", "a.b"},
	} {
		got, err := m.toPetrel(tc.in)
		want, wantErr := TopicToPetrel(tc.in)
		if got != want || (err == nil) != (wantErr == nil) || got != tc.want {
			t.Fatalf("%q: %q, %v; want %q, %v", tc.in, got, err, want, wantErr)
		}
	}
	if m.mqtt != "a/b" || m.petrel != "a.b" {
		t.Fatalf("memo holds %q -> %q, want the last good topic", m.mqtt, m.petrel)
	}
	var none *topicMemo
	if got, err := none.toPetrel("x/y"); got != "x.y" || err != nil {
		t.Fatalf("nil memo: %q, %v", got, err)
	}
}
