package session

import "sync"

// Data payloads of file chunks are large (512 KiB by default) and many: a
// new slice for each would be zeroed and then collected, about a tenth of
// a file receiver's CPU. Their buffers are pooled instead, in classes of
// poolClass bytes up to eagerPayload. A receiver that is done with a
// Data's Message gives its buffer back with Data.Release; one that keeps
// the Message (a queue stores it) never does, and the buffer is simply
// collected. Smaller payloads are not pooled: they are messages, kept.
const poolClass = 16 << 10

var payloadPools [eagerPayload / poolClass]sync.Pool

// poolIndex is the class of an n-byte payload, -1 if it is not pooled.
func poolIndex(n int) int {
	if n < poolClass || n > eagerPayload {
		return -1
	}
	return (n+poolClass-1)/poolClass - 1
}

// getPayload returns an empty slice with room for n bytes from the pool,
// or nil when n is not pooled (readPayload then makes one).
func getPayload(n int) []byte {
	i := poolIndex(n)
	if i < 0 {
		return nil
	}
	if b, ok := payloadPools[i].Get().(*[]byte); ok {
		return (*b)[:0]
	}
	return make([]byte, 0, (i+1)*poolClass)
}

// isPooled reports whether p may have come from getPayload: its capacity
// is a whole class. readPayload only reads into a buffer of that capacity
// when it got it from getPayload.
func isPooled(p []byte) bool {
	i := poolIndex(cap(p))
	return i >= 0 && cap(p) == (i+1)*poolClass
}

// Release gives the buffer of d.Message back for reuse by a later Data
// frame. Call it at most once, and only when nothing refers to d.Message
// any more: the bytes are overwritten. Not calling it is always safe.
func (d Data) Release() {
	if d.frame == nil {
		return
	}
	b := d.frame[:0]
	payloadPools[poolIndex(cap(b))].Put(&b)
}
