package mqttgw_test

import (
	"context"
	"strings"
	"testing"

	"github.com/eclipse/paho.golang/paho"

	petrel "github.com/petrelmq/petrel"
)

// TestPahoPublishToReservedNameSaysWhy: an MQTT 5 publish whose topic
// maps to a name reserved for the node's internal traffic ("_petrel/x"
// is "_petrel.x") is refused with Topic Name Invalid and the reason a
// Petrel sender is given, even in a space "#" that matches it word by
// word: the client was told "in no topic space" before. Nothing is
// stored. An empty level is no such case: "orders//eu" maps to the topic
// "orders._.eu", which is taken.
func TestPahoPublishToReservedNameSaysWhy(t *testing.T) {
	cfg := baseConfig(t)
	cfg.Topics = []petrel.TopicConfig{{Pattern: "#"}}
	tn := openNode(t, cfg)
	ctx := context.Background()
	all := tn.consumer("#", "all")
	c, _ := pahoClient(t, tn, &paho.Connect{ClientID: "pub", CleanStart: true}, paho.ClientConfig{})
	for _, topic := range []string{"_petrel/x", "_petrel/topics", "_petrel"} {
		for _, qos := range []byte{1, 2} {
			pr, err := publish(c, &paho.Publish{Topic: topic, QoS: qos, Payload: []byte("internal")})
			if pr == nil || pr.ReasonCode != 0x90 || pr.Properties == nil ||
				!strings.Contains(pr.Properties.ReasonString, `names whose first word is "_petrel" are reserved for the node's internal traffic`) {
				t.Errorf("publish to %s at QoS %d: %+v, %v; want 0x90 saying the name is reserved", topic, qos, pr, err)
			}
		}
	}
	if _, err := publish(c, &paho.Publish{Topic: "orders//eu", QoS: 1, Payload: []byte("fine")}); err != nil {
		t.Fatalf("publish to orders//eu: %v", err)
	}
	if err := tn.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if d := tn.depth("all"); d != 1 {
		t.Errorf("subscription holds %d, want the publish to orders//eu alone", d)
	}
	if d, err := all.Poll(); err != nil || d.Message.Destination != "orders._.eu" {
		t.Errorf("subscription's message: %+v, %v; want one for orders._.eu", d, err)
	}
	for _, q := range tn.QueueStats() {
		if strings.HasPrefix(q.Name, "_petrel") {
			t.Errorf("the node made the queue %q", q.Name)
		}
	}
}
