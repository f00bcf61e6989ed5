package address

import (
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/petrelmq/petrel/message"
)

// Source is where the directory learnt of a node.
type Source int

const (
	// SourceStatic: the node is in the configuration file.
	SourceStatic Source = iota + 1
	// SourceDiscovered: the node announced itself (UDP discovery).
	SourceDiscovered
)

// String returns "static" or "discovered".
func (s Source) String() string {
	switch s {
	case SourceStatic:
		return "static"
	case SourceDiscovered:
		return "discovered"
	}
	return fmt.Sprintf("source(%d)", int(s))
}

// Entry is what the directory knows of one node.
type Entry struct {
	// Name is the node's name.
	Name string
	// ID is the node's unique id; zero when unknown, as it is for a node
	// known only from the configuration until it has been met.
	ID message.NodeID
	// Connectors are the ways to reach the node.
	Connectors Connectors
	// Source says where the entry comes from.
	Source Source
	// LastSeen is when a discovered node last announced itself; zero for
	// a static entry.
	LastSeen time.Time
}

// clone returns e with its own copy of its connectors, so that neither the
// directory nor its callers see the other's later changes.
func (e Entry) clone() Entry {
	e.Connectors = e.Connectors.clone()
	return e
}

// Directory is the node directory: every other node this node knows how to
// reach, by name. Static entries come from the configuration; discovered
// entries will come from UDP discovery. A static entry wins over a
// discovered one of the same name, so an operator's word overrides what the
// network announces.
//
// A Directory is safe for concurrent use. Entries go in and come out as
// copies, so a caller may keep or change what it got.
type Directory struct {
	mu         sync.Mutex
	static     map[string]Entry
	discovered map[string]Entry // filled by discovery, which is not built yet
}

// NewDirectory returns an empty directory.
func NewDirectory() *Directory {
	return &Directory{static: make(map[string]Entry), discovered: make(map[string]Entry)}
}

// SetStatic replaces every static entry with entries, as a configuration
// load or reload does. Each entry's Source becomes SourceStatic and its
// LastSeen zero. Entries without a name are skipped; of two with one name,
// the last wins (the configuration's checks refuse both cases first).
func (d *Directory) SetStatic(entries []Entry) {
	static := make(map[string]Entry, len(entries))
	for _, e := range entries {
		if e.Name == "" {
			continue
		}
		e = e.clone()
		e.Source, e.LastSeen = SourceStatic, time.Time{}
		static[e.Name] = e
	}
	d.mu.Lock()
	d.static = static
	d.mu.Unlock()
}

// Lookup returns the entry of the node called name: the static one if there
// is one, else the discovered one.
func (d *Directory) Lookup(name string) (Entry, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if e, ok := d.static[name]; ok {
		return e.clone(), true
	}
	if e, ok := d.discovered[name]; ok {
		return e.clone(), true
	}
	return Entry{}, false
}

// Entries returns the entry of every known node, sorted by name: one per
// name, the one Lookup returns.
func (d *Directory) Entries() []Entry {
	d.mu.Lock()
	entries := make([]Entry, 0, len(d.static)+len(d.discovered))
	for _, e := range d.static {
		entries = append(entries, e.clone())
	}
	for name, e := range d.discovered {
		if _, shadowed := d.static[name]; !shadowed {
			entries = append(entries, e.clone())
		}
	}
	d.mu.Unlock()
	sort.Slice(entries, func(i, j int) bool { return entries[i].Name < entries[j].Name })
	return entries
}
