package session

// inQueue is a server session's queue of received Data not yet taken by
// Recv, guarded by Session.mu. It holds what is in it, not what the window
// allows: an idle session of a large window costs nothing, and one that
// emptied its queue after a burst gives its memory back. deliver bounds it
// by the window (a sender past it is ErrWindow).
type inQueue struct {
	q    []Data // q[head:] are queued, oldest first
	head int
	// more is signalled (capacity 1) when Data is pushed; nil until the
	// session is accepted as a data session.
	more chan struct{}
}

// keepCap is the capacity an emptied queue keeps for the next packets;
// past it, the memory of a burst is given back.
const keepCap = 64

func (iq *inQueue) open() { iq.more = make(chan struct{}, 1) }

func (iq *inQueue) opened() bool { return iq.more != nil }

func (iq *inQueue) len() int { return len(iq.q) - iq.head }

// push appends d and wakes a waiting Recv.
func (iq *inQueue) push(d Data) {
	if iq.head > 0 && len(iq.q) == cap(iq.q) {
		// Reuse the room of what was taken before growing.
		n := copy(iq.q, iq.q[iq.head:])
		clear(iq.q[n:])
		iq.q, iq.head = iq.q[:n], 0
	}
	iq.q = append(iq.q, d)
	select {
	case iq.more <- struct{}{}:
	default:
	}
}

// pop takes the oldest Data, if any.
func (iq *inQueue) pop() (Data, bool) {
	if iq.head == len(iq.q) {
		return Data{}, false
	}
	d := iq.q[iq.head]
	iq.q[iq.head] = Data{}
	iq.head++
	if iq.head == len(iq.q) {
		if cap(iq.q) > keepCap {
			iq.q = nil
		} else {
			iq.q = iq.q[:0]
		}
		iq.head = 0
	}
	return d, true
}
