package petrel_test

import (
	"context"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"testing"

	petrel "github.com/petrelmq/petrel"
	"github.com/petrelmq/petrel/internal/console"
	"github.com/petrelmq/petrel/internal/petreltest"
	"github.com/petrelmq/petrel/internal/petreltest/nodes"
	"github.com/petrelmq/petrel/queue"
)

// The console finds dead letters where the node puts them, as petrel dlq
// does: a send queue "nowhere@b" dead-letters into "nowhere.dlq", and an
// address with its own dead_letter into that queue, which reads as a
// dead-letter queue with Replay, replayed through its address.
func TestConsoleFindsEveryDeadLetterQueue(t *testing.T) {
	b := nodes.Open(t, nodes.Name("b"), nodes.Listen("127.0.0.1:0"), nodes.With(func(c *petrel.Config) { c.NoAutoCreate = true }))
	a := nodes.Open(t, nodes.Name("a"), nodes.With(withConsole), nodes.With(func(c *petrel.Config) {
		c.Nodes = []petrel.NodeConfig{{Name: "b", Connector: nodes.TCP(b)}}
		c.Addresses = []petrel.AddressConfig{{Name: "billing", Queue: queue.Policy{MaxDeliveries: 1, DeadLetter: "billing-dead"}}}
	}))
	ctx := context.Background()
	p := a.Producer()
	for _, to := range []string{"nowhere@b", "billing"} {
		m := p.CreateDataMessage(to)
		m.Body = []byte("to " + to)
		if err := p.Send(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	c, err := a.Consumer("billing")
	if err != nil {
		t.Fatal(err)
	}
	d, err := c.Receive(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Nack("failed"); err != nil {
		t.Fatal(err)
	}
	c.Close()
	petreltest.Eventually(t, "both dead letters", func() bool {
		x, _ := a.QueueStat("nowhere.dlq")
		y, _ := a.QueueStat("billing-dead")
		return x.Depth == 1 && y.Depth == 1
	})

	cl := newConsoleClient(t, a)
	cl.login(consoleToken)
	get := func(path string) string {
		t.Helper()
		resp, body := cl.do(http.MethodGet, path, "", "", nil)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: %d", path, resp.StatusCode)
		}
		return body
	}
	cell := func(dlq string) *regexp.Regexp {
		return regexp.MustCompile(`<a href="/queues/` + regexp.QuoteMeta(dlq) + `">1</a></td>`)
	}
	// The console reads the sampler's figures, taken every 2 s.
	petreltest.Eventually(t, "the Queues page counting both dead letters", func() bool {
		page := get("/queues")
		return rowHas(page, "nowhere@b", cell("nowhere.dlq")) && rowHas(page, "billing", cell("billing-dead"))
	}, func() string { return get("/queues") })
	for q, want := range map[string]string{"nowhere@b": "1 in nowhere.dlq", "billing": "1 in billing-dead"} {
		if page := get("/queues/" + q); !strings.Contains(page, want) {
			t.Errorf("the page of %s does not say %q:\n%s", q, want, page)
		}
	}
	page := get("/queues/billing-dead")
	for _, want := range []string{`<dd class="kind">dead letters</dd>`, `id="replay-all"`, `data-url="/api/dlq/billing/replay"`, `data-url="/api/dlq/billing/purge"`} {
		if !strings.Contains(page, want) {
			t.Errorf("the page of billing-dead lacks %s:\n%s", want, page)
		}
	}
	if strings.Contains(page, `data-action="send"`) {
		t.Errorf("the page of billing-dead offers a test message, as for a live queue")
	}
	// Its Replay button's URL moves the message back to billing.
	resp, body := cl.do(http.MethodPost, "/api/dlq/billing/replay", "application/json", "{}", map[string]string{console.CSRFHeader: cl.csrf()})
	if resp.StatusCode != http.StatusOK || !strings.Contains(body, `"count":1`) {
		t.Fatalf("replay through the page's URL: %d %s", resp.StatusCode, body)
	}
	a.Sync(ctx)
	if st, _ := a.QueueStat("billing"); st.Depth != 1 {
		t.Fatalf("billing after the replay: %+v, want the message back", st)
	}
}

// rowHas reports whether the Queues page's row of queue q matches re.
func rowHas(page, q string, re *regexp.Regexp) bool {
	start := strings.Index(page, fmt.Sprintf(`<tr data-queue="%s">`, q))
	if start < 0 {
		return false
	}
	row, _, _ := strings.Cut(page[start:], "</tr>")
	return re.MatchString(row + "</tr>")
}
