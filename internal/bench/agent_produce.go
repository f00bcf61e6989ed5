package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	petrel "github.com/petrelmq/petrel"
	"github.com/petrelmq/petrel/internal/nodeproc"
	"github.com/petrelmq/petrel/message"
)

// ProduceOptions are the flags of `bench agent produce`.
type ProduceOptions struct {
	To, Priorities, KeyPrefix, ThenUrgent string
	Messages, Size, Window                int
	// Queues spreads the messages round robin over that many addresses at
	// the destination node, QueueName(address, i, Queues): as many send
	// queues here, one destination each.
	Queues               int
	Rate                 float64
	KeysLog, WaitDrained bool
	WaitRoute            time.Duration
	// Topic, when set, receives every TopicEvery-th message instead of To;
	// its keys get the prefix KeyPrefix+"t", so a checker tells the two
	// streams apart.
	Topic      string
	TopicEvery int
	// Subscribe is "name=pattern": a durable subscription made at start,
	// before the ready line's traffic.
	Subscribe string
	// FileEvery, when above 0, makes every FileEvery-th message a file
	// message to To instead: a file of FileSize bytes written to FileDir,
	// named and filled with its key (FileContent), key prefix
	// KeyPrefix+"f". It takes precedence over Topic.
	FileEvery, FileSize int
	FileDir             string
	// WaitInterestOf lists nodes (comma-separated) whose topic interest
	// must be known here before the first send: a publish made earlier
	// would go nowhere, by the rules of topics.
	WaitInterestOf string
	// DirectInterest makes WaitInterestOf wait for each node's interest
	// from that node itself, a neighbour, and not only through another.
	// In a mesh a node's interest may come through a relay first: the
	// publishes made then go the longer way, and may reach that node
	// after later ones that took the direct link once its interest came.
	DirectInterest bool
	// WaitInterest is how many pieces of topic interest the node must have
	// learned from its neighbours before it publishes: a publish to a topic
	// that no known subscription wants is dropped as unrouted.
	WaitInterest int
}

// producedEvent is printed once every send is durable.
type producedEvent struct {
	Event string `json:"event"` // "produced"
	Count int    `json:"count"`
	// StartNs is when the first send was submitted, DurableNs when the last
	// one (the urgent one included) was durable; Unix nanoseconds.
	StartNs   int64 `json:"start_ns"`
	DurableNs int64 `json:"durable_ns"`
	// UrgentNs is when the --then-urgent message was submitted, 0 if none.
	UrgentNs  int64   `json:"urgent_ns,omitempty"`
	PeakRSSMB float64 `json:"peak_rss_mb"`
	// The node's group commits until then (see commitWatch).
	commitFigures
}

// DrainedEvent is printed once every send queue of the node is empty.
type DrainedEvent struct {
	Event     string  `json:"event"` // "drained"
	DrainedNs int64   `json:"drained_ns"`
	PeakRSSMB float64 `json:"peak_rss_mb"`
	// Memory grown between before the first send and once every send
	// queue is drained, after a GC: Go heap and stacks, and the resident
	// set (which counts SQLite's own caches too), in KiB.
	GoMemGrowthKiB float64 `json:"go_mem_growth_kib"`
	RSSGrowthKiB   float64 `json:"rss_growth_kib"`
	// With --queues above 1, the same growth for MoreQueues more send
	// queues, one message each, made once the first were drained and
	// idle: what the caches and buffers that the first burst grew do not
	// weigh, the cost of one more idle send queue.
	MoreQueues         int     `json:"more_queues,omitempty"`
	MoreGoMemGrowthKiB float64 `json:"more_go_mem_growth_kib,omitempty"`
	MoreRSSGrowthKiB   float64 `json:"more_rss_growth_kib,omitempty"`
}

