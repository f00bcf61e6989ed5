package nodeproc

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Proc is one child process of a multi-process bench or test: a node run
// by `petrel node` or `petrel bench agent`. Its stdout is kept line by line
// for the caller to wait on; its stderr goes to a file, whose tail errors
// quote.
//
// Its stdin is a pipe the parent holds: agents stop when it closes, and so
// when the parent dies. On Linux the child also gets SIGKILL when the
// parent dies (see setParentDeathSignal), which covers `petrel node`.
type Proc struct {
	name    string
	cmd     *exec.Cmd
	stdin   *os.File
	errPath string

	mu     sync.Mutex
	lines  []string
	eof    bool
	notify chan struct{} // closed and replaced when lines grow or stdout ends

	exited chan struct{} // closed once the process was waited for
}

// Start starts exe with args. The process is killed when ctx ends.
// Its stderr is appended to errPath.
func Start(ctx context.Context, name, exe, errPath string, args ...string) (*Proc, error) {
	cmd := exec.CommandContext(ctx, exe, args...)
	setParentDeathSignal(cmd)
	p := &Proc{name: name, cmd: cmd, errPath: errPath, notify: make(chan struct{}), exited: make(chan struct{})}
	var files []*os.File // the child's ends, closed here once it has them
	defer func() {
		for _, f := range files {
			f.Close()
		}
	}()
	inR, inW, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	files = append(files, inR)
	outR, outW, err := os.Pipe()
	if err != nil {
		inW.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	files = append(files, outW)
	errF, err := os.OpenFile(errPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		inW.Close()
		outR.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	files = append(files, errF)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = inR, outW, errF
	if err := p.start(); err != nil {
		inW.Close()
		outR.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p.stdin = inW
	readDone := make(chan struct{})
	go func() {
		defer close(readDone)
		p.readLines(outR)
	}()
	go func() {
		// Wait only after stdout ended: the process is gone by then, and
		// every line it wrote has been read.
		<-readDone
		cmd.Wait()
		close(p.exited)
	}()
	return p, nil
}

// start starts the command from a goroutine locked to its OS thread, which
// stays locked until the child exits. The parent-death signal fires when
// the thread that forked the child ends, not the process, and the runtime
// ends a thread when a goroutine that locked it returns without unlocking
// (golang/go#27505): holding the thread keeps every other goroutine, and
// so that fate, off it.
func (p *Proc) start() error {
	started := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		err := p.cmd.Start()
		started <- err
		if err == nil {
			<-p.exited
		}
		runtime.UnlockOSThread()
	}()
	return <-started
}

func (p *Proc) readLines(r *os.File) {
	defer r.Close()
	br := bufio.NewReaderSize(r, 64<<10)
	for {
		s, err := br.ReadString('\n')
		p.mu.Lock()
		if err == nil {
			p.lines = append(p.lines, strings.TrimSuffix(s, "\n"))
		} else {
			// A piece without its newline is a line cut short by a kill: a
			// line that was never printed whole was never printed.
			p.eof = true
		}
		close(p.notify)
		p.notify = make(chan struct{})
		p.mu.Unlock()
		if err != nil {
			return
		}
	}
}

// Pid returns the process id.
func (p *Proc) Pid() int { return p.cmd.Process.Pid }

// Exited is closed once the process was waited for.
func (p *Proc) Exited() <-chan struct{} { return p.exited }

// Lines returns a copy of the lines printed so far.
func (p *Proc) Lines() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.lines...)
}

// WaitLine returns the index and text of the first line at or after from
// that match accepts. It fails if the process ends first or ctx ends.
func (p *Proc) WaitLine(ctx context.Context, from int, what string, match func(string) bool) (int, string, error) {
	for {
		p.mu.Lock()
		for i := from; i < len(p.lines); i++ {
			if match(p.lines[i]) {
				line := p.lines[i]
				p.mu.Unlock()
				return i, line, nil
			}
		}
		from = len(p.lines)
		eof, ch := p.eof, p.notify
		p.mu.Unlock()
		if eof {
			return 0, "", p.ExitError("ended before " + what)
		}
		select {
		case <-ch:
		case <-ctx.Done():
			if cause := context.Cause(ctx); cause != ctx.Err() {
				return 0, "", fmt.Errorf("%s: no %s: %w", p.name, what, cause) // another node's end, say
			}
			return 0, "", fmt.Errorf("%s: no %s: %w%s", p.name, what, ctx.Err(), p.stderrNote())
		}
	}
}

// WaitReady waits for the ready line.
func (p *Proc) WaitReady(ctx context.Context) (ReadyInfo, error) {
	_, line, err := p.WaitLine(ctx, 0, "ready line", func(s string) bool { return strings.HasPrefix(s, "ready ") })
	if err != nil {
		return ReadyInfo{}, err
	}
	kv, err := ParseReady(line)
	if err != nil {
		return ReadyInfo{}, fmt.Errorf("%s: %w", p.name, err)
	}
	return ReadyInfo{Node: kv["node"], ID: kv["id"], DataDir: kv["data_dir"], Listen: kv["listen"], MQTT: kv["mqtt"]}, nil
}

