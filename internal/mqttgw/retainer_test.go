package mqttgw_test

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/eclipse/paho.golang/packets"
	"github.com/eclipse/paho.golang/paho"

	"github.com/petrelmq/petrel/internal/petreltest/mqttraw"
)

// TestPahoRetainedPublishesShareCommits: 20 goroutines of one paho
// client publish 300 retained messages of QoS 1, then another client
// writes 3,000 retained publishes of QoS 0 (two values for each of 1,500
// topics) and a SUBSCRIBE at once, without waiting for anything. It gets
// every message back, each once and the latest of its topic: a
// subscription waits for the retained messages handed over before it.
// They took fewer transactions than messages, and a restart keeps them
// all. Before, each retained message was a transaction of its own, and
// one client stored about a thousand a second.
func TestPahoRetainedPublishesShareCommits(t *testing.T) {
	const qos0, qos1, workers = 1500, 300, 20
	cfg := baseConfig(t)
	cfg.Admin.Listen = "127.0.0.1:0"
	tn := openNode(t, cfg)
	c, _ := pahoClient(t, tn, &paho.Connect{ClientID: "states", CleanStart: true}, paho.ClientConfig{})
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < qos1; i += workers {
				pr, err := publish(c, &paho.Publish{Topic: fmt.Sprintf("t/q1/%d", i), QoS: 1, Retain: true, Payload: []byte("v")})
				if err != nil || pr == nil || pr.ReasonCode != 0 {
					errs <- fmt.Errorf("t/q1/%d: %+v %v", i, pr, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}

	raw, _ := mqttraw.Session(t, tn.MQTTAddr(), "states0", true)
	defer raw.Close()
	for i := range qos0 {
		// The first value of each topic, replaced at once by the second.
		for _, v := range []string{"old", "v"} {
			raw.Write(&packets.Publish{Topic: fmt.Sprintf("t/q0/%d", i), Retain: true, Payload: []byte(v)})
		}
	}
	raw.Write(&packets.Subscribe{PacketID: 1, Subscriptions: []packets.SubOptions{{Topic: "t/q0/#"}, {Topic: "t/q1/#"}}})
	seen := map[string]bool{}
	for len(seen) < qos0+qos1 {
		cp := raw.Read()
		p, ok := cp.Content.(*packets.Publish)
		if !ok {
			continue // the SUBACK
		}
		if seen[p.Topic] || string(p.Payload) != "v" || !p.Retain {
			t.Fatalf("%s %q retain %v (seen before: %v)", p.Topic, p.Payload, p.Retain, seen[p.Topic])
		}
		seen[p.Topic] = true
	}
	st := tn.Status().MQTT
	if st.Retained != qos0+qos1 {
		t.Fatalf("retained %d, want %d", st.Retained, qos0+qos1)
	}
	t.Logf("%d retained publishes in %d transactions", 2*qos0+qos1, st.RetainedCommits)
	if st.RetainedCommits >= 2*qos0+qos1 || st.RetainedCommits == 0 {
		t.Fatalf("%d transactions for %d retained publishes, want fewer", st.RetainedCommits, 2*qos0+qos1)
	}
	if m := metricsText(t, tn); !strings.Contains(m, fmt.Sprintf("petrel_mqtt_retained_commits_total %d\n", st.RetainedCommits)) {
		t.Fatalf("petrel_mqtt_retained_commits_total is not %d", st.RetainedCommits)
	}

	tn.restart()
	got := newReceived()
	c, _ = pahoClient(t, tn, &paho.Connect{ClientID: "states", CleanStart: true},
		paho.ClientConfig{OnPublishReceived: []func(paho.PublishReceived) (bool, error){got.handler}})
	subscribeCodes(t, c, "t/q0/#", "t/q1/#")
	seen = map[string]bool{}
	for range qos0 + qos1 {
		p := got.next(t)
		if seen[p.Topic] || string(p.Payload) != "v" || !p.Retain {
			t.Fatalf("after a restart: %s %q retain %v (seen before: %v)", p.Topic, p.Payload, p.Retain, seen[p.Topic])
		}
		seen[p.Topic] = true
	}
	got.none(t, 200*time.Millisecond)
}
