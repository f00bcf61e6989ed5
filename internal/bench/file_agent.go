package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/pprof"
	"time"

	"github.com/petrelmq/petrel/message"
)

// The agents of `bench file`: sendfile runs node a, which sends one file;
// recvfile runs node b, which takes it from its receive queue. See
// agent.go for what agents print and how they end.
//
//	{"event":"sent",...}      sendfile: the Send call returned
//	{"event":"handed",...}    sendfile: the send queues are empty, the next hop has the file
//	{"event":"received",...}  recvfile: the file message was received and acked

// cpuProfileEnv names a file prefix: a file agent writes a CPU profile of
// its work to <prefix>.<node>.pprof.
const cpuProfileEnv = "PETREL_CPUPROFILE"

// sentFileEvent is printed once the Send call returned.
type sentFileEvent struct {
	Event string `json:"event"` // "sent"
	// StartNs is when Send was called, SentNs when it returned; Unix
	// nanoseconds.
	StartNs int64  `json:"start_ns"`
	SentNs  int64  `json:"sent_ns"`
	Size    int64  `json:"size"`
	SHA256  string `json:"sha256"`
}

// handedFileEvent is printed once every send queue of the node is empty
// and the file was handed over.
type handedFileEvent struct {
	Event     string  `json:"event"` // "handed"
	HandedNs  int64   `json:"handed_ns"`
	FileBytes int64   `json:"file_bytes"` // content bytes the next hop acked
	PeakRSSMB float64 `json:"peak_rss_mb"`
}

// receivedFileEvent is printed once the file message was received.
type receivedFileEvent struct {
	Event      string  `json:"event"` // "received"
	ReadyNs    int64   `json:"ready_ns"`
	ReceivedNs int64   `json:"received_ns"`
	Path       string  `json:"path"` // ReceivedFilePath
	Filename   string  `json:"filename"`
	Size       int64   `json:"size"`
	SHA256     string  `json:"sha256"` // as announced
	PeakRSSMB  float64 `json:"peak_rss_mb"`
}

// SendFileOptions are the flags of `bench agent sendfile`.
type SendFileOptions struct {
	To, File string
	// SHA256, when set, is given to Send as the file's checksum, which
	// then does not read the file.
	SHA256 string
}

// RunAgentSendFile runs `bench agent sendfile`: it opens the node, prints
// its ready line, sends o.File to o.To, prints the sent and handed events,
// and keeps the node open until stdin closes or a signal comes.
func RunAgentSendFile(ctx context.Context, open OpenFunc, o SendFileOptions, stdin io.Reader, stdout io.Writer) error {
	if o.To == "" || o.File == "" {
		return usageErrorf("sendfile needs --to address@node and --file path")
	}
	ctx, cancel := agentContext(ctx, stdin)
	defer cancel()
	a, err := openAgent(ctx, open, stdout)
	if err != nil {
		return err
	}
	stop, err := cpuProfile(a.node.Name())
	if err == nil {
		err = a.sendFile(ctx, o)
		if perr := stop(); err == nil {
			err = perr
		}
	}
	if err != nil {
		return a.close(interrupted(ctx, err))
	}
	<-ctx.Done()
	return a.close(nil)
}

func (a *agent) sendFile(ctx context.Context, o SendFileOptions) error {
	p := a.node.Producer()
	m := p.CreateFileMessage(o.To)
	m.File.SendFilePath = o.File
	m.File.FileChecksum = o.SHA256
	start := time.Now()
	if err := p.Send(ctx, m); err != nil {
		return fmt.Errorf("send %s: %w", o.File, err)
	}
	sent := time.Now()
	if err := a.event(sentFileEvent{Event: "sent", StartNs: start.UnixNano(), SentNs: sent.UnixNano(),
		Size: m.File.Filesize, SHA256: m.File.FileChecksum}); err != nil {
		return err
	}
	bytes, err := a.waitFileHanded(ctx)
	if err != nil {
		return err
	}
	return a.event(handedFileEvent{Event: "handed", HandedNs: time.Now().UnixNano(), FileBytes: bytes, PeakRSSMB: currentPeakRSS()})
}

