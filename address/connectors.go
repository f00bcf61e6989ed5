package address

import (
	"fmt"
	"strings"
)

// Mode is how the connectors of a list are used.
type Mode int

const (
	// ModeSingle is one connector, written on its own: tcp://host:7400.
	ModeSingle Mode = iota
	// ModeStatic tries each connector in turn until one connects:
	// static:(tcp://a:7400,tcp://b:7400).
	ModeStatic
	// ModeFailover uses the main connector, the backup while the main is
	// down, and the main again once it is back:
	// failover:(tcp://main:7400,tcp://backup:7400).
	ModeFailover
)

// String returns the mode's name as a connector URI spells it ("single" is
// never written).
func (m Mode) String() string {
	switch m {
	case ModeSingle:
		return "single"
	case ModeStatic:
		return "static"
	case ModeFailover:
		return "failover"
	}
	return fmt.Sprintf("mode(%d)", int(m))
}

// Connectors is a parsed connector URI: one connector (ModeSingle), a list
// tried in turn (ModeStatic), or a main and a backup (ModeFailover).
//
// Invariants of a value from ParseConnectors: a single has exactly one
// connector, a static list at least one, a failover exactly two (List[0] is
// the main, List[1] the backup), and no connector appears twice.
type Connectors struct {
	Mode Mode
	List []Connector
}

// String returns the canonical text: the connector alone for ModeSingle,
// otherwise mode:(c1,c2) with each connector canonical and no spaces.
// ParseConnectors reads it back to an equal value. The zero Connectors is "".
func (c Connectors) String() string {
	if c.Mode == ModeSingle {
		if len(c.List) == 0 {
			return ""
		}
		return c.List[0].String()
	}
	items := make([]string, len(c.List))
	for i, conn := range c.List {
		items[i] = conn.String()
	}
	return c.Mode.String() + ":(" + strings.Join(items, ",") + ")"
}

// clone returns c with its own copies of List and of each Params.
func (c Connectors) clone() Connectors {
	if c.List == nil {
		return c
	}
	list := make([]Connector, len(c.List))
	for i, conn := range c.List {
		list[i] = conn.clone()
	}
	c.List = list
	return c
}

// ParseConnectors parses a connector URI:
//
//	tcp://host:7400                          one connector
//	tls://host:7400?ca=/etc/petrel/ca.pem    options as query parameters
//	static:(tcp://a:7400, tcp://b:7400)      each in turn; at least one
//	failover:(tcp://main:7400,tcp://bk:7400) main, then backup; exactly two
//
// Whitespace around the URI and around list items is ignored. Hosts are
// names or IP addresses (IPv6 in brackets), and the port is required. A
// failover list has exactly two connectors, because a failover pair is a
// main and its backup (as discovery announces them); use static for more.
// Lists do not nest, and no connector may appear twice in one.
//
// Every error wraps ErrConnector and names the connector that is wrong.
func ParseConnectors(s string) (Connectors, error) {
	text := strings.TrimSpace(s)
	if text == "" {
		return Connectors{}, badConnector(s, "empty (want tcp://host:port, tls://host:port, static:(...) or failover:(...))")
	}
	for _, mode := range []Mode{ModeStatic, ModeFailover} {
		if body, ok := strings.CutPrefix(text, mode.String()+":"); ok {
			return parseList(text, mode, body)
		}
	}
	if kind, _, ok := strings.Cut(text, ":("); ok && !strings.Contains(kind, "/") {
		return Connectors{}, badConnector(text, fmt.Sprintf("unknown list kind %s (want static or failover)", quote(kind)))
	}
	if strings.Contains(text, ",") {
		return Connectors{}, badConnector(text, "several connectors go in a list: static:(...) or failover:(...)")
	}
	c, err := parseConnector(text)
	if err != nil {
		return Connectors{}, err
	}
	return Connectors{Mode: ModeSingle, List: []Connector{c}}, nil
}

// parseList parses the "(c1,c2,...)" after "static:" or "failover:". text
// is the whole URI, for errors.
func parseList(text string, mode Mode, body string) (Connectors, error) {
	body = strings.TrimSpace(body)
	inner, open := strings.CutPrefix(body, "(")
	inner, closed := strings.CutSuffix(inner, ")")
	if !open || !closed {
		return Connectors{}, badConnector(text, fmt.Sprintf("want a list in parentheses, as in %s:(tcp://a:7400,tcp://b:7400)", mode))
	}
	if strings.ContainsAny(inner, "()") {
		return Connectors{}, badConnector(text, "lists do not nest, and '(' or ')' cannot appear in a connector")
	}
	if strings.TrimSpace(inner) == "" {
		return Connectors{}, badConnector(text, fmt.Sprintf("%s list has no connectors", mode))
	}
	items := strings.Split(inner, ",")
	list := make([]Connector, 0, len(items))
	seen := make(map[string]bool, len(items))
	for i, item := range items {
		item = strings.TrimSpace(item)
		if item == "" {
			return Connectors{}, badConnector(text, fmt.Sprintf("item %d of the list is empty", i+1))
		}
		c, err := parseConnector(item)
		if err != nil {
			return Connectors{}, err
		}
		key := c.String()
		if seen[key] {
			return Connectors{}, badConnector(text, fmt.Sprintf("%s is listed twice", quote(key)))
		}
		seen[key] = true
		list = append(list, c)
	}
	if mode == ModeFailover && len(list) != 2 {
		return Connectors{}, badConnector(text, fmt.Sprintf("failover needs exactly 2 connectors, a main and a backup, not %d (use static:(...) to try several in turn)", len(list)))
	}
	return Connectors{Mode: mode, List: list}, nil
}
