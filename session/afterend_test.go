package session

import (
	"context"
	"testing"
	"time"
)

// AfterEnd runs its function once the session ends, whichever side ends
// it, and not before; stop before the end keeps it from running; one
// registered after the end runs at once.
func TestAfterEnd(t *testing.T) {
	c, s := pair(t, testConfig("plant-7"), testConfig("hub-1"))
	snd, rcv := openPair(t, c, s, "orders", 4, 4)
	ran := make(chan string, 3)
	snd.AfterEnd(func() { ran <- "first" })
	stop := snd.AfterEnd(func() { ran <- "stopped" })
	if !stop() {
		t.Fatal("stop before the end reported false")
	}
	select {
	case r := <-ran:
		t.Fatalf("%s ran before the session ended", r)
	case <-time.After(50 * time.Millisecond):
	}
	// The peer ends it: the client side's function runs.
	if err := rcv.Close(context.Background(), "done"); err != nil {
		t.Fatal(err)
	}
	expectRan(t, ran, "first", "AfterEnd's function did not run when the peer closed the session")
	<-snd.Done()
	late := snd.AfterEnd(func() { ran <- "late" })
	expectRan(t, ran, "late", "AfterEnd after the end did not run its function")
	if late() {
		t.Error("stop after the function ran reported true")
	}
	select {
	case r := <-ran:
		t.Fatalf("%s ran again", r)
	case <-time.After(50 * time.Millisecond):
	}
}

// expectRan waits for the next function to run, which must be want;
// none within 5 s fails t with missing.
func expectRan(t *testing.T, ran <-chan string, want, missing string) {
	t.Helper()
	select {
	case r := <-ran:
		if r != want {
			t.Fatalf("%s ran, want %s", r, want)
		}
	case <-time.After(5 * time.Second):
		t.Fatal(missing)
	}
}
