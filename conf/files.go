package conf

import (
	"fmt"
	"path/filepath"
	"strings"
	"time"

	petrel "github.com/petrelmq/petrel"
	"github.com/petrelmq/petrel/filetransfer"
	"github.com/petrelmq/petrel/message"
)

// FilesSection configures file transfer (petrel.FilesConfig). Zero values
// mean the node's defaults.
type FilesSection struct {
	// Spool holds files being received and those a relay forwards.
	// Default <data_dir>/spool. Keep it on the filesystem of the received
	// folders: delivery is then a link, not a copy.
	Spool string `yaml:"spool"`
	// Received is the folder under which each address's files are
	// placed, one subfolder per address. Default <data_dir>/received.
	Received string `yaml:"received"`
	// ChunkSize is the content bytes per chunk packet. Default 512KiB.
	ChunkSize Size `yaml:"chunk_size"`
	// Window is the most chunks in flight per transfer. Default 16.
	Window int `yaml:"window"`
	// Concurrency is how many files of one send queue move at once.
	// Default 4.
	Concurrency int `yaml:"concurrency"`
	// SyncBytes is how much a receiver appends between two syncs and
	// acknowledgements, at most. Default 8MiB.
	SyncBytes Size `yaml:"sync_bytes"`
	// AbandonAfter is how long a partly received file may go without
	// progress before the spool drops it. Default 168h (7 days).
	AbandonAfter Duration `yaml:"abandon_after"`
	// MaxSpoolBytes bounds the space the files being received take in
	// the spool, each at its announced size. Default 64GiB.
	MaxSpoolBytes Size `yaml:"max_spool_bytes"`
	// MaxSpoolBytesPerPeer bounds those handed over by one peer. Default
	// half of max_spool_bytes.
	MaxSpoolBytesPerPeer Size `yaml:"max_spool_bytes_per_peer"`
	// BufferedWrites writes received files through the page cache only,
	// never with O_DIRECT. Default false.
	BufferedWrites bool `yaml:"buffered_writes"`
}

func (s *FilesSection) check(c *checker, path string) {
	c.nonEmpty(join(path, "spool"), s.Spool, "leave it out for the default <data_dir>/spool")
	c.nonEmpty(join(path, "received"), s.Received, "leave it out for the default <data_dir>/received")
	c.fitsInt(join(path, "chunk_size"), s.ChunkSize)
	if c.has(join(path, "chunk_size")) && s.ChunkSize == 0 {
		c.fail(join(path, "chunk_size"), reasonf(nil, "must be at least 1 byte"))
	}
	c.atLeast(join(path, "window"), int64(s.Window), 1)
	c.atLeast(join(path, "concurrency"), int64(s.Concurrency), 1)
	c.fitsInt(join(path, "sync_bytes"), s.SyncBytes)
	c.positive(join(path, "abandon_after"), s.AbandonAfter)
	c.atLeast(join(path, "max_spool_bytes"), int64(s.MaxSpoolBytes), 1)
	c.atLeast(join(path, "max_spool_bytes_per_peer"), int64(s.MaxSpoolBytesPerPeer), 1)
	if s.MaxSpoolBytes > 0 && s.MaxSpoolBytesPerPeer > s.MaxSpoolBytes {
		c.fail(join(path, "max_spool_bytes_per_peer"), reasonf(nil, "%s is more than max_spool_bytes %s", s.MaxSpoolBytesPerPeer, s.MaxSpoolBytes))
	}
}

func (s *FilesSection) filesConfig() petrel.FilesConfig {
	return petrel.FilesConfig{
		Spool: s.Spool, Received: s.Received, ChunkSize: int(s.ChunkSize),
		Window: s.Window, Concurrency: s.Concurrency, SyncBytes: int64(s.SyncBytes),
		AbandonAfter:  time.Duration(s.AbandonAfter),
		MaxSpoolBytes: int64(s.MaxSpoolBytes), MaxSpoolBytesPerPeer: int64(s.MaxSpoolBytesPerPeer),
		BufferedWrites: s.BufferedWrites,
	}
}

