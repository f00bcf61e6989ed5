package address

import (
	"bytes"
	"cmp"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
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
	// Seq is the sequence number of the announcement the entry was last
	// taken from (Announcement.Seq); 0 for a static entry and for a node
	// that announces without one.
	Seq uint64
}

// clone returns e with its own copy of its connectors, so that neither the
// directory nor its callers see the other's later changes.
func (e Entry) clone() Entry {
	e.Connectors = e.Connectors.clone()
	return e
}

// DefaultTimeout is how long a discovered node stays in the directory
// without being heard, unless SetTimeout says otherwise.
const DefaultTimeout = 10 * time.Second

// DefaultMaxNodes is the default bound on the discovered entries of a
// directory; see SetMaxDiscovered.
const DefaultMaxNodes = 1024

// Directory is the node directory: every other node this node knows how to
// reach. Static entries come from the configuration, one per name.
// Discovered entries come from announcements (Heard), one per unique id, and
// leave when they are not heard within the timeout (Expire). A static entry
// wins over discovered ones of the same name, so an operator's word
// overrides what the network announces.
//
// A Directory is safe for concurrent use. Entries go in and come out as
// copies, so a caller may keep or change what it got.
type Directory struct {
	mu         sync.Mutex
	timeout    time.Duration
	maxNodes   int    // bound on discovered entries
	full       uint64 // announcements of new nodes dropped at maxNodes
	static     map[string]Entry
	discovered map[message.NodeID]Entry
	// silent are the names of discovered nodes that Expire forgot, with
	// when: an outage, not an operator's removal, so a send to one still
	// waits in its send queue (see Silent). At most maxNodes.
	silent  map[string]time.Time
	changed chan struct{} // closed and replaced at each change
	// gen counts the changes that close changed, read without mu by
	// callers that keep an answer of Lookup until the directory changes.
	gen atomic.Uint64
}

// NewDirectory returns an empty directory with the DefaultTimeout.
func NewDirectory() *Directory {
	return &Directory{
		timeout:    DefaultTimeout,
		maxNodes:   DefaultMaxNodes,
		static:     make(map[string]Entry),
		discovered: make(map[message.NodeID]Entry),
		silent:     make(map[string]time.Time),
		changed:    make(chan struct{}),
	}
}

// SetTimeout sets how long a discovered entry lives without being heard;
// 0 or less means DefaultTimeout. It applies from the next Expire.
func (d *Directory) SetTimeout(timeout time.Duration) {
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	d.mu.Lock()
	d.timeout = timeout
	d.mu.Unlock()
}

// SetMaxDiscovered bounds the discovered entries; 0 or less means
// DefaultMaxNodes. An announcement from a new node past the bound is
// dropped (Heard reports false, and Full counts it), while the nodes
// already known go on refreshing; room returns as they expire. Entries
// held past a lowered bound stay until they expire.
func (d *Directory) SetMaxDiscovered(n int) {
	if n <= 0 {
		n = DefaultMaxNodes
	}
	d.mu.Lock()
	d.maxNodes = n
	d.mu.Unlock()
}

// Full returns how many announcements of new nodes were dropped because
// the directory held its most discovered entries.
func (d *Directory) Full() uint64 {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.full
}

// Discovered returns how many discovered entries the directory holds.
func (d *Directory) Discovered() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.discovered)
}

// Changed returns a channel that is closed at the next change of what
// Lookup, Entries or All return, other than a LastSeen refresh: a static
// reload, a node discovered or announcing new connectors or a new name, a
// node expired. Take the channel before reading the directory, so that a
// change between the two is not missed.
func (d *Directory) Changed() <-chan struct{} {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.changed
}

// Generation returns a number that grows at each change Changed reports.
// Read before a Lookup, it tells whether an answer kept since is still
// the directory's: a cache need not take the lock to check.
func (d *Directory) Generation() uint64 { return d.gen.Load() }

// notify wakes the waiters of Changed; d.mu is held.
func (d *Directory) notify() {
	d.gen.Add(1)
	close(d.changed)
	d.changed = make(chan struct{})
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
	d.notify()
	d.mu.Unlock()
}

// Heard adds or refreshes the discovered entry of node e.ID, heard at now:
// its Source becomes SourceDiscovered and its LastSeen now. It reports
// whether the node is new to the directory. An entry without a name or with
// the zero id is ignored, and so is a new node while the directory holds
// its most discovered entries (see SetMaxDiscovered). A static entry of the
// same name still wins in Lookup; the discovered one is kept beside it (All
// lists both).
//
// e.Seq is the sequence of the announcement. While the entry of e.ID lives
// (heard within the timeout) and was taken from an announcement with a
// sequence, an announcement whose sequence is not greater is stale and
// ignored: a replay of that one or of an older one, or one without a
// sequence. It neither changes nor refreshes the entry, so a node that
// stopped still expires however often it is replayed. Once the entry
// expired any announcement is taken again. A node whose clock stepped back
// across a restart therefore announces sequences smaller than those it
// sent before: it is ignored until its old entry expires, at most one
// timeout after its last announcement of before the restart.
func (d *Directory) Heard(e Entry, now time.Time) (added bool) {
	added, _, _ = d.heard(e, now)
	return added
}

