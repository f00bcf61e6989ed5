package demo

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	petrel "github.com/petrelmq/petrel"
	"github.com/petrelmq/petrel/queue"
)

// The demo's addresses: one per consumption mode, so that each mode gets a
// full batch and shows priority order on its own.
const (
	pollAddr    = "demo.poll"
	receiveAddr = "demo.receive"
	listenAddr  = "demo.listen"
	retryAddr   = "demo.retry"
)

var batchAddrs = []string{pollAddr, receiveAddr, listenAddr}

// retryPolicy dead-letters at the second failed delivery, with a backoff
// short enough to watch.
var retryPolicy = queue.Policy{
	MaxDeliveries:      2,
	RedeliveryDelay:    50 * time.Millisecond,
	MaxRedeliveryDelay: 50 * time.Millisecond,
}

func demoSteps() []demoStep {
	return []demoStep{
		{"start an embedded node", startDemoNode},
		{"send command and data messages of mixed priorities", sendBatches},
		{"let the short TTLs run out", letExpire},
		{"consume with Poll (non-blocking)", consumeWithPoll},
		{"consume with Receive (blocking)", consumeWithReceive},
		{"consume with Listen (handler)", consumeWithListen},
		{"check that expired messages never arrived", checkExpired},
		{"nack, redeliver, dead-letter", nackToDeadLetter},
		{"start three nodes on loopback: A -> C (relay) -> B", startRelayNetwork},
		{"send mixed priorities from A across the relay to B", sendAcrossRelay},
		{"cut the A-C link while A sends; nothing is lost", cutLink},
		{"publish to a topic from A, subscribers at C and B; cut the A-C link while A publishes", publishAcrossRelay},
		{"send a file from A across the relay to B, cutting the link mid-way", sendFileAcrossRelay},
	}
}

func startDemoNode(ctx context.Context, d *demo) error {
	n, err := petrel.Open(ctx, petrel.Config{
		Name:      "demo-1",
		DataDir:   filepath.Join(d.dir, "demo-1"),
		Logger:    d.log,
		Addresses: []petrel.AddressConfig{{Name: retryAddr, Queue: retryPolicy}},
	})
	if err != nil {
		return err
	}
	d.nodes = append(d.nodes, n)
	d.printf("node %s, id %s, data in a temporary directory", n.Name(), n.ID())
	d.printf("other addresses are created on first use")
	return nil
}

// node returns the demo's first node, the only one so far.
func (d *demo) node() *petrel.Node { return d.nodes[0] }

func sendBatches(ctx context.Context, d *demo) error {
	d.printf("in this order, to %s:", strings.Join(batchAddrs, ", "))
	for _, m := range demoBatch {
		line := fmt.Sprintf("  prio %d  %-7s %-12s %-22q", m.priority, m.kind, m.subject, m.body)
		if m.ttl > 0 {
			line += " ttl " + m.ttl.String()
		}
		d.printf("%s", strings.TrimRight(line, " "))
	}
	p := d.node().Producer()
	for _, addr := range batchAddrs[:2] {
		for _, m := range demoBatch {
			if err := p.Send(ctx, m.build(p, addr)); err != nil {
				return err
			}
		}
	}
	d.printf("Send returned for each message to %s and %s: each one is durable", pollAddr, receiveAddr)
	// The third address gets the batch with SendAsync: all in flight at
	// once, sharing group commits, in the same order.
	pending := make([]*petrel.Pending, len(demoBatch))
	for i, m := range demoBatch {
		pending[i] = p.SendAsync(m.build(p, listenAddr))
	}
	for _, pd := range pending {
		if err := pd.Wait(ctx); err != nil {
			return err
		}
	}
	d.printf("SendAsync sent the batch to %s, and every Pending completed", listenAddr)
	return nil
}

func letExpire(ctx context.Context, d *demo) error {
	wait := demoTTL + 100*time.Millisecond
	d.printf("waiting %v; %d messages per address have a %v TTL", wait, len(expiring()), demoTTL)
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(wait):
		return nil
	}
}

// show prints and records one delivery.
func (d *demo) show(mode string, dl *petrel.Delivery) {
	d.received = append(d.received, string(dl.Body))
	d.printf("%-8s prio %d  %-7s %-12s %q", mode, dl.Priority, dl.Kind, subject(dl.Message), dl.Body)
}

