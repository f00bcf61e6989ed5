package conf

import (
	"os"
	"strings"
	"time"

	"github.com/petrelmq/petrel/message"
	"github.com/petrelmq/petrel/queue"
)

// defaultDataDir is petrel.Config's own default. conf fills it in so that a
// parsed File, and `petrel config show`, say where the data goes.
const defaultDataDir = "petrel-data"

// fallbackNodeName is the node name when the host name cannot be made into a
// valid one.
const fallbackNodeName = "petrel"

// hostname is os.Hostname; tests replace it.
var hostname = os.Hostname

// NodeSection is the node's identity.
type NodeSection struct {
	// Name is the node's human name, unique among the nodes it talks to.
	// Default: the host name, with bytes a name may not hold replaced by
	// '-'.
	Name string `yaml:"name"`
	// DataDir holds the node's database and unique id. A relative path is
	// relative to the working directory of the process. Default
	// "petrel-data".
	DataDir string `yaml:"data_dir"`
}

func (s *NodeSection) check(c *checker, path string) {
	c.name(join(path, "name"), s.Name)
	c.nonEmpty(join(path, "data_dir"), s.DataDir, "leave it out for the default "+defaultDataDir)
}

// defaultNodeName makes the host name into a valid node name, because a node
// must start with no file at all even on a host called "my laptop".
func defaultNodeName() string {
	h, err := hostname()
	if err != nil {
		return fallbackNodeName
	}
	if message.ValidName(h) == nil {
		return h
	}
	b := []byte(h)
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			b[i] = '-'
		}
	}
	name := strings.TrimLeft(string(b), ".-")
	if len(name) > 128 {
		name = name[:128]
	}
	if message.ValidName(name) != nil {
		return fallbackNodeName
	}
	return name
}

// StoreSection configures the node's durable store (queue.Config). Zero
// values mean the queue package's defaults.
type StoreSection struct {
	Sync               queue.SyncMode   `yaml:"sync"`
	MaxBytes           Size             `yaml:"max_bytes"`
	MaxMessages        int64            `yaml:"max_messages"`
	OnFull             queue.FullPolicy `yaml:"on_full"`
	DedupeWindow       Duration         `yaml:"dedupe_window"`
	DedupeMaxEntries   int              `yaml:"dedupe_max_entries"`
	SweepInterval      Duration         `yaml:"sweep_interval"`
	PrefetchMessages   int              `yaml:"prefetch_messages"`
	PrefetchBytes      Size             `yaml:"prefetch_bytes"`
	PrefetchTotalBytes Size             `yaml:"prefetch_total_bytes"`
}

func (s *StoreSection) check(c *checker, path string) {
	c.count(join(path, "max_messages"), s.MaxMessages)
	c.positive(join(path, "dedupe_window"), s.DedupeWindow)
	c.count(join(path, "dedupe_max_entries"), int64(s.DedupeMaxEntries))
	c.positive(join(path, "sweep_interval"), s.SweepInterval)
	c.count(join(path, "prefetch_messages"), int64(s.PrefetchMessages))
	c.fitsInt(join(path, "prefetch_bytes"), s.PrefetchBytes)
	c.fitsInt(join(path, "prefetch_total_bytes"), s.PrefetchTotalBytes)
}

// queueConfig converts the section. Path, MaxBatch, Now and Logger are the
// node's business.
func (s *StoreSection) queueConfig() queue.Config {
	return queue.Config{
		Sync:               s.Sync,
		MaxBytes:           int64(s.MaxBytes),
		MaxMessages:        s.MaxMessages,
		OnFull:             s.OnFull,
		DedupeWindow:       time.Duration(s.DedupeWindow),
		DedupeMaxEntries:   s.DedupeMaxEntries,
		SweepInterval:      time.Duration(s.SweepInterval),
		PrefetchMessages:   s.PrefetchMessages,
		PrefetchBytes:      int(s.PrefetchBytes),
		PrefetchTotalBytes: int(s.PrefetchTotalBytes),
	}
}

func parseSync(s string) (any, error) {
	switch s {
	case "full":
		return queue.SyncFull, nil
	case "normal":
		return queue.SyncNormal, nil
	}
	return nil, reasonf(nil, "unknown sync mode %s (want full or normal)", short(s))
}

func parseOnFull(s string) (any, error) {
	switch s {
	case "error":
		return queue.FullError, nil
	case "block":
		return queue.FullBlock, nil
	}
	return nil, reasonf(nil, "unknown on_full policy %s (want error or block)", short(s))
}

// LimitsSection bounds every message the node accepts (message.Limits). Zero
// values mean the message package's defaults.
type LimitsSection struct {
	MaxBody          Size `yaml:"max_body"`
	MaxProperties    int  `yaml:"max_properties"`
	MaxPropertyBytes Size `yaml:"max_property_bytes"`
	MaxHeaderString  int  `yaml:"max_header_string"`
}

func (s *LimitsSection) check(c *checker, path string) {
	c.fitsInt(join(path, "max_body"), s.MaxBody)
	c.count(join(path, "max_properties"), int64(s.MaxProperties))
	c.fitsInt(join(path, "max_property_bytes"), s.MaxPropertyBytes)
	c.count(join(path, "max_header_string"), int64(s.MaxHeaderString))
}

func (s *LimitsSection) messageLimits() message.Limits {
	return message.Limits{
		MaxBody:          int(s.MaxBody),
		MaxProperties:    s.MaxProperties,
		MaxPropertyBytes: int(s.MaxPropertyBytes),
		MaxHeaderString:  s.MaxHeaderString,
	}
}
