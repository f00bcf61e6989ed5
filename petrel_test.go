package petrel_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/petrelmq/petrel"
	"github.com/petrelmq/petrel/address"
	"github.com/petrelmq/petrel/internal/petreltest/nodes"
	"github.com/petrelmq/petrel/message"
	"go.uber.org/fx"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

var quiet = nodes.Quiet

func receive(t *testing.T, c *petrel.Consumer) *petrel.Delivery {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	d, err := c.Receive(ctx)
	if err != nil {
		t.Fatalf("receive: %v", err)
	}
	return d
}

func TestFxGraphIsValid(t *testing.T) {
	if err := fx.ValidateApp(fx.Supply(petrel.Config{}), petrel.Module, fx.NopLogger); err != nil {
		t.Fatal(err)
	}
}

func TestSendReceiveAllKinds(t *testing.T) {
	n := nodes.Open(t)
	p := n.Producer()
	ctx := context.Background()

	cmd := p.CreateCommandMessage("orders")
	cmd.Command = message.CommandProps{Command: "start", ReplyTo: "replies@plant-7", CorrelationID: "c-1"}
	cmd.Properties.Set("line", message.Int16(3))
	data := p.CreateDataMessage("orders@plant-7")
	data.Data = message.DataProps{DataType: "reading", Encoding: "json"}
	data.Body = []byte(`{"t":21.5}`)
	file := p.CreateFileMessage("orders")
	file.File.Filename = "report.csv"
	file.File.SendFilePath = filepath.Join(t.TempDir(), "r.csv")
	if err := os.WriteFile(file.File.SendFilePath, []byte("a,b\n1,2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, m := range []*message.Message{cmd, data, file} {
		if m.ID == 0 || m.Origin != n.ID() || m.Priority != message.DefaultPriority || m.Timestamp.IsZero() {
			t.Fatalf("factory left the header unset: %+v", m)
		}
		if err := p.Send(ctx, m); err != nil {
			t.Fatalf("send %s: %v", m.Kind, err)
		}
	}
	c, err := n.Consumer("orders")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []*message.Message{cmd, data, file} {
		d := receive(t, c)
		if d.ID != want.ID || d.Kind != want.Kind || d.Command != want.Command || d.Data != want.Data || d.File.Filename != want.File.Filename || string(d.Body) != string(want.Body) {
			t.Fatalf("got %+v, want %+v", d.Message, want)
		}
		if d.Attempt != 1 {
			t.Fatalf("attempt %d", d.Attempt)
		}
		// The property is read from the delivery, not from the message
		// sent: only the delivery shows that it crossed the store.
		if want == cmd {
			if v, ok := d.Properties.Get("line"); !ok || v.Int16() != 3 {
				t.Fatalf("property line lost in the delivery: %v, %v", v, ok)
			}
		}
		if err := c.Ack(d); err != nil {
			t.Fatal(err)
		}
	}
}

func TestSendErrors(t *testing.T) {
	n := nodes.Open(t, nodes.With(func(c *petrel.Config) {
		c.NoAutoCreate = true
		c.Addresses = []petrel.AddressConfig{{Name: "orders", Role: address.RoleReceive}}
	}))
	p := n.Producer()
	ctx := context.Background()
	cases := []struct {
		name string
		mod  func(m *message.Message)
		want error
	}{
		{"other node", func(m *message.Message) { m.Destination = "orders@plant-9" }, petrel.ErrNoRoute},
		{"undeclared address", func(m *message.Message) { m.Destination = "nope" }, petrel.ErrUnknownAddress},
		{"priority", func(m *message.Message) { m.Priority = 12 }, message.ErrPriority},
		{"empty destination", func(m *message.Message) { m.Destination = "" }, message.ErrDestination},
		{"bad destination", func(m *message.Message) { m.Destination = "a b@c" }, message.ErrDestination},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m := p.CreateDataMessage("orders")
			tc.mod(m)
			if err := p.Send(ctx, m); !errors.Is(err, tc.want) {
				t.Fatalf("got %v, want %v", err, tc.want)
			}
			if err := p.SendAsync(m).Wait(ctx); !errors.Is(err, tc.want) {
				t.Fatalf("async: got %v, want %v", err, tc.want)
			}
		})
	}
	if _, err := n.Consumer("nope"); !errors.Is(err, petrel.ErrUnknownAddress) {
		t.Fatalf("consumer of undeclared address: %v", err)
	}
	if st := n.QueueStats(); len(st) != 1 || st[0].Depth != 0 {
		t.Fatalf("a refused send stored something: %+v", st)
	}
}

func TestCloseStopsListenersAndKeepsMessages(t *testing.T) {
	dir := t.TempDir()
	cfg := petrel.Config{Name: "a", DataDir: dir, Logger: quiet}
	n, err := petrel.Open(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	c, _ := n.Consumer("q")
	started := make(chan struct{})
	if _, err := c.Listen(func(ctx context.Context, d *petrel.Delivery) error {
		close(started)
		<-ctx.Done() // hold the message until the node closes
		return ctx.Err()
	}, petrel.ListenOptions{}); err != nil {
		t.Fatal(err)
	}
	p := n.Producer()
	m := p.CreateDataMessage("q")
	m.Body = []byte("kept")
	if err := p.Send(context.Background(), m); err != nil {
		t.Fatal(err)
	}
	<-started
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	if err := p.Send(context.Background(), p.CreateDataMessage("q")); !errors.Is(err, petrel.ErrClosed) {
		t.Fatalf("send after close: %v", err)
	}
	n2, err := petrel.Open(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer n2.Close()
	if n2.ID() != n.ID() {
		t.Fatal("node id changed across restart")
	}
	c2, _ := n2.Consumer("q")
	d := receive(t, c2)
	if string(d.Body) != "kept" {
		t.Fatalf("got %q", d.Body)
	}
	if m2 := n2.Producer().CreateDataMessage("q"); m2.ID <= m.ID {
		t.Fatalf("id %d after restart is not above %d", m2.ID, m.ID)
	}
}

func TestOpenRefusesBadName(t *testing.T) {
	_, err := petrel.Open(context.Background(), petrel.Config{Name: "bad name", DataDir: t.TempDir(), Logger: quiet})
	if !errors.Is(err, message.ErrDestination) {
		t.Fatalf("got %v", err)
	}
}
