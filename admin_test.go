package petrel_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/petrelmq/petrel"
	"github.com/petrelmq/petrel/internal/adminapi"
	"github.com/petrelmq/petrel/internal/petreltest"
	"github.com/petrelmq/petrel/internal/petreltest/nodes"
)

// adminClient makes no keep-alive connections, so that none outlives a
// test (goleak).
var adminClient = &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 10 * time.Second}

func adminGet(t *testing.T, n *petrel.Node, path string) (int, string) {
	t.Helper()
	resp, err := adminClient.Get("http://" + n.AdminAddr() + path)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	return resp.StatusCode, string(body)
}

// scrape returns the samples of /metrics by series ("name{labels}"), the
// labels as the text format writes them, sorted by name.
func scrape(t *testing.T, n *petrel.Node) map[string]float64 {
	t.Helper()
	code, body := adminGet(t, n, "/metrics")
	if code != http.StatusOK {
		t.Fatalf("GET /metrics: %d %s", code, body)
	}
	out := map[string]float64{}
	for _, line := range strings.Split(body, "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			t.Fatalf("metrics line %q: %v", line, err)
		}
		out[line[:i]] = v
	}
	return out
}

func withAdmin(c *petrel.Config) { c.Admin.Listen = "127.0.0.1:0" }

func TestAdminEndpoints(t *testing.T) {
	n := nodes.Open(t, nodes.With(withAdmin))
	if n.AdminAddr() == "" {
		t.Fatal("no admin address")
	}
	if code, body := adminGet(t, n, "/healthz"); code != http.StatusOK || strings.TrimSpace(body) != "ok" {
		t.Fatalf("/healthz: %d %q", code, body)
	}
	if code, body := adminGet(t, n, "/readyz"); code != http.StatusOK {
		t.Fatalf("/readyz: %d %q", code, body)
	}
	code, body := adminGet(t, n, "/api/status")
	var st petrel.Status
	if err := json.Unmarshal([]byte(body), &st); code != http.StatusOK || err != nil {
		t.Fatalf("/api/status: %d %v %q", code, err, body)
	}
	if st.Node != "plant-7" || st.ID != n.ID().String() {
		t.Fatalf("/api/status: %+v", st)
	}
	if code, _ := adminGet(t, n, "/nope"); code != http.StatusNotFound {
		t.Fatalf("/nope: %d", code)
	}
}

func TestAdminOffByDefault(t *testing.T) {
	n := nodes.Open(t)
	if addr := n.AdminAddr(); addr != "" {
		t.Fatalf("admin listens on %s without Admin.Listen", addr)
	}
}

func TestAdminListenIsValidated(t *testing.T) {
	cfg := petrel.Config{Name: "a", DataDir: t.TempDir(), Logger: quiet, Admin: petrel.AdminConfig{Listen: "localhost"}}
	var ce *petrel.ConfigError
	if err := cfg.Validate(); !errors.As(err, &ce) || ce.Field != "admin.listen" {
		t.Fatalf("got %v, want an admin.listen error", err)
	}
}

// TestAdminSocketServesEndpoints checks that the unix socket in the data
// directory serves the same endpoints, with the TCP listener off.
func TestAdminSocketServesEndpoints(t *testing.T) {
	n := nodes.Open(t)
	path := filepath.Join(n.DataDir(), adminapi.SocketName)
	tr := &http.Transport{DisableKeepAlives: true, DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", path)
	}}
	c := &http.Client{Transport: tr, Timeout: 10 * time.Second}
	for _, p := range []string{"/healthz", "/readyz", "/metrics", "/api/status"} {
		resp, err := c.Get("http://petrel" + p)
		if err != nil {
			t.Fatalf("GET %s: %v", p, err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: %d", p, resp.StatusCode)
		}
	}
}

