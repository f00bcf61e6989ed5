package queue

import "errors"

var (
	// ErrClosed is returned by every operation on a Store after Close.
	ErrClosed = errors.New("store closed")
	// ErrStoreFull is returned by a put when the store is past its configured
	// MaxBytes or MaxMessages, or when the disk itself is full. Nothing of the
	// put was stored.
	ErrStoreFull = errors.New("store full")
	// ErrNoMessage is returned by Poll when no message is ready now.
	ErrNoMessage = errors.New("no message ready")
	// ErrTooLarge is returned by PollWithin and ReceiveWithin when the
	// next ready message is longer than the room the caller has left; the
	// message stays ready, untaken.
	ErrTooLarge = errors.New("next message larger than the room left")
	// ErrLeaseLost is returned by Ack, Nack and Release when the delivery's
	// lease already timed out, so the message went back to the queue and may
	// have been delivered again.
	ErrLeaseLost = errors.New("lease lost")
	// ErrUnknownQueue is returned when a queue name is not in the store.
	ErrUnknownQueue = errors.New("unknown queue")
	// ErrKindMismatch is returned when a queue is opened as a receive queue
	// but exists as a send queue, or the reverse.
	ErrKindMismatch = errors.New("queue kind mismatch")
	// ErrInUse is returned by New and Open for a store that another Store
	// has open, in this process or another.
	ErrInUse = errors.New("the store is already open, by another node or process: one node per data directory")
)
