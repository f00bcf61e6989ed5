package mqttgw_test

import (
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/eclipse/paho.golang/paho"

	"github.com/petrelmq/petrel/internal/petreltest"
)

// Each MQTT topic filter is a Petrel subscription, so a queue: the
// node-wide max_auto_queues bounds them. With it at 3, an MQTT 5 client
// subscribes to new filters, one SUBSCRIBE each: three are granted (the
// node's own topic inbox takes none of the places), the fourth refused.
// Past the bound a new filter is answered with 0x97 quota exceeded, as
// past max_subscriptions, while a filter the client holds, in the same
// SUBSCRIBE, is granted; the node logs the reason, naming max_auto_queues;
// petrel_auto_create_refused_total counts each refusal. Nothing is made
// of a refused filter, and the filters held go on delivering.
func TestMaxAutoQueuesThroughMQTTSubscribe(t *testing.T) {
	cfg := baseConfig(t)
	cfg.Admin.Listen = "127.0.0.1:0"
	cfg.MaxAutoQueues = 3
	logs := &petreltest.SyncBuffer{}
	cfg.Logger = slog.New(slog.NewTextHandler(logs, nil))
	tn := openNode(t, cfg)
	r := newReceived()
	c, _ := pahoClient(t, tn, &paho.Connect{ClientID: "many", CleanStart: true},
		paho.ClientConfig{OnPublishReceived: []func(paho.PublishReceived) (bool, error){r.handler}})
	sub := func(filters ...string) []byte {
		t.Helper()
		return subscribeCodes(t, c, filters...)
	}
	const metric = "petrel_auto_create_refused_total"
	refusedCode := func(code byte) bool { return code == 0x97 }

	var held []string
	refusedAt := ""
	for i := range 4 {
		f := fmt.Sprintf("t/%d", i)
		code := sub(f)[0]
		if refusedCode(code) {
			refusedAt = f
			break
		}
		if code != 1 {
			t.Fatalf("subscribe %s within the bound: code %#x, want 1", f, code)
		}
		held = append(held, f)
	}
	if refusedAt == "" || len(held) != 3 {
		t.Fatalf("filters granted %v, then refused %q; want three granted, then a refusal (0x97)", held, refusedAt)
	}
	t.Logf("granted %v, then refused %s", held, refusedAt)
	subs := len(tn.Subscriptions())
	if subs != len(held) {
		t.Fatalf("node holds %d subscriptions for %d granted filters", subs, len(held))
	}
	// A held filter and a new one in one SUBSCRIBE: the first is granted
	// again, the second refused.
	if got := sub(held[0], "t/late"); got[0] != 1 || !refusedCode(got[1]) {
		t.Fatalf("subscribe %s (held) and t/late (new) past the bound: codes % x, want 1 then 0x97", held[0], got)
	}
	t.Logf("SUBACK past max_auto_queues: %#x", sub("t/later")[0])
	if n := len(tn.Subscriptions()); n != subs {
		t.Fatalf("subscriptions %d after the refusals, want still %d", n, subs)
	}
	if m := metricsText(t, tn); !strings.Contains(m, metric+" 3\n") {
		t.Fatalf("%s not 3 after three refusals:\n%s", metric, m)
	}
	petreltest.Eventually(t, "the refusal logged with its reason", func() bool {
		return strings.Contains(logs.String(), "mqtt subscription refused") && strings.Contains(logs.String(), "max_auto_queues")
	}, logs.String)

	// The filters held deliver; the refused ones deliver nothing.
	p, _ := pahoClient(t, tn, &paho.Connect{ClientID: "pub", CleanStart: true}, paho.ClientConfig{})
	for _, topic := range []string{refusedAt, "t/late", "t/later"} {
		if _, err := publish(p, &paho.Publish{Topic: topic, QoS: 1, Payload: []byte("refused filter")}); err != nil {
			t.Fatal(err)
		}
	}
	got := map[string]bool{}
	for _, f := range held {
		if _, err := publish(p, &paho.Publish{Topic: f, QoS: 1, Payload: []byte("held filter")}); err != nil {
			t.Fatal(err)
		}
	}
	for range held {
		m := r.next(t)
		if string(m.Payload) != "held filter" || got[m.Topic] {
			t.Fatalf("got %s %q (already %v), want one publish per held filter %v", m.Topic, m.Payload, got, held)
		}
		got[m.Topic] = true
	}
	r.none(t, 200*time.Millisecond)
}
