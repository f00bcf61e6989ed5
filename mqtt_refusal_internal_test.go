package petrel

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/petrelmq/petrel/internal/mqttgw"
	"github.com/petrelmq/petrel/message"
	"github.com/petrelmq/petrel/receiver"
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

// mqttBreaker makes an MQTT publish invalid as its body says.
type mqttBreaker struct{ NopInterceptor }

func (mqttBreaker) OnPublish(_ context.Context, m *message.Message, _ ConnInfo) error {
	switch string(m.Body) {
	case "ttl":
		m.TTL = -time.Second
	case "big":
		m.Body = make([]byte, 2048)
	}
	return nil
}

// TestMQTTPublishMadeInvalidByInterceptor: an MQTT publish an interceptor
// made invalid is refused with a reason that says so and why, Packet Too
// Large for a body grown past the limit and Implementation Specific Error
// for the rest; nothing is stored.
func TestMQTTPublishMadeInvalidByInterceptor(t *testing.T) {
	n, err := Open(context.Background(), Config{Name: "m", DataDir: t.TempDir(), Logger: quietLog,
		Topics: []TopicConfig{{Pattern: "orders.#"}}, Limits: message.Limits{MaxBody: 1024},
		Interceptors: []Interceptor{mqttBreaker{}}})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	sub, err := n.Subscribe(context.Background(), "orders.#", SubscribeOptions{Name: "all"})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	b := mqttBackend{n}
	for _, tc := range []struct {
		body string
		code byte
		want error
	}{
		{"ttl", mqttgw.CodeImplementation, message.ErrTTL},
		{"big", mqttgw.CodePacketTooLarge, message.ErrBodyTooLarge},
	} {
		m := b.NewMessage("orders.eu")
		m.Body = []byte(tc.body)
		_, err := b.Publish(context.Background(), m, mqttgw.Conn{Identity: "c", ClientID: "c"}, "")
		var r *mqttgw.Refusal
		if !errors.As(err, &r) || r.Code != tc.code || !strings.HasPrefix(r.Reason, receiver.ReasonIntercepted) ||
			!strings.Contains(r.Reason, tc.want.Error()) {
			t.Errorf("publish %q: %v, want code %#x saying %q and %q", tc.body, err, tc.code, receiver.ReasonIntercepted, tc.want)
		}
	}
	m := b.NewMessage("orders.eu")
	m.Body = []byte("fine")
	c, err := b.Publish(context.Background(), m, mqttgw.Conn{Identity: "c", ClientID: "c"}, "")
	if err != nil {
		t.Fatal(err)
	}
	<-c.Done()
	if err := c.Err(); err != nil {
		t.Fatal(err)
	}
	d, err := sub.Receive(context.Background())
	if err != nil || string(d.Body) != "fine" {
		t.Fatalf("first stored: %v, want only the valid publish", err)
	}
	d.Ack()
	if d, err := sub.Poll(); err == nil {
		t.Fatalf("a publish made invalid was stored: %q", d.Body)
	}
}
