package conf

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"reflect"
	"time"

	"go.yaml.in/yaml/v3"

	petrel "github.com/petrelmq/petrel"
)

// File is the parsed configuration file of a node. Each field is one
// top-level section of the YAML document, under the key in its yaml tag.
//
// After Parse, Load or Default every default that conf decides (node name,
// data directory, auto_create, address roles, log format) is filled in.
// Fields left zero mean "the default of the package that uses them", which
// conf does not repeat.
type File struct {
	Node NodeSection `yaml:"node"`
	// Listen is the host:port that this node accepts links on. Default:
	// none, no listener.
	Listen string `yaml:"listen"`
	// Secret is the links' shared secret. After Parse it holds the
	// content of SecretFile when the file names one.
	Secret Secret `yaml:"secret"`
	// SecretFile is the path of a file that holds the secret, read by
	// Parse. At most one of Secret and SecretFile is set in a file.
	SecretFile string             `yaml:"secret_file"`
	Nodes      []NeighbourSection `yaml:"nodes"`
	Routes     []RouteSection     `yaml:"routes"`
	Link       LinkSection        `yaml:"link"`
	Discovery  DiscoverySection   `yaml:"discovery"`
	Store      StoreSection       `yaml:"store"`
	Limits     LimitsSection      `yaml:"limits"`
	// AutoCreate, when true, creates an undeclared local address as a
	// receive address on first use. Default true.
	AutoCreate *bool `yaml:"auto_create"`
	// MaxAutoQueues bounds the undeclared queues auto_create makes.
	// Default 10000.
	MaxAutoQueues int `yaml:"max_auto_queues"`
	// MaxSubscriptionsPerIdentity bounds the topic subscriptions the
	// remote clients of one identity own. Default 1000, or a tenth of
	// max_auto_queues where that is less.
	MaxSubscriptionsPerIdentity int              `yaml:"max_subscriptions_per_identity"`
	Addresses                   []AddressSection `yaml:"addresses"`
	// Topics are the topic spaces; see TopicSection.
	Topics   []TopicSection  `yaml:"topics"`
	Files    FilesSection    `yaml:"files"`
	Outboxes []OutboxSection `yaml:"outboxes"`
	Log      LogSection      `yaml:"log"`
	Admin    AdminSection    `yaml:"admin"`
	TLS      TLSSection      `yaml:"tls"`
	Access   []AccessSection `yaml:"access"`
	// Peers are the identities that may connect, each with its own
	// credentials; none: the shared secret mode.
	Peers []PeerSection `yaml:"peers"`
	// HA makes the node one of a live/backup pair; see HASection.
	HA HASection `yaml:"ha"`

	// TopicInterestGrace is how long a neighbour's link may be down before
	// the non-durable topic interest learned from it is dropped. Default:
	// petrel.DefaultTopicInterestGrace.
	TopicInterestGrace Duration `yaml:"topic_interest_grace"`
	// TopicForwardMaxQueued bounds the topic publishes waiting toward one
	// neighbour; see petrel.Config.TopicForwardMaxQueued.
	TopicForwardMaxQueued int64 `yaml:"topic_forward_max_queued"`
	// TopicForwardOverflow is drop_new or drop_oldest; see
	// petrel.Config.TopicForwardOverflow.
	TopicForwardOverflow string `yaml:"topic_forward_overflow"`
	// MQTT is the node's MQTT listener; see MQTTSection.
	MQTT MQTTSection `yaml:"mqtt"`
}

// section is one part of File with its own checks. To add a section: add
// the field to File with its yaml tag, write its type with a check method in
// a file of its own, and list it in File.sections. Decoding needs no change.
type section interface {
	// check reports every rule the section breaks to c; path is the
	// section's key.
	check(c *checker, path string)
}

// keyedSection is a section with its top-level key.
type keyedSection struct {
	key string
	s   section
}

// sections lists File's sections with their keys, in the order of the
// example file.
func (f *File) sections() []keyedSection {
	return []keyedSection{
		{"node", &f.Node},
		{"", linkKeys{f}},
		{"nodes", nodeList(f.Nodes)},
		{"routes", routeList(f.Routes)},
		{"link", &f.Link},
		{"discovery", &f.Discovery},
		{"store", &f.Store},
		{"limits", &f.Limits},
		{"", boundKeys{f}},
		{"addresses", addressList(f.Addresses)},
		{"topics", topicList(f.Topics)},
		{"", topicKeys{f}},
		{"files", &f.Files},
		{"outboxes", outboxList(f.Outboxes)},
		{"log", &f.Log},
		{"admin", &f.Admin},
		{"tls", &f.TLS},
		{"access", accessList(f.Access)},
		{"peers", peerList(f.Peers)},
		{"ha", &f.HA},
		{"mqtt", &f.MQTT},
	}
}

// maxFileSize bounds what Parse reads. A node's file is a few kilobytes; the
// bound keeps a wrong path (a log, a database) from costing much to refuse.
const maxFileSize = 4 << 20

// Load reads and parses the file at path. Problems in the file are *Error
// values that wrap ErrInvalid. A file that cannot be read (including one that
// does not exist: errors.Is(err, fs.ErrNotExist)) is an I/O error instead,
// because whether a missing file is fine is the caller's call: `petrel node`
// runs on defaults, `petrel config check` does not.
func Load(path string) (*File, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("load config: %w", err)
	}
	return Parse(path, data)
}

