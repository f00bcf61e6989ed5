package adminapi

import (
	"time"

	"github.com/petrelmq/petrel/filetransfer"
)

// The JSON bodies of the admin API (see paths.go for who takes which).
// Message ids are JSON numbers, as in the rest of the API; durations are
// nanoseconds, as time.Duration marshals. GET /api/status answers
// petrel.Status and GET /api/queues []petrel.QueueStats: those are the
// embedding API's own types, which this package cannot name.

// Message is a message as the admin API shows it.
type Message struct {
	ID          uint64        `json:"id"`
	Origin      string        `json:"origin"`
	Destination string        `json:"destination"`
	Kind        string        `json:"kind"`
	Priority    uint8         `json:"priority"`
	Timestamp   time.Time     `json:"timestamp"`
	TTL         time.Duration `json:"ttl,omitempty"` // what remains; 0 never expires
	// Attempt is 1 on a message's first delivery (see petrel.Delivery.Attempt).
	Attempt  int    `json:"attempt,omitempty"`
	InFlight bool   `json:"in_flight,omitempty"` // browsed while a consumer holds it
	Reason   string `json:"reason,omitempty"`    // why it was moved to this queue
	// The kind properties: the one that matches Kind is set.
	Command    *Command   `json:"command,omitempty"`
	Data       *Data      `json:"data,omitempty"`
	File       *File      `json:"file,omitempty"`
	Properties []Property `json:"properties,omitempty"`
	// Body is the body as base64; Text is the same body as a string, set
	// when the body is valid UTF-8.
	Body []byte  `json:"body,omitempty"`
	Text *string `json:"text,omitempty"`
	// DecodeError says why a stored message could not be read; only the
	// fields above that the store knows are set then.
	DecodeError string `json:"decode_error,omitempty"`
}

// Command are the kind properties of a command message.
type Command struct {
	Name          string `json:"name"`
	ReplyTo       string `json:"reply_to,omitempty"`
	CorrelationID string `json:"correlation_id,omitempty"`
}

// Data are the kind properties of a data message.
type Data struct {
	DataType string `json:"data_type,omitempty"`
	Encoding string `json:"encoding,omitempty"`
}

// File are the kind properties of a file message.
type File struct {
	Filename     string `json:"filename"`
	Filesize     int64  `json:"filesize"`
	Checksum     string `json:"checksum,omitempty"`
	ReceivedPath string `json:"received_path,omitempty"`
}

// Property is one application property: its type is a name that
// message.ParseType reads, its value as message.ParseValue reads it.
type Property struct {
	Key   string `json:"key"`
	Type  string `json:"type"`
	Value string `json:"value"`
}

// SendRequest is the body of POST /api/send.
type SendRequest struct {
	To         string        `json:"to"`
	Kind       string        `json:"kind,omitempty"` // "data" (default) or "command"
	Priority   *uint8        `json:"priority,omitempty"`
	TTL        time.Duration `json:"ttl,omitempty"`
	Command    *Command      `json:"command,omitempty"` // command messages only
	Data       *Data         `json:"data,omitempty"`    // data messages only
	Properties []Property    `json:"properties,omitempty"`
	// Body, as base64, or Text, as a string: one or neither.
	Body []byte  `json:"body,omitempty"`
	Text *string `json:"text,omitempty"`
}

// SendResponse answers POST /api/send once the message is durable.
type SendResponse struct {
	ID          uint64 `json:"id"`
	Destination string `json:"destination"`
}

// How POST /api/recv settles the messages it returns (RecvRequest.Settle,
// RecvResponse.Settled).
const (
	SettleAck     = "ack"     // delete them
	SettleRelease = "release" // redeliver them at once, counting no attempt
	SettleNack    = "nack"    // redeliver them after a backoff; dead-letter past max_deliveries
	// SettleLater leaves them leased, under RecvResponse.Lease: the
	// client settles them with POST /api/settle once it has them safe,
	// before LeaseExpires, or they are delivered again. A client killed
	// before that loses nothing.
	SettleLater = "later"
)

