package petrel

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"

	"github.com/petrelmq/petrel/address"
	"github.com/petrelmq/petrel/internal/adminapi"
	"github.com/petrelmq/petrel/internal/logkey"
)

// POST /api/subscribe takes messages from a topic subscription as POST
// /api/recv takes them from a queue: up to count within wait, written
// first and settled after. With a name it makes or joins that durable
// subscription, which outlives the request and keeps accumulating; without
// one it makes a private non-durable subscription that lasts for the
// request only, so it sees just what is published while it waits.

func (s *adminServer) handleSubscribe(w http.ResponseWriter, r *http.Request) {
	var req adminapi.SubscribeRequest
	if err := decodeBody(w, r, 1<<20, &req); err != nil {
		writeAPIError(w, err)
		return
	}
	recv, err := checkSubscribe(req)
	if err != nil {
		writeAPIError(w, err)
		return
	}
	opts := SubscribeOptions{Name: req.Name, Durable: req.Name != ""}
	c, err := s.node.Subscribe(r.Context(), req.Pattern, opts)
	if err != nil {
		writeSubscribeError(w, err)
		return
	}
	defer s.closeSubscription(c, req.Pattern)
	q, err := s.node.lookupQueue(c.Address())
	if err != nil {
		writeAPIError(w, err)
		return
	}
	s.takeAndAnswer(w, r.Context(), q, recv)
}

// checkSubscribe checks req and returns the recv it amounts to, with
// its defaults.
func checkSubscribe(req adminapi.SubscribeRequest) (adminapi.RecvRequest, error) {
	if req.Pattern == "" {
		return adminapi.RecvRequest{}, fmt.Errorf("no pattern: %w", errBadRequest)
	}
	switch req.Settle {
	case "", adminapi.SettleAck:
	case adminapi.SettleLater:
		if req.Name == "" {
			return adminapi.RecvRequest{}, fmt.Errorf("settle %q needs a durable subscription (a name): a private one ends with its request, with what it holds: %w", req.Settle, errBadRequest)
		}
	default:
		return adminapi.RecvRequest{}, fmt.Errorf("settle %q: want %s or, with a name, %s: %w", req.Settle, adminapi.SettleAck, adminapi.SettleLater, errBadRequest)
	}
	recv := adminapi.RecvRequest{Address: req.Pattern, Count: req.Count, Wait: req.Wait, Settle: req.Settle}
	if err := checkRecv(&recv); err != nil {
		return adminapi.RecvRequest{}, err
	}
	return recv, nil
}

// writeSubscribeError answers a refused subscription: 400 for a malformed
// pattern or name, 409 for a pattern outside the topic spaces or a name
// taken by another subscription.
func writeSubscribeError(w http.ResponseWriter, err error) {
	switch {
	case errors.Is(err, address.ErrTopicPattern), errors.Is(err, errSubscriptionName):
		writeJSONError(w, http.StatusBadRequest, err.Error())
	case errors.Is(err, ErrNoTopicSpace), errors.Is(err, ErrSubscription):
		writeJSONError(w, http.StatusConflict, err.Error())
	default:
		writeAPIError(w, err)
	}
}

// closeSubscription closes the request's consumer: a durable subscription
// stays, a private one ends with what it holds.
func (s *adminServer) closeSubscription(c *Consumer, pattern string) {
	if err := c.Close(); err != nil {
		s.log.Warn("close the subscription of an admin request", slog.String("pattern", pattern), slog.Any(logkey.Error, err))
	}
}
