package petrel

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/petrelmq/petrel/message"
	"github.com/petrelmq/petrel/queue"
)

// The browse of a queue's messages a page at a time, for GET
// /api/queues/{queue}/messages and the console's queue page.
//
// A page starts after a key: the priority and id of the last message of
// the page before (queue.Key), which the answer hands back. The queue
// seeks there along its index, so a page costs the same deep in a queue
// of a million messages as at its head. The older offset, a count of
// messages to skip, still works: it becomes the key before the offset-th
// message, counted along the index without reading a message
// (queue.KeyAt). It read and decoded every message before it: 29 s of a
// core for one page at offset 999,000.
//
// Browses read the store's read connections and decode messages: at most
// maxBrowses run at once on a node, the API's and the console's together.
// One past them waits up to browseWait for a slot, then is refused with
// errTooManyBrowses (503 and Retry-After). Before, 20 deep browses at once
// held a node's cores for 7.5 minutes.

// maxBrowses bounds the browses in progress on a node; browseWait is how
// long one past it waits for a slot. Variables so that tests can lower
// them.
var (
	maxBrowses = 4
	browseWait = 2 * time.Second
)

// errTooManyBrowses refuses a browse past maxBrowses.
var errTooManyBrowses = errors.New("too many browses in progress")

// browseLimit holds the slots of the browses in progress.
type browseLimit struct {
	slots   chan struct{}
	gauge   prometheus.Gauge
	refused prometheus.Counter
	// read counts the messages browses read from their queues, a page at
	// a time: what browses cost.
	read prometheus.Counter
}

func newBrowseLimit(reg *prometheus.Registry) *browseLimit {
	b := &browseLimit{
		slots: make(chan struct{}, maxBrowses),
		gauge: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "petrel_admin_browses",
			Help: "Browses of a queue's messages in progress (GET /api/queues/{queue}/messages and the console's queue page).",
		}),
		refused: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "petrel_admin_browses_refused_total",
			Help: "Browses refused because as many as the bound were in progress for the time one waits.",
		}),
		read: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "petrel_admin_browse_messages_read_total",
			Help: "Messages browses read from their queues, a page at a time: those they answered and the rest of their last page.",
		}),
	}
	reg.MustRegister(b.gauge, b.refused, b.read)
	return b
}

// acquire takes a slot, waiting up to browseWait; release gives it back.
func (b *browseLimit) acquire(ctx context.Context) error {
	select {
	case b.slots <- struct{}{}:
	default:
		t := time.NewTimer(browseWait)
		defer t.Stop()
		select {
		case b.slots <- struct{}{}:
		case <-t.C:
			b.refused.Inc()
			return fmt.Errorf("%w (%d at once): ask again in a moment", errTooManyBrowses, cap(b.slots))
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	b.gauge.Inc()
	return nil
}

func (b *browseLimit) release() {
	b.gauge.Dec()
	<-b.slots
}

// browseFrom is where a page starts: after the message at key after, or,
// with offset > 0, from the offset-th message (0: the first).
type browseFrom struct {
	after  queue.Key
	offset int
}

// browseStart is the start of a queue.
var browseStart = browseFrom{after: queue.Start}

// parseBrowseKey reads a key as formatBrowseKey writes it: "priority:id".
func parseBrowseKey(s string) (queue.Key, error) {
	ps, is, ok := strings.Cut(s, ":")
	p, perr := strconv.ParseUint(ps, 10, 8)
	id, ierr := strconv.ParseInt(is, 10, 64)
	if !ok || perr != nil || ierr != nil || p > message.MaxPriority || id < 0 {
		return queue.Key{}, fmt.Errorf("key %q: want priority:id, as a browse's next page names it: %w", s, errBadRequest)
	}
	return queue.Key{Priority: uint8(p), ID: id}, nil
}

// formatBrowseKey writes k for an answer's next page.
func formatBrowseKey(k queue.Key) string {
	return strconv.Itoa(int(k.Priority)) + ":" + strconv.FormatInt(k.ID, 10)
}

// browsedPage is a page of a queue's messages.
type browsedPage struct {
	Messages []StoredMessage
	// Keys[i] is where Messages[i] stands in the delivery order.
	Keys []queue.Key
	// Cut says the page stopped before its limit, at its bytes.
	Cut bool
	// More says the queue held a message after the page's last: the next
	// page starts after Keys[len(Keys)-1].
	More bool
}

// browsePage returns up to limit messages of the queue called name, in
// delivery order from from, without consuming them, and no more than
// maxBytes of them (as stored) past the first. It reads the queue a page
// at a time: what it holds is what it returns, and one page.
func (n *Node) browsePage(ctx context.Context, name string, from browseFrom, limit, maxBytes int) (pg browsedPage, err error) {
	q, err := n.lookupQueue(name)
	if err != nil {
		return pg, err
	}
	if err := n.browses.acquire(ctx); err != nil {
		return pg, err
	}
	defer n.browses.release()
	if from.offset > 0 {
		// Counted along the index, not read: see queue.KeyAt.
		k, ok, err := q.KeyAt(ctx, from.offset)
		if err != nil || !ok {
			return pg, err // past the end: an empty page
		}
		from.after = k
	}
	size := 0
	read, err := q.EachAfter(ctx, from.after, func(r queue.Browsed) bool {
		if len(pg.Messages) == limit {
			pg.More = true
			return false
		}
		if len(pg.Messages) > 0 && size+len(r.Data) > maxBytes {
			pg.Cut, pg.More = true, true
			return false
		}
		pg.Messages = append(pg.Messages, n.storedOf(r))
		pg.Keys = append(pg.Keys, r.Key())
		size += len(r.Data)
		return true
	})
	n.browses.read.Add(float64(read))
	if err != nil {
		return browsedPage{}, err
	}
	return pg, nil
}