// RecvRequest is the body of POST /api/recv.
type RecvRequest struct {
	Address string `json:"address"`
	Count   int    `json:"count,omitempty"` // default 1, at most 1000
	// Wait is how long to wait for Count messages; 0 takes only those
	// ready now.
	Wait   time.Duration `json:"wait,omitempty"`
	Settle string        `json:"settle,omitempty"` // SettleAck (default), SettleRelease, SettleNack or SettleLater
	Reason string        `json:"reason,omitempty"` // the nack's reason
}

// RecvResponse answers POST /api/recv. The messages are written first and
// settled after, so that a client gone before they were written gets
// them again (released) instead of losing them: Settled is set once the
// settling is durable, Error if it failed (the messages may come again).
//
// The fields come in this order: Messages, More, then Settled (or, for
// SettleLater, Lease and LeaseExpires) or Error.
// A client that reads the answer as it comes (petrel recv) has every
// message before it learns how they were settled.
type RecvResponse struct {
	Messages []Message `json:"messages"`
	// More says that the answer stopped before Count messages because
	// the next ready one did not fit in its byte budget (MaxAnswerBytes
	// of messages, past the first): it was not taken, and a next request
	// gets it.
	More    bool   `json:"more,omitempty"`
	Settled string `json:"settled,omitempty"`
	// Lease names the messages of a SettleLater answer for POST
	// /api/settle, which must come before LeaseExpires: then the queue's
	// lease_timeout has passed, and it delivers them again. Empty when
	// the answer has no message.
	Lease        string    `json:"lease,omitempty"`
	LeaseExpires time.Time `json:"lease_expires,omitzero"`
	Error        string    `json:"error,omitempty"`
}

// SettleRequest is the body of POST /api/settle: how to settle the
// messages of a SettleLater answer.
type SettleRequest struct {
	Lease  string `json:"lease"`
	Settle string `json:"settle,omitempty"` // SettleAck (default), SettleRelease or SettleNack
	Reason string `json:"reason,omitempty"` // the nack's reason
}

// SettleResponse answers POST /api/settle once the settling is durable.
type SettleResponse struct {
	Settled string `json:"settled"`
	Count   int    `json:"count"` // the messages settled
}

// SubscribeRequest is the body of POST /api/subscribe, which answers a
// RecvResponse: the messages are acked once written, or left leased for
// POST /api/settle (Settle).
type SubscribeRequest struct {
	Pattern string `json:"pattern"` // the topic pattern, such as orders.#
	// Name makes or joins the durable subscription so called, which
	// outlives the request. Empty: a private non-durable subscription
	// that lasts for the request, and sees only what is published while
	// it waits.
	Name  string        `json:"name,omitempty"`
	Count int           `json:"count,omitempty"` // default 1, at most 1000
	Wait  time.Duration `json:"wait,omitempty"`  // how long to wait for Count messages
	// Settle is SettleAck (default) or, with a Name, SettleLater: a
	// private subscription ends with its request, so its messages cannot
	// wait for a later settle.
	Settle string `json:"settle,omitempty"`
}

// DeadLettersResponse answers GET /api/dlq/{addr}.
type DeadLettersResponse struct {
	Queue    string    `json:"queue"` // "" when the address has no dead letters yet
	Messages []Message `json:"messages"`
}

// CountResponse answers the purges and the replay: how many messages of
// Queue they deleted or moved.
type CountResponse struct {
	Queue string `json:"queue"`
	Count int    `json:"count"`
}

