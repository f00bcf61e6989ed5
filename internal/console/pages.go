package console

import (
	"bytes"
	"context"
	"fmt"
	"html/template"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// pageNames are the pages; each has templates/<name>.html, which defines
// "body" and, but for login, "live": the part the event stream redraws.
var pageNames = []string{"login", "network", "queues", "queue", "transfers", "node"}

var funcs = template.FuncMap{
	"bytes":   formatBytes,
	"rate":    func(f float64) string { return strconv.FormatFloat(f, 'f', 1, 64) },
	"pct":     func(f float64) string { return strconv.FormatFloat(f, 'f', 1, 64) + "%" },
	"dur":     formatDuration,
	"ago":     func(t time.Time) string { return formatDuration(time.Since(t).Round(time.Second)) + " ago" },
	"when":    func(t time.Time) string { return t.UTC().Format("2006-01-02 15:04:05 UTC") },
	"f1":      func(f float64) string { return strconv.FormatFloat(f, 'f', 1, 64) },
	"escpath": pathEscape,
	"bps":     func(f float64) string { return formatBytes(int64(f)) + "/s" },
	"sub":     func(a, b int) int { return a - b },
	"add":     func(a, b int) int { return a + b },
}

func parsePages() (map[string]*template.Template, error) {
	out := map[string]*template.Template{}
	for _, name := range pageNames {
		t, err := template.New(name).Funcs(funcs).ParseFS(templateFS, "templates/layout.html", "templates/"+name+".html")
		if err != nil {
			return nil, fmt.Errorf("console templates: %w", err)
		}
		out[name] = t
	}
	return out, nil
}

// pageData is what every page's layout takes.
type pageData struct {
	Title, Page, Node, CSRF, Error string
	// Events is the URL of the page's event stream, "" for none.
	Events string
	Logout bool
	Live   any
	Static any
}

func (s *Server) render(w http.ResponseWriter, r *http.Request, code int, page string, d pageData) {
	d.Page = page
	d.CSRF = s.csrfToken(r)
	d.Logout = s.hasToken && page != "login"
	if d.Node == "" {
		d.Node = s.sampler.snapshot().Node
	}
	var buf bytes.Buffer
	if err := s.pages[page].ExecuteTemplate(&buf, "layout", d); err != nil {
		s.log.Error("console page", "page", page, "error", err)
		http.Error(w, "the page could not be drawn", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(code)
	w.Write(buf.Bytes())
}

// page serves one page: its live part drawn as the stream would, and the
// rest.
func (s *Server) page(name string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		if name == "queue" {
			q.Set("queue", r.PathValue("queue"))
		}
		d := pageData{Title: titles[name], Live: s.live(r.Context(), name, q)}
		q.Set("page", name)
		d.Events = "/events?" + q.Encode()
		if name == "queue" {
			d.Title = "Queue " + q.Get("queue")
			limit, _ := strconv.Atoi(q.Get("limit"))
			if limit <= 0 || limit > 1000 {
				limit = 100
			}
			d.Static = s.queueMessages(r.Context(), q.Get("queue"), q.Get("after"), limit)
		}
		s.render(w, r, http.StatusOK, name, d)
	}
}

var titles = map[string]string{"network": "Network", "queues": "Queues", "transfers": "Transfers", "node": "Node"}

// live returns the data of the live part of page.
func (s *Server) live(ctx context.Context, page string, q url.Values) any {
	snap := s.sampler.snapshot()
	switch page {
	case "network":
		return s.networkView(snap, q.Get("link"))
	case "queues":
		from, _ := strconv.Atoi(q.Get("from"))
		return s.queuesView(ctx, snap, from)
	case "queue":
		return s.queueView(ctx, snap, q.Get("queue"))
	case "transfers":
		return s.transfersView(snap)
	case "node":
		return s.nodeView(snap)
	}
	return nil
}

// handleEvents streams the live part of a page: each time the sampler
// has new figures, the page's feed draws the part again, once for all the
// streams on it, and each sends it if it changed, as one event whose data
// is its HTML. A comment every 15 s keeps proxies from closing a quiet
// stream. The bounds are in streams.go.
func (s *Server) handleEvents(w http.ResponseWriter, r *http.Request) {
	page := r.URL.Query().Get("page")
	if s.pages[page] == nil || page == "login" {
		http.Error(w, "no such page", http.StatusNotFound)
		return
	}
	if _, ok := w.(http.Flusher); !ok {
		http.Error(w, "streaming unsupported", http.StatusInternalServerError)
		return
	}
	st, f, ok := s.join(w, r, page)
	if !ok {
		return
	}
	defer s.leave(f, st)
	w.Header().Set("Content-Type", "text/event-stream")
	// The connection closes with the stream: a write deadline left on it
	// would cut the next request on it, as net/http sets none itself.
	w.Header().Set("Connection", "close")
	w.WriteHeader(http.StatusOK)
	if err := s.send(w, r, st, nil); err != nil {
		return
	}
	var last []byte
	quiet := 0
	for {
		var b []byte
		select {
		case <-s.closing:
			return
		case <-r.Context().Done():
			return
		case <-f.done:
			return
		case b = <-st.data:
		}
		if bytes.Equal(b, last) {
			if quiet++; quiet*int(s.interval) < int(15*time.Second) {
				continue
			}
			quiet = 0
			if err := s.send(w, r, st, []byte(": idle\n\n")); err != nil {
				return
			}
			continue
		}
		last, quiet = b, 0
		if err := s.send(w, r, st, eventBytes(b)); err != nil {
			return
		}
	}
}

// eventBytes is data as one event: a "data:" line per line.
func eventBytes(data []byte) []byte {
	var b bytes.Buffer
	for _, line := range bytes.Split(data, []byte("\n")) {
		b.WriteString("data: ")
		b.Write(line)
		b.WriteByte('\n')
	}
	b.WriteByte('\n')
	return b.Bytes()
}

func formatBytes(n int64) string {
	if n < 0 {
		return "unknown"
	}
	const unit = 1024
	if n < unit {
		return strconv.FormatInt(n, 10) + " B"
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}

// formatDuration writes d to the second, dropping only zero parts at the
// end: "45s", "5m", "1m40s", "2h", "1h20m30s", "1d", "3d4h". A plain
// trim of "0s" would also cut the last digit of "1m40s".
func formatDuration(d time.Duration) string {
	d = d.Round(time.Second)
	if d <= 0 {
		return "0s"
	}
	days, rest := d/(24*time.Hour), d%(24*time.Hour)
	s := rest.String() // "1h20m30s", "5m0s", "1h0m0s", "0s"
	if t, ok := strings.CutSuffix(s, "m0s"); ok {
		s = t + "m"
		if t, ok := strings.CutSuffix(s, "h0m"); ok {
			s = t + "h"
		}
	}
	switch {
	case days == 0:
		return s
	case rest == 0:
		return fmt.Sprintf("%dd", days)
	}
	return fmt.Sprintf("%dd%s", days, s)
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

func pathEscape(s string) string { return url.PathEscape(s) }