// validate returns the fixed priority, or -1 for mixed.
func (o ProduceOptions) validate() (int, error) {
	if o.To == "" {
		return 0, usageErrorf("produce needs --to address@node")
	}
	for _, c := range []struct {
		flag   string
		v, min int
	}{{"messages", o.Messages, 0}, {"size", o.Size, 0}, {"window", o.Window, 1}, {"queues", o.Queues, 1}} {
		if c.v < c.min {
			return 0, usageErrorf("invalid argument %d for \"--%s\" flag: want at least %d", c.v, c.flag, c.min)
		}
	}
	if o.Rate < 0 {
		return 0, usageErrorf("invalid argument %v for \"--rate\" flag: want 0 or more", o.Rate)
	}
	if o.KeyPrefix == "" || strings.ContainsAny(o.KeyPrefix, " \t\n") {
		return 0, usageErrorf("invalid argument %q for \"--key-prefix\" flag: want a word without spaces", o.KeyPrefix)
	}
	if o.FileEvery > 0 && (o.FileDir == "" || o.FileSize < 1) {
		return 0, usageErrorf("--file-every needs --file-dir and a --file-size of 1 or more")
	}
	if o.Topic != "" && o.TopicEvery < 1 {
		return 0, usageErrorf("--topic needs --topic-every 1 or more")
	}
	if o.Subscribe != "" {
		if name, pattern, ok := strings.Cut(o.Subscribe, "="); !ok || name == "" || pattern == "" {
			return 0, usageErrorf("invalid argument %q for \"--subscribe\" flag: want name=pattern", o.Subscribe)
		}
	}
	if o.Priorities == "mixed" {
		return -1, nil
	}
	p, err := strconv.Atoi(o.Priorities)
	if err != nil || p < message.MinPriority || p > message.MaxPriority {
		return 0, usageErrorf("invalid argument %q for \"--priorities\" flag: want 0 to 9, or mixed", o.Priorities)
	}
	return p, nil
}

// RunAgentProduce runs `bench agent produce`: it opens the node, prints its
// ready line, sends the messages, prints the produced (and with
// o.WaitDrained the drained) event, and keeps the node open until stdin
// closes or a signal comes.
func RunAgentProduce(ctx context.Context, open OpenFunc, o ProduceOptions, stdin io.Reader, stdout io.Writer) error {
	prio, err := o.validate()
	if err != nil {
		return err
	}
	ctx, cancel := agentContext(ctx, stdin)
	defer cancel()
	a, err := openAgent(ctx, open, stdout)
	if err != nil {
		return err
	}
	if err := a.subscribe(ctx, o); err != nil {
		return a.close(err)
	}
	if err := a.waitReachable(ctx, o); err != nil {
		return a.close(err)
	}
	if err := a.waitInterest(ctx, o.WaitInterest); err != nil {
		return a.close(err)
	}
	if err := a.waitInterestOf(ctx, o.WaitInterestOf, o.DirectInterest); err != nil {
		return a.close(interrupted(ctx, err))
	}
	if err := a.produce(ctx, o, prio); err != nil {
		return a.close(interrupted(ctx, err))
	}
	<-ctx.Done()
	return a.close(nil)
}

