package conf

import (
	"bytes"
	"errors"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	petrel "github.com/petrelmq/petrel"
	"github.com/petrelmq/petrel/address"
	"github.com/petrelmq/petrel/message"
	"github.com/petrelmq/petrel/queue"
)

// withHostname makes defaultNodeName see h for the rest of the test.
func withHostname(t *testing.T, h string, err error) {
	old := hostname
	hostname = func() (string, error) { return h, err }
	t.Cleanup(func() { hostname = old })
}

func TestParseValid(t *testing.T) {
	withHostname(t, "host-1", nil)
	yes, no := true, false
	defaults := File{Node: NodeSection{Name: "host-1", DataDir: "petrel-data"}, AutoCreate: &yes, Log: LogSection{Format: LogText}}
	with := func(change func(f *File)) File {
		f := defaults
		change(&f)
		return f
	}
	tests := []struct {
		name string
		doc  string
		want File
	}{
		{"empty", "", defaults},
		{"comments only", "# nothing yet\n\n", defaults},
		{"null document", "~\n", defaults},
		{"null sections", "node:\nstore:\nlimits: ~\naddresses:\nlog:\n", defaults},
		{"empty flow mappings", "node: {}\nstore: {}\n", defaults},
		{"node", "node:\n  name: plant-7\n  data_dir: /var/lib/petrel\n", with(func(f *File) {
			f.Node = NodeSection{Name: "plant-7", DataDir: "/var/lib/petrel"}
		})},
		{"store", "store:\n  sync: normal\n  max_bytes: 10GB\n  max_messages: 1_000_000\n  on_full: block\n  dedupe_window: 1h\n" +
			"  dedupe_max_entries: 0x10\n  sweep_interval: 250ms\n  prefetch_messages: 10\n  prefetch_bytes: 512k\n  prefetch_total_bytes: 8MiB\n", with(func(f *File) {
			f.Store = StoreSection{Sync: queue.SyncNormal, MaxBytes: 10e9, MaxMessages: 1e6, OnFull: queue.FullBlock,
				DedupeWindow: Duration(time.Hour), DedupeMaxEntries: 16, SweepInterval: Duration(250 * time.Millisecond),
				PrefetchMessages: 10, PrefetchBytes: 512 << 10, PrefetchTotalBytes: 8 << 20}
		})},
		{"zero counts mean default", "store:\n  max_messages: 0\nlimits:\n  max_properties: 0\n", defaults},
		{"limits", "limits:\n  max_body: 1MiB\n  max_properties: 8\n  max_property_bytes: 1024\n  max_header_string: 200\n", with(func(f *File) {
			f.Limits = LimitsSection{MaxBody: 1 << 20, MaxProperties: 8, MaxPropertyBytes: 1024, MaxHeaderString: 200}
		})},
		{"auto_create false", "auto_create: false\n", with(func(f *File) { f.AutoCreate = &no })},
		{"log", "log:\n  level: debug\n  format: json\n", with(func(f *File) { f.Log = LogSection{Level: slog.LevelDebug, Format: LogJSON} })},
		{"addresses", "nodes: [{name: hub-1, connector: 'tcp://h:1'}]\n" +
			"addresses:\n  - name: orders\n    max_deliveries: 3\n    dead_letter: orders.dlq\n    lease_timeout: 1m\n" +
			"  - name: orders.dlq\n  - {name: out, role: send, node: hub-1, expiry_address: out.expired}\n  - name: hub\n    role: relay\n", with(func(f *File) {
			f.Nodes = []NeighbourSection{{Name: "hub-1", Connector: mustConnectors(t, "tcp://h:1")}}
			f.Addresses = []AddressSection{
				{Name: "orders", Role: address.RoleReceive, MaxDeliveries: 3, DeadLetter: "orders.dlq", LeaseTimeout: Duration(time.Minute)},
				{Name: "orders.dlq", Role: address.RoleReceive},
				{Name: "out", Role: address.RoleSend, Node: "hub-1", ExpiryAddress: "out.expired"},
				{Name: "hub", Role: address.RoleRelay},
			}
		})},
		{"merge from an x- anchor, explicit keys win", "x-policy: &p {max_deliveries: 3, lease_timeout: 5s}\naddresses:\n" +
			"  - <<: *p\n    name: a\n  - name: b\n    <<: *p\n    max_deliveries: 7\n", with(func(f *File) {
			f.Addresses = []AddressSection{
				{Name: "a", Role: address.RoleReceive, MaxDeliveries: 3, LeaseTimeout: Duration(5 * time.Second)},
				{Name: "b", Role: address.RoleReceive, MaxDeliveries: 7, LeaseTimeout: Duration(5 * time.Second)},
			}
		})},
		{"merge list, earlier wins", "x-a: &a {max_deliveries: 1}\nx-b: &b {max_deliveries: 2, dead_letter: z}\naddresses:\n" +
			"  - {<<: [*a, *b], name: q}\n", with(func(f *File) {
			f.Addresses = []AddressSection{{Name: "q", Role: address.RoleReceive, MaxDeliveries: 1, DeadLetter: "z"}}
		})},
		{"alias of a whole item", "addresses:\n  - &x {name: a, role: relay}\n", with(func(f *File) {
			f.Addresses = []AddressSection{{Name: "a", Role: address.RoleRelay}}
		})},
		{"links", "listen: ':7400'\nsecret: s3cret\nnodes:\n  - name: hub-1\n    connector: tcp://10.0.0.1:7400\n" +
			"  - name: hub-2\n    connector: failover:( tcp://a:1, tcp://b:1 )\n" +
			"  - {name: hub-3, connector: 'static:(tls://c:1?ca=/ca.pem,tcp://[::1]:2)'}\n" +
			"routes:\n  - {node: plant-9, via: hub-1}\n  - node: plant-10\n    via: hub-2\n" +
			"link: {window: 10, max_frame: 1MiB, handshake_timeout: 1s, write_timeout: 2s, idle_timeout: 3s, reconnect_min: 10ms, reconnect_max: 10ms}\n" +
			"addresses:\n  - {name: a, role: send, node: plant-10}\n  - {name: b, role: send, node: hub-3}\n", with(func(f *File) {
			f.Listen, f.Secret = ":7400", "s3cret"
			f.Nodes = []NeighbourSection{
				{Name: "hub-1", Connector: mustConnectors(t, "tcp://10.0.0.1:7400")},
				{Name: "hub-2", Connector: mustConnectors(t, "failover:(tcp://a:1,tcp://b:1)")},
				{Name: "hub-3", Connector: mustConnectors(t, "static:(tls://c:1?ca=/ca.pem,tcp://[::1]:2)")},
			}
			f.Routes = []RouteSection{{Node: "plant-9", Via: "hub-1"}, {Node: "plant-10", Via: "hub-2"}}
			f.Link = LinkSection{Window: 10, MaxFrame: 1 << 20, HandshakeTimeout: Duration(time.Second), WriteTimeout: Duration(2 * time.Second),
				IdleTimeout: Duration(3 * time.Second), ReconnectMin: Duration(10 * time.Millisecond), ReconnectMax: Duration(10 * time.Millisecond)}
			f.Addresses = []AddressSection{{Name: "a", Role: address.RoleSend, Node: "plant-10"}, {Name: "b", Role: address.RoleSend, Node: "hub-3"}}
		})},
		{"null link keys", "listen:\nsecret: ~\nsecret_file:\nnodes:\nroutes: []\nlink:\n", with(func(f *File) {
			f.Routes = []RouteSection{}
		})},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Parse("petrel.yaml", []byte(tt.doc))
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(*got, tt.want) {
				t.Errorf("Parse =\n%+v\nwant\n%+v", *got, tt.want)
			}
		})
	}
}

