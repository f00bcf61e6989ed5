package receiver

import (
	"errors"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/petrelmq/petrel/filetransfer"
	"github.com/petrelmq/petrel/message"
	"github.com/petrelmq/petrel/session"
)

// The ended transfers a peer can make the receiver remember (one per
// refused announcement) are bounded, oldest dropped first.
func TestEndedTransfersBounded(t *testing.T) {
	var r transfers
	before := time.Now().Add(-time.Second)
	m := &message.Message{Destination: "files"}
	for i := range maxEnded + 10 {
		m.File.Filename = fmt.Sprintf("f%d", i)
		r.endedFailed(fmt.Sprint(i), m, "peer", 0, errors.New("refused: no"))
	}
	got := r.endedSince(before)
	if len(got) != maxEnded {
		t.Fatalf("%d ended transfers kept, want the bound %d", len(got), maxEnded)
	}
	if got[0].Filename != "f10" || got[len(got)-1].Filename != fmt.Sprintf("f%d", maxEnded+9) {
		t.Fatalf("kept %s..%s, want the newest", got[0].Filename, got[len(got)-1].Filename)
	}
	if n := len(r.endedSince(time.Now())); n != 0 {
		t.Fatalf("%d transfers ended after now", n)
	}

	tr := r.begin(nil, "x", m, "peer", 0)
	tr.received(5)
	r.taken(tr, true)
	last := r.endedSince(before)[maxEnded-1]
	if last.ID != "x" || last.State != filetransfer.StateHeld || last.Error != "" {
		t.Fatalf("a relayed file ended as %+v", last)
	}
}

// The paused entries a peer can leave (one per file it announces past the
// spool quota, each with no session behind it) are bounded per peer and in
// all, the entry paused longest ago dropped and counted first; a repeat of
// a file replaces its entry, entries being received are never dropped, and
// a connection's entries go with it.
func TestPausedTransfersBounded(t *testing.T) {
	var r transfers
	m := &message.Message{Destination: "files"}
	quota := errors.New("spool quota reached")
	c1, c2 := &session.Conn{}, &session.Conn{}
	live := r.begin(c2, "live", m, "p", 0)
	for i := range maxPausedPerPeer + 10 {
		r.failed(c1, fmt.Sprint(i), m, "p", quota)
	}
	count := func(peer string, state filetransfer.State) (n int) {
		for _, st := range r.list() {
			if st.From == peer && st.State == state {
				n++
			}
		}
		return n
	}
	if n := count("p", filetransfer.StatePaused); n != maxPausedPerPeer {
		t.Fatalf("%d paused entries of one peer kept, want the bound %d", n, maxPausedPerPeer)
	}
	if n := count("p", filetransfer.StateReceiving); n != 1 {
		t.Fatalf("the transfer being received was dropped: %d left", n)
	}
	if got := r.evicted.Load(); got != 10 {
		t.Fatalf("%d evictions counted, want 10", got)
	}
	for _, st := range r.list() {
		if n, err := strconv.Atoi(st.ID); err == nil && n < 10 {
			t.Fatalf("entry %s kept: the oldest should go first", st.ID)
		}
	}
	// The sender tries a file again: its entry is replaced, nothing added
	// or dropped.
	r.failed(c1, "20", m, "p", quota)
	if n, got := count("p", filetransfer.StatePaused), r.evicted.Load(); n != maxPausedPerPeer || got != 10 {
		t.Fatalf("a repeat left %d paused entries and %d evictions, want %d and 10", n, got, maxPausedPerPeer)
	}
	// A peer's paused transfer of the same file does not hide another's.
	r.failed(c2, "live", m, "q", quota)
	if count("p", filetransfer.StateReceiving) != 1 || count("q", filetransfer.StatePaused) != 1 {
		t.Fatalf("another peer's entry for the same file: %+v", r.list())
	}
	// The bound of all peers together.
	for p := range maxPaused/maxPausedPerPeer + 1 {
		for i := range maxPausedPerPeer {
			r.failed(c2, fmt.Sprint(i), m, fmt.Sprintf("peer%d", p), quota)
		}
	}
	if got := r.pausedList.Len(); got != maxPaused || len(r.list()) != maxPaused+1 {
		t.Fatalf("%d paused entries kept (%d listed), want the bound %d and the live one", got, len(r.list()), maxPaused)
	}
	if count("p", filetransfer.StatePaused) != 0 || count("q", filetransfer.StatePaused) != 0 {
		t.Fatal("the entries paused longest ago were not the ones dropped")
	}
	// A paused live transfer counts against the bound too; once its
	// connection ends, nothing of it is listed.
	r.paused(live, quota)
	r.end(live)
	if count("p", filetransfer.StatePaused) != 1 || r.pausedList.Len() != maxPaused {
		t.Fatalf("a paused transfer: %d of its peer listed, %d paused in all", count("p", filetransfer.StatePaused), r.pausedList.Len())
	}
	r.connClosed(c2)
	if got := r.list(); len(got) != 0 || r.pausedList.Len() != 0 || len(r.peerPaused) != 0 {
		t.Fatalf("%d entries left after their connection ended (%d paused, %d peers)", len(got), r.pausedList.Len(), len(r.peerPaused))
	}
}
