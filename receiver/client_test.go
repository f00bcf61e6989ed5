package receiver

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/petrelmq/petrel/message"
	"github.com/petrelmq/petrel/session"
)

// A router that does not serve clients refuses their sessions, and the
// connection stays good for links.
func TestClientSessionsRefusedWithoutClientRouter(t *testing.T) {
	f := newFixture(t)
	nc, err := net.Dial("tcp", f.srv.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := session.Client(ctx, nc, session.Config{Name: "app", ID: message.NodeID{9}, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.OpenPublish(ctx, 4); !errors.Is(err, session.ErrRefused) || !strings.Contains(err.Error(), "serves no clients") {
		t.Fatalf("publish session: %v", err)
	}
	if _, err := c.OpenSubscribe(ctx, "orders", 4); !errors.Is(err, session.ErrRefused) {
		t.Fatalf("subscribe session: %v", err)
	}
	if _, err := c.Open(ctx, "orders@b", 4); err != nil {
		t.Fatalf("link session after the refusals: %v", err)
	}
	if got := f.srv.StatsRef().SessionsRefused.Load(); got != 2 {
		t.Fatalf("SessionsRefused = %d, want 2", got)
	}
}
