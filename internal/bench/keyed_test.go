package bench

import (
	"strings"
	"testing"

	"github.com/petrelmq/petrel/message"
)

// KeyedDiffers finds a change anywhere in the message, not only in the
// key its body starts with.
func TestKeyedDiffers(t *testing.T) {
	const key = "i0-3-17"
	sent := func() *message.Message {
		m := &message.Message{Kind: message.KindData, Priority: 3, Body: keyedBody(key, 64)}
		m.Data.DataType = "bench"
		m.Properties.Set(sentNsProperty, message.Int64(1))
		return m
	}
	if d := KeyedDiffers(key, sent(), 64); d != "" {
		t.Fatalf("the message as sent differs: %s", d)
	}
	withHops := sent()
	withHops.Properties.Set("petrel.hops", message.String("n1"))
	if d := KeyedDiffers(key, withHops, 64); d != "" {
		t.Fatalf("a property the nodes add counts as a difference: %s", d)
	}
	cases := map[string]func(m *message.Message){
		"body tail":      func(m *message.Message) { m.Body[40] = 'x' },
		"body length":    func(m *message.Message) { m.Body = m.Body[:60] },
		"priority":       func(m *message.Message) { m.Priority = 4 },
		"data type":      func(m *message.Message) { m.Data.DataType = "other" },
		"encoding":       func(m *message.Message) { m.Data.Encoding = "json" },
		"extra property": func(m *message.Message) { m.Properties.Set("x", message.Int16(1)) },
		"property value": func(m *message.Message) { m.Properties.Set(sentNsProperty, message.Int64(0)) },
		"property type":  func(m *message.Message) { m.Properties.Set(sentNsProperty, message.Int32(5)) },
	}
	for name, change := range cases {
		m := sent()
		change(m)
		if d := KeyedDiffers(key, m, 64); d == "" {
			t.Errorf("%s changed, KeyedDiffers saw nothing", name)
		}
	}
	if d := KeyedDiffers("nokey", sent(), 64); !strings.Contains(d, "is not") {
		t.Errorf("a malformed key: %q", d)
	}
}