func TestMetricsMoveWithTraffic(t *testing.T) {
	n := nodes.Open(t, nodes.With(withAdmin))
	before := scrape(t, n)
	ctx := context.Background()
	p := n.Producer()
	for i := range 5 {
		m := p.CreateDataMessage("orders")
		m.Body = []byte(fmt.Sprint(i))
		if err := p.Send(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	c, err := n.Consumer("orders")
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if err := receive(t, c).Ack(); err != nil {
			t.Fatal(err)
		}
	}
	if err := n.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	after := scrape(t, n)
	for series, want := range map[string]float64{
		`petrel_queue_messages_total{event="enqueued",queue="orders"}`: 5,
		`petrel_queue_messages_total{event="acked",queue="orders"}`:    3,
		`petrel_queue_depth{queue="orders"}`:                           2,
		`petrel_queue_in_flight{queue="orders"}`:                       0,
	} {
		if got, ok := after[series]; !ok || got != want {
			t.Errorf("%s = %v (present %v), want %v", series, got, ok, want)
		}
	}
	for _, series := range []string{
		"petrel_store_commits_total",
		"petrel_store_commit_requests_total",
		"petrel_store_commit_batch_size_count",
		"petrel_store_commit_duration_seconds_count",
	} {
		if after[series] <= before[series] {
			t.Errorf("%s did not move: %v then %v", series, before[series], after[series])
		}
	}
	// Every commit is observed by both histograms.
	if after["petrel_store_commit_batch_size_count"] != after["petrel_store_commits_total"] ||
		after["petrel_store_commit_batch_size_sum"] != after["petrel_store_commit_requests_total"] {
		t.Errorf("batch histogram %v/%v, store counters %v/%v",
			after["petrel_store_commit_batch_size_count"], after["petrel_store_commit_batch_size_sum"],
			after["petrel_store_commits_total"], after["petrel_store_commit_requests_total"])
	}
}

// TestMetricsOfTwoNodesWithALink runs two nodes in one process, each with
// its own registry, and checks the link and receiver metrics.
func TestMetricsOfTwoNodesWithALink(t *testing.T) {
	b := nodes.Open(t, nodes.Name("b"), nodes.Listen("127.0.0.1:0"), nodes.With(withAdmin))
	a := nodes.Open(t, nodes.Name("a"), nodes.With(func(c *petrel.Config) {
		withAdmin(c)
		c.Nodes = []petrel.NodeConfig{{Name: "b", Connector: nodes.TCP(b)}}
	}))
	p := a.Producer()
	const total = 10
	for i := range total {
		m := p.CreateDataMessage("orders@b")
		m.Body = []byte(fmt.Sprint(i))
		if err := p.Send(context.Background(), m); err != nil {
			t.Fatal(err)
		}
	}
	petreltest.Eventually(t, fmt.Sprintf("the link connected with all %d acked", total), func() bool {
		l := a.Links()
		return len(l) == 1 && l[0].Acked == total && l[0].State == "connected"
	}, func() string { return fmt.Sprintf("links %+v", a.Links()) })

	ma := scrape(t, a)
	for series, want := range map[string]float64{
		`petrel_link_up{next_hop="b",queue="orders@b"}`:                           1,
		`petrel_link_messages_total{event="sent",next_hop="b",queue="orders@b"}`:  total,
		`petrel_link_messages_total{event="acked",next_hop="b",queue="orders@b"}`: total,
		`petrel_link_in_flight{next_hop="b",queue="orders@b"}`:                    0,
		`petrel_link_in_flight_bytes{next_hop="b",queue="orders@b"}`:              0,
		`petrel_queue_messages_total{event="enqueued",queue="orders@b"}`:          total,
	} {
		if got, ok := ma[series]; !ok || got != want {
			t.Errorf("a: %s = %v (present %v), want %v", series, got, ok, want)
		}
	}
	mb := scrape(t, b)
	for series, want := range map[string]float64{
		`petrel_receiver_messages_total{event="stored"}`:               total,
		`petrel_queue_messages_total{event="enqueued",queue="orders"}`: total,
	} {
		if got, ok := mb[series]; !ok || got != want {
			t.Errorf("b: %s = %v (present %v), want %v", series, got, ok, want)
		}
	}
	if mb["petrel_receiver_connections_total"] < 1 {
		t.Errorf("b: petrel_receiver_connections_total = %v", mb["petrel_receiver_connections_total"])
	}
}

func TestMetricsOfAFileTransfer(t *testing.T) {
	b := nodes.Open(t, nodes.Name("b"), nodes.Listen("127.0.0.1:0"), nodes.With(withAdmin))
	a := nodes.Open(t, nodes.Name("a"), nodes.With(func(c *petrel.Config) {
		withAdmin(c)
		c.Nodes = []petrel.NodeConfig{{Name: "b", Connector: nodes.TCP(b)}}
	}))
	before := scrape(t, b)
	if before[`petrel_file_bytes_total{direction="received"}`] != 0 || before[`petrel_files_total{event="taken"}`] != 0 {
		t.Fatalf("file counters not zero before traffic: %v", before)
	}
	const size = 1<<20 + 3
	src, _ := writeRandom(t, t.TempDir(), "m.bin", size)
	m := a.Producer().CreateFileMessage("files@b")
	m.File.SendFilePath = src
	if err := a.Producer().Send(context.Background(), m); err != nil {
		t.Fatal(err)
	}
	receiveFile(t, b, "files", 30*time.Second)
	petreltest.Eventually(t, "a counted the file handed over", func() bool {
		return scrape(t, a)[`petrel_files_total{event="handed_over"}`] == 1
	}, func() string { return "a never counted the file handed over" })
	ma, mb := scrape(t, a), scrape(t, b)
	for series, want := range map[string]float64{
		`petrel_file_bytes_total{direction="sent"}`:         size,
		`petrel_file_transfers_active{direction="sending"}`: 0,
	} {
		if got := ma[series]; got != want {
			t.Errorf("a: %s = %v, want %v", series, got, want)
		}
	}
	for series, want := range map[string]float64{
		`petrel_file_bytes_total{direction="received"}`:       size,
		`petrel_files_total{event="taken"}`:                   1,
		`petrel_file_transfers_active{direction="receiving"}`: 0,
	} {
		if got := mb[series]; got != want {
			t.Errorf("b: %s = %v, want %v", series, got, want)
		}
	}
}
