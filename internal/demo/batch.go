package demo

import (
	"cmp"
	"slices"
	"strings"
	"time"

	petrel "github.com/petrelmq/petrel"
	"github.com/petrelmq/petrel/message"
)

// demoTTL is short enough that the demo can let it run out, long enough
// that the messages are surely stored before it does.
const demoTTL = 200 * time.Millisecond

// demoMessage is one message of the batch the demo sends to each address.
type demoMessage struct {
	kind     message.Kind
	priority uint8
	// subject is the command of a command message, the data type of a data
	// message.
	subject string
	body    string
	ttl     time.Duration
}

// demoBatch is sent in this order. Its priorities are mixed so that
// consumption order differs from send order, and two priorities hold two
// live messages each to show FIFO within a priority. The TTL'd ones sit at
// several priorities, including the highest, and their bodies say "stale".
var demoBatch = []demoMessage{
	{message.KindData, 4, "reading", "temp=21.5", 0},
	{message.KindCommand, 9, "stop", "stop line 3", 0},
	{message.KindData, 0, "report", "nightly report", 0},
	{message.KindData, 4, "reading", "stale reading", demoTTL},
	{message.KindCommand, 7, "recalibrate", "recalibrate sensor 2", 0},
	{message.KindCommand, 9, "stop", "stale stop", demoTTL},
	{message.KindData, 4, "reading", "temp=21.7", 0},
	{message.KindCommand, 9, "resume", "resume line 3", 0},
	{message.KindData, 7, "alarm", "stale alarm", demoTTL},
}

// build makes m into a message of p's, ready to send.
func (m demoMessage) build(p *petrel.Producer, addr string) *message.Message {
	var msg *message.Message
	if m.kind == message.KindCommand {
		msg = p.CreateCommandMessage(addr)
		msg.Command.Command = m.subject
	} else {
		msg = p.CreateDataMessage(addr)
		msg.Data.DataType = m.subject
		msg.Data.Encoding = "text/plain"
	}
	msg.Priority = m.priority
	msg.TTL = m.ttl
	msg.Body = []byte(m.body)
	return msg
}

// liveInOrder returns the bodies of the batch's messages without a TTL in
// the order a consumer must get them: highest priority first, send order
// within a priority. It is the model the consumers are checked against.
func liveInOrder() []string {
	live := slices.DeleteFunc(slices.Clone(demoBatch), func(m demoMessage) bool { return m.ttl > 0 })
	slices.SortStableFunc(live, func(a, b demoMessage) int { return cmp.Compare(b.priority, a.priority) })
	bodies := make([]string, len(live))
	for i, m := range live {
		bodies[i] = m.body
	}
	return bodies
}

// expiring returns the bodies of the batch's messages with a TTL.
func expiring() []string {
	var bodies []string
	for _, m := range demoBatch {
		if m.ttl > 0 {
			bodies = append(bodies, m.body)
		}
	}
	return bodies
}

// subject returns what the demo prints for a message's kind property.
func subject(m *message.Message) string {
	switch m.Kind {
	case message.KindCommand:
		return m.Command.Command
	case message.KindData:
		return m.Data.DataType
	}
	return m.File.Filename
}

// priorities returns the priorities of bodies, as the batch defines them,
// for a one-line summary such as "9 9 7 4 4 0".
func priorities(bodies []string) string {
	var b strings.Builder
	for i, body := range bodies {
		if i > 0 {
			b.WriteByte(' ')
		}
		for _, m := range demoBatch {
			if m.body == body {
				b.WriteByte('0' + m.priority)
				break
			}
		}
	}
	return b.String()
}
