package petrel

import (
	"context"
	"os"
	"path/filepath"
	"runtime/debug"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/petrelmq/petrel/address"
	"github.com/petrelmq/petrel/internal/adminapi"
	"github.com/petrelmq/petrel/internal/console"
	"github.com/petrelmq/petrel/message"
	"github.com/petrelmq/petrel/queue"
	"github.com/petrelmq/petrel/receiver"
)

// The web console (internal/console) is served by the admin TCP listener
// at "/". It reads the node through consoleSource, the same figures the
// JSON API answers, and its buttons call the JSON API.

// consoleSource is the node as the console reads it.
type consoleSource struct{ n adminNode }

func (c consoleSource) Snapshot() console.Snapshot { return c.n.consoleSnapshot() }

// Browse reads a page of a queue's messages as the admin API's browse
// does, after the message of key after ("" from the first), within its
// byte budget: a page of the console holds them all.
func (c consoleSource) Browse(ctx context.Context, name, after string, limit int) (console.Page, error) {
	from := browseStart
	if after != "" {
		k, err := parseBrowseKey(after)
		if err != nil {
			return console.Page{}, err
		}
		from.after = k
	}
	pg, err := c.n.browsePage(ctx, name, from, limit, answerBytes)
	if err != nil {
		return console.Page{}, err
	}
	out := console.Page{Cut: pg.Cut, Messages: make([]adminapi.Message, len(pg.Messages)), Keys: make([]string, len(pg.Keys))}
	for i, st := range pg.Messages {
		out.Messages[i] = storedAPIMessage(st)
		out.Keys[i] = formatBrowseKey(pg.Keys[i])
	}
	if pg.More {
		out.Next = out.Keys[len(out.Keys)-1]
	}
	return out, nil
}

func (c consoleSource) Oldest(ctx context.Context, name string) (time.Time, bool) {
	q, err := c.n.lookupQueue(name)
	if err != nil {
		return time.Time{}, false
	}
	data, ok, err := q.Oldest(ctx)
	if err != nil || !ok {
		return time.Time{}, false
	}
	m, err := message.Peek(data, message.Limits{})
	if err != nil {
		return time.Time{}, false
	}
	return m.Timestamp, true
}

// DeadLetterQueue is the node's own mapping, the one petrel dlq uses.
func (c consoleSource) DeadLetterQueue(name string) string {
	dlq, err := c.n.DeadLetterQueue(name)
	if err != nil {
		return ""
	}
	return dlq
}

// consoleSnapshot gathers what the console shows.
func (n *Node) consoleSnapshot() console.Snapshot {
	st := n.Status()
	snap := console.Snapshot{
		Node: st.Node, ID: st.ID, DataDir: st.DataDir, Listen: st.Listen, Version: moduleVersion(),
		Started: st.Started, Links: st.Links, Queues: st.Queues, Receiving: st.Transfers,
		Subscriptions:    n.topicsResponse().Subscriptions,
		Finished:         n.outcomes.recent(),
		Received:         n.endedTransfers(),
		DiscoveryEnabled: st.Discovery.Enabled,
		Config: console.Config{Source: st.Config.Source, Version: st.Config.Version, LoadedAt: st.Config.LoadedAt,
			LastError: st.Config.LastError, NeedsRestart: st.Config.NeedsRestart},
		StoreBytes: storeBytes(n.storePath()),
		DiskFree:   diskFree(n.cfg.DataDir),
	}
	for _, e := range st.Nodes {
		snap.Nodes = append(snap.Nodes, console.Peer{Name: e.Name, ID: e.ID, Connectors: e.Connectors, Source: e.Source, LastSeen: e.LastSeen})
	}
	n.mu.Lock()
	for name, a := range n.addresses {
		if a.Role == address.RoleRelay {
			snap.RelayAddresses = append(snap.RelayAddresses, name)
		}
		// The first address by name, so that the page does not change
		// with the map's order when several share a dead_letter.
		if dl := a.Queue.DeadLetter; dl != "" && !queue.IsDeadLetter(dl) {
			if snap.DeadLetterOwners == nil {
				snap.DeadLetterOwners = map[string]string{}
			}
			if prev, ok := snap.DeadLetterOwners[dl]; !ok || name < prev {
				snap.DeadLetterOwners[dl] = name
			}
		}
	}
	n.mu.Unlock()
	n.reconfMu.Lock()
	for _, r := range n.current.Routes {
		snap.Routes = append(snap.Routes, console.Route{Node: r.Node, Via: r.Via})
	}
	n.reconfMu.Unlock()
	return snap
}

