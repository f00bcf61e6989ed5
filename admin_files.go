package petrel

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/petrelmq/petrel/filetransfer"
	"github.com/petrelmq/petrel/internal/adminapi"
	"github.com/petrelmq/petrel/message"
	"github.com/petrelmq/petrel/queue"
)

// fileOutcomes remembers how the last files sent from this node ended,
// for fileProgress: a bounded record, oldest dropped first.
type fileOutcomes struct {
	mu    sync.Mutex
	m     map[uint64]adminapi.FileProgress
	at    map[uint64]time.Time // when each ended, for the console
	order []uint64
	// queued holds, for queuedFor, when each file message last found in
	// a send queue (fileQueued) was found: `petrel sendfile` asks ten
	// times a second about a file that waits, and each look reads the
	// send queues.
	queued map[uint64]time.Time
}

// queuedFor is how long a file message found in a send queue is taken to
// be there still, without a look. A file that leaves its queue by its
// transfer has its outcome recorded first, which fileProgress reads
// before this; one purged or expired meanwhile is reported waiting for at
// most queuedFor more.
const queuedFor = 5 * time.Second

// seenQueued reports whether id was found in a send queue within queuedFor.
func (o *fileOutcomes) seenQueued(id uint64, now time.Time) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	at, ok := o.queued[id]
	return ok && now.Sub(at) < queuedFor
}

// noteQueued records that id was found in a send queue at now. The map
// holds at most maxOutcomes ids: past it, those not seen within queuedFor
// are dropped, then, if need be, all.
func (o *fileOutcomes) noteQueued(id uint64, now time.Time) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.queued == nil {
		o.queued = map[uint64]time.Time{}
	}
	if len(o.queued) >= maxOutcomes {
		for k, at := range o.queued {
			if now.Sub(at) >= queuedFor {
				delete(o.queued, k)
			}
		}
		if len(o.queued) >= maxOutcomes {
			clear(o.queued)
		}
	}
	o.queued[id] = now
}

const maxOutcomes = 1024

func (o *fileOutcomes) record(p adminapi.FileProgress) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.m == nil {
		o.m = map[uint64]adminapi.FileProgress{}
		o.at = map[uint64]time.Time{}
	}
	if _, ok := o.m[p.ID]; !ok {
		o.order = append(o.order, p.ID)
	}
	o.m[p.ID] = p
	o.at[p.ID] = time.Now()
	if len(o.order) > maxOutcomes {
		delete(o.m, o.order[0])
		delete(o.at, o.order[0])
		o.order = o.order[1:]
	}
}

func (o *fileOutcomes) get(id uint64) (adminapi.FileProgress, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	p, ok := o.m[id]
	return p, ok
}

// recordOutcome notes how the file message m ended on this node.
func (n *Node) recordOutcome(m *message.Message, state filetransfer.State, err error) {
	p := adminapi.FileProgress{ID: m.ID, Filename: m.File.Filename, Size: m.File.Filesize, State: state}
	if err != nil {
		p.State, p.Error = filetransfer.StateFailed, err.Error()
	} else {
		p.Acked = m.File.Filesize
	}
	// The next hop: the center, from the origin of a relayed file, else
	// the destination.
	if c := m.File.CenterIdentifier; c != "" && c != n.cfg.Name {
		p.NextHop = c
	} else if state != filetransfer.StateDelivered {
		p.NextHop = m.File.DestIdentifier
	}
	n.outcomes.record(p)
}

// fileProgress returns where the file message id, sent from this node,
// stands: how it ended, if it ended since the node started, else how its
// transfer goes, else waiting, if it is in a send queue (queued, or
// leased while its link is down). An id that is none of these is not
// found (false): an unknown id, or a file that ended before the node
// restarted, since outcomes are kept in memory only.
func (n *Node) fileProgress(ctx context.Context, id uint64) (adminapi.FileProgress, bool, error) {
	if p, ok := n.outcomes.get(id); ok {
		return p, true, nil
	}
	for _, l := range n.Links() {
		for _, f := range l.Files.Active {
			if f.ID == id {
				return adminapi.FileProgress{ID: id, Filename: f.Filename, Size: f.Size, Acked: f.Acked,
					State: f.State, Error: f.Error, NextHop: l.NextHop}, true, nil
			}
		}
	}
	now := time.Now()
	queued := n.outcomes.seenQueued(id, now)
	if !queued {
		var err error
		if queued, err = n.fileQueued(ctx, id); err != nil {
			return adminapi.FileProgress{}, false, err
		}
		if queued {
			n.outcomes.noteQueued(id, now)
		}
	}
	if queued {
		return adminapi.FileProgress{ID: id, State: filetransfer.StateWaiting}, true, nil
	}
	// A sender records the outcome before it acks the file message: one
	// that ended while the queues were read is recorded by now.
	p, ok := n.outcomes.get(id)
	return p, ok, nil
}

