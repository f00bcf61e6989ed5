package petrel_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/petrelmq/petrel"
	"github.com/petrelmq/petrel/internal/adminapi"
	"github.com/petrelmq/petrel/internal/petreltest/nodes"
)

// sendPrioritized sends to addr one data message per priority in prios,
// in order, without waiting for each, and returns their ids in the order
// a consumer gets them: by priority, highest first, then as sent.
func sendPrioritized(t *testing.T, n *petrel.Node, addr string, prios ...uint8) []uint64 {
	t.Helper()
	p := n.Producer()
	type sent struct {
		id   uint64
		prio uint8
	}
	var all []sent
	var pending []*petrel.Pending
	for i, prio := range prios {
		m := p.CreateDataMessage(addr)
		m.Priority = prio
		m.Body = []byte(fmt.Sprint("m", i))
		pending = append(pending, p.SendAsync(m))
		all = append(all, sent{m.ID, prio})
	}
	for _, pd := range pending {
		if err := pd.Wait(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	slices.SortStableFunc(all, func(a, b sent) int { return int(b.prio) - int(a.prio) })
	ids := make([]uint64, len(all))
	for i, s := range all {
		ids[i] = s.id
	}
	return ids
}

// nextLink is the path of an answer's Link rel="next", "" if none.
func nextLink(t *testing.T, resp *http.Response) string {
	t.Helper()
	l := resp.Header.Get("Link")
	if l == "" {
		return ""
	}
	m := regexp.MustCompile(`^<([^>]+)>; rel="next"$`).FindStringSubmatch(l)
	if m == nil {
		t.Fatalf("Link %q", l)
	}
	return m[1]
}

// browsePath answers GET path, a browse.
func browsePath(t *testing.T, n *petrel.Node, path string) (*http.Response, []adminapi.Message) {
	t.Helper()
	name, query, _ := strings.Cut(strings.TrimPrefix(path, adminapi.PathQueues+"/"), "?")
	return browse(t, n, strings.TrimSuffix(name, "/messages"), query)
}

// TestAdminAPIBrowseNextLinks follows a browse's next-page links through
// a queue of three priorities while messages are acked and added between
// pages: every message the queue held throughout comes exactly once, in
// delivery order; those added after the page they would follow come too,
// and one added before the pages already read does not. An offset would
// have skipped as many messages as were acked before it.
func TestAdminAPIBrowseNextLinks(t *testing.T) {
	n := nodes.Open(t, nodes.With(withAdmin))
	var prios []uint8
	for i := range 30 {
		prios = append(prios, []uint8{0, 4, 8}[i%3])
	}
	want := sendPrioritized(t, n, "pages", prios...)

	resp, msgs := browse(t, n, "pages", "limit=7")
	var got []uint64
	for _, m := range msgs {
		got = append(got, m.ID)
	}
	// Between pages: the 3 at the head, read already, are acked, and
	// messages come at the highest priority (before the pages read) and
	// at the lowest (after them).
	var recv adminapi.RecvResponse
	mustAPI(t, n, "POST", adminapi.PathRecv, adminapi.RecvRequest{Address: "pages", Count: 3}, &recv)
	if len(recv.Messages) != 3 || recv.Messages[0].ID != want[0] {
		t.Fatalf("recv of the head: %+v", recv.Messages)
	}
	sendPrioritized(t, n, "pages", 9)
	want = append(want, sendPrioritized(t, n, "pages", 0, 0)...)

	for pages := 1; ; pages++ {
		next := nextLink(t, resp)
		if next == "" {
			break
		}
		if pages > 10 {
			t.Fatalf("%d pages and still a next one", pages)
		}
		if !strings.Contains(next, adminapi.ParamAfter+"=") || strings.Contains(next, adminapi.ParamOffset) || resp.Header.Get(adminapi.HeaderNextAfter) == "" {
			t.Fatalf("next page %q, %s %q: not by key", next, adminapi.HeaderNextAfter, resp.Header.Get(adminapi.HeaderNextAfter))
		}
		resp, msgs = browsePath(t, n, next)
		if len(msgs) == 0 || len(msgs) > 7 {
			t.Fatalf("page %d: %d messages", pages, len(msgs))
		}
		for _, m := range msgs {
			got = append(got, m.ID)
		}
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("the pages returned\n%v\nwant\n%v", got, want)
	}

	for _, bad := range []string{"after=x", "after=10:1", "after=1:-1", "after=1:2&offset=3"} {
		if code, raw := apiCall(t, n, "GET", "/api/queues/pages/messages?"+bad, nil, nil); code != http.StatusBadRequest {
			t.Fatalf("%s: %d %s", bad, code, raw)
		}
	}
}

// TestAdminAPIBrowseDeepPageReadsPage browses the last message of a queue
// of 3,000 by the key of the one before it: the node reads that message,
// not the 2,999 before it, as petrel_admin_browse_messages_read_total
// counts. The same page by offset reads no more: the node counts the
// messages before it along the index.
func TestAdminAPIBrowseDeepPageReadsPage(t *testing.T) {
	n := nodes.Open(t, nodes.With(withAdmin))
	const total = 3000
	prios := make([]uint8, total)
	for i := range prios {
		prios[i] = uint8(i % 2 * 5)
	}
	want := sendPrioritized(t, n, "deep", prios...)

	// Pages of 1,000, 1,000 and 999 end at the last message but one.
	after := ""
	for _, limit := range []int{1000, 1000, 999} {
		resp, msgs := browsePath(t, n, adminapi.QueueBrowsePath("deep", limit, after))
		if len(msgs) != limit {
			t.Fatalf("a page of %d: %d messages", limit, len(msgs))
		}
		after = resp.Header.Get(adminapi.HeaderNextAfter)
	}
	read := func() float64 { return scrape(t, n)["petrel_admin_browse_messages_read_total"] }
	before := read()
	resp, msgs := browsePath(t, n, adminapi.QueueBrowsePath("deep", 1, after))
	if len(msgs) != 1 || msgs[0].ID != want[total-1] || nextLink(t, resp) != "" {
		t.Fatalf("the last page: %d messages, next %q", len(msgs), nextLink(t, resp))
	}
	if got := read() - before; got != 1 {
		t.Fatalf("the page after message %d of %d read %v messages, want 1", total-1, total, got)
	}

	before = read()
	_, msgs = browse(t, n, "deep", fmt.Sprintf("limit=1&offset=%d", total-1))
	if len(msgs) != 1 || msgs[0].ID != want[total-1] {
		t.Fatalf("by offset: %d messages", len(msgs))
	}
	if got := read() - before; got != 1 {
		t.Fatalf("the page at offset %d read %v messages, want 1", total-1, got)
	}
	if _, msgs := browse(t, n, "deep", fmt.Sprintf("offset=%d", total)); len(msgs) != 0 {
		t.Fatalf("past the end by offset: %d messages", len(msgs))
	}
}

// TestConsoleQueuePageNextAndText pages through a queue in the console by
// its "next" links, which name the key of the last message shown, not an
// offset; a long text body shows its start alone, with a link to the
// whole message in the admin API: nine bodies of 1 MB of '<' made a page
// of 32 MB built in memory.
func TestConsoleQueuePageNextAndText(t *testing.T) {
	n := nodes.Open(t, nodes.With(withConsole))
	long := strings.Repeat("<", 1<<20)
	want := sendBodiesTo(t, n, "shown", []byte("a"), []byte(long), []byte("c"), []byte("d"), []byte("e"))
	cl := newConsoleClient(t, n)
	cl.login(consoleToken)
	next := regexp.MustCompile(`<a id="next" href="([^"]+)">`)
	full := regexp.MustCompile(`<a href="(/api/queues/shown/messages[^"]*)">the whole message</a>`)
	var got []string
	var fullPath string
	path := "/queues/shown?limit=2"
	for pages := 0; path != ""; pages++ {
		if pages > 5 {
			t.Fatal("more than 5 pages")
		}
		resp, page := cl.do(http.MethodGet, path, "", "", nil)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: %d", path, resp.StatusCode)
		}
		if len(page) > 200<<10 {
			t.Fatalf("GET %s: a page of %d bytes", path, len(page))
		}
		for _, m := range regexp.MustCompile(`<article class="msg" data-id="(\d+)">`).FindAllStringSubmatch(page, -1) {
			got = append(got, m[1])
		}
		if m := full.FindStringSubmatch(page); m != nil {
			fullPath = strings.ReplaceAll(m[1], "&amp;", "&")
		}
		path = ""
		if m := next.FindStringSubmatch(page); m != nil {
			path = strings.ReplaceAll(m[1], "&amp;", "&")
			if !strings.Contains(path, "after=") || strings.Contains(path, "offset") {
				t.Fatalf("next link %q: not by key", path)
			}
		}
	}
	if strings.Join(got, " ") != strings.Trim(fmt.Sprint(want), "[]") {
		t.Fatalf("the console's pages showed %v, want %v", got, want)
	}
	if fullPath == "" {
		t.Fatal("no link to the whole message past the text shown")
	}
	// The console's session reads the API, as its buttons do.
	resp, raw := cl.do(http.MethodGet, fullPath, "", "", nil)
	var msgs []adminapi.Message
	if err := json.Unmarshal([]byte(raw), &msgs); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %v", fullPath, resp.StatusCode, err)
	}
	if len(msgs) != 1 || msgs[0].ID != want[1] || msgs[0].Text == nil || *msgs[0].Text != long {
		t.Fatalf("the whole message: %d messages", len(msgs))
	}
}
