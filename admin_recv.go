package petrel

import (
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

// taken is a message /api/recv took.
type taken struct {
	d *queue.Delivery
	m *message.Message
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
	ts, err := s.take(r.Context(), q, req.Count, req.Wait)
	if err != nil {
		settleAll(ts, adminapi.SettleRelease, "")
		writeAPIError(w, err)
		return
	}
	s.answerRecv(w, r.Context(), ts, req)
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
	case req.Settle != adminapi.SettleAck && req.Settle != adminapi.SettleRelease && req.Settle != adminapi.SettleNack:
		return fmt.Errorf("settle %q: want %s, %s or %s: %w", req.Settle,
			adminapi.SettleAck, adminapi.SettleRelease, adminapi.SettleNack, errBadRequest)
	}
	return nil
}

// take receives up to count messages from q, waiting up to wait for them.
func (s *adminServer) take(ctx context.Context, q *queue.Queue, count int, wait time.Duration) ([]taken, error) {
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	var ts []taken
	for len(ts) < count {
		d, err := q.Poll()
		if errors.Is(err, queue.ErrNoMessage) && wait > 0 {
			if d, err = q.Receive(ctx); err != nil && ctx.Err() != nil {
				break // waited long enough, or the client left
			}
		}
		if errors.Is(err, queue.ErrNoMessage) {
			break
		}
		if err != nil {
			return ts, err
		}
		m := decodeOrDeadLetter(s.log, d)
		if m == nil {
			continue
		}
		ts = append(ts, taken{d: d, m: m})
	}
	return ts, nil
}

// answerRecv writes the messages, then settles them and says so.
func (s *adminServer) answerRecv(w http.ResponseWriter, ctx context.Context, ts []taken, req adminapi.RecvRequest) {
	msgs := make([]adminapi.Message, len(ts))
	for i, t := range ts {
		msgs[i] = newAPIMessage(t.m)
		msgs[i].Attempt, msgs[i].Reason = t.d.Attempt, t.d.Reason
	}
	head, err := json.Marshal(msgs)
	if err != nil {
		settleAll(ts, adminapi.SettleRelease, "")
		writeAPIError(w, err)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, err = fmt.Fprintf(w, `{"messages":%s`, head)
	if err == nil {
		err = http.NewResponseController(w).Flush()
	}
	if err != nil {
		settleAll(ts, adminapi.SettleRelease, "") // the client is gone
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
