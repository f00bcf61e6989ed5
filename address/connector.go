package address

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"sort"
	"strconv"
	"strings"
)

// ErrConnector is returned when a connector URI cannot be parsed. The error
// that wraps it names the connector and says what is wrong with it, as in
// `connector "tcp://host": missing port: invalid connector`.
var ErrConnector = errors.New("invalid connector")

// The schemes of a single connector.
const (
	SchemeTCP = "tcp" // plain TCP
	SchemeTLS = "tls" // TCP with TLS
)

// Connector is one way to reach a node: a scheme, a host and port, and
// options for whoever dials it.
//
// Its text form is scheme://host:port?key=value&key=value. address checks the
// syntax of the options, not their meaning: the package that dials decides
// which keys it knows.
type Connector struct {
	// Scheme is SchemeTCP or SchemeTLS.
	Scheme string
	// Addr is "host:port", with an IPv6 host in brackets ("[::1]:7400").
	// The port is required, from 1 to 65535. IP addresses are in their
	// canonical form and the port has no leading zeros.
	Addr string
	// Params are the query parameters, such as ca in
	// tls://h:7400?ca=/etc/ca.pem. Nil when there are none, never empty.
	Params map[string]string
}

// String returns the connector's canonical text: scheme://addr, then the
// parameters sorted by key, with the bytes that would break the syntax
// percent-encoded. ParseConnectors reads it back to an equal Connector.
func (c Connector) String() string {
	var b strings.Builder
	b.WriteString(c.Scheme)
	b.WriteString("://")
	b.WriteString(c.Addr)
	keys := make([]string, 0, len(c.Params))
	for k := range c.Params {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for i, k := range keys {
		if i == 0 {
			b.WriteByte('?')
		} else {
			b.WriteByte('&')
		}
		b.WriteString(escapeParam(k))
		b.WriteByte('=')
		b.WriteString(escapeParam(c.Params[k]))
	}
	return b.String()
}

// clone returns c with its own copy of Params.
func (c Connector) clone() Connector {
	if c.Params != nil {
		p := make(map[string]string, len(c.Params))
		for k, v := range c.Params {
			p[k] = v
		}
		c.Params = p
	}
	return c
}

// parseConnector parses one connector, scheme://host:port[?params]. s has no
// surrounding whitespace.
func parseConnector(s string) (Connector, error) {
	scheme, rest, ok := strings.Cut(s, "://")
	if !ok {
		return Connector{}, badConnector(s, "want scheme://host:port, such as tcp://127.0.0.1:7400")
	}
	switch scheme {
	case SchemeTCP, SchemeTLS:
	case "":
		return Connector{}, badConnector(s, "missing scheme (want tcp or tls)")
	default:
		return Connector{}, badConnector(s, fmt.Sprintf("unknown scheme %s (want tcp or tls)", quote(scheme)))
	}
	hostport, query, hasQuery := strings.Cut(rest, "?")
	addr, err := parseAddr(hostport)
	if err != nil {
		return Connector{}, badConnector(s, err.Error())
	}
	c := Connector{Scheme: scheme, Addr: addr}
	if hasQuery {
		if c.Params, err = parseParams(query); err != nil {
			return Connector{}, badConnector(s, err.Error())
		}
	}
	return c, nil
}

// badConnector is the error for connector text s, with what is wrong.
func badConnector(s, reason string) error {
	return fmt.Errorf("connector %s: %s: %w", quote(s), reason, ErrConnector)
}

// parseAddr checks "host:port" and returns it in canonical form.
func parseAddr(hostport string) (string, error) {
	if hostport == "" {
		return "", errors.New("missing host and port")
	}
	if i := strings.IndexAny(hostport, "/#"); i >= 0 {
		return "", fmt.Errorf("unexpected %s after the port (a connector is scheme://host:port?options)", quote(hostport[i:]))
	}
	host, port, err := splitHostPort(hostport)
	if err != nil {
		return "", err
	}
	p, err := parsePort(port)
	if err != nil {
		return "", err
	}
	return net.JoinHostPort(host, strconv.Itoa(p)), nil
}

// splitHostPort splits hostport and checks the host, which it returns in
// canonical form (without brackets). It says precisely what is missing,
// which net.SplitHostPort's errors do not.
func splitHostPort(hostport string) (host, port string, err error) {
	if rest, ok := strings.CutPrefix(hostport, "["); ok {
		inner, after, closed := strings.Cut(rest, "]")
		switch {
		case !closed:
			return "", "", errors.New("missing ']' after the IPv6 address")
		case after == "":
			return "", "", errors.New("missing port")
		case after[0] != ':':
			return "", "", fmt.Errorf("unexpected %s after ']' (want :port)", quote(after))
		}
		ip, err := netip.ParseAddr(inner)
		if err != nil || !ip.Is6() {
			return "", "", fmt.Errorf("%s in brackets is not an IPv6 address", quote(inner))
		}
		if zone := ip.Zone(); zone != "" && !validHostname(zone) {
			return "", "", fmt.Errorf("IPv6 zone %s is not an interface name", quote(zone))
		}
		return ip.String(), after[1:], nil
	}
	i := strings.LastIndexByte(hostport, ':')
	if i < 0 {
		return "", "", errors.New("missing port")
	}
	host, port = hostport[:i], hostport[i+1:]
	switch {
	case host == "":
		return "", "", errors.New("missing host")
	case strings.Contains(host, ":"):
		return "", "", fmt.Errorf("IPv6 address %s needs brackets, as in [::1]:7400", quote(host))
	case strings.Contains(host, "]"):
		return "", "", fmt.Errorf("host %s has a ']' without '['", quote(host))
	}
	if ip, err := netip.ParseAddr(host); err == nil {
		return ip.String(), port, nil
	}
	if !validHostname(host) {
		return "", "", fmt.Errorf("host %s is not a host name or an IP address (a name has letters, digits, '.', '-' or '_')", quote(host))
	}
	return host, port, nil
}

// validHostname accepts the bytes of DNS names (and '_', which some private
// networks use), up to DNS's 253. It keeps out the bytes that the connector
// syntax uses: ',', '(', ')', '?', '&', '=', '%' and spaces.
func validHostname(s string) bool {
	if s == "" || len(s) > 253 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !isNameByte(s[i]) {
			return false
		}
	}
	return true
}

func isNameByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '-' || c == '_'
}

// parsePort accepts a decimal port from 1 to 65535. Service names ("http")
// are refused: a connector says exactly where to go.
func parsePort(s string) (int, error) {
	if s == "" {
		return 0, errors.New("missing port")
	}
	if len(s) > 5 || strings.TrimLeft(s, "0123456789") != "" {
		return 0, fmt.Errorf("port %s is not a number from 1 to 65535", quote(s))
	}
	p, _ := strconv.Atoi(s) // at most 5 digits: cannot fail
	if p < 1 || p > 65535 {
		return 0, fmt.Errorf("port %s is not a number from 1 to 65535", quote(s))
	}
	return p, nil
}

// parseParams parses "k=v&k=v". Keys are names; values are percent-decoded
// ('+' is a space, as in URLs). Empty parameters and repeated keys are
// refused, since the connector could only keep one meaning of them.
func parseParams(query string) (map[string]string, error) {
	if query == "" {
		return nil, errors.New("'?' with no parameters after it")
	}
	params := make(map[string]string)
	for _, part := range strings.Split(query, "&") {
		k, v, _ := strings.Cut(part, "=")
		switch {
		case part == "":
			return nil, errors.New("empty parameter (two '&' in a row, or one at an end)")
		case !validParamKey(k):
			return nil, fmt.Errorf("parameter name %s: want letters, digits, '.', '-' or '_'", quote(k))
		}
		if _, dup := params[k]; dup {
			return nil, fmt.Errorf("parameter %s given twice", quote(k))
		}
		value, err := url.QueryUnescape(v)
		if err != nil {
			return nil, fmt.Errorf("parameter %s: bad %%-escape in %s", quote(k), quote(v))
		}
		params[k] = value
	}
	return params, nil
}

func validParamKey(k string) bool {
	return k != "" && len(k) <= 64 && validHostname(k)
}

// escapeParam percent-encodes every byte of s except letters, digits and
// "-._~/:@", which are safe in a query and keep paths and addresses in
// parameters readable (ca=/etc/petrel/ca.pem).
func escapeParam(s string) string {
	const hex = "0123456789ABCDEF"
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if isNameByte(c) || strings.IndexByte("~/:@", c) >= 0 {
			b.WriteByte(c)
			continue
		}
		b.WriteByte('%')
		b.WriteByte(hex[c>>4])
		b.WriteByte(hex[c&15])
	}
	return b.String()
}

// quote quotes s for an error message, cut short: connector text can come
// from the network (discovery), and an error should fit on a line.
func quote(s string) string {
	const max = 80
	if len(s) > max {
		return strconv.Quote(s[:max]) + "…"
	}
	return strconv.Quote(s)
}
