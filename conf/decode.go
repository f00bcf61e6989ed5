package conf

import (
	"encoding"
	"fmt"
	"log/slog"
	"math"
	"reflect"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/petrelmq/petrel/address"
	"github.com/petrelmq/petrel/queue"
)

// The decoder walks the yaml.Node tree against the Go types of File, instead
// of calling yaml's Decode on the whole document, for three reasons:
//   - every error carries the line and column of its key and the field path
//     ("addresses[1].role"), which yaml's errors do not;
//   - it records where each field was set, so checks that run after decoding
//     can point at a line too, and can tell "absent" from "written as zero";
//   - types that Petrel's packages own (address.Role, address.Connectors,
//     queue.SyncMode) are
//     parsed here with their own words, without those packages knowing YAML.
//
// A new section needs nothing here: any struct of strings, numbers, bools,
// pointers, slices, Size, Duration and the types in scalars decodes as is.

// scalarParser parses the text of a YAML scalar into a value of one type.
type scalarParser func(s string) (any, error)

// scalars parses the field types that belong to other packages. Types of this
// package implement encoding.TextUnmarshaler instead.
var scalars = map[reflect.Type]scalarParser{
	reflect.TypeFor[address.Role]():       parseRole,
	reflect.TypeFor[address.Connectors](): parseConnectors,
	reflect.TypeFor[queue.SyncMode]():     parseSync,
	reflect.TypeFor[queue.FullPolicy]():   parseOnFull,
	reflect.TypeFor[slog.Level]():         parseLevel,
}

// budgetPerNode bounds the work of a walk, in visits per node of the parsed
// tree. A walk without aliases visits each node once; merge keys (<<) and
// aliases revisit the nodes they point at, and a hostile file can nest them so
// that a few kilobytes expand to billions of visits. Real files, even ones
// that merge a block of defaults into every address, stay far below this.
const budgetPerNode = 10

// extensionPrefix starts top-level keys that conf ignores, as Docker Compose
// does: they give YAML anchors a home ("x-defaults: &defaults {...}") that
// addresses can merge with "<<: *defaults", without a typo check to trip.
const extensionPrefix = "x-"

// decoder holds the state of one walk.
type decoder struct {
	file   string
	set    map[string]position // field path → where it was set (non-null)
	budget int                 // visits left
	limit  int                 // the budget at the start, for the error
	err    *Error              // the first problem; the walk stops there
}

func newDecoder(file string, root *yaml.Node) *decoder {
	limit := budgetPerNode*countNodes(root) + 64
	return &decoder{file: file, set: make(map[string]position), budget: limit, limit: limit}
}

// countNodes counts the nodes of the tree, not following aliases.
func countNodes(n *yaml.Node) int {
	count := 1
	for _, c := range n.Content {
		count += countNodes(c)
	}
	return count
}

func (d *decoder) fail(at position, path string, err error) {
	if d.err == nil {
		d.err = newError(d.file, at, path, err)
	}
}

// spend takes one visit from the budget, and fails the walk when it is
// spent.
func (d *decoder) spend(at position, path string) bool {
	if d.budget--; d.budget < 0 {
		d.fail(at, path, reasonf(nil, "too many aliases or merges: the document expands to more than %d values", d.limit))
		return false
	}
	return true
}

// value decodes n into v. path names the field and at is where its key (or
// list item) is, for errors and for d.set.
func (d *decoder) value(n *yaml.Node, v reflect.Value, path string, at position) {
	if d.err != nil {
		return
	}
	if !d.spend(at, path) {
		return
	}
	for n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	// A null value (a key with nothing after it, or ~) means "not set", so
	// commenting out every key of a section leaves the section at defaults.
	if n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null" {
		return
	}
	d.set[path] = at
	if parse, ok := scalars[v.Type()]; ok {
		d.scalar(n, v, path, at, parse)
		return
	}
	if u, ok := v.Addr().Interface().(encoding.TextUnmarshaler); ok {
		d.scalar(n, v, path, at, func(s string) (any, error) {
			return nil, u.UnmarshalText([]byte(s))
		})
		return
	}
	switch v.Kind() {
	case reflect.Struct:
		d.mapping(n, v, path, at, nil)
	case reflect.Slice:
		d.sequence(n, v, path, at)
	case reflect.Pointer:
		p := reflect.New(v.Type().Elem())
		d.value(n, p.Elem(), path, at)
		v.Set(p)
	case reflect.String, reflect.Bool, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		d.basic(n, v, path, at)
	default:
		// Only a new File field of an unsupported type gets here; the
		// tests decode every field, so this is a programming error.
		d.fail(at, path, reasonf(nil, "internal error: cannot decode into %s", v.Type()))
	}
}

