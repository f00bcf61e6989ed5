package petrel

import (
	"fmt"
	"unicode/utf8"

	"github.com/petrelmq/petrel/internal/adminapi"
	"github.com/petrelmq/petrel/message"
)

// The admin API's messages (adminapi.Message, adminapi.SendRequest) to and
// from message.Message.

// messageToSend makes, with p, the message req asks to send.
func messageToSend(p *Producer, req adminapi.SendRequest) (*message.Message, error) {
	if req.To == "" {
		return nil, fmt.Errorf("no destination (to): %w", errBadRequest)
	}
	kind := message.KindData
	if req.Kind != "" {
		k, err := message.ParseKind(req.Kind)
		if err != nil {
			return nil, err
		}
		kind = k
	}
	var m *message.Message
	switch kind {
	case message.KindCommand:
		m = p.CreateCommandMessage(req.To)
	case message.KindData:
		m = p.CreateDataMessage(req.To)
	default:
		return nil, fmt.Errorf("kind %s: send files with POST %s: %w", kind, adminapi.PathFiles, errBadRequest)
	}
	if err := fillMessage(m, req); err != nil {
		return nil, err
	}
	return m, nil
}

// fillMessage sets m, made by the producer for r.To, from r. m.Kind is set.
func fillMessage(m *message.Message, r adminapi.SendRequest) error {
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
	if err := fillProperties(m, r.Properties); err != nil {
		return err
	}
	m.Body = r.Body
	if r.Text != nil {
		m.Body = []byte(*r.Text)
	}
	return nil
}

func fillProperties(m *message.Message, props []adminapi.Property) error {
	for _, p := range props {
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
	return nil
}

// newAPIMessage shows m.
func newAPIMessage(m *message.Message) adminapi.Message {
	a := adminapi.Message{
		ID: m.ID, Origin: m.Origin.String(), Destination: m.Destination, Kind: m.Kind.String(),
		Priority: m.Priority, Timestamp: m.Timestamp, TTL: m.TTL, Body: m.Body,
	}
	switch m.Kind {
	case message.KindCommand:
		a.Command = &adminapi.Command{Name: m.Command.Command, ReplyTo: m.Command.ReplyTo, CorrelationID: m.Command.CorrelationID}
	case message.KindData:
		a.Data = &adminapi.Data{DataType: m.Data.DataType, Encoding: m.Data.Encoding}
	case message.KindFile:
		f := m.File
		a.File = &adminapi.File{Filename: f.Filename, Filesize: f.Filesize, Checksum: f.FileChecksum, ReceivedPath: f.ReceivedFilePath}
	}
	for _, p := range m.Properties {
		a.Properties = append(a.Properties, adminapi.Property{Key: p.Key, Type: p.Value.Type().String(), Value: p.Value.String()})
	}
	if utf8.Valid(m.Body) {
		t := string(m.Body)
		a.Text = &t
	}
	return a
}

// storedAPIMessage shows a browsed message.
func storedAPIMessage(s StoredMessage) adminapi.Message {
	var a adminapi.Message
	if s.Message != nil {
		a = newAPIMessage(s.Message)
	} else {
		a.DecodeError = s.Err.Error()
	}
	a.Attempt, a.InFlight, a.Reason = s.Attempt, s.InFlight, s.Reason
	return a
}
