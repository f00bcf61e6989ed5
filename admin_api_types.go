package petrel

import (
	"errors"
	"fmt"
	"time"
	"unicode/utf8"

	"github.com/petrelmq/petrel/message"
)

// The JSON bodies of the admin API (see adminAPI). Message ids are JSON
// numbers, as in the rest of the API; durations are nanoseconds, as
// time.Duration marshals.

// APIMessage is a message as the admin API shows it.
type APIMessage struct {
	ID          uint64        `json:"id"`
	Origin      string        `json:"origin"`
	Destination string        `json:"destination"`
	Kind        string        `json:"kind"`
	Priority    uint8         `json:"priority"`
	Timestamp   time.Time     `json:"timestamp"`
	TTL         time.Duration `json:"ttl,omitempty"` // what remains; 0 never expires
	// Attempt is 1 on a message's first delivery (see Delivery.Attempt).
	Attempt  int    `json:"attempt,omitempty"`
	InFlight bool   `json:"in_flight,omitempty"` // browsed while a consumer holds it
	Reason   string `json:"reason,omitempty"`    // why it was moved to this queue
	// The kind properties: the one that matches Kind is set.
	Command    *APICommand   `json:"command,omitempty"`
	Data       *APIData      `json:"data,omitempty"`
	File       *APIFile      `json:"file,omitempty"`
	Properties []APIProperty `json:"properties,omitempty"`
	// Body is the body as base64; Text is the same body as a string, set
	// when the body is valid UTF-8.
	Body []byte  `json:"body,omitempty"`
	Text *string `json:"text,omitempty"`
	// DecodeError says why a stored message could not be read; only the
	// fields above that the store knows are set then.
	DecodeError string `json:"decode_error,omitempty"`
}

// APICommand are the kind properties of a command message.
type APICommand struct {
	Name          string `json:"name"`
	ReplyTo       string `json:"reply_to,omitempty"`
	CorrelationID string `json:"correlation_id,omitempty"`
}

// APIData are the kind properties of a data message.
type APIData struct {
	DataType string `json:"data_type,omitempty"`
	Encoding string `json:"encoding,omitempty"`
}

// APIFile are the kind properties of a file message.
type APIFile struct {
	Filename     string `json:"filename"`
	Filesize     int64  `json:"filesize"`
	Checksum     string `json:"checksum,omitempty"`
	ReceivedPath string `json:"received_path,omitempty"`
}

// APIProperty is one application property: its type is a name that
// message.ParseType reads, its value as message.ParseValue reads it.
type APIProperty struct {
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
	Command    *APICommand   `json:"command,omitempty"` // command messages only
	Data       *APIData      `json:"data,omitempty"`    // data messages only
	Properties []APIProperty `json:"properties,omitempty"`
	// Body, as base64, or Text, as a string: one or neither.
	Body []byte  `json:"body,omitempty"`
	Text *string `json:"text,omitempty"`
}

// SendResponse answers POST /api/send once the message is durable.
type SendResponse struct {
	ID          uint64 `json:"id"`
	Destination string `json:"destination"`
}

// How POST /api/recv settles the messages it returns.
const (
	SettleAck     = "ack"     // delete them
	SettleRelease = "release" // redeliver them at once, counting no attempt
	SettleNack    = "nack"    // redeliver them after a backoff; dead-letter past max_deliveries
)

// RecvRequest is the body of POST /api/recv.
type RecvRequest struct {
	Address string `json:"address"`
	Count   int    `json:"count,omitempty"` // default 1, at most 1000
	// Wait is how long to wait for Count messages; 0 takes only those
	// ready now.
	Wait   time.Duration `json:"wait,omitempty"`
	Settle string        `json:"settle,omitempty"` // SettleAck (default), SettleRelease or SettleNack
	Reason string        `json:"reason,omitempty"` // the nack's reason
}

