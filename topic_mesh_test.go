package petrel_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/petrelmq/petrel"
	"github.com/petrelmq/petrel/internal/petreltest"
	"github.com/petrelmq/petrel/message"
)

// Topic duplicates in networks of brokers (PITFALLS 13), on a full mesh:
// every node linked to every other, each subscribing and publishing. The
// triangle tests (TestInterestTriangle, TestTopicsTriangleProcesses) have a
// single cycle; a mesh of four has many, of lengths 3 and 4, so a copy can
// reach a node by up to six different paths.

// copyKey is one publish: its (origin, id).
type copyKey struct {
	origin message.NodeID
	id     uint64
}

// linkCopy is a forwarded topic copy as it entered a node over a link.
type linkCopy struct {
	copyKey
	from, dest, hops string
}

// copyLog is an interceptor that records every forwarded topic copy that
// enters its node over a link (OnPublish runs before dedupe, so repeated
// copies are recorded too); interest messages are left out.
type copyLog struct {
	petrel.NopInterceptor
	mu   sync.Mutex
	got  []linkCopy
	skip bool
}

func (l *copyLog) OnPublish(_ context.Context, m *message.Message, from petrel.ConnInfo) error {
	if from.Path != petrel.PathLink {
		return nil
	}
	if name, _, err := message.ParseDestination(m.Destination); err != nil || name == "_petrel.topics" {
		return nil
	}
	c := linkCopy{copyKey: copyKey{m.Origin, m.ID}, from: from.Identity, dest: m.Destination}
	if v, ok := m.Properties.Get(hopsProp); ok {
		c.hops = v.Str()
	}
	l.mu.Lock()
	l.got = append(l.got, c)
	l.mu.Unlock()
	return nil
}

// take returns what the log holds and empties it.
func (l *copyLog) take() []linkCopy {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := l.got
	l.got = nil
	return out
}

// drainOnce receives from c until every body of want arrived, failing on
// an unknown or repeated body, or on a delivery that carries the hops
// property.
func drainOnce(t *testing.T, name string, c *petrel.Consumer, want []string, all []*petrel.Node) {
	t.Helper()
	wanted := make(map[string]bool, len(want))
	for _, b := range want {
		wanted[b] = true
	}
	seen := map[string]int{}
	ctx, cancel := context.WithTimeout(context.Background(), petreltest.Patience)
	defer cancel()
	for len(seen) < len(wanted) {
		d, err := c.Receive(ctx)
		if err != nil {
			t.Fatalf("%s: received %d of %d distinct messages: %v\nlinks:\n%s", name, len(seen), len(wanted), err, linksOf(all))
		}
		if v, ok := d.Properties.Get(hopsProp); ok {
			t.Errorf("%s: %q delivered with %s=%q", name, d.Body, hopsProp, v.Str())
		}
		receivedOnce(t, d, wanted, seen)
	}
}

