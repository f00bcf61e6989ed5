package session

import "fmt"

// Packets of subscribe sessions (FlagSubscribe), which carry messages the
// other way: the server leases them from a receive queue and pushes them,
// the client grants credit and settles them. The same rules hold as for
// the packets in packets_conn.go.

// Deliver carries one leased message from the server to the client.
//
//	offset  field    type    notes
//	[ 0]    tag      uint64  the lease's id in this session, from 1, increasing
//	[ 8]    attempt  uint32  1 on the first delivery of the message
//	[12]    reason   str16   why the message was moved to this queue (dead
//	                         letter, expiry address); empty otherwise
//	        message  the rest of the payload: an encoded message.Message
//
// Each Deliver spends one credit. The message has no length of its own:
// the frame's length bounds it, as for Data.
type Deliver struct {
	Tag     uint64
	Attempt uint32
	Reason  string
	Message []byte
}

// AppendBinary appends the encoding of d to dst.
func (d Deliver) AppendBinary(dst []byte) []byte {
	dst = be.AppendUint64(dst, d.Tag)
	dst = be.AppendUint32(dst, d.Attempt)
	dst = appendStr16(dst, d.Reason)
	return append(dst, d.Message...)
}

// DecodeDeliver decodes a Deliver payload. As DecodeData, it does not copy
// the message: Message is a capped sub-slice of p.
func DecodeDeliver(p []byte) (Deliver, error) {
	d := decoder{p: p, pkt: "Deliver"}
	x := Deliver{Tag: d.u64("tag"), Attempt: d.u32("attempt"), Reason: d.str16("reason")}
	x.Message = d.rest()
	if err := d.finish(); err != nil {
		return Deliver{}, err
	}
	return x, nil
}

// Credit lets the server push more deliveries. A subscribe session starts
// with the negotiated window as its credit; the client grants one credit
// for each delivery its application has taken, so that the deliveries in
// flight and buffered at the client never exceed the window. A server
// whose credit would exceed the window closes the connection (ErrWindow).
//
//	offset  field   type    notes
//	[0]     credit  uint32  deliveries added to what the server may send
type Credit struct {
	N uint32
}

// AppendBinary appends the encoding of c to dst.
func (c Credit) AppendBinary(dst []byte) []byte {
	return be.AppendUint32(dst, c.N)
}

// DecodeCredit decodes a Credit payload.
func DecodeCredit(p []byte) (Credit, error) {
	d := decoder{p: p, pkt: "Credit"}
	c := Credit{N: d.u32("credit")}
	if err := d.finish(); err != nil {
		return Credit{}, err
	}
	return c, nil
}

// SettleOp is what a Settle does with its deliveries.
type SettleOp uint8

// Settle operations. The numbers are part of the wire format.
const (
	SettleAck     SettleOp = 1 // handled: delete the message
	SettleNack    SettleOp = 2 // failed: redeliver after a backoff, dead-letter past max deliveries
	SettleRelease SettleOp = 3 // not handled: back to the queue at once, no attempt counted
	SettleReject  SettleOp = 4 // can never be handled (undecodable): dead-letter at once
)

func (op SettleOp) String() string {
	switch op {
	case SettleAck:
		return "ack"
	case SettleNack:
		return "nack"
	case SettleRelease:
		return "release"
	case SettleReject:
		return "reject"
	}
	return fmt.Sprintf("SettleOp(%d)", uint8(op))
}

// MaxSettleTags is the most tags one Settle carries; Session.Settle splits
// longer lists. 4096 tags fit well within the control frame limit.
const MaxSettleTags = 4096

// Settle settles deliveries of the session, all with the same operation.
// Tags the server does not hold (settled already, or whose lease timed out)
// are ignored.
//
//	offset  field   type    notes
//	[0]     op      uint8   SettleAck ... SettleReject
//	[1]     count   uint16  1 to MaxSettleTags
//	[3]     tags    count × uint64
//	        reason  str16   for nack and reject: why; empty otherwise
type Settle struct {
	Op     SettleOp
	Tags   []uint64
	Reason string
}

// AppendBinary appends the encoding of s to dst. Tags past MaxSettleTags
// are not sent.
func (s Settle) AppendBinary(dst []byte) []byte {
	tags := s.Tags
	if len(tags) > MaxSettleTags {
		tags = tags[:MaxSettleTags]
	}
	dst = append(dst, byte(s.Op))
	dst = be.AppendUint16(dst, uint16(len(tags)))
	for _, t := range tags {
		dst = be.AppendUint64(dst, t)
	}
	return appendStr16(dst, s.Reason)
}

// DecodeSettle decodes a Settle payload. An unknown operation, and a count
// of 0 or over MaxSettleTags, are ErrMalformed.
func DecodeSettle(p []byte) (Settle, error) {
	d := decoder{p: p, pkt: "Settle"}
	op := SettleOp(d.u8("op"))
	n := int(d.u16("count"))
	tags := d.take(8*n, "tags")
	reason := d.str16("reason")
	if err := d.finish(); err != nil {
		return Settle{}, err
	}
	if op < SettleAck || op > SettleReject {
		return Settle{}, fmt.Errorf("Settle: unknown op %d: %w", uint8(op), ErrMalformed)
	}
	if n == 0 || n > MaxSettleTags {
		return Settle{}, fmt.Errorf("Settle: %d tags, want 1 to %d: %w", n, MaxSettleTags, ErrMalformed)
	}
	s := Settle{Op: op, Tags: make([]uint64, n), Reason: reason}
	for i := range s.Tags {
		s.Tags[i] = be.Uint64(tags[8*i:])
	}
	return s, nil
}