// waitReachable waits, with --wait-route, until the destination's node is
// reachable, as when discovery has yet to hear it.
func (a *agent) waitReachable(ctx context.Context, o ProduceOptions) error {
	if o.WaitRoute <= 0 {
		return nil
	}
	_, node, err := message.ParseDestination(o.To)
	if err != nil || node == "" {
		return nil
	}
	deadline := time.Now().Add(o.WaitRoute)
	for !a.node.Reachable(node) {
		if time.Now().After(deadline) {
			return fmt.Errorf("node %s not reachable after %v", node, o.WaitRoute)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
	return nil
}

// waitInterest waits until the node learned at least n pieces of topic
// interest from its neighbours.
func (a *agent) waitInterest(ctx context.Context, n int) error {
	t := time.NewTicker(10 * time.Millisecond)
	defer t.Stop()
	for len(a.node.TopicInterest()) < n {
		select {
		case <-ctx.Done():
			return fmt.Errorf("wait for %d pieces of topic interest (have %v): %w", n, a.node.TopicInterest(), ctx.Err())
		case <-t.C:
		}
	}
	return nil
}

// subscribe makes --subscribe's durable subscription. Its consumer is
// closed at once: the subscription keeps what is published for it.
func (a *agent) subscribe(ctx context.Context, o ProduceOptions) error {
	if o.Subscribe == "" {
		return nil
	}
	name, pattern, _ := strings.Cut(o.Subscribe, "=")
	c, err := a.node.Subscribe(ctx, pattern, petrel.SubscribeOptions{Name: name, Durable: true})
	if err != nil {
		return fmt.Errorf("subscribe %s to %s: %w", name, pattern, err)
	}
	return c.Close()
}

// waitInterestOf waits until this node has learned the topic interest of
// every node of --wait-interest-of but itself; with direct, from each of
// them itself (see ProduceOptions.DirectInterest).
func (a *agent) waitInterestOf(ctx context.Context, nodes string, direct bool) error {
	if nodes == "" {
		return nil
	}
	t := time.NewTicker(20 * time.Millisecond)
	defer t.Stop()
	for {
		known := map[string]bool{a.node.Name(): true}
		for _, in := range a.node.TopicInterest() {
			if !direct || in.Neighbour == in.Node {
				known[in.Node] = true
			}
		}
		missing := ""
		for n := range strings.SplitSeq(nodes, ",") {
			if !known[n] {
				missing = n
			}
		}
		if missing == "" {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("wait for the topic interest of %s: %w", missing, ctx.Err())
		case <-t.C:
		}
	}
}

func (a *agent) produce(ctx context.Context, o ProduceOptions, prio int) (err error) {
	stop, err := cpuProfile(a.node.Name())
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, stop()) }()
	before := sampleMemory()
	start := time.Now()
	if err := a.sendAll(ctx, o, prio, start); err != nil {
		return err
	}
	ev := producedEvent{Event: "produced", Count: o.Messages, StartNs: start.UnixNano()}
	if o.ThenUrgent != "" {
		p := a.node.Producer()
		m := p.CreateDataMessage(o.To)
		m.Priority = message.MaxPriority
		m.Body = keyedBody(o.ThenUrgent, o.Size)
		ev.UrgentNs = time.Now().UnixNano()
		m.Properties.Set(sentNsProperty, message.Int64(ev.UrgentNs))
		if err := p.Send(ctx, m); err != nil {
			return fmt.Errorf("send the urgent message: %w", err)
		}
	}
	ev.DurableNs = time.Now().UnixNano()
	ev.PeakRSSMB, ev.commitFigures = currentPeakRSS(), agentCommits.figures()
	if err := a.event(ev); err != nil {
		return err
	}
	if !o.WaitDrained {
		return nil
	}
	if err := a.waitDrained(ctx); err != nil {
		return err
	}
	drained := time.Now()
	// An idle send queue's cost: the store gives back the buffers a
	// burst grew once it has been idle for half a second.
	if err := sleepUntil(ctx, drained.Add(idleBeforeSample)); err != nil {
		return err
	}
	after := sampleMemory()
	if err := heapProfile("a"); err != nil {
		return err
	}
	ev2 := DrainedEvent{Event: "drained", DrainedNs: drained.UnixNano(), PeakRSSMB: currentPeakRSS(),
		GoMemGrowthKiB: round(after.goKiB-before.goKiB, 1), RSSGrowthKiB: round(after.rssKiB-before.rssKiB, 1)}
	if o.Queues > 1 {
		more, err := a.moreQueues(ctx, o)
		if err != nil {
			return err
		}
		ev2.MoreQueues = o.Queues
		ev2.MoreGoMemGrowthKiB, ev2.MoreRSSGrowthKiB = round(more.goKiB-after.goKiB, 1), round(more.rssKiB-after.rssKiB, 1)
	}
	return a.event(ev2)
}

