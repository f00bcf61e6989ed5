package sender

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/petrelmq/petrel/address"
	"github.com/petrelmq/petrel/internal/petreltest"
	"github.com/petrelmq/petrel/message"
	"github.com/petrelmq/petrel/queue"
	"github.com/petrelmq/petrel/session"
)

// TestSenderWithoutRouteWakesWhenOneMayReturn: a sender whose node has no
// route waits up to noRouteWait before it looks again, so it must be
// woken by what can bring a route back: the directory learning the node
// (discovery), and Rehop (routes reloaded, which need not change the
// directory). Each delivers well within the wait.
func TestSenderWithoutRouteWakesWhenOneMayReturn(t *testing.T) {
	addr, _ := ackingPeer(t)
	b := dirOf(t, "tcp://"+addr).Entries()
	// A route needs b in the directory and routed set.
	for _, tc := range []struct {
		name          string
		known, routed bool // at the start
		route         func(dir *address.Directory, routed *atomic.Bool, m *Manager)
	}{
		{"directory", false, true, func(dir *address.Directory, _ *atomic.Bool, _ *Manager) { dir.SetStatic(b) }},
		{"rehop", true, false, func(_ *address.Directory, routed *atomic.Bool, m *Manager) { routed.Store(true); m.Rehop() }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st, err := queue.Open(context.Background(), queue.Config{Path: filepath.Join(t.TempDir(), "petrel.db"), Logger: quiet})
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			dir := address.NewDirectory()
			if tc.known {
				dir.SetStatic(b)
			}
			var routed atomic.Bool
			routed.Store(tc.routed)
			hop := func(node string) (string, bool) {
				_, known := dir.Lookup(node)
				return node, known && routed.Load()
			}
			m := NewManager(Config{Window: 4, Logger: quiet}, session.Config{Name: "a", ID: message.NodeID{1}, Logger: quiet}, dir, hop)
			defer m.Stop()
			q, err := st.Queue(context.Background(), "orders@b", queue.KindSend)
			if err != nil {
				t.Fatal(err)
			}
			msg := &message.Message{ID: 1, Origin: message.NodeID{1}, Destination: "orders@b", Kind: message.KindData, Priority: 4}
			if err := q.Put(context.Background(), msg, false); err != nil {
				t.Fatal(err)
			}
			m.Ensure(q, "b")
			petreltest.Eventually(t, "the sender waiting for a route", func() bool {
				s := m.Statuses()[0]
				return s.State == StateBackingOff && strings.Contains(s.LastError, "no route")
			}, func() string { return fmt.Sprintf("%+v", m.Statuses()[0]) })
			tc.route(dir, &routed, m)
			for deadline := time.Now().Add(noRouteWait / 10); q.Stats().Depth != 0; time.Sleep(10 * time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatalf("not delivered %v after a route came back: %+v", noRouteWait/10, m.Statuses()[0])
				}
			}
		})
	}
}
