package session

import (
	"bytes"
	"context"
	"testing"
)

// TestReleasedPayloadsAreReusedSafely sends large Data frames one at a
// time: each one's bytes arrive intact whether the frames before it were
// released to the pool (and their buffers reused) or kept, and a kept
// payload is never overwritten by a later frame.
func TestReleasedPayloadsAreReusedSafely(t *testing.T) {
	c, s := tcpPair(t, testConfig("plant-7"), testConfig("hub-1"))
	snd, rcv := openPair(t, c, s, "files", 4, 4)
	ctx := context.Background()
	payload := func(i int) []byte { return bytes.Repeat([]byte{byte(i)}, 200<<10) }
	var kept []Data
	for i := 1; i <= 20; i++ {
		if err := snd.SendData(ctx, uint64(i), payload(i)); err != nil {
			t.Fatal(err)
		}
		d, err := rcv.Recv(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if d.Seq != uint64(i) || !bytes.Equal(d.Message, payload(i)) {
			t.Fatalf("frame %d arrived as seq %d with other bytes", i, d.Seq)
		}
		if d.frame == nil {
			t.Fatalf("frame %d of %d bytes was not read into a pooled buffer", i, len(d.Message))
		}
		if i%2 == 0 {
			kept = append(kept, d)
		} else {
			d.Release()
		}
		if err := rcv.Ack(uint64(i)); err != nil {
			t.Fatal(err)
		}
		<-snd.Acks()
	}
	for _, d := range kept {
		if !bytes.Equal(d.Message, payload(int(d.Seq))) {
			t.Fatalf("the kept payload of frame %d was overwritten", d.Seq)
		}
	}
	// Small payloads are messages, kept: never pooled.
	if p := getPayload(100); p != nil {
		t.Fatalf("a 100-byte payload got a pooled buffer of %d bytes", cap(p))
	}
	Data{Message: []byte("not pooled")}.Release() // no frame: nothing happens
}