// FileProgress answers GET /api/files/{id}: where a file sent from the
// node stands.
type FileProgress struct {
	ID       uint64 `json:"id"`
	Filename string `json:"filename,omitempty"`
	Size     int64  `json:"size"`
	// Acked is how many bytes the next hop holds durably.
	Acked int64 `json:"acked"`
	// State is one of filetransfer's sending states: waiting (queued, or
	// its link is down), sending, backing off (the link broke; it
	// resumes), handed over (the next hop has it: done here), delivered
	// (it was for this node) or failed (Error says why).
	State filetransfer.State `json:"state"`
	Error string             `json:"error,omitempty"`
	// NextHop is the node the file goes to next, when known.
	NextHop string `json:"next_hop,omitempty"`
}

// SendFileRequest is the body of POST /api/files.
type SendFileRequest struct {
	Path     string        `json:"path"` // absolute, on the node's host
	To       string        `json:"to"`
	Filename string        `json:"filename,omitempty"` // default: the path's base name
	Notify   string        `json:"notify,omitempty"`   // see petrel.PropNotify
	Priority *uint8        `json:"priority,omitempty"`
	TTL      time.Duration `json:"ttl,omitempty"`
}

// SendFileResponse answers POST /api/files once the file message is
// stored: the transfer is the node's from then on.
type SendFileResponse struct {
	ID          uint64 `json:"id"`
	Filename    string `json:"filename"`
	Size        int64  `json:"size"`
	SHA256      string `json:"sha256"`
	Destination string `json:"destination"`
	Center      string `json:"center,omitempty"`
}

// ReplayRequest is the body of POST /api/dlq/{addr}/replay; none, or a
// Count of 0, moves them all back. Select, when set, moves back only the
// dead letters it names (Count is then ignored).
type ReplayRequest struct {
	Count  int          `json:"count"`
	Select []MessageRef `json:"select,omitempty"`
}

// MessageRef names one message: its origin node id (hex, as
// Message.Origin) and its id. The id is a JSON string here, unlike the
// rest of the API: the console sends it, and a JavaScript number holds
// only 53 bits.
type MessageRef struct {
	Origin string `json:"origin"`
	ID     uint64 `json:"id,string"`
}

// ErrorResponse is the body of every answer with an error status.
type ErrorResponse struct {
	Error string `json:"error"`
}

// Topics answers GET /api/topics: the node's declared topic spaces and
// its subscriptions.
type Topics struct {
	// Spaces are the declared topic spaces' patterns.
	Spaces        []string       `json:"spaces"`
	Subscriptions []Subscription `json:"subscriptions"`
	// Forwards are the send queues toward neighbours for topic traffic,
	// with what waits in each; empty when the node has no neighbour's
	// interest.
	Forwards []Forward `json:"forwards"`
}

// Forward is the send queue toward one neighbour for topic traffic: the
// publishes forwarded for its interest, and the node's interest messages.
type Forward struct {
	Neighbour string `json:"neighbour"`
	Queue     string `json:"queue"`
	Depth     int64  `json:"depth"`
	// MaxQueued is topic_forward_max_queued, 0 for none; Overflowed the
	// publishes dropped at it since the queue was made.
	MaxQueued  int64 `json:"max_queued,omitempty"`
	Overflowed int64 `json:"overflowed,omitempty"`
}

// Subscription is one subscription of a node: its queue, the pattern it
// binds and its consumers.
type Subscription struct {
	Name      string `json:"name"`
	Pattern   string `json:"pattern"`
	Durable   bool   `json:"durable"`
	Queue     string `json:"queue"`
	Consumers int    `json:"consumers"`
	Depth     int64  `json:"depth"`
	// MaxQueued is the subscription's bound, 0 for none; Overflowed the
	// copies dropped at it since the subscription was made.
	MaxQueued  int64 `json:"max_queued,omitempty"`
	Overflowed int64 `json:"overflowed,omitempty"`
	// Owner is the identity that made it, which alone may join it: a
	// remote client's or an MQTT client's; empty for the node's own (an
	// application's, the admin API's) and for the MQTT shared groups'.
	Owner string `json:"owner,omitempty"`
}
