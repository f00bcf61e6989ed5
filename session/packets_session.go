package session

import (
	"fmt"

	"github.com/petrelmq/petrel/message"
)

// Packets on a session (session id != 0). The same rules hold as for the
// packets in packets_conn.go: AppendBinary appends the payload only, and the
// Decode functions accept exactly that encoding and nothing else.

// SessionCreate opens a session: the client (always the sending side)
// offers protocol versions and a window, and names itself and the address
// whose send queue it serves.
//
//	offset  field     type      notes
//	[ 0]    window    uint32    most Data packets the client will have unacknowledged
//	[ 4]    id        [16]byte  client NodeID
//	[20]    versions  list8 of uint16, in the client's order of preference
//	        name      str16     client node name
//	        address   str16     the address served, e.g. orders@plant-7;
//	                            with FlagTopic, the topic pattern, e.g. orders.#
//
// A SessionCreate with FlagTopic (always with FlagSubscribe) opens a
// subscribe session on a topic subscription rather than on an address's
// queue, and carries the subscription past the address:
//
//	subscription  str16  its name; empty: a private non-durable one
//	options       uint8  bit 0: durable; the other bits must be 0
//
// Without FlagTopic neither field is there (DecodeSessionCreate), with it
// both are (DecodeTopicSessionCreate): the flag, not the length, says
// which, so that every payload has one decoding.
type SessionCreate struct {
	Versions []uint16
	Name     string
	ID       message.NodeID
	Address  string
	Window   uint32
	// Topic is the subscription of a SessionCreate with FlagTopic; nil
	// without the flag.
	Topic *TopicSubscription
}

// TopicSubscription is the topic subscription a subscribe session with
// FlagTopic serves: the one called Name, made if it does not exist.
type TopicSubscription struct {
	Name    string
	Durable bool
}

// topicDurable is bit 0 of a TopicSubscription's options byte.
const topicDurable uint8 = 1 << 0

// AppendBinary appends the encoding of s to dst. Versions past the 255th are
// not sent.
func (s SessionCreate) AppendBinary(dst []byte) []byte {
	dst = be.AppendUint32(dst, s.Window)
	dst = append(dst, s.ID[:]...)
	vs := s.Versions
	if len(vs) > maxList8 {
		vs = vs[:maxList8]
	}
	dst = append(dst, byte(len(vs)))
	for _, v := range vs {
		dst = be.AppendUint16(dst, v)
	}
	dst = appendStr16(dst, s.Name)
	dst = appendStr16(dst, s.Address)
	if s.Topic == nil {
		return dst
	}
	dst = appendStr16(dst, s.Topic.Name)
	var opts uint8
	if s.Topic.Durable {
		opts |= topicDurable
	}
	return append(dst, opts)
}

// DecodeSessionCreate decodes the payload of a SessionCreate without
// FlagTopic. An empty version list decodes as nil.
func DecodeSessionCreate(p []byte) (SessionCreate, error) {
	d := decoder{p: p, pkt: "SessionCreate"}
	s := decodeCreateBase(&d)
	if err := d.finish(); err != nil {
		return SessionCreate{}, err
	}
	return s, nil
}

// DecodeTopicSessionCreate decodes the payload of a SessionCreate with
// FlagTopic: Topic is never nil.
func DecodeTopicSessionCreate(p []byte) (SessionCreate, error) {
	d := decoder{p: p, pkt: "SessionCreate"}
	s := decodeCreateBase(&d)
	s.Topic = &TopicSubscription{Name: d.str16("subscription")}
	opts := d.u8("options")
	s.Topic.Durable = opts&topicDurable != 0
	if err := d.finish(); err != nil {
		return SessionCreate{}, err
	}
	if opts&^topicDurable != 0 {
		return SessionCreate{}, fmt.Errorf("SessionCreate: topic options %#02x: unknown bits set: %w", opts, ErrMalformed)
	}
	return s, nil
}

// decodeCreateBase decodes the fields every SessionCreate has.
func decodeCreateBase(d *decoder) SessionCreate {
	s := SessionCreate{Window: d.u32("window"), ID: d.nodeID("id")}
	n := int(d.u8("versions count"))
	if vs := d.take(2*n, "versions"); len(vs) > 0 {
		s.Versions = make([]uint16, n)
		for i := range s.Versions {
			s.Versions[i] = be.Uint16(vs[2*i:])
		}
	}
	s.Name = d.str16("name")
	s.Address = d.str16("address")
	return s
}

// SessionCreateResponse answers a SessionCreate on the same session id:
// either the version chosen and the window granted, or Version 0 and the
// reason for the refusal. The frame carries FlagNoCommonVersion when the
// refusal is for lack of a common version.
//
//	offset  field    type      notes
//	[ 0]    version  uint16    chosen from the offer; 0 = refused
//	[ 2]    window   uint32    min of both sides' windows; 0 when refused
//	[ 6]    id       [16]byte  server NodeID
//	[22]    name     str16     server node name
//	        reason   str16     why it was refused; empty when accepted
type SessionCreateResponse struct {
	Version uint16 // 0 = refused
	Reason  string
	Name    string
	ID      message.NodeID
	Window  uint32
}