// scalar decodes a scalar with parse. A parse that returns a nil value has
// set v itself (a TextUnmarshaler).
func (d *decoder) scalar(n *yaml.Node, v reflect.Value, path string, at position, parse scalarParser) {
	if n.Kind != yaml.ScalarNode {
		d.fail(at, path, reasonf(nil, "want a single value, not %s", kindName(n)))
		return
	}
	x, err := parse(n.Value)
	if err != nil {
		d.fail(at, path, err)
		return
	}
	if x != nil {
		v.Set(reflect.ValueOf(x))
	}
}

// basic decodes strings, integers and booleans with yaml's own resolution, so
// that 0x10, 1_000 and quoted numbers work as they do elsewhere in YAML.
func (d *decoder) basic(n *yaml.Node, v reflect.Value, path string, at position) {
	if n.Kind != yaml.ScalarNode {
		d.fail(at, path, reasonf(nil, "want %s, not %s", kindWant(v.Kind()), kindName(n)))
		return
	}
	var err error
	switch v.Kind() {
	case reflect.String:
		var s string
		if err = n.Decode(&s); err == nil {
			v.SetString(s)
		}
	case reflect.Bool:
		var b bool
		if err = n.Decode(&b); err == nil {
			v.SetBool(b)
		}
	default:
		// yaml converts a float to an integer by cutting off its
		// fraction, so that 1.9 would run as 1: a number with a
		// fraction is refused instead. A whole one (1e3, 2.0) is fine.
		var f float64
		if n.ShortTag() == "!!float" && n.Decode(&f) == nil && f != math.Trunc(f) {
			d.fail(at, path, reasonf(nil, "want %s, not %s", kindWant(v.Kind()), short(n.Value)))
			return
		}
		var i int64
		if err = n.Decode(&i); err == nil && v.OverflowInt(i) {
			d.fail(at, path, reasonf(nil, "%s is too large", n.Value))
			return
		}
		if err == nil {
			v.SetInt(i)
		}
	}
	if err != nil {
		hint := ""
		if n.Style&(yaml.SingleQuotedStyle|yaml.DoubleQuotedStyle) != 0 {
			// YAML reads '5' and "true" as strings; say so, since the
			// text alone looks right.
			hint = " (a quoted value is a string: drop the quotes)"
		}
		d.fail(at, path, reasonf(nil, "want %s, not %s%s", kindWant(v.Kind()), short(n.Value), hint))
	}
}

// mapping decodes a YAML mapping into the struct v. Keys in skip were set by
// a mapping that merges this one, and win over it, as YAML merge keys say.
func (d *decoder) mapping(n *yaml.Node, v reflect.Value, path string, at position, skip map[string]bool) {
	if d.err != nil {
		return
	}
	if n.Kind != yaml.MappingNode {
		d.fail(at, path, reasonf(nil, "want a mapping of keys (%s), not %s", strings.Join(fieldNames(v.Type()), ", "), kindName(n)))
		return
	}
	fields := fieldIndex(v.Type())
	// Keys written here override keys merged in, wherever the << sits, so
	// merged mappings must know them all before the walk.
	here := copySet(skip)
	for i := 0; i+1 < len(n.Content); i += 2 {
		if !isMerge(n.Content[i]) {
			here[n.Content[i].Value] = true
		}
	}
	seen := make(map[string]position)
	for i := 0; i+1 < len(n.Content) && d.err == nil; i += 2 {
		key, val := n.Content[i], n.Content[i+1]
		switch {
		case !d.spend(nodePos(key), path):
			return
		case isMerge(key):
			d.merge(val, v, path, here)
		case skip[key.Value] || (path == "" && strings.HasPrefix(key.Value, extensionPrefix)):
			// Overridden by the mapping that merges this one, or an
			// extension key.
		default:
			d.field(key, val, v, path, fields, seen)
		}
	}
}

