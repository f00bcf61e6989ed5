package mqttgw

import (
	"context"
	"testing"
	"time"
)

// TestPumpWaitsForAQuarterOfAFullWindow checks the silly-window
// avoidance: once the window is full, one acknowledgement does not let a
// pump deliver again; a quarter of the window does.
func TestPumpWaitsForAQuarterOfAFullWindow(t *testing.T) {
	st := &connState{slots: make(chan struct{}, 8), roomy: make(chan struct{}, 1), roomWait: time.Hour}
	timer := time.NewTimer(time.Hour)
	timer.Stop()

	// Room to spare: no wait at all.
	if !st.waitRoom(context.Background(), timer) {
		t.Fatal("waitRoom refused with the window empty")
	}
	for range cap(st.slots) {
		st.slots <- struct{}{}
	}
	done := make(chan bool, 1)
	go func() { done <- st.waitRoom(context.Background(), timer) }()
	// Let it find the window full; one that looks after the release below
	// finds room and rightly goes on.
	time.Sleep(200 * time.Millisecond)

	st.release() // one of eight back: not enough
	select {
	case <-done:
		t.Fatal("the pump went on with one slot of eight free")
	case <-time.After(50 * time.Millisecond):
	}
	st.release() // two of eight: a quarter
	select {
	case ok := <-done:
		if !ok {
			t.Fatal("waitRoom reported the connection ended")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the pump still waits with a quarter of the window free")
	}

	// A full window and a connection that ends: the pump stops.
	for len(st.slots) < cap(st.slots) {
		st.slots <- struct{}{}
	}
	ctx, cancel := context.WithCancel(context.Background())
	go func() { done <- st.waitRoom(ctx, timer) }()
	cancel()
	if ok := <-done; ok {
		t.Fatal("waitRoom went on after its context ended")
	}

	// With the room wait short, a full window waits no longer than it.
	st.roomWait = time.Millisecond
	if !st.waitRoom(context.Background(), timer) {
		t.Fatal("waitRoom refused after its wait")
	}
}