// WaitEvent waits for the JSON event line {"event":name,...} and decodes
// it into v.
func (p *Proc) WaitEvent(ctx context.Context, name string, v any) error {
	_, line, err := p.WaitLine(ctx, 0, name+" event", func(s string) bool {
		if !strings.HasPrefix(s, "{") {
			return false
		}
		var ev struct{ Event string }
		return json.Unmarshal([]byte(s), &ev) == nil && ev.Event == name
	})
	if err != nil {
		return err
	}
	return json.Unmarshal([]byte(line), v)
}

// Running reports whether the process has not been waited for yet.
func (p *Proc) Running() bool {
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

// Stop asks the process to stop, by sending SIGTERM and closing its stdin,
// and waits up to grace before killing it. It returns an error unless the
// process exited 0 in time, or had already exited 0.
//
// The signal goes first. A bench agent stops on either; closed stdin
// first, an agent could finish its stop and let go of its signal handler
// before the signal came, and then die of it: "stopped badly: signal:
// terminated", seen under a loaded CI machine.
func (p *Proc) Stop(grace time.Duration) error { return p.StopWith(syscall.SIGTERM, grace) }

// StopWith is Stop with another signal than SIGTERM, for a program that
// exits 0 only on that one (nats-server exits 1 on SIGTERM, 0 on SIGINT).
func (p *Proc) StopWith(sig os.Signal, grace time.Duration) error {
	if p.Running() {
		p.cmd.Process.Signal(sig)
		p.stdin.Close()
		t := time.NewTimer(grace)
		defer t.Stop()
		select {
		case <-p.exited:
		case <-t.C:
			p.Kill()
			return fmt.Errorf("%s %w: not within %v of %v; killed%s", p.name, ErrStopTimeout, grace, sig, p.stderrNote())
		}
	}
	if !p.cmd.ProcessState.Success() {
		return p.ExitError("stopped badly")
	}
	return nil
}

// Kill sends SIGKILL and waits for the process to be gone.
func (p *Proc) Kill() {
	p.cmd.Process.Kill()
	<-p.exited
	p.stdin.Close()
}

// ExitError describes how the process ended, with its stderr's tail.
func (p *Proc) ExitError(what string) error {
	select {
	case <-p.exited:
		return fmt.Errorf("%s %s: %v%s", p.name, what, p.cmd.ProcessState, p.stderrNote())
	case <-time.After(5 * time.Second):
		return fmt.Errorf("%s %s (stdout closed, still running)%s", p.name, what, p.stderrNote())
	}
}

// stderrNote is the tail of the process's stderr, to append to an error.
func (p *Proc) stderrNote() string {
	tail := fileTail(p.errPath, 2048)
	if tail == "" {
		return ""
	}
	return fmt.Sprintf("\n--- %s stderr (%s), last lines:\n%s", p.name, p.errPath, tail)
}

// fileTail returns up to n bytes from the end of the file at path.
func fileTail(path string, n int64) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	if st, err := f.Stat(); err == nil && st.Size() > n {
		f.Seek(st.Size()-n, io.SeekStart)
	}
	b, _ := io.ReadAll(f)
	return strings.TrimRight(string(b), "\n")
}

// StartRetryingPort calls start, which starts a node that listens on a
// port, again while the node fails because its port is taken, up to tries
// times. The node's stderr is the only place that says so, hence the text
// match.
func StartRetryingPort(ctx context.Context, tries int, start func() (*Proc, ReadyInfo, error)) (*Proc, ReadyInfo, error) {
	for i := 1; ; i++ {
		p, info, err := start()
		if err == nil || i >= tries || !strings.Contains(err.Error(), "address already in use") {
			return p, info, err
		}
		select {
		case <-ctx.Done():
			return nil, ReadyInfo{}, err
		case <-time.After(time.Duration(i) * 100 * time.Millisecond):
		}
	}
}

// ErrStopTimeout is returned, wrapped, by Stop when the process had to be
// killed.
var ErrStopTimeout = errors.New("did not stop in time")

// StopAll stops every process at once, each with grace, and joins their
// errors.
func StopAll(grace time.Duration, ps ...*Proc) error {
	return errors.Join(StopEach(grace, ps...)...)
}

// StopEach stops every process at once, each with grace, and returns
// their errors, in the order of ps.
func StopEach(grace time.Duration, ps ...*Proc) []error {
	errs := make([]error, len(ps))
	var wg sync.WaitGroup
	for i, p := range ps {
		if p == nil {
			continue
		}
		wg.Go(func() { errs[i] = p.Stop(grace) })
	}
	wg.Wait()
	return errs
}
