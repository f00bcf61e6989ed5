package petreltest

import (
	"io"
	"testing"

	"go.uber.org/goleak"
)

// TCPPair starts a goroutine to accept; none may outlive the tests.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestTCPPair: the two ends carry bytes both ways.
func TestTCPPair(t *testing.T) {
	c, s := TCPPair(t)
	for _, p := range [][2]io.ReadWriter{{c, s}, {s, c}} {
		if _, err := p[0].Write([]byte("ping")); err != nil {
			t.Fatal(err)
		}
		got := make([]byte, 4)
		if _, err := io.ReadFull(p[1], got); err != nil || string(got) != "ping" {
			t.Fatalf("read %q, %v; want ping", got, err)
		}
	}
}
