package console

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// The event streams (GET /events) are what a party reaching the admin
// listener can make the console spend for as long as it likes, so each
// cost has a bound:
//
//   - MaxStreams bounds the streams open at once. Each holds one of the
//     admin listener's 256 connections; 32 is a few consoles' worth of
//     tabs and leaves most of them to the API, /metrics and petrel. The
//     one past it is answered 503 and counted.
//   - A page is drawn once a tick, however many streams show it: the
//     streams of one page (and query) share a feed, which draws the live
//     part and hands the same bytes to each. Before, each stream drew its
//     page itself, store reads included: 250 streams on the Queues page of
//     100 queues took about a core, and cut a producer to 11–22% of its
//     rate alone.
//   - Each write to a stream has a deadline (writeTimeout): a reader that
//     stops reading (a suspended laptop, a stuck proxy) is dropped once its
//     socket is full for that long, counted, and logged at most once a
//     minute. Without it the stream's goroutine waited in the write for
//     ever, and the node's stop with it.

// MaxStreams is how many event streams may be open at once.
const MaxStreams = 32

// DefaultWriteTimeout is how long one write to an event stream may wait
// for its reader.
const DefaultWriteTimeout = 10 * time.Second

// Stats counts what the event streams cost; the node exports it as
// metrics. Its fields are only ever added to.
type Stats struct {
	// Open is the streams open now.
	Open atomic.Int64
	// Refused counts the streams refused past MaxStreams, Dropped those
	// closed because their reader stopped reading.
	Refused, Dropped atomic.Int64
	// Renders counts the live parts drawn for the streams: one per feed
	// and tick, whatever the number of streams on the feed.
	Renders atomic.Int64
}

// feed draws the live part of one page for the streams that show it.
type feed struct {
	key  string
	page string
	q    url.Values
	// subs are the streams on it, under Server.mu.
	subs map[*stream]struct{}
	// stop is closed when the last stream leaves; done when the feed's
	// goroutine returned.
	stop, done chan struct{}
}

// stream is one open GET /events.
type stream struct {
	rc *http.ResponseController
	// data holds the latest drawing of the feed not yet taken: a slow
	// stream skips drawings rather than hold up the others.
	data chan []byte
	// mu orders the arming of a write's deadline against Close, which
	// ends the write at once.
	mu sync.Mutex
}

// feedKey names the feed of page: the page and the one parameter its live
// part reads, so that other parameters make no more feeds.
func feedKey(page string, q url.Values) (string, url.Values) {
	var param string
	switch page {
	case "network":
		param = "link"
	case "queues":
		from, _ := strconv.Atoi(q.Get("from"))
		q = url.Values{"from": {strconv.Itoa(from)}}
		return page + "\x00" + q.Get("from"), q
	case "queue":
		param = "queue"
	default:
		return page, url.Values{}
	}
	v := q.Get(param)
	return page + "\x00" + v, url.Values{param: {v}}
}

// join opens a stream of page on w, and its feed if it is the first; ok
// is false, and w answered, if the node is stopping or MaxStreams are
// open.
func (s *Server) join(w http.ResponseWriter, r *http.Request, page string) (*stream, *feed, bool) {
	key, q := feedKey(page, r.URL.Query())
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		http.Error(w, "the node is stopping", http.StatusServiceUnavailable)
		return nil, nil, false
	}
	if len(s.open) >= MaxStreams {
		s.mu.Unlock()
		s.stats.Refused.Add(1)
		if held, ok := s.logs.Allow("refused"); ok {
			s.log.Warn("console event stream refused: too many open; close other console tabs",
				slog.String("remote", r.RemoteAddr), slog.Int("max_streams", MaxStreams), slog.Int64("suppressed", held))
		}
		// The connection goes with the refusal: kept alive, each refused
		// stream would still hold one of the admin listener's
		// connections, which the bound is there to leave to the API.
		w.Header().Set("Connection", "close")
		http.Error(w, "too many console event streams open (at most "+strconv.Itoa(MaxStreams)+
			"): close other console tabs, then reload this page", http.StatusServiceUnavailable)
		return nil, nil, false
	}
	st := &stream{rc: http.NewResponseController(w), data: make(chan []byte, 1)}
	s.open[st] = struct{}{}
	s.stats.Open.Store(int64(len(s.open)))
	f := s.feeds[key]
	if f == nil {
		f = &feed{key: key, page: page, q: q, subs: map[*stream]struct{}{}, stop: make(chan struct{}), done: make(chan struct{})}
		s.feeds[key] = f
		s.streams.Add(1)
		go s.runFeed(f)
	}
	f.subs[st] = struct{}{}
	s.streams.Add(1)
	s.mu.Unlock()
	return st, f, true
}

