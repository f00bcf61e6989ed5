package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	petrel "github.com/petrelmq/petrel"
	"github.com/petrelmq/petrel/internal/adminapi"
)

// opNode is a running `petrel node` for the operating commands: its data
// directory (for the socket) and its admin listener.
type opNode struct {
	dataDir, admin string
}

// startOpNode runs a node with the addresses orders and jobs, whose
// messages go to jobs.dlq at their first nack.
func startOpNode(t *testing.T) opNode {
	t.Helper()
	return startOpNodeWith(t, `  - {name: orders}
  - {name: jobs, max_deliveries: 1}
`)
}

// startOpNodeWith starts a node as startOpNode does, with addresses, the
// lines of its configuration's list of addresses.
func startOpNodeWith(t *testing.T, addresses string) opNode {
	t.Helper()
	dir := t.TempDir()
	cfg := filepath.Join(dir, "a.yaml")
	writeFile(t, cfg, `node: {name: a, data_dir: data}
admin: {listen: "127.0.0.1:0"}
addresses:
`+addresses)
	f := startNode(t, dir, "-c", cfg).ready(t)
	if f["admin"] == "" {
		t.Fatalf("ready line has no admin address: %v", f)
	}
	return opNode{dataDir: filepath.Join(dir, "data"), admin: f["admin"]}
}

// run runs `petrel args... --data-dir <node's>`, through the socket.
func (n opNode) run(t *testing.T, args ...string) result {
	t.Helper()
	// A bound on a hang, not a timing: recv of 18 MiB on a loaded
	// machine under -race has taken more than 20 s.
	return runPetrel(t, time.Minute, append(args, "--data-dir", n.dataDir)...)
}

// runStdin runs `petrel args...` with stdin as its standard input.
func runStdin(t *testing.T, stdin string, args ...string) result {
	t.Helper()
	cmd := exec.Command(petrelBin, args...)
	cmd.Env = petrelEnv
	cmd.Stdin = strings.NewReader(stdin)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		if _, ok := err.(*exec.ExitError); !ok {
			t.Fatal(err)
		}
	}
	return result{stdout: stdout.String(), stderr: stderr.String(), code: cmd.ProcessState.ExitCode()}
}

// jsonLines decodes each line of out into a T.
func jsonLines[T any](t *testing.T, out string) []T {
	t.Helper()
	var all []T
	sc := bufio.NewScanner(strings.NewReader(out))
	sc.Buffer(nil, 16<<20)
	for sc.Scan() {
		var v T
		if err := json.Unmarshal(sc.Bytes(), &v); err != nil {
			t.Fatalf("line %q is not JSON: %v", sc.Text(), err)
		}
		all = append(all, v)
	}
	return all
}

func (n opNode) queues(t *testing.T) map[string]petrel.QueueStats {
	t.Helper()
	r := n.run(t, "queues", "--json")
	r.wantCode(t, exitOK)
	out := map[string]petrel.QueueStats{}
	for _, q := range jsonLines[[]petrel.QueueStats](t, r.stdout)[0] {
		out[q.Name] = q
	}
	return out
}