// fileQueued reports whether a send queue holds the file message id that
// this node sent. It reads the send queues a page at a time, so it costs
// as much as they hold: fileProgress asks only for a file that neither
// ended nor moves. The origin is compared too: a relay's send queues hold
// other nodes' files, whose ids may be the same.
func (n *Node) fileQueued(ctx context.Context, id uint64) (bool, error) {
	found := false
	for _, q := range n.store.Queues() {
		if q.Kind() != queue.KindSend {
			continue
		}
		err := q.Each(ctx, func(r queue.Browsed) bool {
			m, err := message.Peek(r.Data, message.Limits{})
			found = err == nil && m.ID == id && m.Kind == message.KindFile && m.Origin == n.id
			return !found
		})
		if err != nil {
			return false, fmt.Errorf("look for file message %d: %w", id, err)
		}
		if found {
			return true, nil
		}
	}
	return false, nil
}

// handleSendFile serves POST /api/files in scope. Over the unix socket it
// sends any file the node's user can read: whoever reaches the socket is
// that user. Over TCP it sends only files under scope.fileRoots
// (admin.file_roots), and none when there are none: 403 (see
// fileUnderRoots).
func (s *adminServer) handleSendFile(scope adminScope) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var req adminapi.SendFileRequest
		if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<20)).Decode(&req); err != nil {
			writeJSONError(w, http.StatusBadRequest, "bad request body: "+err.Error())
			return
		}
		if req.Path == "" || req.To == "" {
			writeJSONError(w, http.StatusBadRequest, "path and to are required")
			return
		}
		if scope.tcp {
			path, code, err := fileUnderRoots(req.Path, scope.fileRoots)
			if err != nil {
				if code == http.StatusForbidden {
					s.refused.WithLabelValues(refusedFileRoot).Inc()
				}
				writeJSONError(w, code, err.Error())
				return
			}
			req.Path = path
		}
		m, err := s.sendFile(r.Context(), req)
		if err != nil {
			code := http.StatusBadRequest
			if errors.Is(err, ErrClosed) {
				code = http.StatusServiceUnavailable
			}
			writeJSONError(w, code, err.Error())
			return
		}
		writeJSON(w, adminapi.SendFileResponse{ID: m.ID, Filename: m.File.Filename, Size: m.File.Filesize,
			SHA256: m.File.FileChecksum, Destination: m.Destination, Center: m.File.CenterIdentifier})
	}
}

// sendFile sends the file req names, whose path is checked, and returns
// its message once it is stored.
func (s *adminServer) sendFile(ctx context.Context, req adminapi.SendFileRequest) (*message.Message, error) {
	p := s.node.Producer() // Send refuses a notify address that is not one (checkNotify)
	m := p.CreateFileMessage(req.To)
	m.File.SendFilePath, m.File.Filename, m.TTL = req.Path, req.Filename, req.TTL
	if req.Priority != nil {
		m.Priority = *req.Priority
	}
	if req.Notify != "" {
		m.Properties.Set(PropNotify, message.String(req.Notify))
	}
	return m, p.Send(ctx, m)
}

// handleFileProgress serves GET /api/files/{id}.
func (s *adminServer) handleFileProgress(w http.ResponseWriter, r *http.Request) {
	id, err := strconv.ParseUint(r.PathValue(adminapi.ParamID), 10, 64)
	if err != nil {
		writeJSONError(w, http.StatusBadRequest, "file id must be a message id (an unsigned integer)")
		return
	}
	p, ok, err := s.node.fileProgress(r.Context(), id)
	switch {
	case err != nil:
		writeAPIError(w, err)
	case !ok:
		writeJSONError(w, http.StatusNotFound, fmt.Sprintf(
			"no file message %d here: not in a send queue, and no outcome recorded since the node started", id))
	default:
		writeJSON(w, p)
	}
}

// fileUnderRoots returns path with its symbolic links resolved if it is
// a file under one of roots, also resolved; else the status and reason of
// the refusal. The cleaned path is checked before the disk is touched, so
// that a refusal says nothing of what exists outside the roots; the
// resolved one after, so that a link cannot lead out of them. A root
// that users other than the node's may write to can still swap a link
// between the check and the read: roots are meant for the node's own.
func fileUnderRoots(path string, roots []string) (string, int, error) {
	if len(roots) == 0 {
		return "", http.StatusForbidden, errors.New("this admin listener sends no files from the node's disk: " +
			"list the directories it may read in admin.file_roots, or use the node's unix socket")
	}
	if !filepath.IsAbs(path) {
		return "", http.StatusBadRequest, fmt.Errorf("path %q is not absolute", path)
	}
	outside := fmt.Errorf("%s is outside admin.file_roots: this admin listener sends only files under them", path)
	path = filepath.Clean(path)
	if !underAny(path, roots, filepath.Clean) {
		return "", http.StatusForbidden, outside
	}
	real, err := filepath.EvalSymlinks(path)
	if err != nil {
		return "", http.StatusBadRequest, fmt.Errorf("resolve the path: %w", err)
	}
	resolve := func(root string) string {
		if r, err := filepath.EvalSymlinks(root); err == nil {
			return r
		}
		return filepath.Clean(root)
	}
	if !underAny(real, roots, resolve) {
		return "", http.StatusForbidden, outside
	}
	return real, 0, nil
}

// underAny reports whether path is in one of roots (or is one), each
// root passed through norm first.
func underAny(path string, roots []string, norm func(string) string) bool {
	for _, root := range roots {
		rel, err := filepath.Rel(norm(root), path)
		if err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
			return true
		}
	}
	return false
}
