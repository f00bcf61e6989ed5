package petrel_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/petrelmq/petrel"
	"github.com/petrelmq/petrel/internal/adminapi"
	"github.com/petrelmq/petrel/internal/petreltest/nodes"
)

// sendBodiesTo sends one data message to addr per body, in order, and
// returns their ids.
func sendBodiesTo(t *testing.T, n *petrel.Node, addr string, bodies ...[]byte) []uint64 {
	t.Helper()
	p := n.Producer()
	var ids []uint64
	for _, b := range bodies {
		m := p.CreateDataMessage(addr)
		m.Body = b
		if err := p.Send(context.Background(), m); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, m.ID)
	}
	return ids
}

// filled is a body of size bytes of c.
func filled(c byte, size int) []byte { return bytes.Repeat([]byte{c}, size) }

// queueStats is the figures of the queue called name.
func queueStats(t *testing.T, n *petrel.Node, name string) petrel.QueueStats {
	t.Helper()
	var stats []petrel.QueueStats
	mustAPI(t, n, "GET", "/api/queues", nil, &stats)
	for _, q := range stats {
		if q.Name == name {
			return q
		}
	}
	t.Fatalf("no queue %q in %+v", name, stats)
	return petrel.QueueStats{}
}

// withinBudget fails unless msgs, but for the last, hold no more than
// the answer's byte budget of bodies: the budget counts the messages as
// stored, a little more than their bodies.
func withinBudget(t *testing.T, what string, msgs []adminapi.Message) {
	t.Helper()
	if len(msgs) == 0 {
		t.Fatalf("%s: no message", what)
	}
	total := 0
	for _, m := range msgs[:len(msgs)-1] {
		total += len(m.Body)
	}
	if total > adminapi.MaxAnswerBytes {
		t.Fatalf("%s: %d messages, %d bytes of bodies before the last, past the budget of %d", what, len(msgs), total, adminapi.MaxAnswerBytes)
	}
}

// TestAdminAPIBrowseByteBudget browses a queue of more bytes than an
// answer holds: each answer stops at the budget (and says where to go
// on), and the answers together hold every message once, in order. A
// message larger than the budget is answered alone.
func TestAdminAPIBrowseByteBudget(t *testing.T) {
	n := nodes.Open(t, nodes.With(withAdmin))
	var bodies [][]byte
	for i := range 12 {
		bodies = append(bodies, filled(byte('a'+i), 1536<<10)) // 18 MiB in all
	}
	want := sendBodiesTo(t, n, "bigq", bodies...)

	var got []uint64
	calls := 0
	for offset := 0; ; calls++ {
		if calls > len(want) {
			t.Fatalf("%d browses and still more", calls)
		}
		resp, msgs := browse(t, n, "bigq", fmt.Sprintf("limit=1000&offset=%d", offset))
		withinBudget(t, fmt.Sprintf("browse from %d", offset), msgs)
		for _, m := range msgs {
			got = append(got, m.ID)
			if !bytes.Equal(m.Body, bodies[len(got)-1]) {
				t.Fatalf("message %d: a body of %d bytes, not the one sent", m.ID, len(m.Body))
			}
		}
		next := resp.Header.Get(adminapi.HeaderNextOffset)
		if next == "" {
			break
		}
		if offset, _ = strconv.Atoi(next); offset != len(got) {
			t.Fatalf("next offset %q after %d messages", next, len(got))
		}
	}
	if fmt.Sprint(got) != fmt.Sprint(want) || calls < 2 {
		t.Fatalf("%d browses returned %v, want %v in several", calls+1, got, want)
	}
	if q := queueStats(t, n, "bigq"); q.Depth != int64(len(want)) || q.InFlight != 0 {
		t.Fatalf("browsing consumed: %+v", q)
	}

	// The largest body, past the budget once stored: alone, with the
	// offset of the next; the small one after it comes next.
	big := filled('z', 8<<20)
	ids := sendBodiesTo(t, n, "hugeq", big, []byte("small"))
	resp, msgs := browse(t, n, "hugeq", "")
	if len(msgs) != 1 || msgs[0].ID != ids[0] || !bytes.Equal(msgs[0].Body, big) || resp.Header.Get(adminapi.HeaderNextOffset) != "1" {
		t.Fatalf("browse of a message past the budget: %d messages, next %q", len(msgs), resp.Header.Get(adminapi.HeaderNextOffset))
	}
	resp, msgs = browse(t, n, "hugeq", "offset=1")
	if len(msgs) != 1 || msgs[0].ID != ids[1] || resp.Header.Get(adminapi.HeaderNextOffset) != "" {
		t.Fatalf("browse after it: %+v, next %q", msgs, resp.Header.Get(adminapi.HeaderNextOffset))
	}

	if code, raw := apiCall(t, n, "GET", "/api/queues/hugeq/messages?offset=-1", nil, nil); code != http.StatusBadRequest || !strings.Contains(raw, "offset") {
		t.Fatalf("a negative offset: %d %s", code, raw)
	}
}

// browse answers GET /api/queues/{name}/messages?query.
func browse(t *testing.T, n *petrel.Node, name, query string) (*http.Response, []adminapi.Message) {
	t.Helper()
	resp, err := adminClient.Get("http://" + n.AdminAddr() + "/api/queues/" + name + "/messages?" + query)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var msgs []adminapi.Message
	if err := jsonDecode(resp, &msgs); err != nil {
		t.Fatalf("browse %s?%s: %v", name, query, err)
	}
	return resp, msgs
}