func TestCLISendRecv(t *testing.T) {
	n := startOpNode(t)
	r := n.run(t, "send", "orders", "hello", "--kind", "command", "--command", "restart", "--reply-to", "replies",
		"--correlation-id", "c-1", "--prop", "line=int32:3", "--prop", "note=string:a=b:c", "--priority", "7", "--ttl", "1h")
	r.wantCode(t, exitOK)
	cmdID, err := strconv.ParseUint(strings.TrimSpace(r.stdout), 10, 64)
	if err != nil {
		t.Fatalf("send printed %q, want the message id", r.stdout)
	}
	// A binary body from a file, over the admin listener.
	body := filepath.Join(t.TempDir(), "body.bin")
	if err := os.WriteFile(body, []byte{0xff, 0, 1}, 0o600); err != nil {
		t.Fatal(err)
	}
	r = runPetrel(t, 20*time.Second, "send", "orders", "@"+body, "--data-type", "blob", "--server", n.admin, "--json")
	r.wantCode(t, exitOK)
	var sent adminapi.SendResponse
	if err := json.Unmarshal([]byte(r.stdout), &sent); err != nil || sent.ID == 0 || sent.Destination != "orders" {
		t.Fatalf("send --json printed %q (%v)", r.stdout, err)
	}
	runStdin(t, "from stdin\n", "send", "orders", "-", "--server", "http://"+n.admin).wantCode(t, exitOK)

	if q := n.queues(t)["orders"]; q.Depth != 3 || q.Enqueued != 3 || q.Kind.String() != "receive" {
		t.Fatalf("queues after three sends: %+v", q)
	}
	r = n.run(t, "queues")
	r.wantCode(t, exitOK)
	if !regexp.MustCompile(`(?m)^orders\s+receive\s+3\s+0\s+3\s+0\s+0\s+0\s+\d+$`).MatchString(r.stdout) {
		t.Fatalf("queues table:\n%s", r.stdout)
	}

	// Released: they stay, and come again.
	r = n.run(t, "recv", "orders", "--count", "2", "--json", "--no-ack")
	r.wantCode(t, exitOK)
	msgs := jsonLines[adminapi.Message](t, r.stdout)
	if len(msgs) != 2 {
		t.Fatalf("recv --count 2 printed %d messages:\n%s", len(msgs), r.stdout)
	}
	m := msgs[0]
	if m.ID != cmdID || m.Kind != "command" || m.Priority != 7 || m.Command == nil || m.Command.Name != "restart" ||
		m.Command.CorrelationID != "c-1" || len(m.Properties) != 2 || m.Properties[1].Value != "a=b:c" ||
		m.Text == nil || *m.Text != "hello" || m.TTL <= 0 || m.Attempt != 1 {
		t.Fatalf("command message: %+v", m)
	}
	if b := msgs[1]; b.ID != sent.ID || b.Text != nil || !bytes.Equal(b.Body, []byte{0xff, 0, 1}) || b.Data == nil || b.Data.DataType != "blob" {
		t.Fatalf("binary message: %+v", b)
	}

	r = n.run(t, "recv", "orders", "--count", "3")
	r.wantCode(t, exitOK)
	for _, want := range []string{
		"id:              " + strconv.FormatUint(cmdID, 10), "kind:            command", "command:         restart",
		"reply-to:        replies", "property line:   int32 3", "attempt:         1", "body:            5 bytes, text\nhello\n",
		"body:            3 bytes, not UTF-8, as base64\n/wAB\n", "data-type:       blob", "from stdin",
	} {
		if !strings.Contains(r.stdout, want) {
			t.Fatalf("recv output lacks %q:\n%s", want, r.stdout)
		}
	}
	// Acked: gone, and counted by the time recv returned.
	if q := n.queues(t)["orders"]; q.Depth != 0 || q.Acked != 3 {
		t.Fatalf("queues after recv: %+v", q)
	}
	r = n.run(t, "recv", "orders", "--wait", "20ms")
	r.wantCode(t, exitOK)
	if r.stdout != "" || !strings.Contains(r.stderr, "no message on orders") {
		t.Fatalf("recv of an empty queue: stdout %q stderr %q", r.stdout, r.stderr)
	}
	r = runPetrel(t, 20*time.Second, "stat", "--server", n.admin)
	r.wantCode(t, exitOK)
	if !strings.Contains(r.stdout, "node a") || !strings.Contains(r.stdout, "orders") {
		t.Fatalf("stat --server:\n%s", r.stdout)
	}
	r = n.run(t, "recv", "nosuch")
	r.wantCode(t, exitFailure)
	if !strings.Contains(r.stderr, "unknown queue") {
		t.Fatalf("recv of an unknown queue: %s", r.stderr)
	}
}

