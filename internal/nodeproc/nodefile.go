package nodeproc

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gofrs/flock"
)

// NodeFile is the configuration file of one node of a multi-process bench
// or test, written in the YAML schema of conf/example.yaml.
type NodeFile struct {
	Name, DataDir string
	// Listen is host:port; "" for a node that accepts no links.
	Listen string
	// Sync is the store's sync mode, "" for the default.
	Sync string
	// Nodes are the neighbours, name -> connector, in order.
	Nodes [][2]string
	// Routes are node -> via, in order.
	Routes [][2]string
	// Receive and Relay name the addresses of those roles.
	Receive, Relay []string
	// ReconnectMin and ReconnectMax bound the senders' backoff, 0 for the
	// defaults (100ms, 30s). Benches and tests set them low, so that a
	// node coming back is found at once, not up to 30s later.
	ReconnectMin, ReconnectMax time.Duration
	// Window is link.window, the Data packets a session may have
	// unacknowledged; 0 for the default.
	Window int
	// Extra is YAML appended as is: sections the fields above do not cover.
	Extra string
}

// YAML renders the file. Strings are double-quoted: YAML reads Go's
// escapes of printable text the same way.
func (f NodeFile) YAML() string {
	var b strings.Builder
	q := strconv.Quote
	fmt.Fprintf(&b, "node:\n  name: %s\n  data_dir: %s\n", q(f.Name), q(f.DataDir))
	if f.Listen != "" {
		fmt.Fprintf(&b, "listen: %s\n", q(f.Listen))
	}
	if len(f.Nodes) > 0 {
		b.WriteString("nodes:\n")
		for _, n := range f.Nodes {
			fmt.Fprintf(&b, "  - name: %s\n    connector: %s\n", q(n[0]), q(n[1]))
		}
	}
	if len(f.Routes) > 0 {
		b.WriteString("routes:\n")
		for _, r := range f.Routes {
			fmt.Fprintf(&b, "  - node: %s\n    via: %s\n", q(r[0]), q(r[1]))
		}
	}
	if f.ReconnectMin > 0 || f.ReconnectMax > 0 || f.Window > 0 {
		b.WriteString("link:\n")
		if f.Window > 0 {
			fmt.Fprintf(&b, "  window: %d\n", f.Window)
		}
		if f.ReconnectMin > 0 {
			fmt.Fprintf(&b, "  reconnect_min: %dms\n", f.ReconnectMin.Milliseconds())
		}
		if f.ReconnectMax > 0 {
			fmt.Fprintf(&b, "  reconnect_max: %dms\n", f.ReconnectMax.Milliseconds())
		}
	}
	if f.Sync != "" {
		fmt.Fprintf(&b, "store:\n  sync: %s\n", f.Sync)
	}
	if len(f.Receive)+len(f.Relay) > 0 {
		b.WriteString("addresses:\n")
		for _, a := range f.Receive {
			fmt.Fprintf(&b, "  - name: %s\n    role: receive\n", q(a))
		}
		for _, a := range f.Relay {
			fmt.Fprintf(&b, "  - name: %s\n    role: relay\n", q(a))
		}
	}
	// Warnings (a link that failed and backs off) are worth keeping in the
	// stderr file; per-start info lines are not.
	b.WriteString("log:\n  level: warn\n")
	b.WriteString(f.Extra)
	return b.String()
}

// Write writes the file to path.
func (f NodeFile) Write(path string) error {
	if err := os.WriteFile(path, []byte(f.YAML()), 0o644); err != nil {
		return fmt.Errorf("write configuration of %s: %w", f.Name, err)
	}
	return nil
}

// FreePort returns a TCP port of 127.0.0.1 that nothing listens on now. It
// picks one below the kernel's ephemeral range when it can: a node whose
// port is fixed across restarts must find it free again, and while the
// node is down any outgoing connection may be given a port of that range.
// It never returns a port twice to one process, nor one that another
// process holds from FreePort (see reserve): test binaries run side by
// side, and two of them could otherwise be given the same port in the
// moment before either listens on it.
func FreePort() (int, error) {
	if low := ephemeralLow(); low > 2048 {
		from := max(1024, low-16384)
		for range 64 {
			port := from + rand.IntN(low-from)
			if ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port))); err == nil {
				ln.Close()
				if reserve(port) {
					return port, nil
				}
			}
		}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("find a free port: %w", err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// reserved holds the ports this process was given, each with a lock file
// that tells other processes the port is taken. The locks are released
// when the process exits, so none outlives its holder.
var reserved struct {
	sync.Mutex
	ports map[int]*flock.Flock
}

// reserve marks port taken by this process, and reports false when this
// process or another one took it already. Where no lock file can be made,
// the listen check alone decides.
func reserve(port int) bool {
	reserved.Lock()
	defer reserved.Unlock()
	if _, ok := reserved.ports[port]; ok {
		return false
	}
	if reserved.ports == nil {
		reserved.ports = map[int]*flock.Flock{}
	}
	dir := filepath.Join(os.TempDir(), "petrel-test-ports")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		reserved.ports[port] = nil
		return true
	}
	l := flock.New(filepath.Join(dir, strconv.Itoa(port)))
	ok, err := l.TryLock()
	if err != nil {
		reserved.ports[port] = nil
		return true
	}
	if !ok {
		return false
	}
	reserved.ports[port] = l
	return true
}

// ephemeralLow is the first port of the kernel's ephemeral range, 0 if
// unknown.
func ephemeralLow() int {
	data, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 0
	}
	fields := strings.Fields(string(data))
	if len(fields) == 0 {
		return 0
	}
	low, _ := strconv.Atoi(fields[0])
	return low
}
