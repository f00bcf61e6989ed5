package petrel

import (
	"testing"

	"github.com/petrelmq/petrel/message"
)

// FuzzParseInterest feeds parseInterest the properties a neighbour sends:
// it must never panic, and what it accepts must be usable (a parsed
// pattern, a valid node, at least one valid hop).
func FuzzParseInterest(f *testing.F) {
	f.Add("subscribe", "orders.#", "b", "b,c", true)
	f.Add("unsubscribe", "orders.*.created", "b", "b", false)
	f.Add("subscribe", "", "", "", false)
	f.Add("drop", "#", "b", ",,", true)
	f.Fuzz(func(t *testing.T, op, pattern, node, hops string, durable bool) {
		m := &message.Message{Kind: message.KindData, Data: message.DataProps{DataType: interestType}}
		m.Properties.Set(propOp, message.String(op))
		m.Properties.Set(propPattern, message.String(pattern))
		m.Properties.Set(propNode, message.String(node))
		m.Properties.Set(propHops, message.String(hops))
		m.Properties.Set(propDurable, message.Bool(durable))
		im, err := parseInterest(m)
		if err != nil {
			return
		}
		if im.p.IsZero() || message.ValidName(im.node) != nil || len(im.hops) == 0 {
			t.Fatalf("accepted unusable interest %+v", im)
		}
		for _, h := range im.hops {
			if message.ValidName(h) != nil {
				t.Fatalf("accepted hop %q", h)
			}
		}
	})
}
