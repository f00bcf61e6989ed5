package session

import (
	"context"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// Bounds of the write queue.
const (
	// queueBytes is how many bytes of Data frames may wait for writeLoop
	// before SendData blocks. While writeLoop writes one batch the next
	// one fills, so at most about twice this is held per connection.
	queueBytes = 1 << 20
	// controlBytes bounds the control frames (acks, pongs, responses)
	// queued between two batches. They never block, because the read loop
	// queues some of them and must never wait on the write side; a peer
	// that makes this side queue more than this without reading is
	// disconnected (ErrLimit).
	controlBytes = 1 << 20
	// keepBytes: a batch buffer grown past this (by a large Data frame) is
	// dropped after use rather than kept for the next batch.
	keepBytes = 4 << 20
	// linger bounds how long a dying connection tries to send its final
	// ErrorPacket (and finish the batch in progress).
	linger = time.Second
)

// outbox is the connection's write queue and the record of its death, shared
// by the Conn, its Sessions and writeLoop. Frames are appended straight into
// one buffer; writeLoop swaps it for an empty one and writes the whole batch
// with one Write, so frames cost no syscall, no goroutine and no allocation
// of their own, and batches grow by themselves when the socket is slower
// than the producers. The buffer plays the part of a bufio.Writer that is
// flushed whenever writeLoop finds the queue non-empty.
type outbox struct {
	nc           net.Conn
	writeTimeout time.Duration
	maxFrame     uint32

	mu     sync.Mutex
	buf    []byte        // frames waiting for writeLoop
	frames uint64        // frames in buf
	ctl    int           // control bytes appended to buf since the last take
	space  chan struct{} // closed when writeLoop takes buf; nil if no one waits
	err    error         // why the connection died; set once
	final  []byte        // ErrorPacket frame to send before closing, if any

	ready chan struct{} // capacity 1: buf became non-empty, or err was set
	quit  chan struct{} // closed when err is set

	framesOut, bytesOut atomic.Uint64
}

func newOutbox(nc net.Conn, cfg Config) *outbox {
	return &outbox{
		nc:           nc,
		writeTimeout: cfg.WriteTimeout,
		maxFrame:     cfg.MaxFrame,
		ready:        make(chan struct{}, 1),
		quit:         make(chan struct{}),
	}
}

// data queues a Data frame, copying msg. It blocks while queueBytes are
// waiting, until writeLoop takes them, ctx is done, the session ends
// (sessionDone) or the connection dies.
func (o *outbox) data(ctx context.Context, sid uint32, seq uint64, msg []byte, sessionDone <-chan struct{}) error {
	return o.bulk(ctx, sid, sessionDone, func(buf []byte) []byte {
		buf = AppendHeader(buf, Header{Type: TypeData, Session: sid, Length: uint32(8 + len(msg))})
		buf = be.AppendUint64(buf, seq)
		return append(buf, msg...)
	})
}

// bulk queues the frame that appendFrame appends: a frame that carries a
// message (Data, Deliver), which waits for room, unlike control frames.
// It blocks while queueBytes are waiting, until writeLoop takes them, ctx
// is done, the session ends (sessionDone) or the connection dies.
func (o *outbox) bulk(ctx context.Context, sid uint32, sessionDone <-chan struct{}, appendFrame func([]byte) []byte) error {
	for {
		o.mu.Lock()
		if o.err != nil {
			err := o.err
			o.mu.Unlock()
			return err
		}
		if len(o.buf) < queueBytes {
			wake := len(o.buf) == 0
			o.buf = appendFrame(o.buf)
			o.frames++
			o.mu.Unlock()
			if wake {
				o.signal()
			}
			return nil
		}
		if o.space == nil {
			o.space = make(chan struct{})
		}
		space := o.space
		o.mu.Unlock()
		select {
		case <-space:
		case <-o.quit:
		case <-sessionDone:
			return fmt.Errorf("session %d: %w", sid, ErrClosed)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// appender is a packet that can append its payload.
type appender interface {
	AppendBinary(dst []byte) []byte
}

// control queues a frame other than Data. It never blocks: past
// controlBytes queued since writeLoop last took the buffer, it fails the
// connection with ErrLimit (the peer is not reading). h.Length is set here.
func (o *outbox) control(h Header, p appender) error {
	o.mu.Lock()
	if o.err != nil {
		err := o.err
		o.mu.Unlock()
		return err
	}
	if o.ctl > controlBytes {
		o.mu.Unlock()
		err := fmt.Errorf("more than %d bytes of replies queued: the peer sends requests but does not read: %w", controlBytes, ErrLimit)
		o.fail(err, true)
		return err
	}
	start := len(o.buf)
	o.buf = AppendHeader(o.buf, h)
	if p != nil {
		o.buf = p.AppendBinary(o.buf)
	}
	be.PutUint32(o.buf[start+6:], uint32(len(o.buf)-start-HeaderLen))
	o.ctl += len(o.buf) - start
	o.frames++
	wake := start == 0
	o.mu.Unlock()
	if wake {
		o.signal()
	}
	return nil
}

func (o *outbox) signal() {
	select {
	case o.ready <- struct{}{}:
	default:
	}
}

// fail records err as the reason the connection died, once; later calls do
// nothing. It wakes everyone waiting on the connection (quit) and writeLoop,
// which then sends the final ErrorPacket if notify is set and closes the
// socket. fail never blocks, so any goroutine may call it, holding no lock
// of the outbox.
func (o *outbox) fail(err error, notify bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.err != nil {
		return
	}
	o.err = err
	if notify {
		pkt := ErrorPacket{Code: codeFor(err), Reason: err.Error()}
		o.final = AppendHeader(nil, Header{Type: TypeError})
		o.final = pkt.AppendBinary(o.final)
		be.PutUint32(o.final[6:], uint32(len(o.final)-HeaderLen))
	}
	// Bound the batch being written, if any, and the final frame.
	deadline := time.Now()
	if notify {
		deadline = deadline.Add(min(linger, o.writeTimeout))
	}
	_ = o.nc.SetWriteDeadline(deadline)
	close(o.quit)
	if o.space != nil {
		close(o.space)
		o.space = nil
	}
	o.signal()
}

// Err returns why the connection died, or nil while it is alive.
func (o *outbox) Err() error {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.err
}

// take hands writeLoop the queued frames and gives the outbox spare, empty,
// to fill meanwhile. It wakes producers blocked on a full queue and sets the
// write deadline for the batch. dying is true once the connection failed:
// then the batch is dropped and final (maybe nil) is all there is to send.
func (o *outbox) take(spare []byte) (batch []byte, frames uint64, final []byte, dying bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.err != nil {
		return nil, 0, o.final, true
	}
	batch, frames = o.buf, o.frames
	o.buf, o.frames, o.ctl = spare[:0], 0, 0
	if o.space != nil {
		close(o.space)
		o.space = nil
	}
	if len(batch) > 0 {
		_ = o.nc.SetWriteDeadline(time.Now().Add(o.writeTimeout))
	}
	return batch, frames, nil, false
}

// writeLoop writes queued frames until the connection dies, then sends the
// final ErrorPacket if there is one and closes the socket, which also ends
// readLoop. It sends a Ping whenever nothing was written for PingInterval,
// so that the peer's idle timeout never drops a healthy connection.
func (c *Conn) writeLoop() {
	defer c.loopDone()
	o := c.out
	ping := time.NewTimer(c.cfg.PingInterval)
	defer ping.Stop()
	var spare []byte
	var nonce uint64
	for {
		select {
		case <-o.ready:
		case <-ping.C:
			nonce++
			_ = o.control(Header{Type: TypePing}, Ping{Nonce: nonce})
			continue
		}
		batch, frames, final, dying := o.take(spare)
		if dying {
			if final != nil {
				_, _ = c.nc.Write(final) // best effort, bounded by linger
			}
			_ = c.nc.Close()
			return
		}
		if len(batch) == 0 {
			continue
		}
		if _, err := c.nc.Write(batch); err != nil {
			o.fail(fmt.Errorf("write to %s: %w", c.peer.Addr, err), false)
			continue
		}
		o.framesOut.Add(frames)
		o.bytesOut.Add(uint64(len(batch)))
		if cap(batch) <= keepBytes {
			spare = batch[:0]
		} else {
			spare = nil
		}
		ping.Reset(c.cfg.PingInterval)
	}
}
