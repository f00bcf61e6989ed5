package petrel_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/petrelmq/petrel"
	"github.com/petrelmq/petrel/address"
	"github.com/petrelmq/petrel/internal/adminapi"
	"github.com/petrelmq/petrel/internal/petreltest/nodes"
	"github.com/petrelmq/petrel/queue"
)

// apiCall sends body (JSON, none if nil) to the admin API and decodes the
// answer into out unless it is nil; it returns the status and the body.
func apiCall(t *testing.T, n *petrel.Node, method, path string, body, out any) (int, string) {
	t.Helper()
	var in io.Reader
	if s, ok := body.(string); ok {
		in = strings.NewReader(s)
	} else if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			t.Fatal(err)
		}
		in = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, "http://"+n.AdminAddr()+path, in)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := adminClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	if out != nil && resp.StatusCode == http.StatusOK {
		if err := json.Unmarshal(raw, out); err != nil {
			t.Fatalf("%s %s: %v\n%s", method, path, err, raw)
		}
	}
	return resp.StatusCode, string(raw)
}

func mustAPI(t *testing.T, n *petrel.Node, method, path string, body, out any) {
	t.Helper()
	if code, raw := apiCall(t, n, method, path, body, out); code != http.StatusOK {
		t.Fatalf("%s %s: %d %s", method, path, code, raw)
	}
}

func TestAdminAPISendRecv(t *testing.T) {
	n := nodes.Open(t, nodes.With(withAdmin))
	prio := uint8(7)
	text := "hello"
	var sent adminapi.SendResponse
	mustAPI(t, n, "POST", "/api/send", adminapi.SendRequest{
		To: "orders", Kind: "command", Priority: &prio, TTL: time.Hour,
		Command:    &adminapi.Command{Name: "restart", ReplyTo: "replies", CorrelationID: "c-1"},
		Properties: []adminapi.Property{{Key: "line", Type: "int32", Value: "3"}, {Key: "ok", Type: "bool", Value: "true"}},
		Text:       &text,
	}, &sent)
	mustAPI(t, n, "POST", "/api/send", adminapi.SendRequest{To: "orders", Body: []byte{0xff, 0}}, nil)
	if sent.ID == 0 || sent.Destination != "orders" {
		t.Fatalf("send answered %+v", sent)
	}
	var got adminapi.RecvResponse
	mustAPI(t, n, "POST", "/api/recv", adminapi.RecvRequest{Address: "orders", Count: 5}, &got)
	if got.Settled != adminapi.SettleAck || len(got.Messages) != 2 {
		t.Fatalf("recv answered %+v", got)
	}
	m := got.Messages[0]
	if m.ID != sent.ID || m.Kind != "command" || m.Priority != 7 || m.Attempt != 1 || m.TTL <= 0 || m.TTL > time.Hour ||
		m.Command == nil || *m.Command != (adminapi.Command{Name: "restart", ReplyTo: "replies", CorrelationID: "c-1"}) ||
		len(m.Properties) != 2 || m.Properties[0] != (adminapi.Property{Key: "line", Type: "int32", Value: "3"}) ||
		m.Text == nil || *m.Text != "hello" || string(m.Body) != "hello" || m.Origin != n.ID().String() {
		t.Fatalf("received %+v", m)
	}
	if b := got.Messages[1]; b.Text != nil || !bytes.Equal(b.Body, []byte{0xff, 0}) || b.Kind != "data" {
		t.Fatalf("binary body came back as %+v", b)
	}
	// Acked and synced before the answer ended.
	var stats []petrel.QueueStats
	mustAPI(t, n, "GET", "/api/queues", nil, &stats)
	if len(stats) != 1 || stats[0].Name != "orders" || stats[0].Depth != 0 || stats[0].Acked != 2 {
		t.Fatalf("queues %+v", stats)
	}
	// Nothing ready: an empty answer, at once or after the wait.
	start := time.Now()
	mustAPI(t, n, "POST", "/api/recv", adminapi.RecvRequest{Address: "orders", Wait: 50 * time.Millisecond}, &got)
	if len(got.Messages) != 0 || time.Since(start) < 50*time.Millisecond {
		t.Fatalf("recv of an empty queue: %+v after %v", got, time.Since(start))
	}
	// A wait ends as soon as the messages are there.
	go func() {
		time.Sleep(20 * time.Millisecond)
		p := n.Producer()
		m := p.CreateDataMessage("orders")
		p.Send(context.Background(), m)
	}()
	mustAPI(t, n, "POST", "/api/recv", adminapi.RecvRequest{Address: "orders", Wait: time.Minute, Settle: adminapi.SettleRelease}, &got)
	if len(got.Messages) != 1 || got.Settled != adminapi.SettleRelease {
		t.Fatalf("recv with a wait: %+v", got)
	}
	// Released: delivered again, at once, on the same attempt.
	mustAPI(t, n, "POST", "/api/recv", adminapi.RecvRequest{Address: "orders"}, &got)
	if len(got.Messages) != 1 || got.Messages[0].Attempt != 1 {
		t.Fatalf("released message: %+v", got)
	}
}