// OutboxSection is one folder whose files are sent to an address
// (petrel.OutboxConfig).
type OutboxSection struct {
	// Dir is the folder watched; it must exist.
	Dir string `yaml:"dir"`
	// To is the address its files go to: name@node, or a local name.
	To string `yaml:"to"`
	// After is what happens to a file once the next hop has it: sent
	// (move it to <dir>/sent, the default) or delete.
	After string `yaml:"after"`
	// Quiet is how long a file must stay unchanged before it counts as
	// complete, unless it arrives by renaming x.part to x. Default 2s.
	Quiet Duration `yaml:"quiet"`
}

func (o *OutboxSection) check(c *checker, path string) {
	c.required(path, "dir", "an outbox needs the folder to watch")
	c.required(path, "to", "an outbox needs the address its files go to")
	if c.has(join(path, "to")) {
		if _, _, err := message.ParseDestination(o.To); err != nil {
			c.fail(join(path, "to"), reasonf(err, "%s", err.Error()))
		}
	}
	if c.has(join(path, "after")) && o.After != "sent" && o.After != "delete" {
		c.fail(join(path, "after"), reasonf(nil, "unknown value %s (want sent or delete)", short(o.After)))
	}
	c.positive(join(path, "quiet"), o.Quiet)
}

// outboxList is the outboxes section; a folder may be watched once.
type outboxList []OutboxSection

// check refuses two outboxes on one folder, however it is spelled ("ob",
// "ob/", "./ob", its absolute path, a symbolic link to it): each would send
// every file, once to each address. It refuses too an outbox on another's
// sent/ or failed/ folder, or inside one, since it would send again the
// files the other one finished. A folder inside another outbox's is
// allowed: an outbox leaves its subfolders alone.
func (l outboxList) check(c *checker, path string) {
	dirs := make([]string, len(l))
	for i := range l {
		item := fmt.Sprintf("%s[%d]", path, i)
		l[i].check(c, item)
		if l[i].Dir == "" {
			continue
		}
		dirs[i] = outboxKey(l[i].Dir)
		for j := range i {
			if dirs[j] == "" {
				continue
			}
			if reason := outboxOverlap(dirs[i], dirs[j]); reason != "" {
				c.fail(join(item, "dir"), reasonf(nil, "folder %q %s %s[%d] (%q)", l[i].Dir, reason, path, j, l[j].Dir))
				break
			}
		}
	}
}

// outboxKey is the folder dir names, as the node will watch it: absolute
// against the working directory (as the node makes it), cleaned, and with
// its symbolic links resolved when it exists.
func outboxKey(dir string) string {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return filepath.Clean(dir)
	}
	if real, err := filepath.EvalSymlinks(abs); err == nil {
		return real
	}
	return abs
}

// outboxOverlap says how the outbox folders a and b, both outboxKey, get
// in each other's way, or "" when they do not.
func outboxOverlap(a, b string) string {
	if a == b {
		return "is watched by"
	}
	for _, sub := range []string{filetransfer.SentDir, filetransfer.FailedDir} {
		if within(a, filepath.Join(b, sub)) {
			return "is in the " + sub + "/ folder of"
		}
		if within(b, filepath.Join(a, sub)) {
			return "has its " + sub + "/ folder watched by"
		}
	}
	return ""
}

// within reports whether path is dir or under it; both are clean and
// absolute.
func within(path, dir string) bool {
	rel, err := filepath.Rel(dir, path)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator))
}

func (f *File) outboxConfigs() []petrel.OutboxConfig {
	var out []petrel.OutboxConfig
	for _, o := range f.Outboxes {
		out = append(out, petrel.OutboxConfig{Dir: o.Dir, To: o.To, After: o.After, Quiet: time.Duration(o.Quiet)})
	}
	return out
}