func TestCLIDeadLettersAndPurge(t *testing.T) {
	n := startOpNode(t)
	for _, b := range []string{"a", "b", "c"} {
		n.run(t, "send", "jobs", b).wantCode(t, exitOK)
	}
	r := n.run(t, "dlq", "list", "jobs")
	r.wantCode(t, exitOK)
	if !strings.Contains(r.stdout, "no dead letters of jobs") {
		t.Fatalf("dlq list before any: %s", r.stdout)
	}
	// max_deliveries 1: a nack dead-letters at once.
	r = n.run(t, "recv", "jobs", "--count", "3", "--nack", "--reason", "no handler")
	r.wantCode(t, exitOK)
	if q := n.queues(t); q["jobs"].Depth != 0 || q["jobs"].DeadLettered != 3 || q["jobs.dlq"].Depth != 3 {
		t.Fatalf("queues after the nacks: %+v", q)
	}
	r = n.run(t, "dlq", "list", "jobs")
	r.wantCode(t, exitOK)
	if lines := strings.Split(strings.TrimSpace(r.stdout), "\n"); len(lines) != 4 || !strings.Contains(lines[1], "no handler") ||
		!strings.HasPrefix(lines[0], "ID") {
		t.Fatalf("dlq list:\n%s", r.stdout)
	}
	r = n.run(t, "dlq", "list", "jobs", "--json", "--limit", "2")
	r.wantCode(t, exitOK)
	dl := jsonLines[adminapi.DeadLettersResponse](t, r.stdout)[0]
	if dl.Queue != "jobs.dlq" || len(dl.Messages) != 2 || *dl.Messages[0].Text != "a" {
		t.Fatalf("dlq list --json: %+v", dl)
	}
	// Listing consumed nothing.
	if q := n.queues(t)["jobs.dlq"]; q.Depth != 3 || q.InFlight != 0 {
		t.Fatalf("jobs.dlq after list: %+v", q)
	}

	r = n.run(t, "dlq", "replay", "jobs", "--count", "2")
	r.wantCode(t, exitOK)
	if !strings.Contains(r.stdout, "replayed 2 dead letters of jobs") {
		t.Fatalf("dlq replay: %s", r.stdout)
	}
	if q := n.queues(t); q["jobs"].Depth != 2 || q["jobs.dlq"].Depth != 1 {
		t.Fatalf("queues after the replay: %+v", q)
	}
	r = n.run(t, "recv", "jobs", "--json", "--no-ack")
	r.wantCode(t, exitOK)
	if m := jsonLines[adminapi.Message](t, r.stdout); len(m) != 1 || *m[0].Text != "a" || m[0].Attempt != 1 || m[0].Reason != "" {
		t.Fatalf("replayed message: %+v", m)
	}
	r = n.run(t, "dlq", "purge", "jobs", "--json")
	r.wantCode(t, exitOK)
	if c := jsonLines[adminapi.CountResponse](t, r.stdout); c[0] != (adminapi.CountResponse{Queue: "jobs.dlq", Count: 1}) {
		t.Fatalf("dlq purge: %+v", c)
	}
	r = n.run(t, "purge", "jobs")
	r.wantCode(t, exitOK)
	if strings.TrimSpace(r.stdout) != "purged 2 messages of jobs" {
		t.Fatalf("purge: %q", r.stdout)
	}
	if q := n.queues(t); q["jobs"].Depth != 0 || q["jobs.dlq"].Depth != 0 {
		t.Fatalf("queues after the purges: %+v", q)
	}
	for _, args := range [][]string{{"purge", "nosuch"}, {"dlq", "list", "nosuch"}, {"dlq", "replay", "nosuch"}} {
		r = n.run(t, args...)
		r.wantCode(t, exitFailure)
		if !strings.Contains(r.stderr, "unknown queue") {
			t.Fatalf("%q: %s", args, r.stderr)
		}
	}
}