// storePath is the store's database file (Config.Store.Path, by default
// in the data directory).
func (n *Node) storePath() string {
	if n.cfg.Store.Path != "" {
		return n.cfg.Store.Path
	}
	return filepath.Join(n.cfg.DataDir, "petrel.db")
}

// storeBytes is the size of the store's database and its journal files.
func storeBytes(path string) int64 {
	var total int64
	for _, p := range []string{path, path + "-wal", path + "-shm"} {
		if fi, err := os.Stat(p); err == nil {
			total += fi.Size()
		}
	}
	return total
}

// moduleVersion is the petrel module's version in the binary, "dev" for
// a build from a working tree; read once.
var moduleVersion = sync.OnceValue(readModuleVersion)

func readModuleVersion() string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "dev"
	}
	v := ""
	if info.Main.Path == "github.com/petrelmq/petrel" {
		v = info.Main.Version
	}
	for _, d := range info.Deps {
		if d.Path == "github.com/petrelmq/petrel" {
			v = d.Version
		}
	}
	if v == "" || v == "(devel)" {
		v = "dev"
	}
	return v + " (" + info.GoVersion + ")"
}

// startConsole makes the console of the TCP listener.
func (s *adminServer) startConsole(cfg AdminConfig) error {
	c, err := console.New(console.Options{Source: consoleSource{s.node}, Token: cfg.Token, Log: s.log,
		Interval: consoleInterval, WriteTimeout: consoleWriteTimeout, Stats: s.consoleStats})
	if err != nil {
		return err
	}
	s.console = c
	return nil
}

// consoleInterval is how often the console samples the node and redraws
// its pages, 0 for its default (2 s); consoleWriteTimeout bounds each
// write to an event stream, 0 for its default (10 s). Variables so that
// tests can shorten them.
var (
	consoleInterval     time.Duration
	consoleWriteTimeout time.Duration
)

// newConsoleStats makes the counters of the console's event streams and
// registers them in reg as metrics: they exist, at 0, on a node without
// an admin listener too, as the other admin metrics do.
func newConsoleStats(reg *prometheus.Registry) *console.Stats {
	st := &console.Stats{}
	reg.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "petrel_console_streams",
			Help: "Console event streams (GET /events) open, at most 32.",
		}, func() float64 { return float64(st.Open.Load()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "petrel_console_streams_refused_total",
			Help: "Console event streams refused with 503 past the bound of streams open at once (32).",
		}, func() float64 { return float64(st.Refused.Load()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "petrel_console_streams_dropped_total",
			Help: "Console event streams closed because their reader stopped reading for 10 s.",
		}, func() float64 { return float64(st.Dropped.Load()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "petrel_console_renders_total",
			Help: "Live parts of console pages drawn for the event streams: once per page and tick, however many streams show it.",
		}, func() float64 { return float64(st.Renders.Load()) }),
	)
	return st
}

// endedTransfers returns the files received that ended in the last hour.
func (n *Node) endedTransfers() []receiver.TransferEnd {
	if n.srv == nil {
		return nil
	}
	return n.srv.EndedTransfers(time.Now().Add(-time.Hour))
}

// recent returns the outcomes recorded in the last hour, oldest first.
func (o *fileOutcomes) recent() []console.Finished {
	o.mu.Lock()
	defer o.mu.Unlock()
	cut := time.Now().Add(-time.Hour)
	var out []console.Finished
	for _, id := range o.order {
		if at := o.at[id]; at.After(cut) {
			out = append(out, console.Finished{FileProgress: o.m[id], At: at})
		}
	}
	return out
}

// replaySelected moves the dead letters of addr that refs name back where
// they were going, as Replay does with the oldest.
func (n *Node) replaySelected(ctx context.Context, addr string, refs []adminapi.MessageRef) (int, error) {
	dlq, err := n.deadLetterQueue(addr)
	if dlq == nil {
		return 0, err
	}
	want := make(map[adminapi.MessageRef]bool, len(refs))
	for _, r := range refs {
		want[r] = true
	}
	return n.replayRows(ctx, addr, dlq, 0, func(r queue.Browsed) bool {
		m, err := message.Peek(r.Data, message.Limits{})
		return err == nil && want[adminapi.MessageRef{Origin: m.Origin.String(), ID: m.ID}]
	})
}
