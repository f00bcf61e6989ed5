package petrel

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/petrelmq/petrel/internal/mqttgw"
)

// TestMQTTPublishRefusalSaysWhy: the MQTT gateway's publish that is no
// topic is refused with Topic Name Invalid and the reason a Petrel sender
// to the same name is given, not always "in no topic space". The
// gateway's mapping makes a valid topic name of every MQTT topic it takes
// ("orders//eu" is "orders._.eu"), so a name inside a space that is no
// topic name is given to the backend here.
func TestMQTTPublishRefusalSaysWhy(t *testing.T) {
	n, err := Open(context.Background(), Config{Name: "m", DataDir: t.TempDir(), Logger: quietLog,
		Topics: []TopicConfig{{Pattern: "orders.#"}}})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	b := mqttBackend{n}
	for _, tc := range []struct{ dest, want string }{
		{"orders..eu", `"orders..eu" is an invalid topic name inside topic space "orders.#"`},
		{"orders.-x", `"orders.-x" is an invalid topic name inside topic space "orders.#"`},
		{"_petrel.x", `names whose first word is "_petrel" are reserved`},
		{"billing.eu", `topic "billing.eu" is in no topic space of node m`},
	} {
		_, err := b.Publish(context.Background(), b.NewMessage(tc.dest), mqttgw.Conn{Identity: "c", ClientID: "c"}, "")
		var r *mqttgw.Refusal
		if !errors.As(err, &r) || r.Code != mqttgw.CodeTopicNameBad || !strings.Contains(r.Reason, tc.want) {
			t.Errorf("publish to %q: %v, want Topic Name Invalid saying %s", tc.dest, err, tc.want)
		}
		if _, ok := n.QueueStat(tc.dest); ok {
			t.Errorf("the node made the queue %q", tc.dest)
		}
	}
}
