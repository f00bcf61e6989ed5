package console

import (
	"time"
)

// The transfers page: files in flight or paused, and those that ended in
// the last hour.

// fileView is one file moving.
type fileView struct {
	ID, Filename, Peer, State, Reason, Direction string
	Size, Done                                   int64
	Percent                                      float64
	Rate                                         float64 // bytes per second
	ETA                                          time.Duration
}

type transfersLive struct {
	Files    []fileView
	Finished []Finished
}

func (s *Server) transfersView(snap Snapshot) transfersLive {
	var v transfersLive
	for _, l := range snap.Links {
		for _, f := range l.Files.Active {
			fv := fileView{ID: itoa(int64(f.ID)), Filename: f.Filename, Peer: l.NextHop, State: string(f.State),
				Reason: f.Error, Direction: "sending", Size: f.Size, Done: f.Acked}
			fv.Rate, _ = rates(s.sampler.history(fileKey(f.ID)))
			v.Files = append(v.Files, fill(fv))
		}
	}
	for _, f := range snap.Receiving {
		fv := fileView{ID: f.ID, Filename: f.Filename, Peer: f.From, State: string(f.State),
			Reason: f.Error, Direction: "receiving", Size: f.Size, Done: f.Received}
		fv.Rate, _ = rates(s.sampler.history("r:" + f.ID))
		v.Files = append(v.Files, fill(fv))
	}
	cut := time.Now().Add(-time.Hour)
	for i := len(snap.Finished) - 1; i >= 0; i-- {
		if f := snap.Finished[i]; f.At.After(cut) {
			v.Finished = append(v.Finished, f)
		}
	}
	return v
}

// fill computes a file's percentage and its ETA at its rate.
func fill(f fileView) fileView {
	if f.Size > 0 {
		f.Percent = 100 * float64(f.Done) / float64(f.Size)
	}
	if f.Rate > 0 && f.Size > f.Done {
		f.ETA = time.Duration(float64(f.Size-f.Done) / f.Rate * float64(time.Second)).Round(time.Second)
	}
	return f
}

type nodeLive struct {
	Snapshot
	Uptime time.Duration
}

func (s *Server) nodeView(snap Snapshot) nodeLive {
	return nodeLive{Snapshot: snap, Uptime: time.Since(snap.Started).Round(time.Second)}
}
