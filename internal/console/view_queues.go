package console

import (
	"context"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/petrelmq/petrel/internal/adminapi"
	"github.com/petrelmq/petrel/queue"
)

// The queues page and a queue's page.

// queueView is one queue's row.
type queueView struct {
	queue.Stats
	Label string // receive, send, relay, dead letters, subscription
	// Toward is where a send or relay queue's messages go: their node,
	// and the next hop when it is another ("b via c").
	Toward            string
	EnqRate, AckRate  float64
	Spark             string // the polyline of its depth over the recent minutes
	SparkMin, SparkMx int64
	// EnqSpark and AckSpark draw its enqueues and acks per second over
	// the recent minutes, on one scale up to RateMax.
	EnqSpark, AckSpark string
	RateMax            float64
	Oldest             time.Duration // the age of its oldest message; 0 when empty
	DeadLetters        int64
	DLQ                string // its dead-letter queue's name, "" if none
	Href               string
}

// queuesPerPage bounds the rows of the Queues page, so that what a tab
// costs each tick (views, charts, oldest-message lookups, the bytes
// sent) does not grow with the node's queues.
const queuesPerPage = 100

// queueViews builds the views of the queues from index from, at most
// queuesPerPage of them.
func (s *Server) queueViews(ctx context.Context, snap Snapshot, from int) []queueView {
	shown := snap.Queues[min(from, len(snap.Queues)):min(from+queuesPerPage, len(snap.Queues))]
	relays := relaySet(snap)
	hops := make(map[string]string, len(snap.Links))
	for _, l := range snap.Links {
		hops[l.Queue] = l.NextHop
	}
	out := make([]queueView, 0, len(shown))
	dlqs := map[string]int64{} // the dead-letter queues of those shown
	for _, q := range shown {
		v := s.viewOf(snap, q, relays, hops[q.Name])
		if v.DLQ != "" {
			dlqs[v.DLQ] = 0
		}
		if q.Depth > 0 {
			v.Oldest = s.oldest(ctx, q)
		}
		out = append(out, v)
	}
	for _, q := range snap.Queues {
		if _, ok := dlqs[q.Name]; ok {
			dlqs[q.Name] = q.Depth
		}
	}
	for i := range out {
		out[i].DeadLetters = dlqs[out[i].DLQ]
	}
	return out
}

// viewOf is the view of q but for its oldest message and the count of its
// dead letters; hop is the next hop of its link, if it has one.
func (s *Server) viewOf(snap Snapshot, q queue.Stats, relays map[string]bool, hop string) queueView {
	v := queueView{Stats: q, Label: queueLabel(q, relays, snap.DeadLetterOwners), Href: "/queues/" + pathEscape(q.Name)}
	// The node's own mapping, not name+".dlq": a send queue "a@b"
	// dead-letters into "a.dlq", and an address may name its dead_letter.
	if dlq := s.src.DeadLetterQueue(q.Name); dlq != q.Name {
		v.DLQ = dlq
	}
	if q.Kind == queue.KindSend {
		v.Toward = toward(q.Name, hop)
	}
	pts := s.sampler.history("q:" + q.Name)
	v.EnqRate, v.AckRate = rates(pts)
	v.Spark, v.SparkMin, v.SparkMx = sparkline(pts)
	v.EnqSpark, v.AckSpark, v.RateMax = rateLines(pts)
	return v
}

// oldest is the age of the oldest message of q, 0 if it has none.
func (s *Server) oldest(ctx context.Context, q queue.Stats) time.Duration {
	t, ok := s.heads.made(ctx, s.src, q)
	if !ok {
		return 0
	}
	return max(time.Since(t), 0).Round(time.Second)
}

// maxHeads bounds the queues whose oldest message the console keeps.
const maxHeads = 2000

// headCache keeps when each queue's oldest message was made, with the
// queue's figures at the lookup. A lookup reads the store about ten
// times (a query per priority, then the row); while the figures are the
// same, nothing was added to the queue or left it, so its oldest is the
// same, and each tick reads the store only for the queues that changed.
type headCache struct {
	mu sync.Mutex
	m  map[string]head
}

type head struct {
	stats queue.Stats
	made  time.Time
	ok    bool
}

func (c *headCache) made(ctx context.Context, src Source, q queue.Stats) (time.Time, bool) {
	c.mu.Lock()
	h, hit := c.m[q.Name]
	c.mu.Unlock()
	if hit && h.stats == q {
		return h.made, h.ok
	}
	h = head{stats: q}
	h.made, h.ok = src.Oldest(ctx, q.Name)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil || len(c.m) >= maxHeads {
		c.m = map[string]head{}
	}
	c.m[q.Name] = h
	return h.made, h.ok
}

