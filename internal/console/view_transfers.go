package console

import (
	"sort"
	"time"

	"github.com/petrelmq/petrel/filetransfer"
)

// The transfers page: files in flight or paused, and those that ended in
// the last hour, sent or received.

// fileView is one file moving.
type fileView struct {
	ID, Filename, Peer, State, Reason, Direction string
	Size, Done                                   int64
	Percent                                      float64
	Rate                                         float64 // bytes per second
	ETA                                          time.Duration
}

// endedView is one file that ended in the last hour: sent from this node
// (Peer its next hop) or received by it (Peer the node it came from).
type endedView struct {
	Filename, Direction, Peer string
	Size                      int64
	State                     filetransfer.State
	Error                     string
	Failed                    bool
	At                        time.Time
}

type transfersLive struct {
	Files []fileView
	Ended []endedView
}

// maxEndedShown bounds the ended files a page lists, newest first.
const maxEndedShown = 200

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
	v.Ended = endedViews(snap, time.Now().Add(-time.Hour))
	return v
}

// endedViews merges the files sent and received that ended after cut,
// newest first.
func endedViews(snap Snapshot, cut time.Time) []endedView {
	var out []endedView
	for _, f := range snap.Finished {
		if f.At.After(cut) {
			out = append(out, endedView{Filename: f.Filename, Direction: "sent", Peer: f.NextHop, Size: f.Size,
				State: f.State, Error: f.Error, Failed: f.Error != "" || f.State == filetransfer.StateFailed, At: f.At})
		}
	}
	for _, f := range snap.Received {
		if f.At.After(cut) {
			out = append(out, endedView{Filename: f.Filename, Direction: "received", Peer: f.From, Size: f.Size,
				State: f.State, Error: f.Error, Failed: f.State == filetransfer.StateFailed, At: f.At})
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].At.After(out[j].At) })
	if len(out) > maxEndedShown {
		out = out[:maxEndedShown]
	}
	return out
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
