package petrel_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/petrelmq/petrel"
	"github.com/petrelmq/petrel/filetransfer"
	"github.com/petrelmq/petrel/internal/adminapi"
	"github.com/petrelmq/petrel/internal/petreltest/nodes"
	"github.com/petrelmq/petrel/message"
)

// fileProgress asks n's admin API where the file message id stands, and
// returns the answer's status, the progress (on 200) and the error (else).
func fileProgress(t *testing.T, n *petrel.Node, id uint64) (int, adminapi.FileProgress, string) {
	t.Helper()
	var p adminapi.FileProgress
	code, raw := apiCall(t, n, "GET", adminapi.FilePath(id), nil, &p)
	var e adminapi.ErrorResponse
	if code != http.StatusOK {
		if err := json.Unmarshal([]byte(raw), &e); err != nil {
			t.Fatalf("GET %s: %d %s", adminapi.FilePath(id), code, raw)
		}
	}
	return code, p, e.Error
}

// wantNoFile checks that n answers 404 for the file message id, naming it.
func wantNoFile(t *testing.T, n *petrel.Node, id uint64) {
	t.Helper()
	code, p, why := fileProgress(t, n, id)
	want := fmt.Sprintf("no file message %d here", id)
	if code != http.StatusNotFound || !strings.Contains(why, want) || !strings.Contains(why, "since the node started") {
		t.Fatalf("GET %s: %d %+v %q; want 404 saying %q", adminapi.FilePath(id), code, p, why, want)
	}
}

// TestAdminFileProgressOfAnUnknownFile: GET /api/files/{id} answers 404
// for an id the node knows nothing of, where it used to answer "waiting"
// for ever. A file waiting in its send queue is found there, also after a
// restart; one that ended is known by its outcome until the node restarts,
// and unknown after.
func TestAdminFileProgressOfAnUnknownFile(t *testing.T) {
	files := t.TempDir()
	cfg := petrel.Config{Name: "a", DataDir: t.TempDir(), Logger: quiet, Link: nodes.FastLinks,
		// b never answers: a file for it waits in its send queue.
		Nodes: []petrel.NodeConfig{{Name: "b", Connector: "tcp://127.0.0.1:1"}},
		Admin: petrel.AdminConfig{Listen: "127.0.0.1:0", FileRoots: []string{files}}}
	a, err := petrel.Open(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { a.Close() }()
	wantNoFile(t, a, 12345)

	waiting, _ := writeRandom(t, files, "waiting.bin", 100000)
	here, _ := writeRandom(t, files, "here.bin", 1000)
	var toB, toA adminapi.SendFileResponse
	mustAPI(t, a, "POST", adminapi.PathFiles, adminapi.SendFileRequest{Path: waiting, To: "files@b"}, &toB)
	mustAPI(t, a, "POST", adminapi.PathFiles, adminapi.SendFileRequest{Path: here, To: "files"}, &toA)
	if code, p, why := fileProgress(t, a, toB.ID); code != http.StatusOK || p.State != filetransfer.StateWaiting {
		t.Fatalf("file waiting for b: %d %+v %q", code, p, why)
	}
	if code, p, why := fileProgress(t, a, toA.ID); code != http.StatusOK || p.State != filetransfer.StateDelivered {
		t.Fatalf("file delivered here: %d %+v %q", code, p, why)
	}
	wantNoFile(t, a, toB.ID+toA.ID) // an id of no file

	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if a, err = petrel.Open(context.Background(), cfg); err != nil {
		t.Fatal(err)
	}
	if code, p, why := fileProgress(t, a, toB.ID); code != http.StatusOK || p.State != filetransfer.StateWaiting {
		t.Fatalf("file waiting for b, after a restart: %d %+v %q", code, p, why)
	}
	// Delivered before the restart: its outcome went with it.
	wantNoFile(t, a, toA.ID)
}

// TestAdminSendFileRefusesAnInvalidNotifyAddress: POST /api/files with a
// notify address that is not one is refused with the reason, and nothing
// is sent. Before, the file went and the notice was dropped when it was
// due, with only a line in the node's log.
func TestAdminSendFileRefusesAnInvalidNotifyAddress(t *testing.T) {
	files := t.TempDir()
	cfg := petrel.Config{Name: "a", DataDir: t.TempDir(), Logger: quiet,
		Admin: petrel.AdminConfig{Listen: "127.0.0.1:0", FileRoots: []string{files}}}
	a, err := petrel.Open(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	path, _ := writeRandom(t, files, "f.bin", 100)
	code, raw := apiCall(t, a, "POST", adminapi.PathFiles, adminapi.SendFileRequest{Path: path, To: "files", Notify: "bad name!"}, nil)
	if code != http.StatusBadRequest || !strings.Contains(raw, `notify \"bad name!\"`) {
		t.Fatalf("POST %s with notify \"bad name!\": %d %s; want 400 naming the notify address", adminapi.PathFiles, code, raw)
	}
	for _, q := range a.QueueStats() {
		if q.Name == "files" && q.Depth != 0 {
			t.Fatalf("files holds %d messages; want none sent", q.Depth)
		}
	}
}

// TestSendFileRefusesAnInvalidNotifyAddress: through the Go API too, a
// file whose notify property is no address is refused at Send, wrapping
// message.ErrDestination, and nothing is stored; its notice would
// otherwise be lost once the file had gone.
func TestSendFileRefusesAnInvalidNotifyAddress(t *testing.T) {
	files := t.TempDir()
	a, err := petrel.Open(context.Background(), petrel.Config{Name: "a", DataDir: t.TempDir(), Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	path, _ := writeRandom(t, files, "f.bin", 100)
	p := a.Producer()
	m := p.CreateFileMessage("files")
	m.File.SendFilePath = path
	m.Properties.Set(petrel.PropNotify, message.String("bad name!"))
	if err := p.Send(context.Background(), m); !errors.Is(err, message.ErrDestination) || !strings.Contains(err.Error(), `notify "bad name!"`) {
		t.Fatalf("Send with notify \"bad name!\": %v; want ErrDestination naming the notify address", err)
	}
	for _, q := range a.QueueStats() {
		if q.Name == "files" && q.Depth != 0 {
			t.Fatalf("files holds %d messages; want none sent", q.Depth)
		}
	}
}
