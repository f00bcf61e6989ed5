package receiver

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/petrelmq/petrel/internal/ratelog"
	"github.com/petrelmq/petrel/message"
	"github.com/petrelmq/petrel/session"
)

// TestForgedOriginLogIsRateLimited: many forged messages from one peer
// within a minute make one log line, and every one is counted; the next
// minute makes a second line, which says how many were held back. Another
// peer has its own line.
func TestForgedOriginLogIsRateLimited(t *testing.T) {
	// checkOrigin logs on the test's goroutine: a plain buffer will do.
	var out bytes.Buffer
	srv := New(Config{Logger: slog.New(slog.NewTextHandler(&out, nil))}, nil, nil)
	now := time.Unix(1_000_000, 0)
	srv.forged = &ratelog.Limiter{Every: forgedLogEvery, Now: func() time.Time { return now }}
	const line = "messages with forged origins refused"
	mallory := session.Peer{Name: "mallory", ID: message.NodeID{7}, Kind: session.PeerNode}
	forged := &message.Message{ID: 1, Origin: message.NodeID{9}, Destination: "orders"}
	for range 100 {
		if reason := srv.checkOrigin(mallory, forged, false); reason == "" {
			t.Fatal("a forged origin was accepted")
		}
		now = now.Add(forgedLogEvery / 200)
	}
	if got := strings.Count(out.String(), line); got != 1 {
		t.Fatalf("%d log lines within the minute, want 1", got)
	}
	now = now.Add(forgedLogEvery)
	srv.checkOrigin(mallory, forged, false)
	if got := strings.Count(out.String(), line); got != 2 {
		t.Fatalf("%d log lines after the minute, want 2", got)
	}
	if !strings.Contains(out.String(), "suppressed=99") {
		t.Errorf("the second line does not count the 99 held back:\n%s", out.String())
	}
	srv.checkOrigin(session.Peer{Name: "eve", ID: message.NodeID{8}, Kind: session.PeerNode}, forged, false)
	if got := strings.Count(out.String(), line); got != 3 {
		t.Fatalf("%d log lines after another peer's forgery, want 3", got)
	}
	if got := srv.stats.ForgedOrigins.Load(); got != 102 {
		t.Fatalf("%d forged origins counted, want 102", got)
	}
}