// heard is Heard, and reports also whether a new node was dropped because
// the directory is full, or an announcement because it is stale.
func (d *Directory) heard(e Entry, now time.Time) (added, dropped, stale bool) {
	if e.Name == "" || e.ID.IsZero() {
		return false, false, false
	}
	e = e.clone()
	e.Source, e.LastSeen = SourceDiscovered, now
	d.mu.Lock()
	defer d.mu.Unlock()
	old, known := d.discovered[e.ID]
	if known && old.Seq != 0 && e.Seq <= old.Seq && now.Before(old.LastSeen.Add(d.timeout)) {
		return false, false, true
	}
	delete(d.silent, e.Name)
	if !known && len(d.discovered) >= d.maxNodes {
		d.full++
		return false, true, false
	}
	d.discovered[e.ID] = e
	if !known || old.Name != e.Name || old.Connectors.String() != e.Connectors.String() {
		d.notify()
	}
	return !known, false, false
}

// Expire removes the discovered entries last heard a timeout or more
// before now, and returns them sorted by name. Static entries never expire.
func (d *Directory) Expire(now time.Time) []Entry {
	d.mu.Lock()
	var gone []Entry
	for id, e := range d.discovered {
		if !now.Before(e.LastSeen.Add(d.timeout)) {
			delete(d.discovered, id)
			gone = append(gone, e)
			d.silenced(e.Name, now)
		}
	}
	if len(gone) > 0 {
		d.notify()
	}
	d.mu.Unlock()
	sortEntries(gone)
	return gone
}

// silenced records that the discovered node name went silent at now,
// forgetting the longest silent past maxNodes; d.mu is held.
func (d *Directory) silenced(name string, now time.Time) {
	d.silent[name] = now
	for len(d.silent) > d.maxNodes {
		oldest, at := "", now
		for n, t := range d.silent {
			if !t.After(at) {
				oldest, at = n, t
			}
		}
		delete(d.silent, oldest)
	}
}

// Silent reports whether name is a node that discovery found and then
// forgot, not heard since: its send queues keep taking messages, which
// wait there until it is heard again, as for any link that is down.
func (d *Directory) Silent(name string) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	_, ok := d.silent[name]
	return ok
}

// Lookup returns the entry of the node called name: the static one if there
// is one, else the discovered one with the greatest sequence, or, among
// those without one, heard last (see fresher).
func (d *Directory) Lookup(name string) (Entry, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if e, ok := d.static[name]; ok {
		return e.clone(), true
	}
	var best Entry
	found := false
	for _, e := range d.discovered {
		if e.Name == name && (!found || fresher(e, best)) {
			best, found = e, true
		}
	}
	if !found {
		return Entry{}, false
	}
	return best.clone(), true
}

// fresher reports whether discovered entry a wins over b of the same name:
// when both carry a sequence, the greater one, so that a replayed
// announcement of an id the node no longer uses does not take its name
// back; else heard later, or, heard at the same time, the smaller id, so
// that the choice does not depend on map order.
func fresher(a, b Entry) bool {
	if a.Seq != 0 && b.Seq != 0 && a.Seq != b.Seq {
		return a.Seq > b.Seq
	}
	if !a.LastSeen.Equal(b.LastSeen) {
		return a.LastSeen.After(b.LastSeen)
	}
	return bytes.Compare(a.ID[:], b.ID[:]) < 0
}

// Entries returns the entry of every known node, sorted by name: one per
// name, the one Lookup returns.
func (d *Directory) Entries() []Entry {
	d.mu.Lock()
	entries := make([]Entry, 0, len(d.static)+len(d.discovered))
	for _, e := range d.static {
		entries = append(entries, e.clone())
	}
	best := make(map[string]Entry)
	for _, e := range d.discovered {
		if _, shadowed := d.static[e.Name]; shadowed {
			continue
		}
		if b, ok := best[e.Name]; !ok || fresher(e, b) {
			best[e.Name] = e
		}
	}
	for _, e := range best {
		entries = append(entries, e.clone())
	}
	d.mu.Unlock()
	sortEntries(entries)
	return entries
}

// All returns every entry, static and discovered, including the discovered
// ones that a static entry or a fresher announcement of the same name hides
// from Lookup: what `petrel nodes` shows. They are sorted by name, static
// before discovered, then by id.
func (d *Directory) All() []Entry {
	d.mu.Lock()
	entries := make([]Entry, 0, len(d.static)+len(d.discovered))
	for _, e := range d.static {
		entries = append(entries, e.clone())
	}
	for _, e := range d.discovered {
		entries = append(entries, e.clone())
	}
	d.mu.Unlock()
	sortEntries(entries)
	return entries
}

// sortEntries sorts by name, then source (static first), then id.
func sortEntries(entries []Entry) {
	slices.SortFunc(entries, func(a, b Entry) int {
		return cmp.Or(
			strings.Compare(a.Name, b.Name),
			cmp.Compare(a.Source, b.Source),
			bytes.Compare(a.ID[:], b.ID[:]),
		)
	})
}
