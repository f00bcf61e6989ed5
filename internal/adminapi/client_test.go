package adminapi

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
)

// TestClientRequests checks what the client sends, which the node's guard
// asks for, and how it reads answers and errors.
func TestClientRequests(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch {
		case r.Header.Get("Content-Type") != "application/json":
			w.WriteHeader(http.StatusUnsupportedMediaType)
			json.NewEncoder(w).Encode(ErrorResponse{Error: "not json"})
		case r.Header.Get("Authorization") != "Bearer secret-token":
			w.WriteHeader(http.StatusUnauthorized)
			json.NewEncoder(w).Encode(ErrorResponse{Error: "missing or wrong bearer token"})
		case r.URL.Path == PathSend:
			var req SendRequest
			if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
				w.WriteHeader(http.StatusBadRequest)
				return
			}
			json.NewEncoder(w).Encode(SendResponse{ID: 7, Destination: req.To})
		default:
			w.WriteHeader(http.StatusNotFound) // no body
		}
	}))
	defer srv.Close()
	ctx := context.Background()

	c := Dial(srv.Listener.Addr().String(), "secret-token")
	defer c.Close()
	var sent SendResponse
	if err := c.Do(ctx, http.MethodPost, PathSend, SendRequest{To: "orders"}, &sent); err != nil || sent != (SendResponse{ID: 7, Destination: "orders"}) {
		t.Errorf("send = %+v, %v", sent, err)
	}
	var se *StatusError
	if err := c.Do(ctx, http.MethodGet, "/api/none", nil, nil); !errors.As(err, &se) || se.Code != http.StatusNotFound || err.Error() != "node answered 404 Not Found" {
		t.Errorf("an error without a body = %v", err)
	}

	anon := Dial(srv.URL+"/", "")
	defer anon.Close()
	if anon.HasToken() {
		t.Error("a client without a token says it has one")
	}
	err := anon.Do(ctx, http.MethodGet, PathStatus, nil, nil)
	if !errors.As(err, &se) || se.Code != http.StatusUnauthorized || err.Error() != "node: missing or wrong bearer token" {
		t.Errorf("without the token = %v", err)
	}
}

// TestSocketNoNode checks that a client of a socket nobody serves says so.
func TestSocketNoNode(t *testing.T) {
	dir := t.TempDir()
	c := Socket(dir)
	defer c.Close()
	err := c.Do(context.Background(), http.MethodGet, PathStatus, nil, nil)
	var se *StatusError
	if err == nil || errors.As(err, &se) {
		t.Fatalf("Do = %v, want a connection error", err)
	}
	if want := filepath.Join(dir, SocketName); SocketPath(dir) != want || !strings.Contains(err.Error(), want) {
		t.Errorf("error %q does not name the socket %s", err, want)
	}
}

func TestPaths(t *testing.T) {
	for got, want := range map[string]string{
		QueuePurgePath("a/b"):           "/api/queues/a%2Fb/purge",
		DeadLettersPath("orders", ""):   "/api/dlq/orders",
		DeadLettersPath("x@n", "purge"): "/api/dlq/x@n/purge",
		FilePath(42):                    "/api/files/42",
	} {
		if got != want {
			t.Errorf("path %q, want %q", got, want)
		}
	}
}