// AppendBinary appends the encoding of r to dst.
func (r SessionCreateResponse) AppendBinary(dst []byte) []byte {
	dst = be.AppendUint16(dst, r.Version)
	dst = be.AppendUint32(dst, r.Window)
	dst = append(dst, r.ID[:]...)
	dst = appendStr16(dst, r.Name)
	return appendStr16(dst, r.Reason)
}

// DecodeSessionCreateResponse decodes a SessionCreateResponse payload.
func DecodeSessionCreateResponse(p []byte) (SessionCreateResponse, error) {
	d := decoder{p: p, pkt: "SessionCreateResponse"}
	r := SessionCreateResponse{
		Version: d.u16("version"),
		Window:  d.u32("window"),
		ID:      d.nodeID("id"),
		Name:    d.str16("name"),
		Reason:  d.str16("reason"),
	}
	if err := d.finish(); err != nil {
		return SessionCreateResponse{}, err
	}
	return r, nil
}

// Data carries one message of a session.
//
//	offset  field    type    notes
//	[0]     seq      uint64  starts at 1 in each session
//	[8]     message  the rest of the payload: an encoded message.Message
//
// The message has no length of its own: the frame's length bounds it, so
// there are no trailing bytes to refuse. The session package neither decodes
// nor checks it.
type Data struct {
	Seq     uint64
	Message []byte

	frame []byte // the pooled buffer Message lies in, if any: see Release
}

// AppendBinary appends the encoding of d to dst.
func (d Data) AppendBinary(dst []byte) []byte {
	dst = be.AppendUint64(dst, d.Seq)
	return append(dst, d.Message...)
}

// DecodeData decodes a Data payload. Unlike the other decoders it does not
// copy: Message is a sub-slice of p (capped, so appending to it cannot
// overwrite p), valid for as long as p is. Session.Recv hands out a payload
// read into its own allocation, so its caller owns the message.
func DecodeData(p []byte) (Data, error) {
	d := decoder{p: p, pkt: "Data"}
	x := Data{Seq: d.u64("seq"), Message: d.rest()}
	if err := d.finish(); err != nil {
		return Data{}, err
	}
	return x, nil
}

// DataAck is a cumulative acknowledgement: every seq <= Seq of the session
// is durable at the receiver.
//
//	offset  field  type    notes
//	[0]     seq    uint64  highest seq durable, with all below it
type DataAck struct {
	Seq uint64
}

// AppendBinary appends the encoding of a to dst.
func (a DataAck) AppendBinary(dst []byte) []byte {
	return be.AppendUint64(dst, a.Seq)
}

// DecodeDataAck decodes a DataAck payload.
func DecodeDataAck(p []byte) (DataAck, error) {
	d := decoder{p: p, pkt: "DataAck"}
	a := DataAck{Seq: d.u64("seq")}
	if err := d.finish(); err != nil {
		return DataAck{}, err
	}
	return a, nil
}

// Refuse tells the sender that one seq will never be stored (an invalid
// message, an unknown destination), so that it can dead-letter the message
// rather than resend it forever.
//
//	offset  field   type    notes
//	[0]     seq     uint64  only this seq is refused
//	[8]     reason  str16
type Refuse struct {
	Seq    uint64
	Reason string
}

// AppendBinary appends the encoding of r to dst.
func (r Refuse) AppendBinary(dst []byte) []byte {
	dst = be.AppendUint64(dst, r.Seq)
	return appendStr16(dst, r.Reason)
}

// DecodeRefuse decodes a Refuse payload.
func DecodeRefuse(p []byte) (Refuse, error) {
	d := decoder{p: p, pkt: "Refuse"}
	r := Refuse{Seq: d.u64("seq"), Reason: d.str16("reason")}
	if err := d.finish(); err != nil {
		return Refuse{}, err
	}
	return r, nil
}

// SessionClose ends a session in order. The peer answers with a
// SessionCloseResponse, whose payload is empty, and both sides free the
// session.
//
//	offset  field   type   notes
//	[0]     reason  str16  for logs: "queue deleted", "shutting down"
type SessionClose struct {
	Reason string
}

// AppendBinary appends the encoding of s to dst.
func (s SessionClose) AppendBinary(dst []byte) []byte {
	return appendStr16(dst, s.Reason)
}

// DecodeSessionClose decodes a SessionClose payload.
func DecodeSessionClose(p []byte) (SessionClose, error) {
	d := decoder{p: p, pkt: "SessionClose"}
	s := SessionClose{Reason: d.str16("reason")}
	if err := d.finish(); err != nil {
		return SessionClose{}, err
	}
	return s, nil
}
