package address

import (
	"cmp"
	"fmt"
	"net"
	"sort"
	"strconv"

	"github.com/petrelmq/petrel/message"
)

// The parameters that carry a tcp or tls connector's address.
const (
	paramHost = "host" // string: a host name or an IP address (IPv6 without brackets)
	paramPort = "port" // int32: 1 to 65535
)

// AnnouncementFor returns the announcement of node name, id, reachable
// through cs:
//
//   - a single connector is one pair without a backup;
//   - failover:(main,backup) is one pair, main and backup;
//   - static:(a,b,...) is one pair per connector, without backups.
//
// A connector is announced with its scheme as factory, its address as a
// "host" string and a "port" int32 parameter, and its URI options as string
// parameters sorted by key. Pair i's main connector is named "c<i>" and its
// backup "c<i>-backup". A connector with an option named host or port
// cannot be announced: AppendBinary refuses the duplicate parameter.
func AnnouncementFor(name string, id message.NodeID, cs Connectors) Announcement {
	a := Announcement{Name: name, ID: id}
	if cs.Mode == ModeFailover && len(cs.List) == 2 {
		backup := announce("c1-backup", cs.List[1])
		a.Pairs = []ConnectorPair{{Main: announce("c1", cs.List[0]), Backup: &backup}}
		return a
	}
	for i, c := range cs.List {
		a.Pairs = append(a.Pairs, ConnectorPair{Main: announce("c"+strconv.Itoa(i+1), c)})
	}
	return a
}

// announce returns the announced form of c, named name.
func announce(name string, c Connector) AnnouncedConnector {
	host, port, _ := net.SplitHostPort(c.Addr) // canonical from ParseConnectors
	p, _ := strconv.Atoi(port)
	params := make([]Param, 0, 2+len(c.Params))
	params = append(params, Param{Key: paramHost, Value: host}, Param{Key: paramPort, Value: int32(p)})
	keys := make([]string, 0, len(c.Params))
	for k := range c.Params {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		params = append(params, Param{Key: k, Value: c.Params[k]})
	}
	return AnnouncedConnector{Name: name, Factory: c.Scheme, Params: params}
}

// Connector returns the connector c announces. The factory is the scheme
// ("tcp" or "tls"); the "host" string and "port" int32 parameters make the
// address; every other parameter becomes a URI option, a bool as "true" or
// "false" and an integer in decimal. The result obeys the rules of
// ParseConnectors (its String parses back to an equal Connector).
//
// Errors wrap ErrConnector: an unknown factory, a missing or mistyped host
// or port, a host that is neither a name nor an IP address, or an option
// name a connector URI cannot hold.
func (c AnnouncedConnector) Connector() (Connector, error) {
	bad := func(reason string) error {
		return fmt.Errorf("announced connector %s: %s: %w", quote(c.Name), reason, ErrConnector)
	}
	if c.Factory != SchemeTCP && c.Factory != SchemeTLS {
		return Connector{}, bad(fmt.Sprintf("unknown factory %s (want tcp or tls)", quote(c.Factory)))
	}
	conn := Connector{Scheme: c.Factory}
	var host *string
	var port *int32
	for _, p := range c.Params {
		switch v := p.Value.(type) {
		case string:
			if p.Key == paramHost {
				host = &v
				continue
			}
			conn.setParam(p.Key, v)
		case int32:
			if p.Key == paramPort {
				port = &v
				continue
			}
			conn.setParam(p.Key, strconv.FormatInt(int64(v), 10))
		case int64:
			conn.setParam(p.Key, strconv.FormatInt(v, 10))
		case bool:
			conn.setParam(p.Key, strconv.FormatBool(v))
		default:
			return Connector{}, bad(fmt.Sprintf("parameter %s of type %T", quote(p.Key), p.Value))
		}
		if !validParamKey(p.Key) {
			return Connector{}, bad(fmt.Sprintf("parameter name %s: want letters, digits, '.', '-' or '_'", quote(p.Key)))
		}
	}
	if host == nil || port == nil {
		return Connector{}, bad("want a host string parameter and a port int32 parameter")
	}
	addr, err := parseAddr(net.JoinHostPort(*host, strconv.FormatInt(int64(*port), 10)))
	if err != nil {
		return Connector{}, bad(err.Error())
	}
	conn.Addr = addr
	return conn, nil
}

// setParam sets a URI option, making Params on first use.
func (c *Connector) setParam(k, v string) {
	if c.Params == nil {
		c.Params = make(map[string]string)
	}
	c.Params[k] = v
}

// Connectors returns the connectors p announces: the main alone, or
// failover:(main,backup). Errors wrap ErrConnector.
func (p ConnectorPair) Connectors() (Connectors, error) {
	main, err := p.Main.Connector()
	if err != nil {
		return Connectors{}, err
	}
	if p.Backup == nil {
		return Connectors{Mode: ModeSingle, List: []Connector{main}}, nil
	}
	backup, err := p.Backup.Connector()
	if err != nil {
		return Connectors{}, err
	}
	if main.String() == backup.String() {
		return Connectors{}, fmt.Errorf("announced connector %s: backup %s is the main connector again: %w", quote(p.Backup.Name), quote(backup.String()), ErrConnector)
	}
	return Connectors{Mode: ModeFailover, List: []Connector{main, backup}}, nil
}

// Connectors returns the connectors a announces, for the directory, from
// the pairs this node can use; pairs it cannot (an unknown factory, say, from
// a newer node) are skipped. One pair gives that pair's Connectors. Several
// give static:(...) of every main and backup in announcement order, without
// repeats: a connector list does not nest, so the failover of each pair
// becomes "try the backup after its main". Errors wrap ErrConnector, when no
// pair is usable.
func (a Announcement) Connectors() (Connectors, error) {
	var usable []Connectors
	var firstErr error
	for _, p := range a.Pairs {
		cs, err := p.Connectors()
		if err != nil {
			firstErr = cmp.Or(firstErr, err)
			continue
		}
		usable = append(usable, cs)
	}
	switch {
	case len(usable) == 1:
		return usable[0], nil
	case len(usable) == 0 && firstErr != nil:
		return Connectors{}, firstErr
	case len(usable) == 0:
		return Connectors{}, fmt.Errorf("node %s announces no connectors: %w", quote(a.Name), ErrConnector)
	}
	all := Connectors{Mode: ModeStatic}
	seen := make(map[string]bool)
	for _, cs := range usable {
		for _, c := range cs.List {
			if key := c.String(); !seen[key] {
				seen[key] = true
				all.List = append(all.List, c)
			}
		}
	}
	if len(all.List) == 1 {
		all.Mode = ModeSingle
	}
	return all, nil
}