// TestTopicMeshOnceEach: four nodes, each linked to the three others over
// loopback TCP, each with a durable orders.# subscription (c with a second
// one, orders.eu.*, overlapping it), each publishing 50 messages to
// orders.eu.created, all four at once. Then:
//   - every subscription gets every one of the 200 publishes exactly once,
//     the origin's own subscription included, and no delivery carries
//     petrel.hops;
//   - no copy of a publish ever enters its origin, or a node its hops
//     name: each copy that enters a node over a link names its origin
//     first and its sender last, and names each node once;
//   - each node sends each neighbour at most one copy of a publish, and
//     the origin sends one to each of its three neighbours;
//   - what crosses the links is bounded: a node fans a publish out once
//     (its inbox drops the repeated copies, on (origin, id)), to the
//     neighbours its hops do not name, so a publish crosses between 6
//     (3+2+1) and 9 ((n-1)^2) links, never more; a loop would not stop;
//   - petrel_topic_forwarded_total (Status().Topics.Forwarded) counts
//     exactly the copies that entered the neighbours, node by node, and
//     each node's topic inbox takes the 150 publishes of the others once
//     each and none of its own (the rest it drops as duplicates).
//
// Each node forwards one copy per neighbour with interest, not the whole
// mesh: relays pass a copy on before they know whether the next node has
// it, so a publish costs up to (n-1)^2 copies on the links, not n-1.
func TestTopicMeshOnceEach(t *testing.T) {
	names := []string{"a", "b", "c", "d"}
	const perNode = 50
	m := newMesh(t, names...)
	logs := map[string]*copyLog{}
	nodesByName := map[string]*petrel.Node{}
	var all []*petrel.Node
	for _, name := range names {
		var nbs []string
		for _, o := range names {
			if o != name {
				nbs = append(nbs, o)
			}
		}
		logs[name] = &copyLog{}
		n := openTopicNode(t, m, name, nbs, logs[name])
		nodesByName[name] = n
		all = append(all, n)
	}
	type sub struct {
		name string
		c    *petrel.Consumer
	}
	var subs []sub
	for _, n := range all {
		s := "s-" + n.Name()
		subs = append(subs, sub{n.Name() + "/" + s + " (orders.#)", subscribe(t, n, "orders.#", petrel.SubscribeOptions{Name: s, Durable: true})})
	}
	subs = append(subs, sub{"c/c-eu (orders.eu.*)", subscribe(t, nodesByName["c"], "orders.eu.*", petrel.SubscribeOptions{Name: "c-eu", Durable: true})})
	for _, n := range all {
		var want []string
		for _, o := range all {
			if o != n {
				want = append(want, o.Name()+"/"+o.Name()+"/orders.#")
			}
		}
		if n.Name() != "c" {
			want = append(want, "c/c/orders.eu.*")
		}
		waitInterest(t, n, want...)
	}
	// The interest passed on between the nodes settles; what the links
	// and inboxes carry from here on is the publishes alone.
	settleTopics(t, all...)
	forwarded0, inbox0 := map[string]int64{}, map[string]petrel.QueueStats{}
	for _, n := range all {
		forwarded0[n.Name()] = n.Status().Topics.Forwarded
		inbox0[n.Name()], _ = n.QueueStat("topic:inbox")
		logs[n.Name()].take()
	}

	// Every node publishes at once.
	origins := map[copyKey]string{} // each publish's origin node
	var (
		mu     sync.Mutex
		bodies []string
		wg     sync.WaitGroup
		errs   = make([]error, len(all))
	)
	for i, n := range all {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p := n.Producer()
			for j := range perNode {
				msg := p.CreateDataMessage("orders.eu.created")
				msg.Body = fmt.Appendf(nil, "%s-%03d", n.Name(), j)
				if err := p.Send(context.Background(), msg); err != nil {
					errs[i] = fmt.Errorf("%s: publish %d: %w", n.Name(), j, err)
					return
				}
				mu.Lock()
				origins[copyKey{msg.Origin, msg.ID}] = n.Name()
				bodies = append(bodies, string(msg.Body))
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	total := len(all) * perNode
	if len(origins) != total {
		t.Fatalf("%d distinct (origin, id) for %d publishes", len(origins), total)
	}

	for _, s := range subs {
		drainOnce(t, s.name, s.c, bodies, all)
	}
	settleTopics(t, all...)
	for _, s := range subs {
		if d, err := s.c.Poll(); err == nil {
			t.Errorf("%s: extra delivery %q (origin %s) once every node settled", s.name, d.Body, d.Origin)
		} else if !errors.Is(err, petrel.ErrNoMessage) {
			t.Fatalf("%s: poll: %v", s.name, err)
		}
	}

	// What crossed the links, copy by copy.
	n := len(all)
	perPublish := map[copyKey]int{}
	fromOrigin := map[copyKey]int{}
	perLink := map[string]int{} // "from>to origin/id"
	sent := map[string]int64{}
	for _, r := range all {
		got := logs[r.Name()].take()
		var inbound int64
		for _, c := range got {
			origin, ok := origins[c.copyKey]
			if !ok {
				t.Errorf("%s took from %s a copy of no publish of the test: %+v", r.Name(), c.from, c)
				continue
			}
			inbound++
			sent[c.from]++
			perPublish[c.copyKey]++
			hops := strings.Split(c.hops, ",")
			switch {
			case origin == r.Name():
				t.Errorf("%s got back from %s a copy of its own publish %d (hops %q)", r.Name(), c.from, c.id, c.hops)
			case c.dest != "orders.eu.created":
				t.Errorf("%s: a copy from %s has destination %q, want the topic alone", r.Name(), c.from, c.dest)
			case c.hops == "" || hops[0] != origin || hops[len(hops)-1] != c.from:
				t.Errorf("%s: a copy of %s's publish %d from %s has hops %q, want %s first and %s last", r.Name(), origin, c.id, c.from, c.hops, origin, c.from)
			case slices.Contains(hops, r.Name()):
				t.Errorf("%s: a copy from %s names it in its hops %q: it went back to a node it visited", r.Name(), c.from, c.hops)
			case len(slices.Compact(slices.Sorted(slices.Values(hops)))) != len(hops):
				t.Errorf("%s: a copy from %s names a node twice in its hops %q", r.Name(), c.from, c.hops)
			}
			if c.from == origin {
				fromOrigin[c.copyKey]++
			}
			link := fmt.Sprintf("%s>%s %s/%d", c.from, r.Name(), origin, c.id)
			if perLink[link]++; perLink[link] == 2 {
				t.Errorf("%s sent %s two copies of %s's publish %d: one copy per next hop", c.from, r.Name(), origin, c.id)
			}
		}
		// The inbox stores each publish of the others once, none of its
		// own, and drops the other copies as duplicates.
		st, _ := r.QueueStat("topic:inbox")
		enq, dup := st.Enqueued-inbox0[r.Name()].Enqueued, st.Deduped-inbox0[r.Name()].Deduped
		if want := int64(total - perNode); enq != want || dup != inbound-want {
			t.Errorf("%s's topic inbox stored %d and dropped %d as duplicates of the %d copies that entered; want %d stored (the others' publishes, none of its own) and %d dropped",
				r.Name(), enq, dup, inbound, want, inbound-want)
		}
	}
	minCopies, maxCopies := 0, (n-1)*(n-1)
	for k := 1; k < n; k++ {
		minCopies += k // the first node to fan it out after the origin passes it to n-2, the next to n-3, ...
	}
	var crossed int
	for k, origin := range origins {
		got := perPublish[k]
		crossed += got
		if got < minCopies || got > maxCopies {
			t.Errorf("%s's publish %d crossed %d links, want %d to %d", origin, k.id, got, minCopies, maxCopies)
		}
		if fromOrigin[k] != n-1 {
			t.Errorf("%s sent %d copies of its publish %d, want one to each of its %d neighbours", origin, fromOrigin[k], k.id, n-1)
		}
	}
	// The forwarded counter counts exactly what entered the neighbours, node
	// by node: every copy it counts is one on a link, none sent uncounted.
	var forwarded int64
	for _, r := range all {
		fw := r.Status().Topics.Forwarded - forwarded0[r.Name()]
		forwarded += fw
		// Its own publishes to all three, the others' to at most two.
		lo, hi := int64((n-1)*perNode), int64((n-1)*perNode+(n-2)*(total-perNode))
		if fw != sent[r.Name()] || fw < lo || fw > hi {
			t.Errorf("%s counted %d copies forwarded, its neighbours took %d from it; want them equal, %d to %d", r.Name(), fw, sent[r.Name()], lo, hi)
		}
	}
	if forwarded != int64(crossed) || crossed > maxCopies*total {
		t.Errorf("forwarded %d copies, %d crossed the links; want them equal and at most %d ((n-1)^2 per publish)", forwarded, crossed, maxCopies*total)
	}
	t.Logf("%d publishes, %d copies forwarded over the links (%.2f per publish; bounds %d to %d)", total, crossed, float64(crossed)/float64(total), minCopies, maxCopies)
}
