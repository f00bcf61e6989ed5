package receiver

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/petrelmq/petrel/filetransfer"
	"github.com/petrelmq/petrel/message"
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

	tr := r.begin("x", m, "peer", 0)
	tr.received(5)
	r.taken(tr, true)
	last := r.endedSince(before)[maxEnded-1]
	if last.ID != "x" || last.State != filetransfer.StateHeld || last.Error != "" {
		t.Fatalf("a relayed file ended as %+v", last)
	}
}
