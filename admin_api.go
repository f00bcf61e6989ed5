package petrel

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"

	"github.com/petrelmq/petrel/message"
	"github.com/petrelmq/petrel/queue"
)

// adminAPI serves what `petrel send`, `recv`, `queues`, `purge` and `dlq`
// call, beside the other admin endpoints (admin.go), on the unix socket
// and on the admin listener. Bodies are JSON (admin_api_types.go):
//
//	POST /api/send                  SendRequest → SendResponse, once the message is durable
//	POST /api/recv                  RecvRequest → RecvResponse
//	GET  /api/queues                → []QueueStats, by name
//	POST /api/queues/{queue}/purge  → CountResponse: the messages deleted
//	GET  /api/dlq/{addr}?limit=N    → DeadLettersResponse, consuming nothing
//	POST /api/dlq/{addr}/replay     {"count": N} (0 or no body: all) → CountResponse: the messages moved back
//	POST /api/dlq/{addr}/purge      → CountResponse: the dead letters deleted
//
// An error answers {"error": "..."}: 400 for a malformed request or an
// invalid message, 404 for an unknown queue or address, 409 for an
// address that cannot do what was asked (not a receive address, no
// route), 503 while the node closes or when its store is full.
//
// They send, take and delete messages: over TCP they pass adminGuard
// (admin_guard.go), the bearer token included when one is configured.
func (n *Node) adminAPI(mux *http.ServeMux) {
	mux.HandleFunc("POST /api/send", n.handleSend)
	mux.HandleFunc("POST /api/recv", n.handleRecv)
	n.adminTopics(mux)
	mux.HandleFunc("GET /api/queues", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, n.QueueStats())
	})
	mux.HandleFunc("POST /api/queues/{queue}/purge", func(w http.ResponseWriter, r *http.Request) {
		name := r.PathValue("queue")
		count, err := n.Purge(r.Context(), name)
		if err != nil {
			writeAPIError(w, err)
			return
		}
		writeJSON(w, CountResponse{Queue: name, Count: count})
	})
	mux.HandleFunc("GET /api/dlq/{addr}", n.handleDeadLetters)
	mux.HandleFunc("POST /api/dlq/{addr}/replay", n.handleReplay)
	mux.HandleFunc("POST /api/dlq/{addr}/purge", func(w http.ResponseWriter, r *http.Request) {
		addr := r.PathValue("addr")
		name, err := n.DeadLetterQueue(addr)
		if err != nil {
			writeAPIError(w, err)
			return
		}
		count, err := n.PurgeDeadLetters(r.Context(), addr)
		if err != nil {
			writeAPIError(w, err)
			return
		}
		writeJSON(w, CountResponse{Queue: name, Count: count})
	})
}

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
	case errors.Is(err, ErrUnknownQueue), errors.Is(err, ErrUnknownAddress):
		return http.StatusNotFound
	case errors.Is(err, ErrNotReceive), errors.Is(err, ErrNoRoute), errors.Is(err, queue.ErrKindMismatch):
		return http.StatusConflict
	case errors.Is(err, ErrDenied):
		return http.StatusForbidden
	case errors.Is(err, ErrClosed), errors.Is(err, ErrStoreFull):
		return http.StatusServiceUnavailable
	}
	return http.StatusInternalServerError
}

// decodeBody reads r's JSON body into v; an empty body leaves v as it is.
func decodeBody(w http.ResponseWriter, r *http.Request, max int64, v any) error {
	err := json.NewDecoder(http.MaxBytesReader(w, r.Body, max)).Decode(v)
	if err != nil && !errors.Is(err, io.EOF) {
		return fmt.Errorf("read request body: %v: %w", err, errBadRequest)
	}
	return nil
}

func (n *Node) handleSend(w http.ResponseWriter, r *http.Request) {
	var req SendRequest
	// The body travels as base64: 4 bytes per 3, plus the properties.
	maxBody := n.cfg.Limits.MaxBody
	if maxBody <= 0 {
		maxBody = message.DefaultLimits().MaxBody
	}
	if err := decodeBody(w, r, int64(maxBody)/3*4+16<<20, &req); err != nil {
		writeAPIError(w, err)
		return
	}
	m, err := n.messageToSend(req)
	if err == nil {
		err = n.Producer().Send(r.Context(), m)
	}
	if err != nil {
		writeAPIError(w, err)
		return
	}
	writeJSON(w, SendResponse{ID: m.ID, Destination: m.Destination})
}

// messageToSend makes the message req asks to send.
func (n *Node) messageToSend(req SendRequest) (*message.Message, error) {
	if req.To == "" {
		return nil, fmt.Errorf("no destination (to): %w", errBadRequest)
	}
	kind := message.KindData
	if req.Kind != "" {
		k, err := message.ParseKind(req.Kind)
		if err != nil {
			return nil, err
		}
		kind = k
	}
	p := n.Producer()
	var m *message.Message
	switch kind {
	case message.KindCommand:
		m = p.CreateCommandMessage(req.To)
	case message.KindData:
		m = p.CreateDataMessage(req.To)
	default:
		return nil, fmt.Errorf("kind %s: send files with POST /api/files: %w", kind, errBadRequest)
	}
	if err := req.fill(m); err != nil {
		return nil, err
	}
	return m, nil
}

func (n *Node) handleDeadLetters(w http.ResponseWriter, r *http.Request) {
	addr := r.PathValue("addr")
	limit := 0
	if s := r.URL.Query().Get("limit"); s != "" {
		var err error
		if limit, err = strconv.Atoi(s); err != nil || limit < 0 {
			writeJSONError(w, http.StatusBadRequest, fmt.Sprintf("limit %q: want a count, 0 for all", s))
			return
		}
	}
	name, err := n.DeadLetterQueue(addr)
	if err != nil {
		writeAPIError(w, err)
		return
	}
	stored, err := n.DeadLetters(r.Context(), addr, limit)
	if err != nil {
		writeAPIError(w, err)
		return
	}
	resp := DeadLettersResponse{Queue: name, Messages: make([]APIMessage, len(stored))}
	for i, s := range stored {
		resp.Messages[i] = storedAPIMessage(s)
	}
	writeJSON(w, resp)
}

func (n *Node) handleReplay(w http.ResponseWriter, r *http.Request) {
	addr := r.PathValue("addr")
	var req struct {
		Count int `json:"count"`
	}
	if err := decodeBody(w, r, 1<<20, &req); err != nil {
		writeAPIError(w, err)
		return
	}
	if req.Count < 0 {
		writeJSONError(w, http.StatusBadRequest, fmt.Sprintf("count %d: want a count, 0 for all", req.Count))
		return
	}
	name, err := n.DeadLetterQueue(addr)
	if err != nil {
		writeAPIError(w, err)
		return
	}
	count, err := n.Replay(r.Context(), addr, req.Count)
	if err != nil {
		writeAPIError(w, err)
		return
	}
	writeJSON(w, CountResponse{Queue: name, Count: count})
}
