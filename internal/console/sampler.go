package console

import (
	"sync"
	"time"
)

// The sampler keeps the recent minutes of the node's counters, for the
// rates and the small charts: one sample every interval, the last
// historyLen of them. The console shows these minutes only; Prometheus
// keeps the long term (docs/grafana).

const (
	historyLen = 90 // 3 minutes at 2 s
	// maxSeries bounds the series kept, whatever the number of queues,
	// links and files: past it, new ones get no history (and no rate).
	maxSeries = 2000
)

// point is one sample of a series of counters.
type point struct {
	at time.Time
	// a and b are the series' counters: a queue's enqueued and acked, a
	// link's sent and acked, a file's acked bytes (in a); depth is a
	// queue's depth.
	a, b, depth int64
}

// series is the recent samples of one queue, link or file, oldest first.
type series struct {
	pts  []point
	seen time.Time // the last sample that had it
}

type sampler struct {
	src      Source
	interval time.Duration

	mu     sync.Mutex
	series map[string]*series // "q:" queue, "l:" link, "f:" file
	last   Snapshot

	stop chan struct{}
	done chan struct{}
}

func newSampler(src Source, interval time.Duration) *sampler {
	s := &sampler{src: src, interval: interval, series: map[string]*series{},
		stop: make(chan struct{}), done: make(chan struct{})}
	s.sample(time.Now())
	go s.loop()
	return s
}

// loop samples until close.
func (s *sampler) loop() {
	defer close(s.done)
	t := time.NewTicker(s.interval)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case now := <-t.C:
			s.sample(now)
		}
	}
}

func (s *sampler) close() {
	close(s.stop)
	<-s.done
}

// sample takes one snapshot and adds its counters to the series.
func (s *sampler) sample(now time.Time) {
	snap := s.src.Snapshot()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.last = snap
	for _, q := range snap.Queues {
		s.add("q:"+q.Name, point{at: now, a: q.Enqueued, b: q.Acked, depth: q.Depth})
	}
	for _, l := range snap.Links {
		s.add("l:"+l.Queue, point{at: now, a: l.Sent, b: l.Acked, depth: l.InFlight})
		for _, f := range l.Files.Active {
			s.add(fileKey(f.ID), point{at: now, a: f.Acked})
		}
	}
	for _, f := range snap.Receiving {
		s.add("r:"+f.ID, point{at: now, a: f.Received})
	}
	// Series not seen for the whole history are gone: drop them.
	for k, se := range s.series {
		if now.Sub(se.seen) > time.Duration(historyLen)*s.interval {
			delete(s.series, k)
		}
	}
}

func fileKey(id uint64) string { return "f:" + itoa(int64(id)) }

func (s *sampler) add(key string, p point) {
	se := s.series[key]
	if se == nil {
		if len(s.series) >= maxSeries {
			return
		}
		se = &series{}
		s.series[key] = se
	}
	se.seen = p.at
	if len(se.pts) == historyLen {
		copy(se.pts, se.pts[1:])
		se.pts = se.pts[:historyLen-1]
	}
	se.pts = append(se.pts, p)
}

// snapshot returns the last sample's snapshot.
func (s *sampler) snapshot() Snapshot {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.last
}

// history returns a copy of the series key.
func (s *sampler) history(key string) []point {
	s.mu.Lock()
	defer s.mu.Unlock()
	se := s.series[key]
	if se == nil {
		return nil
	}
	return append([]point(nil), se.pts...)
}

// rates returns the per-second rates of a series' two counters over its
// last minute, 0 when it has fewer than two samples.
func rates(pts []point) (a, b float64) {
	if len(pts) < 2 {
		return 0, 0
	}
	last := pts[len(pts)-1]
	first := pts[0]
	for _, p := range pts {
		if last.at.Sub(p.at) <= time.Minute {
			first = p
			break
		}
	}
	// The last few samples give a rate that follows changes quickly.
	if n := len(pts) - 4; n >= 0 && pts[n].at.After(first.at) {
		first = pts[n]
	}
	secs := last.at.Sub(first.at).Seconds()
	if secs <= 0 {
		return 0, 0
	}
	return float64(max(last.a-first.a, 0)) / secs, float64(max(last.b-first.b, 0)) / secs
}
