package mqttgw_test

import (
	"testing"
	"time"

	"github.com/eclipse/paho.golang/paho"

	"github.com/petrelmq/petrel/internal/petreltest"
	"github.com/petrelmq/petrel/queue"
)

// A QoS 1 PUBACK says the publish is stored: with a store that holds two
// messages and waits for space when full, the third publish gets no
// PUBACK until a consumer frees a place, and then it is in the
// subscription; with a store that refuses when full, it gets 0x97 and
// nothing of it is stored.
func TestPahoPubackOnlyOnceStored(t *testing.T) {
	for _, tc := range []struct {
		name   string
		onFull queue.FullPolicy
	}{{"block", queue.FullBlock}, {"error", queue.FullError}} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := baseConfig(t)
			cfg.Store = queue.Config{MaxMessages: 2, OnFull: tc.onFull}
			tn := openNode(t, cfg)
			all := tn.consumer("sensors.#", "all")
			c, _ := pahoClient(t, tn, &paho.Connect{ClientID: "full", CleanStart: true}, paho.ClientConfig{})
			for _, body := range []string{"one", "two"} {
				if _, err := publish(c, &paho.Publish{Topic: "sensors/a", QoS: 1, Payload: []byte(body)}); err != nil {
					t.Fatalf("publish %s: %v", body, err)
				}
			}
			type result struct {
				pr  *paho.PublishResponse
				err error
			}
			third := make(chan result, 1)
			go func() {
				pr, err := publish(c, &paho.Publish{Topic: "sensors/a", QoS: 1, Payload: []byte("three")})
				third <- result{pr, err}
			}()
			if tc.onFull == queue.FullError {
				r := <-third
				if r.pr == nil || r.pr.ReasonCode != 0x97 {
					t.Fatalf("third publish: %+v, %v; want PUBACK 0x97", r.pr, r.err)
				}
				if d := tn.depth("all"); d != 2 {
					t.Fatalf("subscription holds %d, want the two stored", d)
				}
				return
			}
			select {
			case r := <-third:
				t.Fatalf("PUBACK %+v, %v while the store is full", r.pr, r.err)
			case <-time.After(500 * time.Millisecond):
			}
			if err := nextDelivery(t, all).Ack(); err != nil {
				t.Fatal(err)
			}
			select {
			case r := <-third:
				if r.err != nil || r.pr.ReasonCode != 0 {
					t.Fatalf("third publish once there is space: %+v, %v", r.pr, r.err)
				}
			case <-time.After(petreltest.Patience):
				t.Fatal("no PUBACK once a place was freed")
			}
			var bodies []string
			for range 2 {
				d := nextDelivery(t, all)
				bodies = append(bodies, string(d.Body))
				_ = d.Ack()
			}
			if bodies[0] != "two" || bodies[1] != "three" {
				t.Fatalf("subscription then held %q, want two and three", bodies)
			}
		})
	}
}
