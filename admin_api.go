package petrel

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"

	"github.com/petrelmq/petrel/internal/adminapi"
	"github.com/petrelmq/petrel/message"
	"github.com/petrelmq/petrel/queue"
)

// The handlers of what `petrel send`, `recv`, `queues`, `purge` and `dlq`
// call (their paths and bodies are in internal/adminapi). They send, take
// and delete messages: over TCP they pass adminGuard (admin_guard.go), the
// bearer token included when one is configured.
//
// An error answers {"error": "..."} with the status that fits it
// (apiStatus).

// writeAPIError answers err with the status that fits it.
func writeAPIError(w http.ResponseWriter, err error) {
	writeJSONError(w, apiStatus(err), err.Error())
}

// badMessage are the message errors of a request's own making.
var badMessage = []error{
	errBadRequest, message.ErrPriority, message.ErrDestination, message.ErrKind,
	message.ErrTooManyProperties, message.ErrPropertyTooLarge, message.ErrBodyTooLarge,
	message.ErrHeaderTooLarge, message.ErrDuplicateProperty, message.ErrPropertyType,
	message.ErrTTL, message.ErrTimestamp, message.ErrPropertyKey,
}

func apiStatus(err error) int {
	for _, e := range badMessage {
		if errors.Is(err, e) {
			return http.StatusBadRequest
		}
	}
	switch {
	case errors.Is(err, ErrUnknownQueue), errors.Is(err, ErrUnknownAddress), errors.Is(err, errNoSubscription):
		return http.StatusNotFound
	case errors.Is(err, ErrNotReceive), errors.Is(err, ErrNoRoute), errors.Is(err, queue.ErrKindMismatch),
		errors.Is(err, ErrTooManyQueues):
		// A queue past max_auto_queues waits for the operator (a
		// declared address, a higher bound, queues removed), as a missing
		// route does: no server fault, and nothing a retry would mend.
		return http.StatusConflict
	case errors.Is(err, ErrDenied):
		return http.StatusForbidden
	case errors.Is(err, ErrClosed), errors.Is(err, ErrStoreFull), errors.Is(err, errTooManyLeases), errors.Is(err, errTooManyBrowses):
		return http.StatusServiceUnavailable
	}
	return http.StatusInternalServerError
}

// errBadRequest marks a request the API refuses as malformed (400).
var errBadRequest = errors.New("bad request")

// decodeBody reads r's JSON body into v; an empty body leaves v as it is.
func decodeBody(w http.ResponseWriter, r *http.Request, max int64, v any) error {
	err := json.NewDecoder(http.MaxBytesReader(w, r.Body, max)).Decode(v)
	if err != nil && !errors.Is(err, io.EOF) {
		return fmt.Errorf("read request body: %v: %w", err, errBadRequest)
	}
	return nil
}

func (s *adminServer) handleSend(w http.ResponseWriter, r *http.Request) {
	var req adminapi.SendRequest
	if err := decodeBody(w, r, s.maxSend, &req); err != nil {
		writeAPIError(w, err)
		return
	}
	p := s.node.Producer()
	m, err := messageToSend(p, req)
	if err == nil {
		err = p.Send(r.Context(), m)
	}
	if err != nil {
		writeAPIError(w, err)
		return
	}
	writeJSON(w, adminapi.SendResponse{ID: m.ID, Destination: m.Destination})
}

func (s *adminServer) handleQueues(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, s.node.QueueStats())
}