// leave closes st's place, and its feed once no stream is on it.
func (s *Server) leave(f *feed, st *stream) {
	s.mu.Lock()
	delete(s.open, st)
	s.stats.Open.Store(int64(len(s.open)))
	delete(f.subs, st)
	if len(f.subs) == 0 {
		if s.feeds[f.key] == f {
			delete(s.feeds, f.key)
		}
		close(f.stop)
	}
	s.mu.Unlock()
	s.streams.Done()
}

// runFeed draws f's live part every tick and hands it to its streams,
// until the last leaves or the console closes.
func (s *Server) runFeed(f *feed) {
	defer s.streams.Done()
	defer close(f.done)
	t := s.pages[f.page]
	tick := time.NewTicker(s.interval)
	defer tick.Stop()
	for {
		select {
		case <-s.closing:
			return
		case <-f.stop:
			return
		case <-tick.C:
		}
		var buf bytes.Buffer
		if err := t.ExecuteTemplate(&buf, "live", s.live(s.ctx, f.page, f.q)); err != nil {
			// A fault of the templates, which the next tick would repeat:
			// the streams end (f.done).
			s.log.Error("console stream", "page", f.page, "error", err)
			s.mu.Lock()
			if s.feeds[f.key] == f {
				delete(s.feeds, f.key)
			}
			s.mu.Unlock()
			return
		}
		s.stats.Renders.Add(1)
		b := buf.Bytes()
		s.mu.Lock()
		for st := range f.subs {
			// Only the feed sends on st.data, so once the drawing not
			// yet taken is dropped there is room.
			select {
			case st.data <- b:
			default:
				select {
				case <-st.data:
				default:
				}
				st.data <- b
			}
		}
		s.mu.Unlock()
	}
}

// arm sets the deadline of st's next write; false once the console
// closes, which ended st's writes for good.
func (s *Server) arm(st *stream) bool {
	st.mu.Lock()
	defer st.mu.Unlock()
	select {
	case <-s.closing:
		return false
	default:
	}
	// An error means a ResponseWriter that is not net/http's: there is
	// no connection to bound.
	st.rc.SetWriteDeadline(time.Now().Add(s.writeTimeout))
	return true
}

// send writes p to st and flushes it, within the write deadline.
func (s *Server) send(w http.ResponseWriter, r *http.Request, st *stream, p []byte) error {
	if !s.arm(st) {
		return errStopping
	}
	_, err := w.Write(p)
	if err == nil {
		err = st.rc.Flush()
	}
	// A reader that went away fails the write otherwise (and net/http
	// cancels r's context on any failed write): only the deadline says
	// the reader is there and stopped reading.
	if err != nil && errors.Is(err, os.ErrDeadlineExceeded) {
		select {
		case <-s.closing:
			// Close ended the write.
		default:
			s.stats.Dropped.Add(1)
			if held, ok := s.logs.Allow("stalled"); ok {
				s.log.Warn("console event stream dropped: its reader stopped reading",
					slog.String("remote", r.RemoteAddr), slog.Duration("write_timeout", s.writeTimeout),
					slog.Int64("suppressed", held))
			}
		}
	}
	return err
}

var errStopping = errors.New("the console is closing")

// endWrites makes the writes of every open stream fail now, so that one
// blocked on a reader that stopped reading returns: Close must not wait
// for its write timeout. Called with s.mu held, after closing was closed.
func (s *Server) endWrites() {
	for st := range s.open {
		st.mu.Lock()
		st.rc.SetWriteDeadline(time.Now())
		st.mu.Unlock()
	}
}

// waitStreams waits for the streams and feeds to end, or ctx to. Should
// ctx end first, its goroutine ends with the last stream: the admin
// listener's stop closes their connections next.
func (s *Server) waitStreams(ctx context.Context) error {
	done := make(chan struct{})
	go func() {
		s.streams.Wait()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
