package bench

import (
	"context"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/petrelmq/petrel/internal/nodeproc"
)

// NATSServer is one run of nats-server with JetStream on, the broker the
// client and local benches measure Petrel against with --against-nats. It
// is a child process, killed when the context it was started with ends.
type NATSServer struct {
	proc *nodeproc.Proc
	addr string
}

// DefaultNATS is where Debian's nats-server package installs the server;
// it is tried when no nats-server is on PATH (/usr/sbin is not on every
// user's).
const DefaultNATS = "/usr/sbin/nats-server"

// FindNATS returns the nats-server binary to run: path if given, else the
// one on PATH, else DefaultNATS.
func FindNATS(path string) (string, error) {
	return findProgram(path, "nats-server", DefaultNATS, "--nats")
}

// StartNATS runs the nats-server binary exe with JetStream on and its
// store in dir, listening on a free port of 127.0.0.1, and returns once it
// accepts connections. It tries other ports while one turns out taken.
//
// The server runs with JetStream's defaults, as a production server runs
// unless told otherwise: its file store hands each message to the OS and
// fsyncs on a timer (sync_interval, 2 minutes by default), not per
// message as Petrel's sync full does.
func StartNATS(ctx context.Context, exe, dir string) (*NATSServer, error) {
	p, addr, err := startServer(ctx, "nats-server", dir, func(port int) (*nodeproc.Proc, error) {
		return nodeproc.Start(ctx, "nats-server", exe, filepath.Join(dir, "nats-server.stderr"),
			"-a", "127.0.0.1", "-p", strconv.Itoa(port), "-js", "-sd", dir)
	})
	if err != nil {
		return nil, err
	}
	return &NATSServer{proc: p, addr: addr}, nil
}

// URL is the server's address as nats.Connect takes it.
func (s *NATSServer) URL() string { return "nats://" + s.addr }

// Pid is the server's process id.
func (s *NATSServer) Pid() int { return s.proc.Pid() }

// PeakRSSMB is the server's peak resident set size so far (VmHWM).
func (s *NATSServer) PeakRSSMB() (float64, error) { return s.proc.PeakRSSMB() }

// Stop stops the server with SIGINT, on which it shuts down and exits 0
// (on SIGTERM it exits 1), and fails unless it exits 0 in time.
func (s *NATSServer) Stop() error { return s.proc.StopWith(syscall.SIGINT, stopGrace) }

// natsVersion is `nats-server --version`, "nats-server: v2.9.10"; "" if it
// cannot be had.
func natsVersion(ctx context.Context, exe string) string {
	out, err := exec.CommandContext(ctx, exe, "--version").Output()
	if err != nil {
		return ""
	}
	line, _, _ := strings.Cut(string(out), "\n")
	return strings.TrimSpace(line)
}