// field decodes one key and its value into the struct v, refusing keys that
// are not words, are set twice, or are not fields of v.
func (d *decoder) field(key, val *yaml.Node, v reflect.Value, path string, fields map[string]int, seen map[string]position) {
	at := nodePos(key)
	if key.Kind != yaml.ScalarNode {
		d.fail(at, path, reasonf(nil, "a key must be a plain word, not %s", kindName(key)))
		return
	}
	fp := join(path, key.Value)
	if first, dup := seen[key.Value]; dup {
		d.fail(at, fp, reasonf(nil, "set twice (first at line %d)", first.line))
		return
	}
	seen[key.Value] = at
	idx, ok := fields[key.Value]
	if !ok {
		d.fail(at, fp, unknownField(key.Value, v.Type()))
		return
	}
	d.value(val, v.Field(idx), fp, at)
}

// merge applies a merge key's value: one mapping, or a list of mappings where
// earlier ones win.
func (d *decoder) merge(n *yaml.Node, v reflect.Value, path string, skip map[string]bool) {
	for n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	if n.Kind != yaml.SequenceNode {
		d.mapping(n, v, path, nodePos(n), skip)
		return
	}
	skip = copySet(skip)
	for _, m := range n.Content {
		for m.Kind == yaml.AliasNode && m.Alias != nil {
			m = m.Alias
		}
		if !d.spend(nodePos(m), path) {
			return
		}
		d.mapping(m, v, path, nodePos(m), skip)
		for i := 0; i < len(m.Content); i += 2 {
			skip[m.Content[i].Value] = true
		}
	}
}

// sequence decodes a YAML list into the slice v; item i has path "path[i]".
func (d *decoder) sequence(n *yaml.Node, v reflect.Value, path string, at position) {
	if n.Kind != yaml.SequenceNode {
		d.fail(at, path, reasonf(nil, "want a list (items start with \"- \"), not %s", kindName(n)))
		return
	}
	s := reflect.MakeSlice(v.Type(), len(n.Content), len(n.Content))
	for i, item := range n.Content {
		d.value(item, s.Index(i), fmt.Sprintf("%s[%d]", path, i), nodePos(item))
	}
	v.Set(s)
}

func isMerge(key *yaml.Node) bool {
	return key.Kind == yaml.ScalarNode && key.Tag == "!!merge"
}

func copySet(m map[string]bool) map[string]bool {
	c := make(map[string]bool, len(m))
	for k := range m {
		c[k] = true
	}
	return c
}

// join appends a key to a field path.
func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// fieldIndex maps the yaml keys of struct type t to field indexes.
func fieldIndex(t reflect.Type) map[string]int {
	m := make(map[string]int, t.NumField())
	for i := range t.NumField() {
		if name := yamlName(t.Field(i)); name != "" {
			m[name] = i
		}
	}
	return m
}

// fieldNames lists the yaml keys of struct type t in declaration order.
func fieldNames(t reflect.Type) []string {
	var names []string
	for i := range t.NumField() {
		if name := yamlName(t.Field(i)); name != "" {
			names = append(names, name)
		}
	}
	return names
}

func yamlName(f reflect.StructField) string {
	name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
	if name == "-" || !f.IsExported() {
		return ""
	}
	return name
}

// kindName describes what the file has where something else was due.
func kindName(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	}
	return short(n.Value)
}

// kindWant describes what a basic Go kind wants.
func kindWant(k reflect.Kind) string {
	switch k {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	}
	return "a whole number"
}

// short quotes s for an error, cut to a length that fits on a terminal line:
// a value in a hostile file may be megabytes long.
func short(s string) string {
	const max = 40
	if len(s) > max {
		return strconv.Quote(s[:max]) + "…"
	}
	return strconv.Quote(s)
}

// unknownField explains a key that t does not have, with the nearest known
// key when it looks like a typo ("mx_body" → "max_body").
func unknownField(name string, t reflect.Type) error {
	best, bestDist := "", 3 // suggest only within two edits
	if len(name) <= 64 {
		for _, known := range fieldNames(t) {
			if dist := editDistance(name, known); dist < bestDist {
				best, bestDist = known, dist
			}
		}
	}
	if best != "" {
		return reasonf(nil, "unknown field %s (did you mean %q?)", short(name), best)
	}
	return reasonf(nil, "unknown field %s (known fields: %s)", short(name), strings.Join(fieldNames(t), ", "))
}

// editDistance is the Levenshtein distance between a and b, in bytes.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
