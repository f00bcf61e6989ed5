package petrel

import (
	"context"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestAdminBrowsesBounded holds every browse slot of a node: one more
// browse, by the API or the console, waits browseWait and is refused with
// 503 and Retry-After, counted in petrel_admin_browses_refused_total while
// petrel_admin_browses shows the slots held; once one is given back, a
// browse is answered.
func TestAdminBrowsesBounded(t *testing.T) {
	defer func(w time.Duration) { browseWait = w }(browseWait)
	browseWait = 100 * time.Millisecond
	n := openAdminNode(t, io.Discard)
	p := n.Producer()
	m := p.CreateDataMessage("held")
	if err := p.Send(context.Background(), m); err != nil {
		t.Fatal(err)
	}
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 10 * time.Second}
	get := func(path string) (*http.Response, string) {
		t.Helper()
		resp, err := client.Get("http://" + n.AdminAddr() + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, string(b)
	}
	for range maxBrowses {
		if err := n.browses.acquire(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	resp, body := get("/api/queues/held/messages")
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("a browse past %d at once: %d, Retry-After %q: %s", maxBrowses, resp.StatusCode, resp.Header.Get("Retry-After"), body)
	}
	_, metrics := get("/metrics")
	if metricLine(metrics, "petrel_admin_browses_refused_total") != "1" || metricLine(metrics, "petrel_admin_browses") != strconv.Itoa(maxBrowses) {
		t.Fatalf("refused %q, in progress %q", metricLine(metrics, "petrel_admin_browses_refused_total"), metricLine(metrics, "petrel_admin_browses"))
	}
	// The console's queue page shares the bound, and says why it shows
	// no message.
	if resp, body := get("/queues/held"); resp.StatusCode != http.StatusOK || !strings.Contains(body, errTooManyBrowses.Error()) {
		t.Fatalf("the console's queue page with every slot held: %d", resp.StatusCode)
	}

	n.browses.release()
	if resp, body := get("/api/queues/held/messages"); resp.StatusCode != http.StatusOK || !strings.Contains(body, strconv.FormatUint(m.ID, 10)) {
		t.Fatalf("a browse with a slot free: %d %s", resp.StatusCode, body)
	}
	for range maxBrowses - 1 {
		n.browses.release()
	}
}