func relaySet(snap Snapshot) map[string]bool {
	relays := make(map[string]bool, len(snap.RelayAddresses))
	for _, a := range snap.RelayAddresses {
		relays[a] = true
	}
	return relays
}

// queueLabel names the role of q: a send queue "name@node" is a relay
// queue when this node relays the address name (relays), as the node
// decides whether it takes a message for another node; owners are the
// dead_letter queues of addresses (Snapshot.DeadLetterOwners).
func queueLabel(q queue.Stats, relays map[string]bool, owners map[string]string) string {
	switch {
	case isDeadLetter(q.Name, owners):
		return "dead letters"
	case strings.HasPrefix(q.Name, "sub:"):
		return "subscription"
	case q.Kind == queue.KindSend:
		if name, _, ok := strings.Cut(q.Name, "@"); ok && relays[name] {
			return "relay"
		}
		return "send"
	}
	return "receive"
}

// isDeadLetter reports whether the queue called name holds dead letters:
// it is named "<addr>.dlq", or an address names it as its dead_letter.
func isDeadLetter(name string, owners map[string]string) bool {
	_, ok := deadLetterAddr(name, owners)
	return ok
}

// deadLetterAddr is the address whose dead letters the queue called name
// holds, as /api/dlq/{addr} takes it: a "<addr>.dlq" stands for itself,
// a dead_letter queue is found through the address that names it.
func deadLetterAddr(name string, owners map[string]string) (string, bool) {
	if queue.IsDeadLetter(name) {
		return name, true
	}
	addr, ok := owners[name]
	return addr, ok
}

// toward is where the send queue called name sends: its node, and hop
// when that is another node.
func toward(name, hop string) string {
	node := destNode(name)
	if hop != "" && hop != node {
		return node + " via " + hop
	}
	return node
}

// sparkline draws the depths of pts in a 120×24 box, and returns their
// range.
func sparkline(pts []point) (string, int64, int64) {
	if len(pts) == 0 {
		return "", 0, 0
	}
	lo, hi := pts[0].depth, pts[0].depth
	for _, p := range pts {
		lo, hi = min(lo, p.depth), max(hi, p.depth)
	}
	var b strings.Builder
	span := float64(max(hi-lo, 1))
	for i, p := range pts {
		x := 120 * float64(i) / float64(max(len(pts)-1, 1))
		y := 22 - 20*float64(p.depth-lo)/span
		fmt.Fprintf(&b, "%.1f,%.1f ", x, y)
	}
	return strings.TrimSpace(b.String()), lo, hi
}

type queuesLive struct {
	Queues        []queueView
	Subscriptions []adminapi.Subscription
	Minutes       int
	// From is the index of the first queue shown, Total the node's
	// queues; Prev and Next the From of the pages around, -1 for none.
	From, Total, Prev, Next int
}

// queuesView is the Queues page from the queue at index from on.
func (s *Server) queuesView(ctx context.Context, snap Snapshot, from int) queuesLive {
	total := len(snap.Queues)
	from = max(min(from, (total-1)/queuesPerPage*queuesPerPage), 0)
	v := queuesLive{Queues: s.queueViews(ctx, snap, from), Subscriptions: snap.Subscriptions, Minutes: s.minutes(),
		From: from, Total: total, Prev: -1, Next: -1}
	if from > 0 {
		v.Prev = max(from-queuesPerPage, 0)
	}
	if from+queuesPerPage < total {
		v.Next = from + queuesPerPage
	}
	return v
}

func (s *Server) minutes() int { return int((time.Duration(historyLen) * s.interval).Minutes()) }

// queueLive is the live part of a queue's page: its figures.
type queueLive struct {
	Name    string
	Found   bool
	Q       queueView
	Minutes int
}

// queueView builds the view of the one queue called name only, with its
// oldest message whatever its place among the node's queues.
func (s *Server) queueView(ctx context.Context, snap Snapshot, name string) queueLive {
	v := queueLive{Name: name, Minutes: s.minutes()}
	i := slices.IndexFunc(snap.Queues, func(q queue.Stats) bool { return q.Name == name })
	if i < 0 {
		return v
	}
	q := snap.Queues[i]
	hop := ""
	for _, l := range snap.Links {
		if l.Queue == name {
			hop = l.NextHop
		}
	}
	v.Q, v.Found = s.viewOf(snap, q, relaySet(snap), hop), true
	if j := slices.IndexFunc(snap.Queues, func(q queue.Stats) bool { return q.Name == v.Q.DLQ }); j >= 0 {
		v.Q.DeadLetters = snap.Queues[j].Depth
	}
	if q.Depth > 0 {
		v.Q.Oldest = s.oldest(ctx, q)
	}
	return v
}