func TestAdminAPIDeadLetters(t *testing.T) {
	n := nodes.Open(t, nodes.With(func(c *petrel.Config) {
		withAdmin(c)
		c.Addresses = []petrel.AddressConfig{{Name: "jobs", Role: address.RoleReceive, Queue: queue.Policy{MaxDeliveries: 1}}}
	}))
	var dl adminapi.DeadLettersResponse
	mustAPI(t, n, "GET", "/api/dlq/jobs", nil, &dl)
	if dl.Queue != "" || len(dl.Messages) != 0 {
		t.Fatalf("dead letters before any: %+v", dl)
	}
	for _, b := range []string{"a", "b", "c"} {
		mustAPI(t, n, "POST", "/api/send", adminapi.SendRequest{To: "jobs", Text: &b}, nil)
	}
	var got adminapi.RecvResponse
	mustAPI(t, n, "POST", "/api/recv", adminapi.RecvRequest{Address: "jobs", Count: 3, Settle: adminapi.SettleNack, Reason: "no handler"}, &got)
	if len(got.Messages) != 3 || got.Settled != adminapi.SettleNack {
		t.Fatalf("recv: %+v", got)
	}
	mustAPI(t, n, "GET", "/api/dlq/jobs?limit=2", nil, &dl)
	if dl.Queue != "jobs.dlq" || len(dl.Messages) != 2 || !strings.Contains(dl.Messages[0].Reason, "no handler") || *dl.Messages[0].Text != "a" {
		t.Fatalf("dead letters: %+v", dl)
	}
	var count adminapi.CountResponse
	mustAPI(t, n, "POST", "/api/dlq/jobs/replay", map[string]int{"count": 2}, &count)
	if count != (adminapi.CountResponse{Queue: "jobs.dlq", Count: 2}) {
		t.Fatalf("replay: %+v", count)
	}
	mustAPI(t, n, "POST", "/api/recv", adminapi.RecvRequest{Address: "jobs", Count: 3, Settle: adminapi.SettleRelease}, &got)
	if len(got.Messages) != 2 || *got.Messages[0].Text != "a" || got.Messages[0].Reason != "" || got.Messages[0].Attempt != 1 {
		t.Fatalf("replayed: %+v", got)
	}
	mustAPI(t, n, "POST", "/api/dlq/jobs/purge", nil, &count)
	if count.Count != 1 {
		t.Fatalf("dlq purge: %+v", count)
	}
	mustAPI(t, n, "POST", "/api/queues/jobs/purge", nil, &count)
	if count != (adminapi.CountResponse{Queue: "jobs", Count: 2}) {
		t.Fatalf("purge: %+v", count)
	}
	for _, q := range []string{"jobs", "jobs.dlq"} {
		if st, _ := n.QueueStat(q); st.Depth != 0 {
			t.Fatalf("%s after the purges: %+v", q, st)
		}
	}
}

func TestAdminAPIErrors(t *testing.T) {
	n := nodes.Open(t, nodes.With(func(c *petrel.Config) {
		withAdmin(c)
		c.NoAutoCreate = true
		c.Addresses = []petrel.AddressConfig{{Name: "jobs"}, {Name: "out", Role: address.RoleSend, Node: "b"}}
		c.Nodes = []petrel.NodeConfig{{Name: "b", Connector: "tcp://127.0.0.1:1"}}
	}))
	for _, tc := range []struct {
		method, path string
		body         any
		code         int
		err          string
	}{
		{"POST", "/api/send", `{"to":`, 400, "read request body"},
		{"POST", "/api/send", adminapi.SendRequest{}, 400, "no destination"},
		{"POST", "/api/send", adminapi.SendRequest{To: "jobs", Kind: "telegram"}, 400, "want command, data or file"},
		{"POST", "/api/send", adminapi.SendRequest{To: "jobs", Kind: "file"}, 400, "/api/files"},
		{"POST", "/api/send", adminapi.SendRequest{To: "jobs", Properties: []adminapi.Property{{Key: "n", Type: "int8", Value: "1"}}}, 400, "property type"},
		{"POST", "/api/send", adminapi.SendRequest{To: "jobs", Properties: []adminapi.Property{{Key: "n", Type: "int16", Value: "x"}}}, 400, "not a valid int16"},
		{"POST", "/api/send", adminapi.SendRequest{To: "jobs", Data: &adminapi.Data{}, Kind: "command"}, 400, "data properties"},
		{"POST", "/api/send", adminapi.SendRequest{To: "bad name"}, 400, "invalid destination"},
		{"POST", "/api/send", adminapi.SendRequest{To: "nosuch"}, 404, "unknown address"},
		{"POST", "/api/recv", adminapi.RecvRequest{}, 400, "no address"},
		{"POST", "/api/recv", adminapi.RecvRequest{Address: "jobs", Count: 5000}, 400, "want 1 to 1000"},
		{"POST", "/api/recv", adminapi.RecvRequest{Address: "jobs", Settle: "drop"}, 400, "settle"},
		{"POST", "/api/recv", adminapi.RecvRequest{Address: "nosuch"}, 404, "unknown queue"},
		{"POST", "/api/recv", adminapi.RecvRequest{Address: "out@b"}, 409, "not a receive address"},
		{"GET", "/api/dlq/nosuch", nil, 404, "unknown queue"},
		{"GET", "/api/dlq/jobs?limit=x", nil, 400, "limit"},
		{"POST", "/api/dlq/jobs/replay", map[string]int{"count": -1}, 400, "count"},
		{"POST", "/api/queues/nosuch/purge", nil, 404, "unknown queue"},
	} {
		t.Run(tc.method+" "+tc.path, func(t *testing.T) { checkAPIAnswer(t, n, tc.method, tc.path, tc.body, tc.code, tc.err) })
	}
}