// Parse parses and checks a configuration file. filename is used only in
// errors. Empty data, or a document of only comments, is valid and gives
// Default(). The error, if any, is an *Error (wrapping ErrInvalid) for the
// first problem in document order.
//
// Checks run in two rounds. The first checks each value and item on its
// own, and reads secret_file; it reports the first problem in document
// order. Only a file that passes it goes to the second round,
// petrel.Config.Validate, which checks the rules across sections (routes
// through known neighbours, send addresses that can be reached) and
// returns its first problem, with the line of the field it names.
func Parse(filename string, data []byte) (*File, error) {
	if len(data) > maxFileSize {
		return nil, &Error{File: filename, Reason: fmt.Sprintf("file is %d bytes; a configuration file is at most %d", len(data), maxFileSize)}
	}
	root, err := parseYAML(filename, data)
	if err != nil {
		return nil, err
	}
	f := &File{}
	if root != nil {
		d := newDecoder(filename, root)
		d.value(root, reflect.ValueOf(f).Elem(), "", nodePos(root))
		if d.err != nil {
			return nil, d.err
		}
		c := &checker{file: filename, set: d.set}
		for _, s := range f.sections() {
			s.s.check(c, s.key)
		}
		f.readSecret(c)
		f.readItemSecrets(c)
		f.Admin.readToken(c, "admin")
		if err := c.first(); err != nil {
			return nil, err
		}
		f.fill()
		if err := f.validate(c); err != nil {
			return nil, err
		}
		return f, nil
	}
	f.fill()
	return f, nil
}

// parseYAML parses data into its one document's root node, or nil for an
// empty document. Later YAML documents ("---") are refused rather than
// ignored, because an operator who wrote them expects them to count.
func parseYAML(filename string, data []byte) (root *yaml.Node, err error) {
	// The YAML parser is a large third-party state machine; if some input
	// makes it panic, a hot reload must refuse the file, not crash the node.
	defer func() {
		if r := recover(); r != nil {
			root, err = nil, &Error{File: filename, Reason: fmt.Sprintf("YAML parser failed: %v", r)}
		}
	}()
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, nil
		}
		return nil, syntaxError(filename, err)
	}
	var next yaml.Node
	if err := dec.Decode(&next); !errors.Is(err, io.EOF) {
		if err != nil {
			return nil, syntaxError(filename, err)
		}
		return nil, &Error{File: filename, Line: next.Line, Column: next.Column,
			Reason: "a second YAML document (after ---); the file must hold exactly one"}
	}
	if doc.Kind == yaml.DocumentNode && len(doc.Content) == 1 {
		root = doc.Content[0]
	}
	// A document that is just "~" or "null" is as empty as no document.
	if root != nil && root.Kind == yaml.ScalarNode && root.ShortTag() == "!!null" {
		return nil, nil
	}
	return root, nil
}

// Default returns the configuration that an absent file means.
func Default() *File {
	f := &File{}
	f.fill()
	return f
}

// fill sets the defaults that conf decides. Checks have already refused set
// but empty values, so "zero" here means "absent from the file".
func (f *File) fill() {
	if f.Node.Name == "" {
		f.Node.Name = defaultNodeName()
	}
	if f.Node.DataDir == "" {
		f.Node.DataDir = defaultDataDir
	}
	if f.AutoCreate == nil {
		yes := true
		f.AutoCreate = &yes
	}
	for i := range f.Addresses {
		f.Addresses[i].fill()
	}
	f.Log.fill()
}

// NodeConfig converts the file to the configuration of a node. Store.Path and
// Logger are left empty: the node derives the path from DataDir, and the
// command sets the logger from NewLogger.
//
// NodeConfig expects a File from Parse, Load or Default. For a File built by
// hand, zero values pass through as package defaults and nothing is checked.
func (f *File) NodeConfig() petrel.Config {
	cfg := petrel.Config{
		Name:                        f.Node.Name,
		DataDir:                     f.Node.DataDir,
		Store:                       f.Store.queueConfig(),
		Limits:                      f.Limits.messageLimits(),
		NoAutoCreate:                f.AutoCreate != nil && !*f.AutoCreate,
		MaxAutoQueues:               f.MaxAutoQueues,
		MaxSubscriptionsPerIdentity: f.MaxSubscriptionsPerIdentity,
		Listen:                      f.Listen,
		Secret:                      string(f.Secret),
		Nodes:                       f.nodeConfigs(),
		Routes:                      f.routeConfigs(),
		Link:                        f.Link.linkConfig(),
		Discovery:                   f.Discovery.discoveryConfig(),
		Admin:                       f.Admin.adminConfig(),
		Files:                       f.Files.filesConfig(),
		Outboxes:                    f.outboxConfigs(),
		TLS:                         f.TLS.tlsConfig(),
		Access:                      f.accessRules(),
		Peers:                       f.peerConfigs(),
		Topics:                      f.topicConfigs(),
		HA:                          f.HA.haConfig(),
		MQTT:                        f.MQTT.mqttConfig(),
	}
	for _, a := range f.Addresses {
		cfg.Addresses = append(cfg.Addresses, a.addressConfig())
	}
	cfg.TopicInterestGrace = time.Duration(f.TopicInterestGrace)
	cfg.TopicForwardMaxQueued = f.TopicForwardMaxQueued
	cfg.TopicForwardOverflow = f.TopicForwardOverflow
	return cfg
}
