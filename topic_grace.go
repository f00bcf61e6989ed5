package petrel

import (
	"context"
	"log/slog"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/petrelmq/petrel/internal/logkey"
	"github.com/petrelmq/petrel/message"
	"github.com/petrelmq/petrel/sender"
)

// Non-durable interest grace. Durable interest crosses any outage: what
// is published for it waits in the send queue toward its neighbour. A
// non-durable subscription, though, lives only as long as its consumer,
// so a neighbour whose link stays down may never come back for what
// accumulates for it. Past Config.TopicInterestGrace of the link toward a
// neighbour being down, the non-durable interest learned from it is
// dropped (and the drop passed on, as an unsubscribe, to the neighbours it
// was passed to), and what waits toward it that no remaining interest
// matches is pruned, counted as petrel_topic_pruned_total{reason="grace"}.
//
// When a link that was down past the grace comes back, the node announces
// to that neighbour again what it subscribes to and what it learned from
// the others: the neighbour dropped this node's non-durable interest too,
// if its own link was down as long (a partition).

// DefaultTopicInterestGrace is the default of Config.TopicInterestGrace.
const DefaultTopicInterestGrace = 5 * time.Minute

// interestGrace is Config.TopicInterestGrace with its default.
func (n *Node) interestGrace() time.Duration {
	if g := n.cfg.TopicInterestGrace; g > 0 {
		return g
	}
	return DefaultTopicInterestGrace
}

// janitorTick is how often the topic janitor looks at the links and the
// kept publishes: a tenth of the grace, within [50ms, 1s].
func (n *Node) janitorTick() time.Duration {
	return min(max(n.interestGrace()/10, 50*time.Millisecond), time.Second)
}

// topicJanitor runs the grace, the keep policies' bounds and the bounds
// of the subscriptions that drop their oldest until ctx ends.
func (n *Node) topicJanitor(ctx context.Context) {
	// No link is up when the node starts: every neighbour is down from
	// then until its link is seen up.
	start := n.now()
	down := map[string]time.Time{}
	known := map[string]bool{}
	for _, nb := range n.neighbours() {
		down[nb], known[nb] = start, true
	}
	dropped := map[string]bool{}
	tick := time.NewTicker(n.janitorTick())
	defer tick.Stop()
	// The prunes withdrawals ask for run at most once per gap (runPrunes):
	// a kick before the gap ends sets pruneTimer for its end.
	var pruneAt time.Time
	pruneTimer := time.NewTimer(time.Hour)
	pruneTimer.Stop()
	defer pruneTimer.Stop()
	pruneSet := false
	for {
		select {
		case <-ctx.Done():
			return
		case <-n.topics.pruneKick:
			if wait := time.Until(pruneAt); wait > 0 {
				if !pruneSet {
					pruneTimer.Reset(wait)
					pruneSet = true
				}
				continue
			}
			pruneAt = n.runPrunes(ctx)
			continue
		case <-pruneTimer.C:
			pruneSet = false
			pruneAt = n.runPrunes(ctx)
			continue
		case <-n.topics.keepKick:
			n.trimKeeps(ctx)
			n.trimSubscriptions(ctx)
			n.trimForwards(ctx)
			// The kicks of the next keepTrimGap wait and make one: a
			// trim is two commits whatever it drops, and a full keep
			// queue is kicked by every publish.
			select {
			case <-ctx.Done():
				return
			case <-time.After(keepTrimGap):
			}
			continue
		case <-tick.C:
		}
		n.greetNew(ctx, known, down)
		n.checkGrace(ctx, down, dropped)
		n.trimKeeps(ctx)
		n.trimSubscriptions(ctx)
		n.trimForwards(ctx)
		n.retryAnnouncements(ctx)
	}
}

// checkGrace updates down (when each neighbour's link went down) from the
// links' states, drops the non-durable interest of those down past the
// grace, and announces again to those that come back after it.
func (n *Node) checkGrace(ctx context.Context, down map[string]time.Time, dropped map[string]bool) {
	now, grace := n.now(), n.interestGrace()
	up := map[string]bool{}
	for _, st := range n.Links() {
		if nb, ok := strings.CutPrefix(st.Queue, interestAddr+"@"); ok && st.State == sender.StateConnected {
			up[nb] = true
		}
	}
	for _, nb := range n.graceNodes() {
		since, wasDown := down[nb]
		if up[nb] {
			delete(down, nb)
			if wasDown && (dropped[nb] || now.Sub(since) >= grace) {
				delete(dropped, nb)
				n.reannounceTo(ctx, nb)
			}
			continue
		}
		if !wasDown {
			down[nb] = now
			continue
		}
		if now.Sub(since) >= grace && n.dropNonDurable(ctx, nb) {
			dropped[nb] = true
		}
	}
}

