package bench

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"time"

	"github.com/petrelmq/petrel/internal/nodeproc"
)

// Mosquitto is one run of Eclipse Mosquitto, the broker the MQTT bench
// measures Petrel against, with persistence on. It is a child process,
// killed when the context it was started with ends.
type Mosquitto struct {
	proc *nodeproc.Proc
	addr string
}

// DefaultMosquitto is where Debian's package installs the broker; it is
// tried when no mosquitto is on PATH (/usr/sbin is not on every user's).
const DefaultMosquitto = "/usr/sbin/mosquitto"

// FindMosquitto returns the mosquitto binary to run: path if given, else
// the one on PATH, else DefaultMosquitto.
func FindMosquitto(path string) (string, error) {
	return findProgram(path, "mosquitto", DefaultMosquitto, "--mosquitto")
}

// findProgram returns the program to run: path if given, else name on
// PATH, else fallback (where Debian's package puts it), and names flag in
// the error when there is none.
func findProgram(path, name, fallback, flag string) (string, error) {
	if path != "" {
		return exec.LookPath(path)
	}
	if p, err := exec.LookPath(name); err == nil {
		return p, nil
	}
	if _, err := os.Stat(fallback); err != nil {
		return "", fmt.Errorf("no %s on PATH nor at %s: install the %s package, or name it with %s", name, fallback, name, flag)
	}
	return fallback, nil
}

// mosquittoConf is the broker's configuration: persistence on, as a
// production broker runs; one listener on loopback; anonymous clients.
// max_queued_messages 0 lifts the default cap of 1000 QoS 1 messages
// queued per client, past which mosquitto drops messages for a subscriber
// that lags: the bench counts every copy and must not wait for dropped
// ones. As root, mosquitto would drop its privileges to the mosquitto
// user, which may not write the temporary persistence folder.
func mosquittoConf(dir string, port int) string {
	conf := fmt.Sprintf("persistence true\npersistence_location %s/\nlistener %d 127.0.0.1\nallow_anonymous true\n"+
		"max_queued_messages 0\nlog_dest stderr\nlog_type error\nlog_type warning\n", dir, port)
	if os.Geteuid() == 0 {
		conf += "user root\n"
	}
	return conf
}

// StartMosquitto runs the mosquitto binary exe with a configuration and
// persistence folder in dir, listening on a free port of 127.0.0.1, and
// returns once it accepts connections. It tries other ports while one
// turns out taken.
func StartMosquitto(ctx context.Context, exe, dir string) (*Mosquitto, error) {
	p, addr, err := startServer(ctx, "mosquitto", dir, func(port int) (*nodeproc.Proc, error) {
		conf := filepath.Join(dir, "mosquitto.conf")
		if err := os.WriteFile(conf, []byte(mosquittoConf(dir, port)), 0o644); err != nil {
			return nil, fmt.Errorf("write mosquitto configuration: %w", err)
		}
		return nodeproc.Start(ctx, "mosquitto", exe, filepath.Join(dir, "mosquitto.stderr"), "-c", conf)
	})
	if err != nil {
		return nil, err
	}
	return &Mosquitto{proc: p, addr: addr}, nil
}

// startServer makes dir and starts a broker named name with start, on a
// free port of 127.0.0.1, and returns once it accepts connections on it;
// it tries other ports while one turns out taken.
func startServer(ctx context.Context, name, dir string, start func(port int) (*nodeproc.Proc, error)) (*nodeproc.Proc, string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, "", fmt.Errorf("%s folder: %w", name, err)
	}
	var errs []error
	for range 5 {
		p, addr, err := startServerOnce(ctx, name, start)
		if err == nil {
			return p, addr, nil
		}
		if ctx.Err() != nil {
			return nil, "", err
		}
		errs = append(errs, err)
	}
	return nil, "", fmt.Errorf("start %s: %w", name, errors.Join(errs...))
}

func startServerOnce(ctx context.Context, name string, start func(port int) (*nodeproc.Proc, error)) (*nodeproc.Proc, string, error) {
	port, err := nodeproc.FreePort()
	if err != nil {
		return nil, "", err
	}
	p, err := start(port)
	if err != nil {
		return nil, "", err
	}
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	if err := waitListening(ctx, p, name, addr); err != nil {
		p.Kill()
		return nil, "", err
	}
	return p, addr, nil
}

// waitListening polls p's TCP port at addr until a connection is
// accepted, for up to readyTimeout: mosquitto prints no ready line, and
// nats-server opens its client port only once JetStream is up. name
// names the program in errors.
func waitListening(ctx context.Context, p *nodeproc.Proc, name, addr string) error {
	ctx, cancel := context.WithTimeout(ctx, readyTimeout)
	defer cancel()
	var d net.Dialer
	for {
		if !p.Running() {
			return p.ExitError("ended before it listened")
		}
		c, err := d.DialContext(ctx, "tcp", addr)
		if err == nil {
			c.Close()
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s: not listening on %s: %w", name, addr, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// URL is the broker's address as the bench's --broker flag spells it.
func (m *Mosquitto) URL() string { return "tcp://" + m.addr }

// Pid is the broker's process id.
func (m *Mosquitto) Pid() int { return m.proc.Pid() }

// Stop stops the broker with SIGTERM (it then writes its persistence
// file) and fails unless it exits 0 in time.
func (m *Mosquitto) Stop() error { return m.proc.Stop(stopGrace) }
