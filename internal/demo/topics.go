package demo

import (
	"context"
	"fmt"
	"slices"
	"strings"

	petrel "github.com/petrelmq/petrel"
)

// The topic step of the demo: on the relay network A -> C -> B, durable
// subscriptions at B and at C; A publishes while its link to C is cut.
const (
	topicSpace = "sensors.#"
	topicName  = "sensors.hall.temp"
)

// publishAcrossRelay subscribes at B and C, publishes from A while the
// A-C link is cut twice, and checks that each subscription got every
// publish once, and that A sent one copy toward C for both.
func publishAcrossRelay(ctx context.Context, d *demo) error {
	r := d.relay
	subs := []struct {
		node          *petrel.Node
		name, pattern string
	}{
		{r.b, "audit", "sensors.#"},
		{r.c, "dashboard", "sensors.*.temp"},
	}
	consumers := make([]*petrel.Consumer, len(subs))
	for i, s := range subs {
		c, err := s.node.Subscribe(ctx, s.pattern, petrel.SubscribeOptions{Name: s.name, Durable: true})
		if err != nil {
			return err
		}
		defer c.Close()
		consumers[i] = c
		d.printf("%s: durable subscription %s to %s", s.node.Name(), s.name, s.pattern)
	}
	learned := waitFor(ctx, func() bool { return len(r.a.TopicInterest()) == 2 })
	if err := d.check(learned, fmt.Sprintf("%s learned both subscriptions' interest through %s", nodeA, nodeC),
		fmt.Sprintf("%s knows %+v", nodeA, r.a.TopicInterest())); err != nil {
		return err
	}
	for _, i := range r.a.TopicInterest() {
		d.printf("%s knows: %s wants %s (via %s)", nodeA, i.Node, i.Pattern, i.Neighbour)
	}
	p := r.a.Producer()
	const total = 300
	var pend []*petrel.Pending
	for i := range total {
		m := p.CreateDataMessage(topicName)
		m.Body = []byte(fmt.Sprintf("temp %03d", i))
		pend = append(pend, p.SendAsync(m))
		if i == total/3 || i == 2*total/3 {
			r.a.CutLink(nodeC)
			d.printf("cut the %s-%s link after %d publishes", nodeA, nodeC, i+1)
		}
	}
	for _, pd := range pend {
		if err := pd.Wait(ctx); err != nil {
			return err
		}
	}
	d.printf("%s published %d messages to %s", nodeA, total, topicName)
	seen := make([]map[string]int, len(subs))
	for i := range subs {
		var err error
		if seen[i], err = drainTopic(ctx, consumers[i], total); err != nil {
			return err
		}
	}
	// A duplicate would come from a resend after a cut: once the links
	// hold nothing queued or in flight, none can still be on its way.
	settled := waitFor(ctx, func() bool {
		for _, n := range []*petrel.Node{r.a, r.c} {
			for _, l := range n.Links() {
				if l.Depth != 0 || l.InFlight != 0 {
					return false
				}
			}
		}
		return true
	})
	if err := d.check(settled, "the links settled, nothing queued or in flight", fmt.Sprintf("links of %s: %+v", nodeA, r.a.Links())); err != nil {
		return err
	}
	for i, s := range subs {
		for {
			dl, err := consumers[i].Poll()
			if err != nil {
				break
			}
			seen[i][string(dl.Body)]++
			dl.Ack()
		}
		var dups []string
		for body, n := range seen[i] {
			if n > 1 {
				dups = append(dups, body)
			}
		}
		slices.Sort(dups)
		if err := d.check(len(seen[i]) == total, fmt.Sprintf("%s/%s got all %d publishes", s.node.Name(), s.name, total),
			fmt.Sprintf("%d arrived", len(seen[i]))); err != nil {
			return err
		}
		if err := d.check(len(dups) == 0, fmt.Sprintf("%s/%s got none twice", s.node.Name(), s.name),
			fmt.Sprintf("%d duplicates: %s", len(dups), strings.Join(dups, ", "))); err != nil {
			return err
		}
	}
	for _, l := range r.a.Links() {
		if l.Queue == "_petrel.topics@"+nodeC {
			d.printf("link %s: sent %d, acked %d, reconnects %d: one copy per publish for both subscriptions", l.Queue, l.Sent, l.Acked, l.Reconnects)
		}
	}
	return nil
}

// drainTopic receives and acks from c until want distinct bodies
// arrived, and returns how often each came.
func drainTopic(ctx context.Context, c *petrel.Consumer, want int) (map[string]int, error) {
	seen := map[string]int{}
	for len(seen) < want {
		dl, err := receiveOne(ctx, c)
		if err != nil {
			return seen, fmt.Errorf("%s: %d of %d arrived: %w", c.Address(), len(seen), want, err)
		}
		seen[string(dl.Body)]++
		dl.Ack()
	}
	return seen, nil
}
