package mqttgw

import "time"

// SetConnectBounds sets the bounds on connections awaiting their CONNECT
// for a test, and returns what puts them back.
func SetConnectBounds(timeout time.Duration, conns, bytes int64) (restore func()) {
	b := &connectBounds
	t, c, n := b.timeout.Load(), b.conns.Load(), b.bytes.Load()
	b.timeout.Store(int64(timeout))
	b.conns.Store(conns)
	b.bytes.Store(bytes)
	return func() { b.timeout.Store(t); b.conns.Store(c); b.bytes.Store(n) }
}

// SetConnectPerAddress sets the most connections awaiting their CONNECT
// from one remote address for a test, and returns what puts it back.
func SetConnectPerAddress(n int64) (restore func()) {
	old := connectBounds.perAddress.Swap(n)
	return func() { connectBounds.perAddress.Store(old) }
}

// SetPacketBounds sets the bounds on the packets of connected clients for
// a test (see claims.go), and returns what puts them back.
func SetPacketBounds(bytes, small int64, wait, stall time.Duration) (restore func()) {
	b := &claimBounds
	n, s, w, st := b.bytes.Load(), b.small.Load(), b.wait.Load(), b.stall.Load()
	b.bytes.Store(bytes)
	b.small.Store(small)
	b.wait.Store(int64(wait))
	b.stall.Store(int64(stall))
	return func() { b.bytes.Store(n); b.small.Store(s); b.wait.Store(w); b.stall.Store(st) }
}

// DurableName and ShareName are the names of the Petrel subscriptions of
// a persistent session's filter and of a shared group's, which anyone can
// compute.
func DurableName(clientID, filter string) string { return durableName(clientID, filter) }
func ShareName(group, filter string) string      { return shareName(group, filter) }

// SetClientWritesPending sets the places of each client's queue of writes
// (mochi's) in the gateways made from then on, for a test, and returns
// what puts mochi's default back.
func SetClientWritesPending(n int32) (restore func()) {
	old := clientWritesPending.Swap(n)
	return func() { clientWritesPending.Store(old) }
}

// SetRetainedWaitingNodeBound sets the bound on the retained messages
// waiting for their connections across the node, for a test, and returns
// what puts the default back.
func SetRetainedWaitingNodeBound(n int64) (restore func()) {
	old := retainedWaitingNodeBound.Swap(n)
	return func() { retainedWaitingNodeBound.Store(old) }
}