// checkOrder checks that a mode delivered exactly the live messages in
// priority order.
func (d *demo) checkOrder(mode string, got []string) error {
	want := liveInOrder()
	return d.check(slices.Equal(got, want),
		fmt.Sprintf("%s delivered the %d live messages in priority order (%s), FIFO within a priority",
			mode, len(want), priorities(want)),
		fmt.Sprintf("got %q", got))
}

func consumeWithPoll(_ context.Context, d *demo) error {
	c, err := d.node().Consumer(pollAddr)
	if err != nil {
		return err
	}
	var got []string
	// The bound only guards the demo against a queue that never empties.
	for range len(demoBatch) + 1 {
		dl, err := c.Poll()
		if errors.Is(err, petrel.ErrNoMessage) {
			d.printf("Poll: no message now (ErrNoMessage)")
			break
		}
		if err != nil {
			return err
		}
		d.show("Poll", dl)
		got = append(got, string(dl.Body))
		if err := dl.Ack(); err != nil {
			return err
		}
	}
	return d.checkOrder("Poll", got)
}

func consumeWithReceive(ctx context.Context, d *demo) error {
	c, err := d.node().Consumer(receiveAddr)
	if err != nil {
		return err
	}
	var got []string
	for range liveInOrder() {
		dl, err := receiveOne(ctx, c)
		if err != nil {
			return err
		}
		d.show("Receive", dl)
		got = append(got, string(dl.Body))
		if err := dl.Ack(); err != nil {
			return err
		}
	}
	if err := d.checkOrder("Receive", got); err != nil {
		return err
	}
	return d.receiveBlocks(ctx, c)
}

func receiveOne(ctx context.Context, c *petrel.Consumer) (*petrel.Delivery, error) {
	return receiveWithin(ctx, c, demoTimeout)
}

// receiveWithin is receiveOne with a bound of its own, for a wait that
// moves much data.
func receiveWithin(ctx context.Context, c *petrel.Consumer, within time.Duration) (*petrel.Delivery, error) {
	ctx, cancel := context.WithTimeout(ctx, within)
	defer cancel()
	dl, err := c.Receive(ctx)
	if err != nil {
		return nil, fmt.Errorf("receive from %s: %w", c.Address(), err)
	}
	return dl, nil
}

// receiveBlocks shows Receive waiting on an empty queue and returning when
// a message is sent.
func (d *demo) receiveBlocks(ctx context.Context, c *petrel.Consumer) error {
	type result struct {
		dl  *petrel.Delivery
		err error
	}
	done := make(chan result, 1)
	go func() {
		dl, err := receiveOne(ctx, c)
		done <- result{dl, err}
	}()
	// Give Receive time to block, so that what follows shows it waking up.
	select {
	case r := <-done:
		return d.check(false, "Receive blocks on an empty queue", fmt.Sprintf("it returned at once (error %v)", r.err))
	case <-time.After(100 * time.Millisecond):
	}
	d.printf("Receive is blocked on the empty queue; sending one more message")
	p := d.node().Producer()
	late := demoMessage{kind: demoBatch[0].kind, priority: 4, subject: "reading", body: "late reading"}
	sent := time.Now()
	if err := p.Send(ctx, late.build(p, receiveAddr)); err != nil {
		return err
	}
	r := <-done
	if r.err != nil {
		return r.err
	}
	d.show("Receive", r.dl)
	if err := r.dl.Ack(); err != nil {
		return err
	}
	return d.check(string(r.dl.Body) == late.body,
		fmt.Sprintf("Receive returned the late message %v after it was sent", time.Since(sent).Round(time.Millisecond)),
		fmt.Sprintf("it returned %q", r.dl.Body))
}

func consumeWithListen(ctx context.Context, d *demo) error {
	c, err := d.node().Consumer(listenAddr)
	if err != nil {
		return err
	}
	want := len(liveInOrder())
	var (
		mu   sync.Mutex
		got  []string
		done = make(chan struct{})
	)
	// One handler at a time keeps the order; with more, Listen trades order
	// for throughput.
	l, err := c.Listen(func(_ context.Context, dl *petrel.Delivery) error {
		mu.Lock()
		defer mu.Unlock()
		d.show("Listen", dl)
		got = append(got, string(dl.Body))
		if len(got) == want {
			close(done)
		}
		return nil
	}, petrel.ListenOptions{Concurrency: 1})
	if err != nil {
		return err
	}
	select {
	case <-done:
	case <-time.After(demoTimeout):
	case <-ctx.Done():
	}
	// Stop waits for the handler in progress, and so for its ack.
	l.Stop()
	handled, failed, _ := l.Counts()
	mu.Lock()
	defer mu.Unlock()
	if err := d.checkOrder("Listen", got); err != nil {
		return err
	}
	return d.check(handled == int64(want) && failed == 0,
		fmt.Sprintf("the handler returned nil %d times, so Listen acked each message", want),
		fmt.Sprintf("handled %d, failed %d", handled, failed))
}

