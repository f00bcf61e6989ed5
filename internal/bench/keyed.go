package bench

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/petrelmq/petrel/message"
)

// KeyedDiffers reports how m differs from the message `bench agent
// produce --keys-log --size size` sends under key ("<prefix>-<priority>-<n>"),
// or "" if it does not: the body (the key padded with spaces to size), the
// priority the key names, the data type of a data message, and the one
// property the producer sets, sent_ns. A checker compares whole messages with it, not only
// the key at the start of the body. Destination and kind are the caller's
// to check: they depend on where the producer sent.
func KeyedDiffers(key string, m *message.Message, size int) string {
	var diff []string
	parts := strings.Split(key, "-")
	if len(parts) != 3 {
		return fmt.Sprintf("key %q is not <prefix>-<priority>-<n>", key)
	}
	if want := keyedBody(key, size); string(m.Body) != string(want) {
		diff = append(diff, fmt.Sprintf("body %q, want %q", m.Body, want))
	}
	if p, err := strconv.Atoi(parts[1]); err != nil || int(m.Priority) != p {
		diff = append(diff, fmt.Sprintf("priority %d, the key says %q", m.Priority, parts[1]))
	}
	if m.Kind == message.KindData && m.Data != (message.DataProps{DataType: "bench"}) {
		diff = append(diff, fmt.Sprintf("data %+v, want data of type bench", m.Data))
	}
	// The nodes add properties of their own under "petrel." (the hops a
	// topic publish crossed, the relay that handed a file on); of the
	// others, the producer's, sent_ns must be the only one.
	own := 0
	for _, p := range m.Properties {
		if !strings.HasPrefix(p.Key, "petrel.") {
			own++
		}
	}
	if v, ok := m.Properties.Get(sentNsProperty); own != 1 || !ok || v.Type() != message.TypeInt64 || v.Int64() <= 0 {
		diff = append(diff, fmt.Sprintf("properties %v, want one %s time besides the nodes' petrel.*", m.Properties, sentNsProperty))
	}
	return strings.Join(diff, "; ")
}
