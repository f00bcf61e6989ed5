package petrel_test

import (
	"context"
	"fmt"
	"html"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	petrel "github.com/petrelmq/petrel"
	"github.com/petrelmq/petrel/internal/petreltest"
	"github.com/petrelmq/petrel/internal/petreltest/nodes"
)

// The console's pages over HTTP from real nodes' admin listeners: the
// Transfers and Queues pages at each hop of a relayed file (the files a
// node received are listed once ended, as well as those it sent, and the
// relay's queue reads "relay"), and the Network page of a node with more
// neighbours than it draws.

// consoleRows returns the table rows of page whose opening tag has attr
// (such as `data-ended="received"`), with their tags stripped.
func consoleRows(page, attr string) []string {
	re := regexp.MustCompile(`(?s)<tr ` + regexp.QuoteMeta(attr) + `>(.*?)</tr>`)
	tags := regexp.MustCompile(`<[^>]+>`)
	var out []string
	for _, m := range re.FindAllStringSubmatch(page, -1) {
		out = append(out, html.UnescapeString(strings.Join(strings.Fields(tags.ReplaceAllString(m[1], " ")), " ")))
	}
	return out
}

// waitRow waits until a row of path on c's node with attr contains every
// one of want, and returns it.
func (c *consoleClient) waitRow(path, attr string, want ...string) string {
	c.t.Helper()
	var rows []string
	var found string
	petreltest.Eventually(c.t, path+": a row "+attr+" reading "+strings.Join(want, ", "), func() bool {
		_, page := c.do(http.MethodGet, path, "", "", nil)
		rows = consoleRows(page, attr)
		for _, r := range rows {
			ok := true
			for _, w := range want {
				ok = ok && strings.Contains(r, w)
			}
			if ok {
				found = r
				return true
			}
		}
		return false
	}, func() string { return strings.Join(rows, "\n") })
	return found
}

func TestConsoleListsFilesEndedAtEachHop(t *testing.T) {
	a, c, b := relayTrio(t, withConsole)
	consoles := map[string]*consoleClient{}
	for _, n := range []*petrel.Node{a, b, c} {
		consoles[n.Name()] = newConsoleClient(t, n)
		consoles[n.Name()].login(consoleToken)
	}
	src, _ := writeRandom(t, t.TempDir(), "report.bin", 300<<10)
	p := a.Producer()
	m := p.CreateFileMessage("files@b")
	m.File.SendFilePath = src
	if err := p.Send(context.Background(), m); err != nil {
		t.Fatal(err)
	}
	receiveFile(t, b, "files", 30*time.Second)

	// The destination lists the file it received, delivered, from the
	// relay; the relay the file it received and holds, and the one it
	// handed over; the origin the one it sent.
	consoles["b"].waitRow("/transfers", `data-ended="received"`, "report.bin", "from c", "✔ delivered")
	consoles["c"].waitRow("/transfers", `data-ended="received"`, "report.bin", "from a", "✔ held")
	consoles["c"].waitRow("/transfers", `data-ended="sent"`, "report.bin", "to b", "✔ handed over")
	consoles["a"].waitRow("/transfers", `data-ended="sent"`, "report.bin", "to c", "✔ handed over")

	// The relay's queue toward b reads relay; the origin's, send, through
	// the relay; the destination's, receive.
	consoles["c"].waitRow("/queues", `data-queue="files@b"`, "relay to b")
	consoles["a"].waitRow("/queues", `data-queue="files@b"`, "send to b via c")
	consoles["b"].waitRow("/queues", `data-queue="files"`, "receive")
	_, page := consoles["c"].do(http.MethodGet, "/queues/files@b", "", "", nil)
	if !strings.Contains(page, `<dd class="kind">relay (to b)</dd>`) {
		t.Fatalf("the relay queue's page does not read relay:\n%s", page)
	}

	// A file the relay refuses (it relays only "files") ends failed at the
	// relay, with the refusal, and at the origin.
	bad := p.CreateFileMessage("other@b")
	bad.File.SendFilePath = src
	if err := p.Send(context.Background(), bad); err != nil {
		t.Fatal(err)
	}
	r := consoles["c"].waitRow("/transfers", `data-ended="received"`, "report.bin", "from a", "✖ failed", "refused")
	if !strings.Contains(r, `does not relay "other"`) {
		t.Errorf("the relay's refusal reads %q", r)
	}
	consoles["a"].waitRow("/transfers", `data-ended="sent"`, "report.bin", "✖ failed")
}

// A node with more neighbours than the graph draws: the page says how
// many are not drawn and lists them.
func TestConsoleNetworkListsWhatItCannotDraw(t *testing.T) {
	n := nodes.Open(t, nodes.With(func(c *petrel.Config) {
		withConsole(c)
		for i := range 40 { // past the 36 the dense ring draws
			c.Nodes = append(c.Nodes, petrel.NodeConfig{Name: fmt.Sprintf("plant-%02d", i), Connector: "tcp://127.0.0.1:1"})
		}
	}))
	c := newConsoleClient(t, n)
	c.login(consoleToken)
	_, page := c.do(http.MethodGet, "/", "", "", nil)
	t.Logf("the network page of 41 nodes: %d bytes", len(page))
	hidden := consoleRows(page, `data-hidden="plant-39"`)
	if len(hidden) != 1 || !strings.Contains(hidden[0], "neighbour") || !strings.Contains(hidden[0], "no link") {
		t.Fatalf("plant-39 is not listed as not drawn: %q", hidden)
	}
	if got := strings.Count(page, "<tr data-hidden="); got != 4 {
		t.Fatalf("%d nodes listed as not drawn, want 40-36 = 4", got)
	}
	if got := strings.Count(page, `<g class="node neighbour"`); got != 36 {
		t.Fatalf("%d neighbours drawn, want 36", got)
	}
	if !strings.Contains(html.UnescapeString(page), "+4 more nodes, listed below") || !strings.Contains(page, `<h2 id="not-drawn">Not drawn (4)</h2>`) {
		t.Fatalf("the graph does not say how many it left out:\n%s", page)
	}
}