// jsonDecode reads a 200 answer's JSON into v.
func jsonDecode(resp *http.Response, v any) error {
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s", resp.Status, raw)
	}
	return json.Unmarshal(raw, v)
}

// TestAdminAPIRecvByteBudget receives, and acks, a queue of more bytes
// than an answer holds: each answer stops at the budget and says more
// remain, the message that did not fit is neither acked nor in flight,
// and the answers together hold every message once, in order. A message
// larger than the budget is answered alone.
func TestAdminAPIRecvByteBudget(t *testing.T) {
	n := nodes.Open(t, nodes.With(withAdmin))
	var bodies [][]byte
	for i := range 12 {
		bodies = append(bodies, filled(byte('a'+i), 1536<<10))
	}
	want := sendBodiesTo(t, n, "bigq", bodies...)

	var got []uint64
	calls := 0
	for {
		calls++
		if calls > len(want) {
			t.Fatalf("%d receives and still more", calls)
		}
		var resp adminapi.RecvResponse
		mustAPI(t, n, "POST", adminapi.PathRecv, adminapi.RecvRequest{Address: "bigq", Count: 1000}, &resp)
		withinBudget(t, fmt.Sprintf("receive %d", calls), resp.Messages)
		for _, m := range resp.Messages {
			got = append(got, m.ID)
			if !bytes.Equal(m.Body, bodies[len(got)-1]) || m.Attempt != 1 {
				t.Fatalf("message %d: a body of %d bytes, attempt %d", m.ID, len(m.Body), m.Attempt)
			}
		}
		if resp.Settled != adminapi.SettleAck {
			t.Fatalf("receive %d: settled %q, error %q", calls, resp.Settled, resp.Error)
		}
		// Those answered are acked; the rest were never taken.
		q := queueStats(t, n, "bigq")
		if q.Acked != int64(len(got)) || q.Depth != int64(len(want)-len(got)) || q.InFlight != 0 {
			t.Fatalf("after %d messages: %+v", len(got), q)
		}
		if resp.More != (len(got) < len(want)) {
			t.Fatalf("after %d of %d messages: more = %v", len(got), len(want), resp.More)
		}
		if !resp.More {
			break
		}
	}
	if fmt.Sprint(got) != fmt.Sprint(want) || calls < 2 {
		t.Fatalf("%d receives returned %v, want %v in several", calls, got, want)
	}

	// The largest body, past the budget once stored: alone; the small
	// one after it stays, untaken.
	big := filled('z', 8<<20)
	ids := sendBodiesTo(t, n, "hugeq", []byte("first"), big, []byte("small"))
	// Each answer in a new value: one without "more" leaves it as it was.
	recv := func() (resp adminapi.RecvResponse) {
		mustAPI(t, n, "POST", adminapi.PathRecv, adminapi.RecvRequest{Address: "hugeq", Count: 3}, &resp)
		return resp
	}
	resp := recv()
	if len(resp.Messages) != 1 || resp.Messages[0].ID != ids[0] || !resp.More {
		t.Fatalf("a small message before one past the budget: %d messages, more %v", len(resp.Messages), resp.More)
	}
	resp = recv()
	if len(resp.Messages) != 1 || resp.Messages[0].ID != ids[1] || !bytes.Equal(resp.Messages[0].Body, big) || !resp.More {
		t.Fatalf("a message past the budget: %d messages, more %v", len(resp.Messages), resp.More)
	}
	if q := queueStats(t, n, "hugeq"); q.Depth != 1 || q.InFlight != 0 || q.Acked != 2 {
		t.Fatalf("after it: %+v", q)
	}
	resp = recv()
	if len(resp.Messages) != 1 || resp.Messages[0].ID != ids[2] || resp.More {
		t.Fatalf("the last: %+v", resp)
	}
}

// TestAdminAPIRecvClientGoneReleases: a client that leaves while its
// answer is being written has its messages released, not acked: they
// are delivered again, on the same attempt.
func TestAdminAPIRecvClientGoneReleases(t *testing.T) {
	n := nodes.Open(t, nodes.With(withAdmin))
	// Larger than the socket buffers: the write is still going when the
	// client leaves.
	ids := sendBodiesTo(t, n, "orders", filled('x', 8<<20))

	c, err := net.Dial("tcp", n.AdminAddr())
	if err != nil {
		t.Fatal(err)
	}
	body := `{"address":"orders"}`
	fmt.Fprintf(c, "POST %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s",
		adminapi.PathRecv, n.AdminAddr(), len(body), body)
	r := bufio.NewReader(c)
	status, err := r.ReadString('\n')
	if err != nil || !strings.Contains(status, "200") {
		t.Fatalf("status line %q, %v", status, err)
	}
	c.Close() // with most of the answer unread

	deadline := time.Now().Add(10 * time.Second)
	for {
		q := queueStats(t, n, "orders")
		if q.InFlight == 0 {
			if q.Depth != 1 || q.Acked != 0 {
				t.Fatalf("after the client left: %+v, want the message released", q)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("still in flight: %+v", q)
		}
		time.Sleep(10 * time.Millisecond)
	}
	var resp adminapi.RecvResponse
	mustAPI(t, n, "POST", adminapi.PathRecv, adminapi.RecvRequest{Address: "orders"}, &resp)
	if len(resp.Messages) != 1 || resp.Messages[0].ID != ids[0] || resp.Messages[0].Attempt != 1 || resp.Settled != adminapi.SettleAck {
		t.Fatalf("received again: %d messages, settled %q", len(resp.Messages), resp.Settled)
	}
}
