package petrel

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/petrelmq/petrel/internal/adminapi"
	"github.com/petrelmq/petrel/message"
	"github.com/petrelmq/petrel/queue"
)

// POST /api/recv takes messages from a receive queue under a lease, like
// a consumer, writes them, and only then settles them, so that a client
// gone before they were written gets them again instead of losing them.

// maxRecv bounds the messages of one POST /api/recv.
const maxRecv = 1000

// answerBytes bounds the messages of one answer of POST /api/recv,
// /api/subscribe and GET /api/queues/{queue}/messages: their encoded
// bytes, past the first message, which goes whatever its size so that
// one larger than the bound can still be read. 1000 messages of the
// largest body (8 MiB by default) made one answer of gigabytes in memory;
// past the bound the answer says more remain, and the caller asks again.
const answerBytes = adminapi.MaxAnswerBytes

// taken is a message /api/recv took.
type taken struct {
	d *queue.Delivery
	m *message.Message
	// at is when it was taken, just after: its lease runs from about then.
	at time.Time
}

func (s *adminServer) handleRecv(w http.ResponseWriter, r *http.Request) {
	var req adminapi.RecvRequest
	if err := decodeBody(w, r, 1<<20, &req); err != nil {
		writeAPIError(w, err)
		return
	}
	if err := checkRecv(&req); err != nil {
		writeAPIError(w, err)
		return
	}
	q, err := s.node.lookupQueue(req.Address)
	if err == nil && q.Kind() != queue.KindReceive {
		err = fmt.Errorf("recv from %q: %w", req.Address, ErrNotReceive)
	}
	if err != nil {
		writeAPIError(w, err)
		return
	}
	s.takeAndAnswer(w, r.Context(), q, req)
}

// takeAndAnswer takes the messages req asks for from q and answers them.
// For settle "later" it first takes a slot of the leases' bound, so that
// a request past it takes nothing.
func (s *adminServer) takeAndAnswer(w http.ResponseWriter, ctx context.Context, q *queue.Queue, req adminapi.RecvRequest) {
	if req.Settle == adminapi.SettleLater {
		if err := s.leases.reserve(); err != nil {
			writeAPIError(w, err)
			return
		}
	}
	ts, more, err := s.take(ctx, q, req.Count, req.Wait)
	if err != nil {
		settleAll(ts, adminapi.SettleRelease, "")
		if req.Settle == adminapi.SettleLater {
			s.leases.unreserve()
		}
		writeAPIError(w, err)
		return
	}
	s.answerRecv(w, ctx, ts, more, req)
}

// checkRecv checks req and fills in its defaults.
func checkRecv(req *adminapi.RecvRequest) error {
	if req.Count == 0 {
		req.Count = 1
	}
	if req.Settle == "" {
		req.Settle = adminapi.SettleAck
	}
	switch {
	case req.Address == "":
		return fmt.Errorf("no address: %w", errBadRequest)
	case req.Count < 0 || req.Count > maxRecv:
		return fmt.Errorf("count %d: want 1 to %d: %w", req.Count, maxRecv, errBadRequest)
	case req.Wait < 0:
		return fmt.Errorf("wait %v: negative: %w", req.Wait, errBadRequest)
	case req.Settle != adminapi.SettleAck && req.Settle != adminapi.SettleRelease && req.Settle != adminapi.SettleNack && req.Settle != adminapi.SettleLater:
		return fmt.Errorf("settle %q: want %s, %s, %s or %s: %w", req.Settle,
			adminapi.SettleAck, adminapi.SettleRelease, adminapi.SettleNack, adminapi.SettleLater, errBadRequest)
	}
	return nil
}

