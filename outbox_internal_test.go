package petrel

import "testing"

// The record of which file a message was sent for keeps the outbox's
// after setting; one written before it was kept is the path alone.
func TestOutboxSentRecord(t *testing.T) {
	for _, tc := range []struct {
		rec         []byte
		path, after string
		known       bool
	}{
		{outboxSentRecord("/out/a.bin", "delete"), "/out/a.bin", "delete", true},
		{outboxSentRecord("/out/a.bin", ""), "/out/a.bin", "", true},
		{[]byte("/out/old.bin"), "/out/old.bin", "", false},
	} {
		path, after, known := parseOutboxSent(tc.rec)
		if path != tc.path || after != tc.after || known != tc.known {
			t.Errorf("parseOutboxSent(%q) = %q, %q, %v; want %q, %q, %v", tc.rec, path, after, known, tc.path, tc.after, tc.known)
		}
	}
}