func checkExpired(ctx context.Context, d *demo) error {
	n := len(expiring())
	for _, addr := range batchAddrs {
		var s queue.Stats
		ok := waitFor(ctx, func() bool {
			s, _ = d.node().QueueStat(addr)
			return s.Expired == int64(n) && s.Depth == 0
		})
		d.printf("%-13s enqueued %d, acked %d, expired %d, depth %d", addr, s.Enqueued, s.Acked, s.Expired, s.Depth)
		if err := d.check(ok, fmt.Sprintf("%s counted %d expired messages and is empty", addr, n),
			fmt.Sprintf("expired %d, depth %d", s.Expired, s.Depth)); err != nil {
			return err
		}
	}
	var leaked []string
	for _, body := range d.received {
		if slices.Contains(expiring(), body) {
			leaked = append(leaked, body)
		}
	}
	return d.check(len(leaked) == 0,
		fmt.Sprintf("none of the %d messages with a %v TTL was delivered, in any mode", n*len(batchAddrs), demoTTL),
		fmt.Sprintf("delivered %q", leaked))
}

func nackToDeadLetter(ctx context.Context, d *demo) error {
	n := d.node()
	p := n.Producer()
	job := demoMessage{kind: demoBatch[1].kind, priority: 5, subject: "run-job", body: "flaky job"}
	if err := p.Send(ctx, job.build(p, retryAddr)); err != nil {
		return err
	}
	c, err := n.Consumer(retryAddr)
	if err != nil {
		return err
	}
	d.printf("%s allows %d deliveries, %v apart", retryAddr, retryPolicy.MaxDeliveries, retryPolicy.RedeliveryDelay)
	var last time.Time
	for attempt := 1; attempt <= retryPolicy.MaxDeliveries; attempt++ {
		dl, err := receiveOne(ctx, c)
		if err != nil {
			return err
		}
		since := ""
		if !last.IsZero() {
			since = fmt.Sprintf(", %v after the nack", time.Since(last).Round(time.Millisecond))
		}
		d.printf("delivery %d of %q%s; nacking it", dl.Attempt, dl.Body, since)
		if err := d.check(dl.Attempt == attempt, fmt.Sprintf("the delivery is attempt %d", attempt),
			fmt.Sprintf("it is attempt %d", dl.Attempt)); err != nil {
			return err
		}
		last = time.Now()
		if err := dl.Nack("simulated handler failure"); err != nil {
			return err
		}
	}
	return d.checkDeadLetter(ctx, job.body)
}

// checkDeadLetter takes the message from the dead-letter address and shows
// why it is there.
func (d *demo) checkDeadLetter(ctx context.Context, body string) error {
	dlq := retryPolicy.DeadLetter
	if dlq == "" {
		dlq = retryAddr + queue.DeadLetterSuffix
	}
	c, err := d.node().Consumer(dlq)
	if err != nil {
		return err
	}
	dl, err := receiveOne(ctx, c)
	if err != nil {
		return err
	}
	d.printf("%s holds %q, reason: %s", dlq, dl.Body, dl.Reason)
	if err := dl.Ack(); err != nil {
		return err
	}
	if err := d.check(string(dl.Body) == body && strings.Contains(dl.Reason, "simulated handler failure"),
		fmt.Sprintf("after %d failed deliveries the message moved to %s with its reason", retryPolicy.MaxDeliveries, dlq),
		fmt.Sprintf("got %q, reason %q", dl.Body, dl.Reason)); err != nil {
		return err
	}
	var s queue.Stats
	ok := waitFor(ctx, func() bool {
		s, _ = d.node().QueueStat(retryAddr)
		return s.DeadLettered == 1 && s.Depth == 0
	})
	return d.check(ok, fmt.Sprintf("%s counted 1 dead-lettered message and is empty", retryAddr),
		fmt.Sprintf("dead-lettered %d, depth %d", s.DeadLettered, s.Depth))
}
