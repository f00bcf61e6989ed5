package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/petrelmq/petrel/internal/adminapi"
	"github.com/petrelmq/petrel/internal/petreltest"
)

// sendText sends one message of body to orders through the node's admin
// listener and returns its id.
func (n opNode) sendText(t *testing.T, c *adminapi.Client, body string) uint64 {
	t.Helper()
	var sent adminapi.SendResponse
	if err := c.Do(context.Background(), http.MethodPost, adminapi.PathSend, adminapi.SendRequest{To: "orders", Text: &body}, &sent); err != nil {
		t.Fatal(err)
	}
	return sent.ID
}

// startRecv starts `petrel recv orders args... --json --server <node>`,
// its standard output a pipe the test reads.
func (n opNode) startRecv(t *testing.T, args ...string) (*exec.Cmd, *bufio.Reader, *strings.Builder) {
	t.Helper()
	cmd := exec.Command(petrelBin, append([]string{"recv", "orders", "--json", "--server", n.admin}, args...)...)
	cmd.Env = petrelEnv
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill() })
	return cmd, bufio.NewReaderSize(out, 1<<20), &stderr
}

// readIDs reads JSON lines of messages from r until it ends and returns
// their ids.
func readIDs(t *testing.T, r *bufio.Reader) []uint64 {
	t.Helper()
	var ids []uint64
	for {
		line, err := r.ReadBytes('\n')
		// A last line without its end was cut short: not printed.
		if len(line) > 0 && line[len(line)-1] == '\n' {
			var m adminapi.Message
			if jerr := json.Unmarshal(line, &m); jerr != nil {
				t.Fatalf("recv printed %q: %v", line, jerr)
			}
			ids = append(ids, m.ID)
		}
		if err == io.EOF {
			return ids
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

// exitCode is how cmd ended: its exit status, or minus the signal that
// killed it.
func exitCode(cmd *exec.Cmd) int {
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return -int(ws.Signal())
	}
	return cmd.ProcessState.ExitCode()
}

// TestCLIRecvInterruptedWhilePrinting: SIGINT to petrel recv while it
// prints an answer does not cut it short: recv prints every message,
// settles them, then exits 130; every message acked was printed. Before, Go's default for SIGINT
// killed recv with the answer half printed, and its acked messages were
// lost.
func TestCLIRecvInterruptedWhilePrinting(t *testing.T) {
	n := startOpNode(t)
	c := adminapi.Dial(n.admin, "")
	defer c.Close()
	const count = 40
	body := strings.Repeat("x", 64<<10) // a line of JSON larger than a pipe's buffer
	sent := map[uint64]bool{}
	for range count {
		sent[n.sendText(t, c, body)] = true
	}

	cmd, out, stderr := n.startRecv(t, "--count", fmt.Sprint(count))
	first := readIDs1(t, out)
	// recv is printing, and now blocked on its full pipe: interrupt it.
	time.Sleep(100 * time.Millisecond)
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	ids := append([]uint64{first}, readIDs(t, out)...)
	cmd.Wait()
	if code := exitCode(cmd); code != 130 {
		t.Fatalf("exit status %d, want 130; stderr:\n%s", code, stderr)
	}
	printed := map[uint64]bool{}
	for _, id := range ids {
		if !sent[id] || printed[id] {
			t.Fatalf("printed message %d: not sent, or printed twice", id)
		}
		printed[id] = true
	}
	q := n.queues(t)["orders"]
	if q.Acked != int64(len(printed)) || q.Depth != count-q.Acked || len(printed) != count {
		t.Fatalf("printed %d of %d messages; the node: %+v\nstderr:\n%s", len(printed), count, q, stderr)
	}
	if !strings.Contains(stderr.String(), "interrupted") {
		t.Errorf("stderr does not say it was interrupted:\n%s", stderr)
	}
}

// TestCLIRecvKilledWhilePrinting: SIGKILL to petrel recv while it prints
// an answer loses nothing. The node holds the messages it answered until
// recv settles them, which recv does once it has printed them; killed
// before, its messages come back when their lease_timeout passes, and the
// next recv prints them all. Before, the node acked them as soon as it
// had written its answer, and those still in recv's buffers were lost.
func TestCLIRecvKilledWhilePrinting(t *testing.T) {
	n := startOpNodeWith(t, "  - {name: orders, lease_timeout: 1s}\n")
	c := adminapi.Dial(n.admin, "")
	defer c.Close()
	// The first message's line of JSON is larger than a pipe's buffer;
	// the answer, whole, fits in the connection's.
	sent := []uint64{n.sendText(t, c, strings.Repeat("x", 100<<10))}
	for i := range 5 {
		sent = append(sent, n.sendText(t, c, fmt.Sprint("message ", i)))
	}
	count := len(sent)

	cmd, _, _ := n.startRecv(t, "--count", fmt.Sprint(count))
	// recv reads the answer, whole, and blocks printing the first
	// message: nobody reads its output. Kill it there.
	time.Sleep(time.Second)
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	if q := n.queues(t)["orders"]; q.Acked != 0 || q.Depth != int64(count) {
		t.Fatalf("recv was killed before it printed its answer, and the node settled it: %+v", q)
	}

	// The lease passes; the next recv gets every message, in order. It
	// waits for every lease to pass first: a message the killed recv's
	// answer did not take (the answer is cut by its bytes, and by what is
	// ready when it is made) is ready at once, and would come first.
	petreltest.Eventually(t, "the killed recv's leases passed", func() bool { return n.queues(t)["orders"].InFlight == 0 })
	r := n.run(t, "recv", "orders", "--count", fmt.Sprint(count), "--wait", "15s", "--json")
	r.wantCode(t, exitOK)
	var got []uint64
	for _, m := range jsonLines[adminapi.Message](t, r.stdout) {
		got = append(got, m.ID)
	}
	if fmt.Sprint(got) != fmt.Sprint(sent) {
		t.Fatalf("after the kill, recv printed %v, want %v", got, sent)
	}
	if q := n.queues(t)["orders"]; q.Depth != 0 || q.Acked != int64(count) {
		t.Fatalf("after the second recv: %+v", q)
	}
}

// readIDs1 reads the first JSON line of a message from r.
func readIDs1(t *testing.T, r *bufio.Reader) uint64 {
	t.Helper()
	line, err := r.ReadBytes('\n')
	if err != nil {
		t.Fatalf("recv printed nothing: %v", err)
	}
	var m adminapi.Message
	if err := json.Unmarshal(line, &m); err != nil {
		t.Fatalf("recv printed %q: %v", line, err)
	}
	return m.ID
}

// TestCLIRecvInterruptedAroundTheAnswer repeats what lost messages: recv
// waits, a message is sent, and SIGINT comes from 8 ms before to 15 ms
// after, before, during or after the node's answer. recv exits 0 (done before the
// signal) or 130, and every message the node acked was printed: a
// signal before the answer hangs the request up, and recv still prints
// what the node had sent.
func TestCLIRecvInterruptedAroundTheAnswer(t *testing.T) {
	n := startOpNode(t)
	c := adminapi.Dial(n.admin, "")
	defer c.Close()
	sent := map[uint64]bool{}
	printed := map[uint64]bool{}
	const rounds = 32
	handled := 0
	for i := range rounds {
		cmd, out, stderr := n.startRecv(t, "--wait", "30s")
		// Up, and its request waiting on the node.
		time.Sleep(300 * time.Millisecond)
		// From 8 ms before the send to 15 ms after it.
		if d := time.Duration(i%24-8) * time.Millisecond; d < 0 {
			go func() { time.Sleep(-d); cmd.Process.Signal(syscall.SIGINT) }()
			sent[n.sendText(t, c, fmt.Sprint("message ", i))] = true
		} else {
			sent[n.sendText(t, c, fmt.Sprint("message ", i))] = true
			time.Sleep(d)
			cmd.Process.Signal(syscall.SIGINT)
		}
		ids := readIDs(t, out)
		for _, id := range ids {
			printed[id] = true
		}
		cmd.Wait()
		switch code := exitCode(cmd); {
		case code == 0 || code == 130:
			handled++
		case code == -int(syscall.SIGINT):
			// On a loaded machine the signal can come before recv
			// started to handle it, and so before its request, or
			// after it printed, settled and gave the signal back on its
			// way out: Go's default ends it either way. A message not
			// settled waits for the next round, and the count below
			// still holds every ack to a print.
		default:
			t.Fatalf("round %d: exit status %d; stderr:\n%s", i, code, stderr)
		}
	}
	if handled < rounds/2 {
		t.Fatalf("recv handled the signal in %d rounds of %d: too few to judge", handled, rounds)
	}
	// Acked are those sent and no longer in the queue.
	var left []adminapi.Message
	if err := c.Do(context.Background(), http.MethodGet, "/api/queues/orders/messages?limit=1000", nil, &left); err != nil {
		t.Fatal(err)
	}
	acked := map[uint64]bool{}
	for id := range sent {
		acked[id] = true
	}
	for _, m := range left {
		delete(acked, m.ID)
	}
	lost := 0
	for id := range acked {
		if !printed[id] {
			lost++
		}
	}
	if q := n.queues(t)["orders"]; lost > 0 || q.Acked != int64(len(acked)) {
		t.Fatalf("%d of the %d messages acked were never printed (%d printed, %d left); the node: %+v", lost, len(acked), len(printed), len(left), q)
	}
	t.Logf("%d rounds: %d messages acked and printed, %d left on the node", rounds, len(acked), len(left))
}

// TestCLIRecvPastOneAnswer: recv --count takes more bytes than one answer
// of the node holds by asking again, and prints every message once, in
// order.
func TestCLIRecvPastOneAnswer(t *testing.T) {
	n := startOpNode(t)
	c := adminapi.Dial(n.admin, "")
	defer c.Close()
	const count = 12
	var sent []uint64
	for i := range count {
		sent = append(sent, n.sendText(t, c, strings.Repeat(fmt.Sprint(i%10), 1536<<10))) // 18 MiB in all
	}
	r := n.run(t, "recv", "orders", "--count", fmt.Sprint(count), "--json")
	r.wantCode(t, exitOK)
	var got []uint64
	for _, m := range jsonLines[adminapi.Message](t, r.stdout) {
		got = append(got, m.ID)
	}
	if fmt.Sprint(got) != fmt.Sprint(sent) {
		t.Fatalf("printed %v, want %v", got, sent)
	}
	if q := n.queues(t)["orders"]; q.Depth != 0 || q.Acked != count {
		t.Fatalf("after recv: %+v", q)
	}
}