// checkAPIAnswer calls the admin API and checks the answer's status, and
// that its error (none for a success) holds want.
func checkAPIAnswer(t *testing.T, n *petrel.Node, method, path string, body any, code int, want string) {
	t.Helper()
	got, raw := apiCall(t, n, method, path, body, nil)
	var e struct{ Error string }
	if err := json.Unmarshal([]byte(raw), &e); err != nil || got != code || !strings.Contains(e.Error, want) {
		t.Fatalf("got %d %s, want %d and an error with %q", got, raw, code, want)
	}
}

// A send the node refuses past max_auto_queues is answered 409 with the
// reason, as a missing route is: a bound the operator set, not a fault of
// the node. Before, it was a 500.
func TestAdminAPISendPastMaxAutoQueues(t *testing.T) {
	n := nodes.Open(t, nodes.With(func(c *petrel.Config) {
		withAdmin(c)
		c.MaxAutoQueues = 2
	}))
	for _, tc := range []struct {
		method, path string
		body         any
		code         int
		err          string
	}{
		{"POST", "/api/send", map[string]string{"to": "a1", "text": "x"}, 200, ""},
		{"POST", "/api/send", map[string]string{"to": "a2", "text": "x"}, 200, ""},
		{"POST", "/api/send", map[string]string{"to": "a3", "text": "x"}, 409, "max_auto_queues"},
	} {
		t.Run(tc.method+" "+tc.path, func(t *testing.T) { checkAPIAnswer(t, n, tc.method, tc.path, tc.body, tc.code, tc.err) })
	}
}

// GET /api/dlq/{addr} writes the dead letters as it reads them, a page
// at a time: more than a page's worth come whole and in order, and a
// limit cuts the list where it says.
func TestAdminAPIDeadLettersPaged(t *testing.T) {
	n := nodes.Open(t, nodes.With(func(c *petrel.Config) {
		withAdmin(c)
		c.Addresses = []petrel.AddressConfig{{Name: "jobs", Role: address.RoleReceive, Queue: queue.Policy{MaxDeliveries: 1}}}
	}))
	const total = 700
	p := n.Producer()
	for i := range total {
		m := p.CreateDataMessage("jobs")
		m.Body = []byte(fmt.Sprint(i))
		if err := p.Send(context.Background(), m); err != nil {
			t.Fatal(err)
		}
	}
	c, err := n.Consumer("jobs")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for taken := 0; taken < total; {
		ds, err := c.ReceiveBatch(context.Background(), 100)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range ds {
			if err := d.Nack("no handler"); err != nil {
				t.Fatal(err)
			}
		}
		taken += len(ds)
	}
	if err := n.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		path string
		want int
	}{{"/api/dlq/jobs", total}, {"/api/dlq/jobs?limit=333", 333}} {
		var dl adminapi.DeadLettersResponse
		mustAPI(t, n, "GET", tc.path, nil, &dl)
		if dl.Queue != "jobs.dlq" || len(dl.Messages) != tc.want {
			t.Fatalf("GET %s: queue %q, %d messages; want jobs.dlq, %d", tc.path, dl.Queue, len(dl.Messages), tc.want)
		}
		for i, m := range dl.Messages {
			if m.Text == nil || *m.Text != fmt.Sprint(i) || m.Reason == "" {
				t.Fatalf("GET %s: message %d is %+v; want body %d with its reason", tc.path, i, m, i)
			}
		}
	}
	if code, raw := apiCall(t, n, "GET", "/api/dlq/nosuch", nil, nil); code != http.StatusNotFound {
		t.Fatalf("GET /api/dlq/nosuch: %d %s; want 404", code, raw)
	}
}
