package main

import (
	"strings"
	"testing"
	"time"
)

func TestDemo(t *testing.T) {
	r := runPetrel(t, 30*time.Second, "demo")
	r.wantCode(t, exitOK)
	out := r.stdout

	// Each mode prints its deliveries as "  <Mode>  prio N ..." lines; read
	// their priorities back, independently of the demo's own checks.
	for _, mode := range []string{"Poll", "Receive", "Listen"} {
		var prios []string
		for _, line := range strings.Split(out, "\n") {
			rest, ok := strings.CutPrefix(strings.TrimSpace(line), mode+" ")
			if !ok {
				continue
			}
			fields := strings.Fields(rest)
			if len(fields) < 2 || fields[0] != "prio" {
				continue
			}
			prios = append(prios, fields[1])
			if strings.Contains(line, "stale") {
				t.Errorf("%s delivered an expired message: %s", mode, line)
			}
		}
		// Receive also shows the message sent while it was blocked.
		want := "9 9 7 4 4 0"
		if mode == "Receive" {
			want += " 4"
		}
		if got := strings.Join(prios, " "); got != want {
			t.Errorf("%s delivered priorities %q, want %q", mode, got, want)
		}
		mustContain(t, out, "check ok: "+mode+" delivered the 6 live messages in priority order (9 9 7 4 4 0), FIFO within a priority")
	}
	for _, line := range []string{
		"demo.poll     enqueued 9, acked 6, expired 3, depth 0",
		"demo.receive  enqueued 10, acked 7, expired 3, depth 0",
		"demo.listen   enqueued 9, acked 6, expired 3, depth 0",
		"check ok: none of the 9 messages with a 200ms TTL was delivered, in any mode",
		"check ok: after 2 failed deliveries the message moved to demo.retry.dlq with its reason",
		"check ok: demo-b/audit got all 300 publishes",
		"check ok: demo-c/dashboard got none twice",
		"demo passed:",
	} {
		mustContain(t, out, line)
	}
}

func mustContain(t *testing.T, out, line string) {
	t.Helper()
	if !strings.Contains(out, line) {
		t.Errorf("output lacks %q:\n%s", line, out)
	}
}
