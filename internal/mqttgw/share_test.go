package mqttgw_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/eclipse/paho.golang/paho"

	petrel "github.com/petrelmq/petrel"
	"github.com/petrelmq/petrel/internal/petreltest"
)

// shareSubs returns the node's subscriptions of shared MQTT groups.
func shareSubs(tn *testNode) []petrel.SubscriptionInfo {
	var out []petrel.SubscriptionInfo
	for _, s := range tn.Subscriptions() {
		if strings.HasPrefix(s.Name, "mqtt-share.") {
			out = append(out, s)
		}
	}
	return out
}

func sendN(t *testing.T, tn *testNode, from, n int) {
	t.Helper()
	p := tn.Producer()
	for i := from; i < from+n; i++ {
		m := p.CreateDataMessage("t.jobs")
		m.Body = []byte(fmt.Sprintf("j-%d", i))
		if err := p.Send(context.Background(), m); err != nil {
			t.Fatal(err)
		}
	}
}

// $share/<group>/<filter> (MQTT 5 4.8.2): the members of a group compete
// for its messages, each delivered to one of them, while a plain
// subscription to the same filter gets them all; what a member had in
// flight when it went goes to another member; the group's Petrel
// subscription goes with its last clean member. Filters without a share
// name are refused with 0x8F, No Local on a shared one with 0x82.
func TestPahoSharedSubscription(t *testing.T) {
	tn := openNode(t, baseConfig(t))
	member := func(id string, rm uint16, manual bool) (*paho.Client, *received) {
		r := newReceived()
		c, _ := pahoClient(t, tn, &paho.Connect{ClientID: id, CleanStart: true, KeepAlive: 30,
			Properties: &paho.ConnectProperties{ReceiveMaximum: ptr(rm)}},
			paho.ClientConfig{EnableManualAcknowledgment: manual, OnPublishReceived: []func(paho.PublishReceived) (bool, error){r.handler}})
		subscribe(t, c, "$share/workers/t/jobs", 1)
		return c, r
	}
	all := newReceived()
	plain, _ := pahoClient(t, tn, &paho.Connect{ClientID: "plain", CleanStart: true, KeepAlive: 30},
		paho.ClientConfig{OnPublishReceived: []func(paho.PublishReceived) (bool, error){all.handler}})
	subscribe(t, plain, "t/jobs", 1)

	// w1 holds j-0, unacknowledged (receive maximum 1): the rest go to w2.
	w1, r1 := member("w1", 1, true)
	sendN(t, tn, 0, 1)
	if got := r1.next(t); string(got.Payload) != "j-0" {
		t.Fatalf("w1 got %q", got.Payload)
	}
	_, r2 := member("w2", 100, false)
	if subs := shareSubs(tn); len(subs) != 1 || subs[0].Consumers != 2 || !subs[0].Durable {
		t.Fatalf("group subscriptions %+v, want one durable with 2 consumers", subs)
	}
	sendN(t, tn, 1, 9)
	var got []string
	for range 9 {
		got = append(got, string(r2.next(t).Payload))
	}
	// w1 goes: its j-0 goes to w2, with DUP.
	w1.TerminateConnectionForTest()
	again := r2.next(t)
	if string(again.Payload) != "j-0" || !again.Duplicate() {
		t.Fatalf("w2 got %q dup=%v, want w1's j-0 again", again.Payload, again.Duplicate())
	}
	got = append(got, string(again.Payload))
	slices.Sort(got)
	want := []string{"j-0", "j-1", "j-2", "j-3", "j-4", "j-5", "j-6", "j-7", "j-8", "j-9"}
	if !slices.Equal(got, want) {
		t.Fatalf("w2 got %v", got)
	}
	r1.none(t, 100*time.Millisecond)
	for range 10 { // the plain subscription got every one
		all.next(t)
	}

	// Two members share the work: each message to one of them.
	w3, r3 := member("w3", 100, false)
	sendN(t, tn, 10, 40)
	seen := map[string]int{}
	n2, n3 := 0, 0
	for len(seen) < 40 {
		select {
		case p := <-r2.ch:
			seen[string(p.Payload)]++
			n2++
		case p := <-r3.ch:
			seen[string(p.Payload)]++
			n3++
		case <-time.After(petreltest.Patience):
			t.Fatalf("members got %d of 40", len(seen))
		}
	}
	r2.none(t, 200*time.Millisecond)
	r3.none(t, 0)
	if n2+n3 != 40 || n2 == 0 || n3 == 0 {
		t.Fatalf("w2 got %d, w3 %d: want 40 between them, some each", n2, n3)
	}
	t.Logf("40 messages shared: w2 %d, w3 %d", n2, n3)
	if st := tn.Status().MQTT; st.SharedGroups != 1 {
		t.Fatalf("shared groups %d", st.SharedGroups)
	}

	// The last clean member gone, the group's subscription goes.
	_ = w3.Disconnect(&paho.Disconnect{})
	<-w3.Done()
	petreltest.Eventually(t, "w3 gone", func() bool {
		subs := shareSubs(tn)
		return len(subs) == 1 && subs[0].Consumers == 1
	}, func() string { return fmt.Sprint(shareSubs(tn)) })
	tn.Close() // w2 too, with the node
	tn.open()
	if subs := shareSubs(tn); len(subs) != 0 || tn.Status().MQTT.SharedGroups != 0 {
		t.Fatalf("after its clean members went: %+v", subs)
	}

	c, _ := pahoClient(t, tn, &paho.Connect{ClientID: "bad", CleanStart: true}, paho.ClientConfig{})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	sa, err := c.Subscribe(ctx, &paho.Subscribe{Subscriptions: []paho.SubscribeOptions{
		{Topic: "$share//t/jobs", QoS: 1}, {Topic: "$share/g+/t/jobs", QoS: 1}, {Topic: "$share/g/t/jobs", QoS: 1, NoLocal: true},
		{Topic: "$share/g/orders/#", QoS: 1},
	}})
	if sa == nil {
		t.Fatalf("subscribe: %v", err)
	}
	if want := []byte{0x8F, 0x8F, 0x82, 0x87}; !slices.Equal(sa.Reasons, want) {
		t.Fatalf("SUBACK % x, want % x", sa.Reasons, want)
	}
}