// moreQueues sends one message to each of o.Queues more addresses, the
// next names after those of the run (see destinations), waits until they
// are drained and idle, and samples the memory then.
func (a *agent) moreQueues(ctx context.Context, o ProduceOptions) (memSample, error) {
	p := a.node.Producer()
	var pending []*petrel.Pending
	for i, to := range destinations(o.To, 2*o.Queues)[o.Queues:] {
		m := p.CreateDataMessage(to)
		m.Body = keyedBody(fmt.Sprintf("%smore-%d", o.KeyPrefix, i), o.Size)
		pending = append(pending, p.SendAsync(m))
	}
	for _, pd := range pending {
		if err := pd.Wait(ctx); err != nil {
			return memSample{}, fmt.Errorf("send to the more queues: %w", err)
		}
	}
	if err := a.waitDrained(ctx); err != nil {
		return memSample{}, err
	}
	if err := sleepUntil(ctx, time.Now().Add(idleBeforeSample)); err != nil {
		return memSample{}, err
	}
	return sampleMemory(), nil
}

// keyedPending is a send in flight and its key ("" without --keys-log).
type keyedPending struct {
	pd  *petrel.Pending
	key string
}

// sendAll submits the messages and returns once all are durable, or with
// the first failure. A completer goroutine waits on the sends in
// submission order (the store commits one producer's sends in order), so
// "ok" lines come out in order and a window slot frees as soon as its send
// is durable.
func (a *agent) sendAll(ctx context.Context, o ProduceOptions, prio int, start time.Time) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	slots := make(chan struct{}, o.Window)
	pending := make(chan keyedPending, o.Window)
	done := make(chan struct{})
	go func() {
		defer close(done)
		a.completeSends(ctx, pending, slots, o.KeysLog, cancel)
	}()
	err := a.submitSends(ctx, o, prio, start, slots, pending)
	close(pending)
	<-done
	if cause := context.Cause(ctx); cause != nil {
		return cause
	}
	return err
}

func (a *agent) completeSends(ctx context.Context, pending <-chan keyedPending, slots <-chan struct{}, keysLog bool, fail context.CancelCauseFunc) {
	for kp := range pending {
		err := kp.pd.Wait(ctx)
		if err == nil && keysLog {
			err = a.out.line("ok " + kp.key)
		}
		if err != nil {
			fail(fmt.Errorf("send %s: %w", kp.key, err))
		}
		<-slots
	}
}

func (a *agent) submitSends(ctx context.Context, o ProduceOptions, prio int, start time.Time, slots chan<- struct{}, pending chan<- keyedPending) error {
	p := a.node.Producer()
	shared := make([]byte, o.Size) // never written: encoded at submit
	dests := destinations(o.To, o.Queues)
	for i := range o.Messages {
		if o.Rate > 0 {
			due := start.Add(time.Duration(float64(i) / o.Rate * float64(time.Second)))
			if err := sleepUntil(ctx, due); err != nil {
				return context.Cause(ctx)
			}
		}
		select {
		case slots <- struct{}{}:
		case <-ctx.Done():
			return context.Cause(ctx)
		}
		pr := prio
		if pr < 0 {
			pr = i % (message.MaxPriority + 1)
		}
		to, prefix := dests[i%len(dests)], o.KeyPrefix
		file := o.FileEvery > 0 && i%o.FileEvery == o.FileEvery-1
		switch {
		case file:
			prefix = o.KeyPrefix + "f"
		case o.Topic != "" && i%o.TopicEvery == o.TopicEvery-1:
			to, prefix = o.Topic, o.KeyPrefix+"t"
		}
		m := p.CreateDataMessage(to)
		m.Data.DataType = "bench"
		m.Body = shared
		var key string
		if o.KeysLog || file {
			key = fmt.Sprintf("%s-%d-%d", prefix, pr, i)
			m.Body = keyedBody(key, o.Size)
		}
		if file {
			path := filepath.Join(o.FileDir, key)
			if err := os.WriteFile(path, FileContent(key, o.FileSize), 0o644); err != nil {
				return err
			}
			m = p.CreateFileMessage(to)
			m.File.SendFilePath = path
			m.Body = keyedBody(key, o.Size)
		}
		m.Priority = uint8(pr)
		if o.KeysLog {
			if err := a.out.line("attempt " + key); err != nil {
				return err
			}
		}
		m.Properties.Set(sentNsProperty, message.Int64(time.Now().UnixNano()))
		pending <- keyedPending{pd: p.SendAsync(m), key: key}
	}
	return nil
}