// greetNew announces this node's interest, and what it learned, to the
// nodes that became neighbours since the janitor last looked: found by
// discovery, or added to nodes by a reload. The start announced to the
// others.
func (n *Node) greetNew(ctx context.Context, known map[string]bool, down map[string]time.Time) {
	for _, nb := range n.neighbours() {
		if known[nb] {
			continue
		}
		known[nb] = true
		if _, ok := down[nb]; !ok {
			down[nb] = n.now()
		}
		n.reannounceTo(ctx, nb)
	}
}

// graceNodes are the neighbours, and the nodes interest was learned from
// that are neighbours no more (a discovered node gone silent): the
// non-durable interest of either may outlast its link.
func (n *Node) graceNodes() []string {
	out := n.neighbours()
	it := &n.topics.remote
	it.mu.RLock()
	for k := range it.learned {
		if !slices.Contains(out, k.Neighbour) {
			out = append(out, k.Neighbour)
		}
	}
	it.mu.RUnlock()
	return out
}

// dropNonDurable forgets the non-durable interest learned from nb, passes
// the drop on and prunes what waited for it; it reports whether it
// dropped any.
func (n *Node) dropNonDurable(ctx context.Context, nb string) bool {
	it := &n.topics.remote
	it.changeMu.Lock()
	defer it.changeMu.Unlock()
	var gone []*interestRecord
	it.mu.Lock()
	for k, r := range it.learned {
		if k.Neighbour == nb && !r.Durable {
			gone = append(gone, r)
			it.set(k, nil) // deleting while ranging is allowed
		}
	}
	it.hops.forget()
	it.mu.Unlock()
	if len(gone) == 0 {
		return false
	}
	sortRecords(gone)
	n.log.Warn("dropping non-durable topic interest: its neighbour's link has been down past topic_interest_grace",
		slog.String("neighbour", nb), slog.Int("pieces", len(gone)), slog.Duration("grace", n.interestGrace()))
	if err := n.forgetInterest(ctx, gone); err != nil {
		n.log.Warn("save topic interest", slog.Any(logkey.Error, err))
	}
	for _, r := range gone {
		hops := append(slices.Clone(r.Hops), n.cfg.Name)
		if err := n.sendInterest(ctx, n.interestMessage(opUnsub, r.Pattern, r.Node, false, hops), hops); err != nil {
			n.log.Warn("pass on dropped topic interest", slog.Any(logkey.Error, err))
		}
	}
	n.pruneLogged(ctx, nb, pruneGrace)
	return true
}

// reannounceTo announces to nb, again, this node's patterns and the
// interest it learned from its other neighbours (what it would pass on to
// nb): idempotent there, it restores what nb dropped past its grace.
func (n *Node) reannounceTo(ctx context.Context, nb string) {
	t := n.topics
	want := map[string]bool{}
	t.mu.RLock()
	for _, e := range t.subs {
		want[e.pattern.String()] = want[e.pattern.String()] || e.durable
	}
	t.mu.RUnlock()
	self := []string{n.cfg.Name}
	var msgs []*message.Message
	for _, p := range sortedKeys(want) {
		msgs = append(msgs, n.interestMessage(opSubscribe, p, n.cfg.Name, want[p], self))
	}
	it := &t.remote
	it.mu.RLock()
	for _, r := range it.learned {
		if r.Neighbour == nb || r.Node == nb || slices.Contains(r.Hops, nb) {
			continue
		}
		hops := append(slices.Clone(r.Hops), n.cfg.Name)
		msgs = append(msgs, n.interestMessage(opSubscribe, r.Pattern, r.Node, r.Durable, hops))
	}
	it.mu.RUnlock()
	for _, m := range msgs {
		if err := n.sendInterestTo(ctx, m, nb); err != nil {
			n.log.Warn("announce topic interest again", slog.String("neighbour", nb), slog.Any(logkey.Error, err))
			return
		}
	}
}

// sendInterestTo queues m toward nb alone.
func (n *Node) sendInterestTo(ctx context.Context, m *message.Message, nb string) error {
	q, err := n.sendQueue(ctx, interestAddr, nb)
	if err != nil {
		return err
	}
	return q.Put(ctx, m, false)
}

func sortRecords(recs []*interestRecord) {
	sort.Slice(recs, func(i, j int) bool {
		a, b := recs[i], recs[j]
		return a.Neighbour+"\x00"+a.Node+"\x00"+a.Pattern < b.Neighbour+"\x00"+b.Node+"\x00"+b.Pattern
	})
}
