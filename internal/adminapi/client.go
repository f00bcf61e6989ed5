package adminapi

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
)

// Client calls a node's admin API: through the unix socket in its data
// directory (Socket), or over TCP to its admin listener (Dial). It is safe
// for concurrent use; Close drops its idle connections.
type Client struct {
	http  *http.Client
	base  string
	where string // what error messages call the node: the socket or the URL
	// token is the bearer token sent over TCP; "" sends none. The socket
	// needs none.
	token string
}

// Socket reaches the node whose data directory is dir through its admin
// socket. The Host it sends is fixed: the socket does not check it.
func Socket(dir string) *Client {
	sock := SocketPath(dir)
	tr := &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return DialSocket(ctx, sock)
	}}
	return &Client{http: &http.Client{Transport: tr}, base: "http://petrel", where: sock}
}

// Dial reaches the node's admin listener at server, "host:port" or
// "http://host:port", sending token as a bearer token unless it is "".
// The Host header is server's, which the listener accepts for its own
// address and for the names of admin.hosts.
func Dial(server, token string) *Client {
	base := server
	if !strings.Contains(base, "://") {
		base = "http://" + base
	}
	return &Client{http: &http.Client{}, base: strings.TrimSuffix(base, "/"), where: base, token: token}
}

// HasToken reports whether the client sends a bearer token.
func (c *Client) HasToken() bool { return c.token != "" }

// StatusError is an answer with an error status.
type StatusError struct {
	Code int
	// Message is the node's reason ({"error": ...}); "" if the answer
	// had none, when Status says what it was.
	Message string
	Status  string
}

func (e *StatusError) Error() string {
	if e.Message != "" {
		return "node: " + e.Message
	}
	return "node answered " + e.Status
}

// Do sends a request with in as its JSON body (none if nil) and decodes
// the JSON answer into out, unless out is nil. An answer with an error
// status is returned as a *StatusError with the node's reason.
func (c *Client) Do(ctx context.Context, method, path string, in, out any) error {
	body, err := c.Stream(ctx, method, path, in)
	if err != nil {
		return err
	}
	defer body.Close()
	if out == nil {
		return nil
	}
	if err := json.NewDecoder(body).Decode(out); err != nil {
		return fmt.Errorf("read the answer of %s from %s: %w", path, c.where, err)
	}
	return nil
}

// Stream sends a request as Do does and returns the body of its answer,
// to read as it comes and then close: POST /api/recv writes its messages
// before it says how it settled them. An answer with an error status is
// returned as a *StatusError, as by Do.
func (c *Client) Stream(ctx context.Context, method, path string, in any) (io.ReadCloser, error) {
	var body bytes.Buffer
	if in != nil {
		if err := json.NewEncoder(&body).Encode(in); err != nil {
			return nil, fmt.Errorf("encode the request to %s: %w", path, err)
		}
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, &body)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, fmt.Errorf("no node answers at %s (is it running?): %w", c.where, err)
	}
	if resp.StatusCode >= 300 {
		defer resp.Body.Close()
		var e ErrorResponse
		json.NewDecoder(resp.Body).Decode(&e)
		return nil, &StatusError{Code: resp.StatusCode, Message: e.Error, Status: resp.Status}
	}
	return resp.Body, nil
}

// Close drops the client's idle connections.
func (c *Client) Close() { c.http.CloseIdleConnections() }