func TestDefault(t *testing.T) {
	withHostname(t, "plant-7", nil)
	f := Default()
	if f.Node.Name != "plant-7" || f.Node.DataDir != "petrel-data" || f.AutoCreate == nil || !*f.AutoCreate {
		t.Errorf("Default() = %+v", f)
	}
	parsed, err := Parse("empty.yaml", nil)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(parsed, f) {
		t.Errorf("Parse(empty) = %+v, want Default() %+v", parsed, f)
	}
	// An empty file must leave every package default to its package.
	want := petrel.Config{Name: "plant-7", DataDir: "petrel-data"}
	if got := f.NodeConfig(); !reflect.DeepEqual(got, want) {
		t.Errorf("Default().NodeConfig() = %+v, want %+v", got, want)
	}
}

func TestDefaultNodeName(t *testing.T) {
	tests := []struct {
		host string
		err  error
		want string
	}{
		{"plant-7", nil, "plant-7"},
		{"build.example.com", nil, "build.example.com"},
		{"My Laptop (2)", nil, "My-Laptop--2-"},
		{"-.-weird", nil, "weird"},
		{"日本", nil, "petrel"},
		{"", nil, "petrel"},
		{"...", nil, "petrel"},
		{strings.Repeat("a", 300) + " ", nil, strings.Repeat("a", 128)},
		{"host", errors.New("no hostname"), "petrel"},
	}
	for _, tt := range tests {
		withHostname(t, tt.host, tt.err)
		got := defaultNodeName()
		if got != tt.want {
			t.Errorf("host %q: name %q, want %q", tt.host, got, tt.want)
		}
		if message.ValidName(got) != nil {
			t.Errorf("host %q: name %q is not valid", tt.host, got)
		}
	}
}

