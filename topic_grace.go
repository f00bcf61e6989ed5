package petrel

import (
	"context"
	"log/slog"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/petrelmq/petrel/address"
	"github.com/petrelmq/petrel/internal/logkey"
	"github.com/petrelmq/petrel/message"
	"github.com/petrelmq/petrel/queue"
	"github.com/petrelmq/petrel/sender"
	"github.com/petrelmq/petrel/session"
)

// Non-durable interest grace. Durable interest crosses any outage: what
// is published for it waits in the send queue toward its neighbour. A
// non-durable subscription, though, lives only as long as its consumer,
// so a neighbour that stays unreachable may never come back for what
// accumulates for it, nor withdraw the interest once its consumer is
// gone. Past Config.TopicInterestGrace of a neighbour being unreachable,
// the non-durable interest learned from it is dropped (and the drop
// passed on, as an unsubscribe, to the neighbours it was passed to), and
// what waits toward it that no remaining interest matches is pruned,
// counted as petrel_topic_pruned_total{reason="grace"}.
//
// A neighbour is reachable while this node's link toward it is up, while
// its own link into this node is connected, and when an interest message
// of its arrives. Its own link counts because the send queue toward it,
// and so this node's link, exist only once this node had something to
// send there: a node that only publishes has none until its first
// forwarded publish, and judged by it alone would drop, at the end of
// the grace, the interest of a neighbour that announced it over a live
// link a moment before.
//
// When a neighbour comes back after the janitor saw it unreachable, the
// node announces to it again what it subscribes to and what it learned
// from the others: the neighbour may have dropped this node's
// non-durable interest, since its own grace and its own view of the
// outage need not be this node's. After an outage shorter than the grace
// only the non-durable pieces go, as the grace drops nothing else.

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
	// No link is up when the node starts: every neighbour is unreachable
	// from then until it is seen reachable.
	g := newGraceState(n.neighbours(), n.now())
	g.settle = n.cfg.Discovery.Timeout
	if g.settle <= 0 {
		g.settle = address.DefaultTimeout
	}
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
		n.releaseGone(ctx, g)
		n.greetNew(ctx, g)
		n.checkGrace(ctx, g)
		n.trimKeeps(ctx)
		n.trimSubscriptions(ctx)
		n.trimForwards(ctx)
		n.retryAnnouncements(ctx)
	}
}

// graceState is what the topic janitor knows of its neighbours'
// reachability.
type graceState struct {
	// down holds, for each neighbour not reachable at the last look,
	// since when it is not.
	down map[string]time.Time
	// lost marks the neighbours of down that were seen reachable before:
	// an outage, rather than the time since the node's start.
	lost map[string]bool
	// dropped marks the neighbours whose non-durable interest the grace
	// dropped.
	dropped map[string]bool
	// known are the neighbours greeted (greetNew).
	known map[string]bool
	// discovered are the neighbours seen in the directory as found by
	// discovery, not configured (releaseGone).
	discovered map[string]bool
	// start is when the janitor started, and settle how long discovery
	// takes to hear the nodes that are up (its timeout): until then, a
	// send queue from before the start toward a node not in the
	// directory may be one discovery has not heard yet (releaseGone).
	start  time.Time
	settle time.Duration
	// swept says releaseGone looked at the send queues from before the
	// start.
	swept bool
}

func newGraceState(neighbours []string, start time.Time) *graceState {
	g := &graceState{down: map[string]time.Time{}, lost: map[string]bool{}, dropped: map[string]bool{}, known: map[string]bool{}, discovered: map[string]bool{}, start: start}
	for _, nb := range neighbours {
		g.down[nb], g.known[nb] = start, true
	}
	return g
}

// checkGrace updates g from what shows each neighbour reachable, drops
// the non-durable interest of those unreachable past the grace, and
// announces again to those that come back.
func (n *Node) checkGrace(ctx context.Context, g *graceState) {
	now, grace := n.now(), n.interestGrace()
	up := n.reachable()
	heard := n.topics.remote.takeHeard()
	for _, nb := range n.graceNodes() {
		since, wasDown := g.down[nb]
		at, spoke := heard[nb]
		if up[nb] || (spoke && (!wasDown || !at.Before(since))) {
			delete(g.down, nb)
			if wasDown {
				n.cameBack(ctx, g, nb, now.Sub(since) >= grace)
			}
			if !up[nb] {
				// It spoke since the last look, and is gone again: its
				// clock runs from then.
				g.down[nb], g.lost[nb] = at, true
			}
			continue
		}
		if !wasDown {
			g.down[nb], g.lost[nb] = now, true
			continue
		}
		if now.Sub(since) >= grace && n.dropNonDurable(ctx, nb) {
			g.dropped[nb] = true
		}
	}
}