// RecvResponse answers POST /api/recv. The messages are written first and
// settled after, so that a client gone before they were written gets
// them again (released) instead of losing them: Settled is set once the
// settling is durable, Error if it failed (the messages may come again).
type RecvResponse struct {
	Messages []APIMessage `json:"messages"`
	Settled  string       `json:"settled,omitempty"`
	Error    string       `json:"error,omitempty"`
}

// DeadLettersResponse answers GET /api/dlq/{addr}.
type DeadLettersResponse struct {
	Queue    string       `json:"queue"` // "" when the address has no dead letters yet
	Messages []APIMessage `json:"messages"`
}

// CountResponse answers the purges and the replay: how many messages of
// Queue they deleted or moved.
type CountResponse struct {
	Queue string `json:"queue"`
	Count int    `json:"count"`
}

// newAPIMessage shows m.
func newAPIMessage(m *message.Message) APIMessage {
	a := APIMessage{
		ID: m.ID, Origin: m.Origin.String(), Destination: m.Destination, Kind: m.Kind.String(),
		Priority: m.Priority, Timestamp: m.Timestamp, TTL: m.TTL, Body: m.Body,
	}
	switch m.Kind {
	case message.KindCommand:
		a.Command = &APICommand{Name: m.Command.Command, ReplyTo: m.Command.ReplyTo, CorrelationID: m.Command.CorrelationID}
	case message.KindData:
		a.Data = &APIData{DataType: m.Data.DataType, Encoding: m.Data.Encoding}
	case message.KindFile:
		f := m.File
		a.File = &APIFile{Filename: f.Filename, Filesize: f.Filesize, Checksum: f.FileChecksum, ReceivedPath: f.ReceivedFilePath}
	}
	for _, p := range m.Properties {
		a.Properties = append(a.Properties, APIProperty{Key: p.Key, Type: p.Value.Type().String(), Value: p.Value.String()})
	}
	if utf8.Valid(m.Body) {
		t := string(m.Body)
		a.Text = &t
	}
	return a
}

// storedAPIMessage shows a browsed message.
func storedAPIMessage(s StoredMessage) APIMessage {
	var a APIMessage
	if s.Message != nil {
		a = newAPIMessage(s.Message)
	} else {
		a.DecodeError = s.Err.Error()
	}
	a.Attempt, a.InFlight, a.Reason = s.Attempt, s.InFlight, s.Reason
	return a
}

// errBadRequest marks a request the API refuses as malformed (400).
var errBadRequest = errors.New("bad request")

// fill sets m, made by the producer for r.To, from r. m.Kind is set.
func (r *SendRequest) fill(m *message.Message) error {
	if r.Command != nil && m.Kind != message.KindCommand {
		return fmt.Errorf("command properties on a %s message: %w", m.Kind, errBadRequest)
	}
	if r.Data != nil && m.Kind != message.KindData {
		return fmt.Errorf("data properties on a %s message: %w", m.Kind, errBadRequest)
	}
	if r.Body != nil && r.Text != nil {
		return fmt.Errorf("give body or text, not both: %w", errBadRequest)
	}
	if r.Priority != nil {
		m.Priority = *r.Priority
	}
	m.TTL = r.TTL
	if c := r.Command; c != nil {
		m.Command = message.CommandProps{Command: c.Name, ReplyTo: c.ReplyTo, CorrelationID: c.CorrelationID}
	}
	if d := r.Data; d != nil {
		m.Data = message.DataProps{DataType: d.DataType, Encoding: d.Encoding}
	}
	for _, p := range r.Properties {
		t, err := message.ParseType(p.Type)
		if err != nil {
			return fmt.Errorf("property %q: %w", p.Key, err)
		}
		v, err := message.ParseValue(t, p.Value)
		if err != nil {
			return fmt.Errorf("property %q: %w", p.Key, err)
		}
		// Appended, not Set: a key given twice is an error Validate reports.
		m.Properties = append(m.Properties, message.Property{Key: p.Key, Value: v})
	}
	m.Body = r.Body
	if r.Text != nil {
		m.Body = []byte(*r.Text)
	}
	return nil
}