func TestNodeConfig(t *testing.T) {
	doc := `
node: {name: n1, data_dir: /data}
store:
  sync: normal
  max_bytes: 1GiB
  max_messages: 100
  on_full: block
  dedupe_window: 2h
  dedupe_max_entries: 50
  sweep_interval: 2s
  prefetch_messages: 5
  prefetch_bytes: 1MiB
limits: {max_body: 2MiB, max_properties: 3, max_property_bytes: 4KiB, max_header_string: 100}
auto_create: false
listen: 127.0.0.1:7400
secret: s3cret
nodes:
  - name: hub-1
    connector: static:(tcp://a:01,  tcp://[0::1]:2)
routes:
  - {node: plant-9, via: hub-1}
link: {window: 5, max_frame: 2MiB, handshake_timeout: 1s, write_timeout: 2s, idle_timeout: 3s, reconnect_min: 4s, reconnect_max: 5s, stall_after: 6s}
addresses:
  - name: orders
    max_deliveries: 4
    dead_letter: bad
    expiry_address: old
    lease_timeout: 10s
    redelivery_delay: 2s
    max_redelivery_delay: 20s
  - {name: out, role: send, node: plant-9}
`
	f, err := Parse("n1.yaml", []byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	want := petrel.Config{
		Name:    "n1",
		DataDir: "/data",
		Store: queue.Config{Sync: queue.SyncNormal, MaxBytes: 1 << 30, MaxMessages: 100, OnFull: queue.FullBlock,
			DedupeWindow: 2 * time.Hour, DedupeMaxEntries: 50, SweepInterval: 2 * time.Second,
			PrefetchMessages: 5, PrefetchBytes: 1 << 20},
		Limits: message.Limits{MaxBody: 2 << 20, MaxProperties: 3, MaxPropertyBytes: 4 << 10, MaxHeaderString: 100},
		Addresses: []petrel.AddressConfig{
			{Name: "orders", Role: address.RoleReceive, Queue: queue.Policy{MaxDeliveries: 4, DeadLetter: "bad", ExpiryAddress: "old",
				LeaseTimeout: 10 * time.Second, RedeliveryDelay: 2 * time.Second, MaxRedeliveryDelay: 20 * time.Second}},
			{Name: "out", Role: address.RoleSend, Node: "plant-9"},
		},
		NoAutoCreate: true,
		Listen:       "127.0.0.1:7400",
		Secret:       "s3cret",
		// The connector is passed on in canonical form.
		Nodes:  []petrel.NodeConfig{{Name: "hub-1", Connector: "static:(tcp://a:1,tcp://[::1]:2)"}},
		Routes: []petrel.RouteConfig{{Node: "plant-9", Via: "hub-1"}},
		Link: petrel.LinkConfig{Window: 5, MaxFrame: 2 << 20, HandshakeTimeout: time.Second, WriteTimeout: 2 * time.Second,
			IdleTimeout: 3 * time.Second, ReconnectMin: 4 * time.Second, ReconnectMax: 5 * time.Second, StallAfter: 6 * time.Second},
	}
	if got := f.NodeConfig(); !reflect.DeepEqual(got, want) {
		t.Errorf("NodeConfig() =\n%+v\nwant\n%+v", got, want)
	}
	// A File built by hand leaves the role zero; the node still gets one.
	hand := File{Addresses: []AddressSection{{Name: "x"}}}
	if got := hand.NodeConfig().Addresses[0].Role; got != address.RoleReceive {
		t.Errorf("hand-built address role = %v, want receive", got)
	}
}

// TestExampleFile parses example.yaml, and checks that the package
// documentation (doc_example.go) and the README show the same text.
func TestExampleFile(t *testing.T) {
	f, err := Load("example.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if f.Node.Name != "plant-7" || len(f.Addresses) != 5 || len(f.Nodes) != 2 || f.Listen == "" {
		t.Errorf("example parsed to %+v", f)
	}
	data, err := os.ReadFile("example.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var want strings.Builder
	for _, line := range strings.Split(strings.TrimRight(string(data), "\n"), "\n") {
		if line == "" {
			want.WriteString("//\n")
		} else {
			want.WriteString("//\t" + line + "\n")
		}
	}
	doc, err := os.ReadFile("doc_example.go")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(doc), want.String()) {
		t.Error("doc_example.go does not hold example.yaml verbatim; copy it again (each line after \"//\\t\")")
	}
	readme, err := os.ReadFile(filepath.Join("..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(readme), string(data)) {
		t.Error("README.md does not hold example.yaml verbatim under Configuration; copy it again")
	}
}

func TestLoad(t *testing.T) {
	dir := t.TempDir()
	_, err := Load(filepath.Join(dir, "missing.yaml"))
	if !errors.Is(err, fs.ErrNotExist) || errors.Is(err, ErrInvalid) {
		t.Errorf("Load(missing) = %v, want fs.ErrNotExist and not ErrInvalid", err)
	}
	path := filepath.Join(dir, "petrel.yaml")
	if err := os.WriteFile(path, []byte("node:\n  name: x\n  bad: 1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = Load(path)
	var e *Error
	if !errors.As(err, &e) || e.File != path || e.Line != 3 {
		t.Errorf("Load(bad) = %v, want an *Error at %s:3", err, path)
	}
}

func TestParseTooLarge(t *testing.T) {
	_, err := Parse("big.yaml", make([]byte, maxFileSize+1))
	if !errors.Is(err, ErrInvalid) {
		t.Errorf("Parse(huge) = %v, want ErrInvalid", err)
	}
}

func TestNewLogger(t *testing.T) {
	for _, tt := range []struct {
		doc, want string
	}{
		{"", "level=INFO msg=shown"},
		{"log: {format: json, level: warn}", `"level":"WARN","msg":"shown"`},
	} {
		f, err := Parse("log.yaml", []byte(tt.doc))
		if err != nil {
			t.Fatal(err)
		}
		var buf bytes.Buffer
		log := f.NewLogger(&buf)
		log.Debug("hidden")
		if f.Log.Level == slog.LevelWarn {
			log.Info("hidden")
			log.Warn("shown")
		} else {
			log.Info("shown")
		}
		if out := buf.String(); !strings.Contains(out, tt.want) || strings.Contains(out, "hidden") {
			t.Errorf("%q logged %q, want %q and nothing hidden", tt.doc, out, tt.want)
		}
	}
}

func mustConnectors(t *testing.T, s string) address.Connectors {
	t.Helper()
	c, err := address.ParseConnectors(s)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestAdminSection checks that admin.listen reaches the node's
// configuration, and that it is off when left out.
func TestAdminSection(t *testing.T) {
	f, err := Parse("t.yaml", []byte("admin:\n  listen: 127.0.0.1:0\n"))
	if err != nil {
		t.Fatal(err)
	}
	if got := f.NodeConfig().Admin.Listen; got != "127.0.0.1:0" {
		t.Fatalf("Admin.Listen = %q", got)
	}
	f, err = Parse("t.yaml", []byte("node:\n  name: a\n"))
	if err != nil {
		t.Fatal(err)
	}
	if got := f.NodeConfig().Admin.Listen; got != "" {
		t.Fatalf("Admin.Listen = %q without an admin section", got)
	}
}
