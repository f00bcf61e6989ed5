package petrel

import (
	"testing"
	"time"

	"github.com/petrelmq/petrel/filetransfer"
)

// The record of which file a message was sent for keeps the outbox's
// after setting and the version sent; one written before it was kept is
// the path alone, and one before the version was kept has a zero one.
func TestOutboxSentRecord(t *testing.T) {
	id := filetransfer.FileID{Dev: 2049, Ino: 1234567, Size: 6 << 20, ModTime: time.Unix(0, 1764884511123456789)}
	for _, tc := range []struct {
		rec         []byte
		path, after string
		sent        filetransfer.FileID
		known       bool
	}{
		{outboxSentRecord("/out/a.bin", "delete", id), "/out/a.bin", "delete", id, true},
		{outboxSentRecord("/out/a.bin", "", id), "/out/a.bin", "", id, true},
		{[]byte("delete\x00/out/a.bin"), "/out/a.bin", "delete", filetransfer.FileID{}, true},
		{[]byte("/out/old.bin"), "/out/old.bin", "", filetransfer.FileID{}, false},
	} {
		path, after, sent, known := parseOutboxSent(tc.rec)
		if path != tc.path || after != tc.after || known != tc.known || sent != tc.sent {
			t.Errorf("parseOutboxSent(%q) = %q, %q, %v; want %q, %q, %v", tc.rec, path, after, known, tc.path, tc.after, tc.known)
		}
	}
}