// cameBack announces again to nb, which the janitor saw unreachable and
// now reachable, what it may have dropped of this node's interest: all
// of it after the grace, or once this node dropped nb's (a partition:
// nb's own grace ran out as well, most likely); the non-durable pieces
// after a shorter outage, which nb may have seen longer, or with a
// shorter grace. Once the node's start alone kept nb down, within the
// grace, nb has everything already (loadInterest announced it).
func (n *Node) cameBack(ctx context.Context, g *graceState, nb string, pastGrace bool) {
	switch {
	case pastGrace || g.dropped[nb]:
		n.reannounceTo(ctx, nb, true)
	case g.lost[nb]:
		n.reannounceTo(ctx, nb, false)
	}
	delete(g.dropped, nb)
	delete(g.lost, nb)
}

// reachable returns the neighbours that are reachable now: those this
// node's link toward is connected, and those whose own link into this
// node is (a node's connection, not a client's).
func (n *Node) reachable() map[string]bool {
	up := map[string]bool{}
	for _, st := range n.Links() {
		if nb, ok := strings.CutPrefix(st.Queue, interestAddr+"@"); ok && st.State == sender.StateConnected {
			up[nb] = true
		}
	}
	if n.srv != nil {
		for _, p := range n.srv.Peers() {
			if p.Kind != session.PeerClient {
				up[p.Name] = true
			}
		}
	}
	return up
}

// hear records that an interest message of neighbour nb arrived at at.
func (it *interestTable) hear(nb string, at time.Time) {
	it.heardMu.Lock()
	defer it.heardMu.Unlock()
	if it.heard == nil {
		it.heard = map[string]time.Time{}
	}
	if at.After(it.heard[nb]) {
		it.heard[nb] = at
	}
}

// takeHeard returns what hear recorded since the last call, and forgets
// it.
func (it *interestTable) takeHeard() map[string]time.Time {
	it.heardMu.Lock()
	defer it.heardMu.Unlock()
	h := it.heard
	it.heard = nil
	return h
}