// QueueName is the i-th of n addresses a bench spreads its messages over:
// base itself when there is one.
func QueueName(base string, i, n int) string {
	if n <= 1 {
		return base
	}
	return fmt.Sprintf("%s-%d", base, i)
}

// destinations returns the n destinations address-i@node of to.
func destinations(to string, n int) []string {
	addr, node, err := message.ParseDestination(to)
	if err != nil || n <= 1 {
		return []string{to}
	}
	out := make([]string, n)
	for i := range out {
		out[i] = QueueName(addr, i, n)
		if node != "" {
			out[i] += "@" + node
		}
	}
	return out
}

// memSample is this process's memory at one moment, after a GC that
// returned the free heap to the system, so that the resident set is what
// is in use and not what a burst once took.
type memSample struct{ goKiB, rssKiB float64 }

func sampleMemory() memSample {
	debug.FreeOSMemory()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	s := memSample{goKiB: float64(ms.HeapInuse+ms.StackInuse) / 1024}
	if rss, err := nodeproc.CurrentRSSKiB(); err == nil {
		s.rssKiB = rss
	}
	return s
}

// keyedBody is key, a space, and padding up to size bytes: a checker reads
// the key back as the body's first word.
func keyedBody(key string, size int) []byte {
	b := make([]byte, max(size, len(key)+1))
	copy(b, key)
	for i := len(key); i < len(b); i++ {
		b[i] = ' '
	}
	return b
}

// FileContent is the content of the file of key: the key and a newline,
// repeated up to size bytes. A checker rebuilds it from the key.
func FileContent(key string, size int) []byte {
	unit := key + "\n"
	b := make([]byte, size)
	for i := range b {
		b[i] = unit[i%len(unit)]
	}
	return b
}

// KeyOf returns the key at the start of a keyed body.
func KeyOf(body []byte) string {
	s := string(body)
	if i := strings.IndexByte(s, ' '); i >= 0 {
		return s[:i]
	}
	return s
}

// waitDrained polls the node's links until every send queue is empty: the
// next hops acked (and so committed) everything.
// idleBeforeSample is how long a waits, idle, between its send queues
// drained and its memory sampled.
const idleBeforeSample = time.Second

func (a *agent) waitDrained(ctx context.Context) error {
	// Every look builds each link's status: with a thousand send queues a
	// look every 10ms took a seventh of a's CPU while b still received,
	// which slowed the very figure being measured.
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	for {
		drained := true
		for _, l := range a.node.Links() {
			if l.Depth > 0 {
				drained = false
			}
		}
		if drained {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("wait for the send queues to drain: %w", ctx.Err())
		case <-t.C:
		}
	}
}

func sleepUntil(ctx context.Context, t time.Time) error {
	d := time.Until(t)
	if d <= 0 {
		return nil
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// currentPeakRSS is this process's VmHWM in MiB, 0 where /proc is missing.
func currentPeakRSS() float64 {
	rss, err := nodeproc.PeakRSSMB()
	if err != nil {
		return 0
	}
	return round(rss, 2)
}