// take receives up to count messages from q, waiting up to wait for them,
// and no more than answerBytes of them past the first. It takes none that
// it will not answer: the first that does not fit stays in q, untaken,
// and more says so.
func (s *adminServer) take(ctx context.Context, q *queue.Queue, count int, wait time.Duration) (ts []taken, more bool, err error) {
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	size := 0
	for len(ts) < count {
		var d *queue.Delivery
		if len(ts) == 0 {
			d, err = q.Poll()
		} else {
			d, err = q.PollWithin(answerBytes - size)
		}
		if errors.Is(err, queue.ErrNoMessage) && wait > 0 {
			if len(ts) == 0 {
				d, err = q.Receive(ctx)
			} else {
				d, err = q.ReceiveWithin(ctx, answerBytes-size)
			}
			if err != nil && ctx.Err() != nil {
				break // waited long enough, or the client left
			}
		}
		if errors.Is(err, queue.ErrNoMessage) {
			break
		}
		if errors.Is(err, queue.ErrTooLarge) {
			return ts, true, nil
		}
		if err != nil {
			return ts, false, err
		}
		m := decodeOrDeadLetter(s.log, d)
		if m == nil {
			continue
		}
		ts = append(ts, taken{d: d, m: m, at: time.Now()})
		size += len(d.Data)
	}
	return ts, false, nil
}

// answerRecv writes the messages, then settles them and says so. It
// encodes them one at a time onto the connection: the answer of a batch
// of large messages is never whole in memory. Until every byte is out,
// the messages are released, not settled: a client gone before it read
// them gets them again.
//
// For settle "later" it settles nothing: once every byte is out it holds
// the messages under a lease that the answer names, until POST
// /api/settle or expires, when their lease_timeout passes.
func (s *adminServer) answerRecv(w http.ResponseWriter, ctx context.Context, ts []taken, more bool, req adminapi.RecvRequest) {
	w.Header().Set("Content-Type", "application/json")
	bw := bufio.NewWriterSize(w, 64<<10)
	enc := json.NewEncoder(bw)
	bw.WriteString(`{"messages":[`)
	var err error
	for i := range ts {
		if i > 0 {
			bw.WriteByte(',')
		}
		a := newAPIMessage(ts[i].m)
		a.Attempt, a.Reason = ts[i].d.Attempt, ts[i].d.Reason
		if err = enc.Encode(a); err != nil {
			break
		}
		ts[i].m = nil // written: its copy of the body may go
	}
	if err == nil {
		bw.WriteByte(']')
		if more {
			bw.WriteString(`,"more":true`)
		}
		err = bw.Flush()
	}
	if err == nil {
		err = http.NewResponseController(w).Flush()
	}
	if err == nil {
		// net/http cancels the request's context when it sees the
		// client's connection close: the bytes may have reached the
		// socket and nobody read them.
		err = ctx.Err()
	}
	if err != nil {
		settleAll(ts, adminapi.SettleRelease, "") // the client is gone
		if req.Settle == adminapi.SettleLater {
			s.leases.unreserve()
		}
		// Part of the answer may be out: ending it would make it look
		// whole.
		panic(http.ErrAbortHandler)
	}
	if req.Settle == adminapi.SettleLater {
		if len(ts) == 0 {
			s.leases.unreserve()
			fmt.Fprintf(w, `,"settled":"%s"}`, req.Settle)
			return
		}
		expires := leaseExpiry(ts)
		lease := s.leases.hold(ts, expires)
		fmt.Fprintf(w, `,"settled":"%s","lease":"%s","lease_expires":"%s"}`, req.Settle, lease, expires.UTC().Format(time.RFC3339Nano))
		return
	}
	err = settleAll(ts, req.Settle, req.Reason)
	if err == nil {
		// Acks are group-committed without waiting; the client returns
		// once they are durable, and the counters count them.
		err = s.node.Sync(ctx)
	}
	if err != nil {
		msg, _ := json.Marshal(fmt.Sprintf("settle (%s) the messages: %v; they may be delivered again", req.Settle, err))
		fmt.Fprintf(w, `,"error":%s}`, msg)
		return
	}
	fmt.Fprintf(w, `,"settled":"%s"}`, req.Settle) // one of the Settle constants
}

// settleAll acks, releases or nacks every message of ts; it returns the
// first error.
func settleAll(ts []taken, how, reason string) error {
	var first error
	for _, t := range ts {
		var err error
		switch how {
		case adminapi.SettleRelease:
			err = t.d.Release()
		case adminapi.SettleNack:
			err = t.d.Nack(reason)
		default:
			err = t.d.Ack()
		}
		if err != nil && first == nil {
			first = err
		}
	}
	return first
}