// waitFileHanded polls the node's links until every send queue is empty
// and a file was handed over; it fails if a file was given up. It returns
// the content bytes the next hops acked.
func (a *agent) waitFileHanded(ctx context.Context) (int64, error) {
	t := time.NewTicker(5 * time.Millisecond)
	defer t.Stop()
	for {
		var depth, done, failed, bytes int64
		var lastErr string
		for _, l := range a.node.Links() {
			depth += l.Depth
			done += l.Files.Done
			failed += l.Files.Failed
			bytes += l.Files.Bytes
			for _, f := range l.Files.Active {
				if f.Error != "" {
					lastErr = f.Error
				}
			}
			if l.LastError != "" && lastErr == "" {
				lastErr = l.LastError
			}
		}
		if failed > 0 {
			return bytes, fmt.Errorf("the file was given up (see the node's log): %s", lastErr)
		}
		if depth == 0 && done > 0 {
			return bytes, nil
		}
		select {
		case <-ctx.Done():
			return bytes, fmt.Errorf("wait for the file to be handed over (last error: %q): %w", lastErr, ctx.Err())
		case <-t.C:
		}
	}
}

// RecvFileOptions are the flags of `bench agent recvfile`.
type RecvFileOptions struct {
	From string
}

// RunAgentRecvFile runs `bench agent recvfile`: it opens the node, prints
// its ready line, receives and acks one file message of o.From, prints the
// received event, and keeps the node open until stdin closes or a signal
// comes.
func RunAgentRecvFile(ctx context.Context, open OpenFunc, o RecvFileOptions, stdin io.Reader, stdout io.Writer) error {
	ctx, cancel := agentContext(ctx, stdin)
	defer cancel()
	a, err := openAgent(ctx, open, stdout)
	if err != nil {
		return err
	}
	stop, err := cpuProfile(a.node.Name())
	if err == nil {
		var ev receivedFileEvent
		ev, err = a.receiveFile(ctx, o.From)
		if perr := stop(); err == nil {
			err = perr
		}
		if err == nil {
			err = a.event(ev)
		}
	}
	if err != nil {
		return a.close(interrupted(ctx, err))
	}
	<-ctx.Done()
	return a.close(nil)
}

func (a *agent) receiveFile(ctx context.Context, from string) (receivedFileEvent, error) {
	ev := receivedFileEvent{Event: "received", ReadyNs: a.readyAt.UnixNano()}
	c, err := a.node.Consumer(from)
	if err != nil {
		return ev, err
	}
	d, err := c.Receive(ctx)
	if err != nil {
		return ev, fmt.Errorf("receive the file message: %w", err)
	}
	ev.ReceivedNs = time.Now().UnixNano()
	if d.Kind != message.KindFile {
		return ev, fmt.Errorf("received a %s message from %s, not a file message", d.Kind, from)
	}
	ev.Path, ev.Filename, ev.Size, ev.SHA256 = d.File.ReceivedFilePath, d.File.Filename, d.File.Filesize, d.File.FileChecksum
	if err := d.Ack(); err != nil {
		return ev, fmt.Errorf("ack the file message: %w", err)
	}
	ev.PeakRSSMB = currentPeakRSS()
	return ev, nil
}

// heapProfileEnv names a file prefix: a producing agent that waits for
// its send queues to drain writes a heap profile of what they still hold
// to <prefix>.<node>.heap.pprof, after a GC.
const heapProfileEnv = "PETREL_HEAPPROFILE"

// heapProfile writes the heap profile of heapProfileEnv, if set.
func heapProfile(node string) error {
	prefix := os.Getenv(heapProfileEnv)
	if prefix == "" {
		return nil
	}
	f, err := os.Create(prefix + "." + node + ".heap.pprof")
	if err != nil {
		return fmt.Errorf("%s: %w", heapProfileEnv, err)
	}
	runtime.GC()
	if err := pprof.WriteHeapProfile(f); err != nil {
		f.Close()
		return fmt.Errorf("%s: %w", heapProfileEnv, err)
	}
	return f.Close()
}

// CPUProfile starts a CPU profile to <$PETREL_CPUPROFILE>.<node>.pprof
// when the variable is set, and returns what stops it. `petrel node` uses
// it too, so that a bench's relay can be profiled beside its agents.
func CPUProfile(node string) (func() error, error) { return cpuProfile(node) }

// cpuProfile starts a CPU profile to <$PETREL_CPUPROFILE>.<node>.pprof
// when the variable is set, and returns what stops it.
func cpuProfile(node string) (func() error, error) {
	prefix := os.Getenv(cpuProfileEnv)
	if prefix == "" {
		return func() error { return nil }, nil
	}
	f, err := os.Create(prefix + "." + node + ".pprof")
	if err != nil {
		return nil, fmt.Errorf("%s: %w", cpuProfileEnv, err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("%s: %w", cpuProfileEnv, err)
	}
	return func() error {
		pprof.StopCPUProfile()
		return errors.Join(f.Sync(), f.Close())
	}, nil
}