// Bad command lines are refused before any node is asked: exit 2 with
// usage, and nothing on stdout.
func TestCLIOperateUsage(t *testing.T) {
	for _, tc := range []struct {
		name   string
		args   []string
		stderr string
	}{
		{"send without body", []string{"send", "orders"}, "wants <address[@node]> and a body"},
		{"send without address", []string{"send"}, "wants <address[@node]> and a body"},
		{"send bad address", []string{"send", "bad name", "x"}, `address "bad name"`},
		{"send unknown kind", []string{"send", "orders", "x", "--kind", "telegram"}, "want command, data or file"},
		{"send file kind", []string{"send", "orders", "x", "--kind", "file"}, "petrel sendfile"},
		{"send prop syntax", []string{"send", "orders", "x", "--prop", "line"}, "want key=type:value"},
		{"send prop type", []string{"send", "orders", "x", "--prop", "n=int8:1"}, "property type"},
		{"send prop value", []string{"send", "orders", "x", "--prop", "n=int16:x"}, "not a valid int16"},
		{"send bad ttl", []string{"send", "orders", "x", "--ttl", "soon"}, `invalid argument "soon" for "--ttl"`},
		{"send negative ttl", []string{"send", "orders", "x", "--ttl", "-1s"}, "negative"},
		{"send priority", []string{"send", "orders", "x", "--priority", "12"}, "want 0 to 9"},
		{"send negative priority", []string{"send", "orders", "x", "--priority", "-1"}, "want 0 to 9"},
		{"send prop key twice", []string{"send", "orders", "x", "--prop", "a=string:x", "--prop", "a=string:y"}, `key "a" is given twice`},
		{"sendfile negative ttl", []string{"sendfile", "f.txt", "orders", "--ttl", "-5s"}, "--ttl -5s: negative; leave it out"},
		{"sendfile negative priority", []string{"sendfile", "f.txt", "orders", "--priority", "-1"}, "want 0 to 9"},
		{"sendfile bad notify", []string{"sendfile", "f.txt", "orders", "--notify", "bad name!"}, `--notify "bad name!"`},
		{"send command without name", []string{"send", "orders", "x", "--kind", "command"}, "needs --command"},
		{"send command props on data", []string{"send", "orders", "x", "--reply-to", "r"}, "add --kind command"},
		{"send data props on command", []string{"send", "orders", "x", "--kind", "command", "--command", "c", "--encoding", "json"}, "for data messages"},
		{"recv without address", []string{"recv"}, "wants one address"},
		{"recv bad wait", []string{"recv", "orders", "--wait", "later"}, `invalid argument "later" for "--wait"`},
		{"recv zero count", []string{"recv", "orders", "--count", "0"}, "want 1 to 1000"},
		{"recv no-ack and nack", []string{"recv", "orders", "--no-ack", "--nack"}, "not both"},
		{"recv reason without nack", []string{"recv", "orders", "--reason", "x"}, "goes with --nack"},
		{"queues argument", []string{"queues", "orders"}, "takes no arguments"},
		{"purge without queue", []string{"purge"}, "wants one queue"},
		{"purge two queues", []string{"purge", "a", "b"}, "wants one queue"},
		{"dlq unknown", []string{"dlq", "drain"}, `unknown command "drain"`},
		{"dlq list without address", []string{"dlq", "list"}, "wants one address"},
		{"dlq replay bad count", []string{"dlq", "replay", "jobs", "--count", "-1"}, "want a count"},
		{"dlq list bad limit", []string{"dlq", "list", "jobs", "--limit", "x"}, `invalid argument "x" for "--limit"`},
		{"dlq purge bad address", []string{"dlq", "purge", "-x"}, "unknown shorthand flag"},
		{"two targets", []string{"queues", "--server", "127.0.0.1:1", "--data-dir", "d"}, "give one of --server, -c and --data-dir"},
		{"stat two targets", []string{"stat", "--server", "127.0.0.1:1", "-c", "x.yaml"}, "give one of --server, -c and --data-dir"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := runPetrel(t, 10*time.Second, tc.args...)
			r.wantCode(t, exitUsage)
			if !strings.Contains(r.stderr, tc.stderr) || !strings.Contains(r.stderr, "Usage:") {
				t.Errorf("stderr lacks %q and usage:\n%s", tc.stderr, r.stderr)
			}
			if r.stdout != "" {
				t.Errorf("stdout is not empty:\n%s", r.stdout)
			}
		})
	}
}

// TestPriorityHelpGivesOneDefault: --priority of send and sendfile gives
// its default once, the node's (4); it used to add "(default -1)", the
// value that meant "not given".
func TestPriorityHelpGivesOneDefault(t *testing.T) {
	for _, c := range []string{"send", "sendfile"} {
		r := runPetrel(t, 10*time.Second, c, "--help")
		r.wantCode(t, exitOK)
		var line string
		for l := range strings.Lines(r.stdout) {
			if strings.Contains(l, "--priority") && !strings.Contains(l, "petrel ") {
				line = l
			}
		}
		if !strings.Contains(line, "0 to 9 (default 4)") || strings.Count(line, "default") != 1 {
			t.Errorf("%s --help: --priority line %q; want one default, 4", c, line)
		}
	}
}

func TestCLIOperateHelpAndNoNode(t *testing.T) {
	for _, args := range [][]string{
		{"send", "--help"}, {"recv", "--help"}, {"queues", "--help"}, {"purge", "--help"},
		{"dlq"}, {"dlq", "list", "--help"}, {"dlq", "replay", "--help"}, {"dlq", "purge", "--help"},
	} {
		r := runPetrel(t, 10*time.Second, args...)
		r.wantCode(t, exitOK)
		if !strings.Contains(r.stdout, "Usage:") {
			t.Errorf("%q: no usage:\n%s", args, r.stdout)
		}
	}
	for _, args := range [][]string{
		{"queues", "--data-dir", t.TempDir()},
		{"send", "orders", "x", "--server", "127.0.0.1:1"},
	} {
		r := runPetrel(t, 10*time.Second, args...)
		r.wantCode(t, exitFailure)
		if !strings.Contains(r.stderr, "no node answers") {
			t.Errorf("%q: %s", args, r.stderr)
		}
	}
}
