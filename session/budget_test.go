package session

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"sync"
	"testing"
	"time"
)

// budgetConfigs returns a client and a server config whose server holds
// at most maxBuf bytes of Data for Recv, with 64 KiB frames.
func budgetConfigs(maxBuf int64, stats *BufferStats) (Config, Config) {
	c, s := testConfig("a"), testConfig("b")
	c.MaxFrame, s.MaxFrame = 64<<10, 64<<10
	s.MaxConnBuffer, s.BufferStats = maxBuf, stats
	return c, s
}

// stream sends n Data packets of size bytes on snd, each filled with its
// seq, and reports the first error.
func stream(ctx context.Context, snd *Session, n, size int) error {
	msg := make([]byte, size)
	for seq := uint64(1); seq <= uint64(n); seq++ {
		binary.BigEndian.PutUint64(msg, seq)
		if err := snd.SendData(ctx, seq, msg); err != nil {
			return err
		}
	}
	return nil
}

// waitPaused waits until the server's read loop stopped for want of room.
func waitPaused(t *testing.T, server *Conn) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for server.Stats().ReadPauses == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("the read loop never paused: %+v", server.Stats())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestBudgetBoundsBufferedBytes streams two sessions' Data much faster
// than the consumer takes it (not at all, at first): the server must stop
// reading at the budget rather than buffer the stream, then deliver all of
// it, in order, once the consumer reads.
func TestBudgetBoundsBufferedBytes(t *testing.T) {
	const maxBuf, frames, size = 256 << 10, 300, 16 << 10
	var stats BufferStats
	ccfg, scfg := budgetConfigs(maxBuf, &stats)
	client, server := tcpPair(t, ccfg, scfg)
	ctx := context.Background()
	var snds, rcvs []*Session
	for _, addr := range []string{"x", "y"} {
		snd, rcv := openPair(t, client, server, addr, 1000, 1000)
		snds, rcvs = append(snds, snd), append(rcvs, rcv)
	}
	var wg sync.WaitGroup
	errs := make(chan error, len(snds))
	for _, snd := range snds {
		wg.Go(func() { errs <- stream(ctx, snd, frames, size) })
	}
	waitPaused(t, server)
	if st := server.Stats(); st.Buffered > maxBuf || stats.Buffered.Load() != st.Buffered {
		t.Fatalf("paused holding %d bytes (stats %d), budget %d", st.Buffered, stats.Buffered.Load(), maxBuf)
	}
	// Both sessions are read at once, as the receiver does: one session
	// left unread holds the connection's budget for all.
	errs2 := make(chan error, len(rcvs))
	for _, rcv := range rcvs {
		wg.Go(func() { errs2 <- drain(ctx, rcv, frames, size) })
	}
	wg.Wait()
	close(errs)
	close(errs2)
	for err := range errs2 {
		if err != nil {
			t.Fatal(err)
		}
	}
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	st := server.Stats()
	t.Logf("peak %d bytes buffered of a %d budget, %d read pauses, for %d bytes streamed",
		st.BufferedPeak, maxBuf, st.ReadPauses, 2*frames*size)
	if st.BufferedPeak > maxBuf || st.Buffered != 0 || stats.Buffered.Load() != 0 || stats.Pauses.Load() == 0 {
		t.Fatalf("after the stream: %+v, shared %d bytes and %d pauses", st, stats.Buffered.Load(), stats.Pauses.Load())
	}
}

// TestBudgetFreedByClose: a session nobody reads holds the whole budget;
// closing it on the receiving side gives its bytes back, so the close
// completes and another session's Data flows again.
func TestBudgetFreedByClose(t *testing.T) {
	const maxBuf, size = 256 << 10, 16 << 10
	ccfg, scfg := budgetConfigs(maxBuf, nil)
	client, server := tcpPair(t, ccfg, scfg)
	ctx := context.Background()
	stuckSnd, stuck := openPair(t, client, server, "stuck", 1000, 1000)
	snd, rcv := openPair(t, client, server, "live", 1000, 1000)
	var wg sync.WaitGroup
	defer wg.Wait() // after stop: the streams end with their context
	sctx, stop := context.WithCancel(ctx)
	defer stop()
	wg.Go(func() { stream(sctx, stuckSnd, 200, size) })
	waitPaused(t, server)
	wg.Go(func() { stream(sctx, snd, 3, size) })
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := stuck.Close(cctx, "not reading"); err != nil {
		t.Fatalf("close of the session holding the budget: %v", err)
	}
	for seq := uint64(1); seq <= 3; seq++ {
		d, err := rcv.Recv(cctx)
		if err != nil || d.Seq != seq {
			t.Fatalf("live session after the close: seq %d, %v; want %d", d.Seq, err, seq)
		}
	}
}

// drain receives n packets sent by stream on rcv and checks each.
func drain(ctx context.Context, rcv *Session, n, size int) error {
	for seq := uint64(1); seq <= uint64(n); seq++ {
		d, err := rcv.Recv(ctx)
		if err != nil {
			return fmt.Errorf("recv %d on %s: %w", seq, rcv.Address(), err)
		}
		if d.Seq != seq || len(d.Message) != size || binary.BigEndian.Uint64(d.Message) != seq ||
			!bytes.Equal(d.Message[8:], make([]byte, size-8)) {
			return fmt.Errorf("%s: got seq %d (%d bytes), want %d", rcv.Address(), d.Seq, len(d.Message), seq)
		}
	}
	return nil
}
