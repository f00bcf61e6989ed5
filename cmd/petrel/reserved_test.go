package main

import (
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestCLISendReservedName: `petrel send` and `petrel sendfile` to a name
// reserved for the node's internal traffic ("_petrel.x", or another
// node's "_petrel.topics", which would reach it as this node's interest)
// fail with exit 1 saying why, over the socket and the admin listener,
// and make no queue. Each made an ordinary queue before.
func TestCLISendReservedName(t *testing.T) {
	n := startOpNode(t)
	const reason = `names whose first word is "_petrel" are reserved for the node's internal traffic`
	src := filepath.Join(t.TempDir(), "f.txt")
	writeFile(t, src, "a file\n")
	for _, to := range []string{"_petrel.x", "_petrel.topics@b"} {
		for _, r := range []result{
			n.run(t, "send", to, "hi"),
			runPetrel(t, 20*time.Second, "send", to, "hi", "--server", n.admin),
			n.run(t, "sendfile", src, to, "--no-wait"),
		} {
			r.wantCode(t, exitFailure)
			if !strings.Contains(r.stderr, reason) || r.stdout != "" {
				t.Errorf("send to %s: stdout %q, stderr %q; want nothing on stdout and the reason on stderr", to, r.stdout, r.stderr)
			}
		}
	}
	for name := range n.queues(t) {
		if strings.HasPrefix(name, "_petrel") {
			t.Errorf("the node made the queue %q", name)
		}
	}
}