// handleBrowse answers messages of a queue, consuming none: up to limit
// after the message of key after (or past offset messages, the older
// form), and no more than answerBytes of them past the first. An answer
// after whose last message the queue holds more names the next page in
// headers (adminapi.HeaderNextAfter, a Link rel="next"): its body is a
// JSON array, as it always was. The messages are encoded one at a time,
// as they go out.
func (s *adminServer) handleBrowse(w http.ResponseWriter, r *http.Request) {
	limit, from := 100, browseStart
	q := r.URL.Query()
	if v := q.Get(adminapi.ParamLimit); v != "" {
		var err error
		if limit, err = strconv.Atoi(v); err != nil || limit < 1 || limit > 1000 {
			writeJSONError(w, http.StatusBadRequest, fmt.Sprintf("limit %q: want 1 to 1000", v))
			return
		}
	}
	after, offset := q.Get(adminapi.ParamAfter), q.Get(adminapi.ParamOffset)
	switch {
	case after != "" && offset != "":
		writeJSONError(w, http.StatusBadRequest, "give after or offset, not both")
		return
	case after != "":
		k, err := parseBrowseKey(after)
		if err != nil {
			writeAPIError(w, err)
			return
		}
		from.after = k
	case offset != "":
		var err error
		if from.offset, err = strconv.Atoi(offset); err != nil || from.offset < 0 {
			writeJSONError(w, http.StatusBadRequest, fmt.Sprintf("offset %q: want a count of messages to skip", offset))
			return
		}
	}
	name := r.PathValue(adminapi.ParamQueue)
	pg, err := s.node.browsePage(r.Context(), name, from, limit, answerBytes)
	if err != nil {
		if errors.Is(err, errTooManyBrowses) {
			w.Header().Set("Retry-After", "1")
		}
		writeAPIError(w, err)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	if pg.More {
		next := formatBrowseKey(pg.Keys[len(pg.Keys)-1])
		w.Header().Set(adminapi.HeaderNextAfter, next)
		w.Header().Set("Link", "<"+adminapi.QueueBrowsePath(name, limit, next)+`>; rel="next"`)
	}
	if pg.Cut && after == "" {
		// For clients of the older form; an offset counts from the head.
		w.Header().Set(adminapi.HeaderNextOffset, strconv.Itoa(from.offset+len(pg.Messages)))
	}
	msgs := pg.Messages
	bw := bufio.NewWriterSize(w, 64<<10)
	enc := json.NewEncoder(bw)
	bw.WriteByte('[')
	for i := range msgs {
		if i > 0 {
			bw.WriteByte(',')
		}
		if err := enc.Encode(storedAPIMessage(msgs[i])); err != nil {
			panic(http.ErrAbortHandler) // a cut list must not look whole
		}
		msgs[i] = StoredMessage{} // written: its bytes may go
	}
	bw.WriteString("]\n")
	if err := bw.Flush(); err != nil {
		panic(http.ErrAbortHandler)
	}
}

func (s *adminServer) handlePurge(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue(adminapi.ParamQueue)
	count, err := s.node.Purge(r.Context(), name)
	writeCount(w, name, count, err)
}

// handleUnsubscribe deletes a durable subscription and the messages it
// holds, whoever made it: the operator's way to remove one a remote
// client made, which has no way to delete it, past
// max_subscriptions_per_identity.
func (s *adminServer) handleUnsubscribe(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue(adminapi.ParamName)
	count, err := s.node.unsubscribe(r.Context(), name)
	writeCount(w, subQueuePrefix+name, count, err)
}

// writeCount answers a purge or a replay: how many messages of queue it
// deleted or moved, or its error.
func writeCount(w http.ResponseWriter, queue string, count int, err error) {
	if err != nil {
		writeAPIError(w, err)
		return
	}
	writeJSON(w, adminapi.CountResponse{Queue: queue, Count: count})
}

func (s *adminServer) handleDeadLetters(w http.ResponseWriter, r *http.Request) {
	addr := r.PathValue(adminapi.ParamAddr)
	limit := 0
	if v := r.URL.Query().Get(adminapi.ParamLimit); v != "" {
		var err error
		if limit, err = strconv.Atoi(v); err != nil || limit < 0 {
			writeJSONError(w, http.StatusBadRequest, fmt.Sprintf("limit %q: want a count, 0 for all", v))
			return
		}
	}
	name, err := s.node.DeadLetterQueue(addr)
	if err != nil {
		writeAPIError(w, err)
		return
	}
	// The response is written as the dead letters are read, a page at a
	// time: listing a million of them holds one page, not the million. It
	// is adminapi.DeadLettersResponse, as writeJSON would write it.
	out := &startedWriter{w: w}
	bw := bufio.NewWriterSize(out, 64<<10)
	head, _ := json.Marshal(name)
	bw.WriteString(`{"queue":`)
	bw.Write(head)
	bw.WriteString(`,"messages":[`)
	first := true
	err = s.node.eachDeadLetter(r.Context(), addr, limit, func(st StoredMessage) error {
		m, err := json.Marshal(storedAPIMessage(st))
		if err != nil {
			return err
		}
		if !first {
			bw.WriteByte(',')
		}
		first = false
		_, err = bw.Write(m)
		return err
	})
	if err != nil {
		if !out.started {
			writeAPIError(w, err)
			return
		}
		// Part of the list is out: ending it would make it look whole.
		panic(http.ErrAbortHandler)
	}
	bw.WriteString("]}\n")
	if err := bw.Flush(); err != nil {
		panic(http.ErrAbortHandler)
	}
}

// startedWriter is a response whose header goes, as JSON, with its first
// bytes: until then an error can still be answered as one.
type startedWriter struct {
	w       http.ResponseWriter
	started bool
}

func (s *startedWriter) Write(p []byte) (int, error) {
	if !s.started {
		s.started = true
		s.w.Header().Set("Content-Type", "application/json")
	}
	return s.w.Write(p)
}

func (s *adminServer) handleReplay(w http.ResponseWriter, r *http.Request) {
	var req adminapi.ReplayRequest
	if err := decodeBody(w, r, 1<<20, &req); err != nil {
		writeAPIError(w, err)
		return
	}
	if req.Count < 0 {
		writeJSONError(w, http.StatusBadRequest, fmt.Sprintf("count %d: want a count, 0 for all", req.Count))
		return
	}
	s.onDeadLetters(w, r, func(ctx context.Context, addr string) (int, error) {
		if len(req.Select) > 0 {
			return s.node.replaySelected(ctx, addr, req.Select)
		}
		return s.node.Replay(ctx, addr, req.Count)
	})
}

func (s *adminServer) handlePurgeDeadLetters(w http.ResponseWriter, r *http.Request) {
	s.onDeadLetters(w, r, s.node.PurgeDeadLetters)
}

// onDeadLetters runs op on the dead letters of the request's address and
// answers how many it deleted or moved.
func (s *adminServer) onDeadLetters(w http.ResponseWriter, r *http.Request, op func(ctx context.Context, addr string) (int, error)) {
	addr := r.PathValue(adminapi.ParamAddr)
	name, err := s.node.DeadLetterQueue(addr)
	if err != nil {
		writeAPIError(w, err)
		return
	}
	count, err := op(r.Context(), addr)
	writeCount(w, name, count, err)
}
