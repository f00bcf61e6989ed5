package petrel_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/petrelmq/petrel"
	"github.com/petrelmq/petrel/address"
	"github.com/petrelmq/petrel/internal/adminapi"
	"github.com/petrelmq/petrel/internal/petreltest/nodes"
	"github.com/petrelmq/petrel/message"
)

// reservedReason is what every refusal of a reserved name says.
const reservedReason = `names whose first word is "_petrel" are reserved for the node's internal traffic`

// TestReservedNamesRefused: names whose first word is "_petrel" are the
// node's own (its interest goes to "_petrel.topics@<neighbour>"). A send
// to one from the node's producer, the admin API, a remote client or a
// neighbour is refused, saying why, and no queue is made; so is a consumer
// of one, but for their dead letters, which are for an operator to read.
// Each became an ordinary anycast queue on first use before, and a send
// to "_petrel.topics@b" would have reached b as this node's interest.
func TestReservedNamesRefused(t *testing.T) {
	n := nodes.Open(t, nodes.Name("n"), nodes.Listen("127.0.0.1:0"), withTopics("#"), nodes.With(withAdmin))
	ctx := context.Background()
	p := n.Producer()
	names := []string{"_petrel.x", "_petrel.topics", "_petrel", "_petrel.topics.dlq"}
	for _, dest := range append(names, "_petrel.topics@b", "_petrel.x@n") {
		m := p.CreateDataMessage(dest)
		m.Body = []byte("mine")
		if err := p.Send(ctx, m); !errors.Is(err, message.ErrDestination) || !strings.Contains(err.Error(), reservedReason) {
			t.Errorf("send to %q: %v, want ErrDestination saying the name is reserved", dest, err)
		}
		if err := p.SendAsync(p.CreateDataMessage(dest)).Wait(ctx); !errors.Is(err, message.ErrDestination) {
			t.Errorf("async send to %q: %v, want ErrDestination", dest, err)
		}
		code, raw := apiCall(t, n, "POST", "/api/send", adminapi.SendRequest{To: dest, Body: []byte("mine")}, nil)
		if code != http.StatusBadRequest || !strings.Contains(raw, "reserved for the node's internal traffic") {
			t.Errorf("POST /api/send to %q: %d %s, want 400 saying why", dest, code, raw)
		}
	}
	src, _ := writeRandom(t, t.TempDir(), "f.bin", 100)
	for _, dest := range []string{"_petrel.x", "_petrel.x@b"} {
		m := p.CreateFileMessage(dest)
		m.File.SendFilePath = src
		if err := p.Send(ctx, m); !errors.Is(err, message.ErrDestination) || !strings.Contains(err.Error(), reservedReason) {
			t.Errorf("file to %q: %v, want ErrDestination saying the name is reserved", dest, err)
		}
	}
	for _, name := range []string{"_petrel.x", "_petrel.topics", "_petrel"} {
		if _, err := n.Consumer(name); !errors.Is(err, message.ErrDestination) || !strings.Contains(err.Error(), reservedReason) {
			t.Errorf("consumer of %q: %v, want ErrDestination saying the name is reserved", name, err)
		}
	}

	c := nodes.Dial(t, n, petrel.DialOptions{})
	cp := c.Producer()
	for _, dest := range []string{"_petrel.x", "_petrel.topics@b"} {
		if err := cp.Send(ctx, cp.CreateDataMessage(dest)); !errors.Is(err, petrel.ErrRefused) || !strings.Contains(err.Error(), reservedReason) {
			t.Errorf("client's send to %q: %v, want ErrRefused saying the name is reserved", dest, err)
		}
	}
	if _, err := c.Consumer("_petrel.x"); !errors.Is(err, petrel.ErrRefused) || !strings.Contains(err.Error(), reservedReason) {
		t.Errorf("client's consumer of _petrel.x: %v, want ErrRefused saying the name is reserved", err)
	}

	x := nodeID("x")
	sess, err := mustRawPeer(t, n, "x", "", x).Open(ctx, "_petrel.x@n", 100)
	if err != nil {
		t.Fatal(err)
	}
	m := msg(x, 1, "from a neighbour")
	m.Destination = "_petrel.x"
	if r := sendAll(t, sess, m); !strings.Contains(r[0], reservedReason) {
		t.Errorf("a neighbour's send to _petrel.x: refused %q, want the reserved name as the reason", r[0])
	}

	for _, name := range append(names, "_petrel.x.dlq", "_petrel.x@b", "_petrel.topics@b") {
		if _, ok := n.QueueStat(name); ok {
			t.Errorf("n made the queue %q", name)
		}
	}
	// The dead letters of the node's own traffic stay readable.
	if _, err := n.Consumer("_petrel.topics.dlq"); err != nil {
		t.Errorf("consumer of _petrel.topics.dlq: %v", err)
	}

	cfg := petrel.Config{Name: "n", Addresses: []petrel.AddressConfig{{Name: "_petrel.mine", Role: address.RoleReceive}}}
	if err := cfg.Validate(); !errors.Is(err, petrel.ErrConfig) || !strings.Contains(err.Error(), reservedReason) {
		t.Errorf("declaring _petrel.mine: %v, want a configuration error saying the name is reserved", err)
	}
}