// messageView is one browsed message.
type messageView struct {
	adminapi.Message
	Key     string // "origin/id", what replay selects it by
	BodyLen int
	// IsText says the body is valid UTF-8, Shown is its start as text, at most maxText bytes of it,
	// and TextMore how many bytes it leaves out; Full is the admin API's
	// path that answers the message whole.
	IsText   bool
	Shown    string
	TextMore int
	Full     string
	Hex      string
	Age      time.Duration
}

// maxHex bounds the body shown in hex, and maxText the body shown as text.
// A page shows up to 1,000 messages of adminapi.MaxAnswerBytes together,
// and HTML escaping makes text up to 5 times longer (a body of '<'): nine
// bodies of 1 MB made a page of 32 MB built in memory.
const (
	maxHex  = 4096
	maxText = 16 << 10
)

// queuePage is the part of a queue's page read once, at load: its
// messages.
type queuePage struct {
	Name  string
	IsDLQ bool
	// DLQAddr is what the replay and purge of a dead-letter queue name
	// in /api/dlq/{addr}: the queue itself, or the address whose
	// dead_letter it is.
	DLQAddr  string
	Messages []messageView
	Limit    int
	// After is the key the page starts after, "" at the head; Next the
	// key of the next page, "" when the queue held no more.
	After, Next string
	// More says the messages stopped before Limit at MaxBytes of them.
	More     bool
	MaxBytes int64
	Err      string
}

func (s *Server) queueMessages(ctx context.Context, name, after string, limit int) queuePage {
	p := queuePage{Name: name, Limit: limit, After: after, MaxBytes: adminapi.MaxAnswerBytes}
	p.DLQAddr, p.IsDLQ = deadLetterAddr(name, s.sampler.snapshot().DeadLetterOwners)
	pg, err := s.src.Browse(ctx, name, after, limit)
	if err != nil {
		p.Err = err.Error()
		return p
	}
	p.More, p.Next = pg.Cut, pg.Next
	prev := after
	for i, m := range pg.Messages {
		v := messageView{Message: m, Key: fmt.Sprintf("%s/%d", m.Origin, m.ID), BodyLen: len(m.Body)}
		v.Hex = hexDump(m.Body)
		if m.Text != nil {
			v.IsText = true
			v.Shown = textStart(*m.Text)
			v.TextMore = len(*m.Text) - len(v.Shown)
		}
		if !m.Timestamp.IsZero() {
			v.Age = max(time.Since(m.Timestamp), 0).Round(time.Second)
		}
		// The message after the one before it: the first of a browse of 1.
		v.Full = adminapi.QueueBrowsePath(name, 1, prev)
		prev = pg.Keys[i]
		// What the page shows of the body is in Shown and Hex: the rest
		// may go before the page is rendered.
		v.Body, v.Text = nil, nil
		p.Messages = append(p.Messages, v)
	}
	return p
}

// textStart returns the first maxText bytes of t, cut at a rune's start.
func textStart(t string) string {
	if len(t) <= maxText {
		return t
	}
	n := maxText
	for n > 0 && !utf8.RuneStart(t[n]) {
		n--
	}
	return t[:n]
}

func hexDump(b []byte) string {
	if len(b) > maxHex {
		return hex.Dump(b[:maxHex]) + fmt.Sprintf("… %d more bytes\n", len(b)-maxHex)
	}
	return hex.Dump(b)
}

// rateLines draws the per-second rates of a series' two counters between
// samples, in a 120×24 box on one scale, and returns its top.
func rateLines(pts []point) (string, string, float64) {
	if len(pts) < 2 {
		return "", "", 0
	}
	ra := make([]float64, len(pts)-1)
	rb := make([]float64, len(pts)-1)
	top := 0.0
	for i := 1; i < len(pts); i++ {
		secs := pts[i].at.Sub(pts[i-1].at).Seconds()
		if secs <= 0 {
			continue
		}
		ra[i-1] = float64(max(pts[i].a-pts[i-1].a, 0)) / secs
		rb[i-1] = float64(max(pts[i].b-pts[i-1].b, 0)) / secs
		top = max(top, ra[i-1], rb[i-1])
	}
	draw := func(r []float64) string {
		var b strings.Builder
		for i, v := range r {
			x := 120 * float64(i) / float64(max(len(r)-1, 1))
			y := 22.0
			if top > 0 {
				y -= 20 * v / top
			}
			fmt.Fprintf(&b, "%.1f,%.1f ", x, y)
		}
		return strings.TrimSpace(b.String())
	}
	return draw(ra), draw(rb), top
}