// greetNew announces this node's interest, and what it learned, to the
// nodes that became neighbours since the janitor last looked: found by
// discovery, or added to nodes by a reload. The start announced to the
// others.
func (n *Node) greetNew(ctx context.Context, g *graceState) {
	for _, nb := range n.neighbours() {
		if g.known[nb] {
			continue
		}
		g.known[nb] = true
		if _, ok := g.down[nb]; !ok {
			g.down[nb] = n.now()
		}
		n.reannounceTo(ctx, nb, true)
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
// nb), all of it or only the non-durable pieces: idempotent there, it
// restores what nb dropped past its grace.
//
// It holds subMu and changeMu, as every change of an announcement does,
// so that a withdrawal cannot be queued toward nb between its read of a
// pattern and its announcement of it, which would leave nb holding
// interest nobody here has.
func (n *Node) reannounceTo(ctx context.Context, nb string, all bool) {
	t := n.topics
	defer t.lockAnnouncements()()
	it := &t.remote
	want := map[string]bool{}
	t.mu.RLock()
	for _, e := range t.subs {
		want[e.pattern.String()] = want[e.pattern.String()] || e.durable
	}
	t.mu.RUnlock()
	self := []string{n.cfg.Name}
	var msgs []*message.Message
	for _, p := range sortedKeys(want) {
		if all || !want[p] {
			msgs = append(msgs, n.interestMessage(opSubscribe, p, n.cfg.Name, want[p], self))
		}
	}
	it.mu.RLock()
	for _, r := range it.learned {
		if r.Neighbour == nb || r.Node == nb || slices.Contains(r.Hops, nb) || (!all && r.Durable) {
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

// Releasing the nodes discovery forgot. Every node discovery finds
// becomes a neighbour: greetNew announces this node's interest to it,
// which makes the send queue "_petrel.topics@<node>" and its sender. The
// directory holds at most discovery.max_nodes discovered nodes, but a
// node that left it (expired, or never heard again) would keep that
// queue, and a sender dialling it, for ever: without a secret anyone can
// announce ever-new names, and each would cost a stored queue and a
// goroutine. So once a node left the directory, the janitor drops what
// it made toward it, when that loses nothing:
//
//   - no interest was learned from it: nothing published here waits for
//     it in that queue (pruning removes what interest no longer wants);
//   - the queue holds interest messages only, which greetNew builds
//     again from this node's state if the node comes back;
//   - nothing was ever delivered through the queue (its acked count is
//     zero, so the node holds none of this node's interest that a
//     withdrawal still queued would have to undo), or the directory
//     forgot the discovered node altogether (Directory.Silent: past
//     max_nodes silent names). A neighbour an operator removed from
//     nodes keeps a queue that delivered before, as any send queue
//     outlives its route.
//
// Messages an application queued toward a discovered node are in queues
// of their own, which stay: a silent node is an outage, and they wait
// for it (see sendQueue).

// releaseGone drops the topic send queues, and stops the senders, toward
// the nodes that left the directory, as above.
func (n *Node) releaseGone(ctx context.Context, g *graceState) {
	live := map[string]bool{}
	for _, e := range n.dir.Entries() {
		live[e.Name] = true
		if e.Source == address.SourceDiscovered {
			g.discovered[e.Name] = true
		}
	}
	var gone []string
	for nb := range g.known {
		if !live[nb] {
			gone = append(gone, nb)
		}
	}
	if !g.swept && n.now().Sub(g.start) >= g.settle {
		// The queues left from before the start, toward nodes discovery
		// has not heard since.
		g.swept = true
		for _, q := range n.store.Queues() {
			nb, ok := strings.CutPrefix(q.Name(), interestAddr+"@")
			if ok && q.Kind() == queue.KindSend && !live[nb] && !g.known[nb] {
				gone = append(gone, nb)
			}
		}
	}
	sort.Strings(gone)
	for _, nb := range gone {
		if _, routed := n.nextHop(nb); routed {
			continue // reached through another node now
		}
		// A node the directory forgot altogether: discovered, and
		// silent no more (past max_nodes silent names).
		forgotten := g.discovered[nb] && !n.dir.Silent(nb)
		released, err := n.releaseTopicQueue(ctx, nb, forgotten)
		if err != nil {
			n.log.Debug("release the topic send queue of a node that left the directory", slog.String(logkey.Node, nb), slog.Any(logkey.Error, err))
			continue
		}
		if !released {
			continue
		}
		delete(g.known, nb)
		delete(g.down, nb)
		delete(g.lost, nb)
		delete(g.dropped, nb)
		delete(g.discovered, nb)
	}
}

// releaseTopicQueue drops the topic send queue toward nb, which left the
// directory, and stops its sender, if that loses nothing (see above); it
// reports whether nb holds nothing here any more. It holds subMu and
// changeMu, as every change of an announcement does, so that no interest
// message is queued toward nb while its queue is judged and dropped.
func (n *Node) releaseTopicQueue(ctx context.Context, nb string, forgotten bool) (bool, error) {
	t := n.topics
	defer t.lockAnnouncements()()
	it := &t.remote
	it.mu.RLock()
	learned := false
	for k := range it.learned {
		if k.Neighbour == nb {
			learned = true
			break
		}
	}
	it.mu.RUnlock()
	if learned {
		return false, nil
	}
	q, ok := n.store.Lookup(message.JoinDestination(interestAddr, nb))
	if !ok || q.Kind() != queue.KindSend {
		return true, nil
	}
	if q.Stats().Acked > 0 && !forgotten {
		return false, nil
	}
	// The sender stops first, so that what it holds in flight is back
	// in the queue when the queue is read.
	left := n.mgr.Remove(q, nb)
	only := true
	err := q.Each(ctx, func(r queue.Browsed) bool {
		var m message.Message
		if err := m.UnmarshalBinary(r.Data); err != nil || m.Kind != message.KindData || m.Data.DataType != interestType {
			only = false
		} else if name, _, _ := message.ParseDestination(m.Destination); name != interestAddr {
			only = false
		}
		return only
	})
	if err == nil && only {
		_, err = n.store.Drop(ctx, q)
	}
	if err != nil || !only {
		n.mgr.Ensure(q, nb) // kept: it goes on waiting for nb
		return false, err
	}
	if left == 0 {
		n.mgr.Pool().Drop(nb)
	}
	t.released.Add(1)
	return true, nil
}

// lockAnnouncements takes subMu, then the remote interest's changeMu, as
// every change of what this node announces to a neighbour does, and
// returns what releases them.
func (t *topics) lockAnnouncements() (unlock func()) {
	t.subMu.Lock()
	t.remote.changeMu.Lock()
	return func() {
		t.remote.changeMu.Unlock()
		t.subMu.Unlock()
	}
}