// A member that unsubscribes completes what it has in flight
// (MQTT-3.10.4-3): its PUBACK afterwards settles the message, which goes
// to no other member. The group's subscription outlives the member's
// consumer, whose Close must not give the message back.
func TestPahoSharedUnsubscribeCompletesInFlight(t *testing.T) {
	tn := openNode(t, baseConfig(t))
	r1 := newReceived()
	w1, _ := pahoClient(t, tn, &paho.Connect{ClientID: "w1", CleanStart: true, KeepAlive: 30,
		Properties: &paho.ConnectProperties{ReceiveMaximum: ptr(uint16(1))}},
		paho.ClientConfig{EnableManualAcknowledgment: true, OnPublishReceived: []func(paho.PublishReceived) (bool, error){r1.handler}})
	subscribe(t, w1, "$share/workers/t/jobs", 1)
	sendN(t, tn, 0, 1)
	held := r1.next(t)
	if string(held.Payload) != "j-0" {
		t.Fatalf("w1 got %q", held.Payload)
	}
	r2 := newReceived()
	w2, _ := pahoClient(t, tn, &paho.Connect{ClientID: "w2", CleanStart: true, KeepAlive: 30},
		paho.ClientConfig{OnPublishReceived: []func(paho.PublishReceived) (bool, error){r2.handler}})
	subscribe(t, w2, "$share/workers/t/jobs", 1)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := w1.Unsubscribe(ctx, &paho.Unsubscribe{Topics: []string{"$share/workers/t/jobs"}}); err != nil {
		t.Fatal(err)
	}
	r2.none(t, 300*time.Millisecond) // j-0 is still w1's
	if err := w1.Ack(held); err != nil {
		t.Fatal(err)
	}
	petreltest.Eventually(t, "w1's PUBACK to settle j-0", func() bool {
		subs := shareSubs(tn)
		return len(subs) == 1 && subs[0].Depth == 0
	}, func() string { return fmt.Sprint(shareSubs(tn)) })
	r2.none(t, 300*time.Millisecond)
}

// A persistent member keeps its group's subscription while it is away,
// across a restart too: what comes meanwhile waits for it; a Petrel
// subscription of a group without members, as a crash leaves one, is
// deleted at start.
func TestPahoSharedSubscriptionPersistent(t *testing.T) {
	tn := openNode(t, baseConfig(t))
	connect := func() (*paho.Client, *received) {
		r := newReceived()
		c, _ := pahoClient(t, tn, &paho.Connect{ClientID: "keeper", CleanStart: false, KeepAlive: 30,
			Properties: &paho.ConnectProperties{SessionExpiryInterval: ptr(uint32(3600))}},
			paho.ClientConfig{OnPublishReceived: []func(paho.PublishReceived) (bool, error){r.handler}})
		return c, r
	}
	c, _ := connect()
	subscribe(t, c, "$share/keepers/t/jobs", 1)
	_ = c.Disconnect(&paho.Disconnect{})
	<-c.Done()
	sendN(t, tn, 0, 3)
	// A subscription named like a group's, with no member: a crash's leftover.
	tn.durable("t.#", "mqtt-share.gone.0011223344556677")
	tn.restart()
	subs := shareSubs(tn)
	if len(subs) != 1 || subs[0].Depth != 3 {
		t.Fatalf("after restart: %+v, want the keepers' group only, holding 3", subs)
	}
	_, r := connect()
	var got []string
	for range 3 {
		got = append(got, string(r.next(t).Payload))
	}
	slices.Sort(got)
	if !slices.Equal(got, []string{"j-0", "j-1", "j-2"}) {
		t.Fatalf("got %v", got)
	}
}

// mosquitto_sub takes $share filters over MQTT 3.1.1 too, as Mosquitto
// does: two of them in one group get each of mosquitto_pub's messages
// once between them.
func TestMosquittoSharedSubscription(t *testing.T) {
	needMosquitto(t)
	tn := openNode(t, baseConfig(t))
	a := startSub(t, "-p", tn.port(), "-i", "ma", "-q", "1", "-t", "$share/g/t/jobs")
	b := startSub(t, "-p", tn.port(), "-i", "mb", "-q", "1", "-t", "$share/g/t/jobs")
	petreltest.Eventually(t, "two members", func() bool {
		subs := shareSubs(tn)
		return len(subs) == 1 && subs[0].Consumers == 2
	})
	for i := range 20 {
		pub(t, tn, "-q", "1", "-t", "t/jobs", "-m", fmt.Sprintf("m-%d", i))
	}
	count := func() (int, map[string]int) {
		seen := map[string]int{}
		n := 0
		for _, s := range []*bgSub{a, b} {
			for _, l := range lines(s.out.String()) {
				if l != "" {
					seen[l]++
					n++
				}
			}
		}
		return n, seen
	}
	petreltest.Eventually(t, "20 received", func() bool { n, _ := count(); return n >= 20 })
	time.Sleep(200 * time.Millisecond) // a duplicate would come now
	n, seen := count()
	if n != 20 || len(seen) != 20 {
		t.Fatalf("received %d lines, %d distinct: want each of 20 once (%v)", n, len(seen), seen)
	}
}
