package message

import (
	"fmt"
	"strconv"
	"strings"
)

// String returns "command", "data" or "file", and "kind(N)" for any other
// value so that a corrupt kind still prints usefully.
func (k Kind) String() string {
	switch k {
	case KindCommand:
		return "command"
	case KindData:
		return "data"
	case KindFile:
		return "file"
	}
	return "kind(" + strconv.Itoa(int(k)) + ")"
}

// ParseKind reads a kind name as String writes it. Case is ignored because
// the names are typed on command lines and in configuration.
func ParseKind(s string) (Kind, error) {
	for k := KindCommand; k <= KindFile; k++ {
		if strings.EqualFold(s, k.String()) {
			return k, nil
		}
	}
	return 0, fmt.Errorf("kind %s: want command, data or file: %w", clip(s), ErrKind)
}

// valid reports whether k is one of the three kinds.
func (k Kind) valid() bool {
	return k >= KindCommand && k <= KindFile
}

// kindFieldNames names the string kind properties of each kind, in the order
// kindStrings returns them (which is their order on the wire). The names are
// the ones DESIGN.md uses, so errors read like the documentation.
var kindFieldNames = [...][]string{
	KindCommand: {"command", "replyTo", "correlationID"},
	KindData:    {"dataType", "encoding"},
	KindFile: {"srcIdentifier", "centerIdentifier", "destIdentifier", "filename",
		"fileChecksum", "sendFilePath", "receivedFilePath"},
}

// maxKindStrings is the most string kind properties any kind has.
const maxKindStrings = 7

// kindStrings returns pointers to the string kind properties of m.Kind, in
// wire order, as an array and a count (n is 0 for an unknown kind). The
// encoder, the decoder and Validate all walk this one list, so the field
// order lives in one place. (FileProps.Filesize is the only non-string kind
// property; the codec handles it on its own.) An array rather than a slice
// keeps the pointers, and so the Message, off the heap.
func (m *Message) kindStrings() (p [maxKindStrings]*string, n int) {
	switch m.Kind {
	case KindCommand:
		c := &m.Command
		p[0], p[1], p[2] = &c.Command, &c.ReplyTo, &c.CorrelationID
		return p, 3
	case KindData:
		p[0], p[1] = &m.Data.DataType, &m.Data.Encoding
		return p, 2
	case KindFile:
		f := &m.File
		p[0], p[1], p[2], p[3] = &f.SrcIdentifier, &f.CenterIdentifier, &f.DestIdentifier, &f.Filename
		p[4], p[5], p[6] = &f.FileChecksum, &f.SendFilePath, &f.ReceivedFilePath
		return p, 7
	}
	return p, 0
}
