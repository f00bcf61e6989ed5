package petrel_test

import (
	"context"
	"html"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	petrel "github.com/petrelmq/petrel"
	"github.com/petrelmq/petrel/internal/petreltest"
)

// The console's Transfers and Queues pages at each hop of a relayed file,
// over HTTP from each node's admin listener: the files a node received
// are listed once ended, as well as those it sent, and the relay's queue
// reads "relay".

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
