package nodeproc

import (
	"fmt"
	"strconv"
	"strings"
)

// The ready line is the first thing `petrel node` and every bench agent
// print on stdout once their node is open:
//
//	ready node=<name> id=<id> data_dir=<dir> [listen=<host:port>] [admin=<host:port>] [mqtt=<host:port>] [pid=<pid>]
//
// Values are plain words, or quoted as Go quotes strings when they hold a
// space, a quote, an equals sign or a backslash (QuoteValue).

// ReadyInfo is what a ready line says.
type ReadyInfo struct {
	Node, ID, DataDir, Listen string
	// MQTT is the MQTT listener's host:port, "" when it is off.
	MQTT string
}

// QuoteValue quotes v if it would not read back as one key=value field.
// Node names are plain by rule; a path may hold anything.
func QuoteValue(v string) string {
	if v == "" || strings.ContainsAny(v, " \t\n\"=\\") {
		return strconv.Quote(v)
	}
	return v
}

// ParseReady reads the key=value fields of a ready line. A value may be
// quoted as Go quotes strings (QuoteValue).
func ParseReady(line string) (map[string]string, error) {
	rest, ok := strings.CutPrefix(line, "ready ")
	if !ok {
		return nil, fmt.Errorf("not a ready line: %q", line)
	}
	kv := map[string]string{}
	for rest = strings.TrimLeft(rest, " "); rest != ""; rest = strings.TrimLeft(rest, " ") {
		key, after, ok := strings.Cut(rest, "=")
		if !ok || key == "" || strings.Contains(key, " ") {
			return nil, fmt.Errorf("ready line %q: field %q has no value", line, rest)
		}
		var val string
		if strings.HasPrefix(after, `"`) {
			q, err := strconv.QuotedPrefix(after)
			if err != nil {
				return nil, fmt.Errorf("ready line %q: %w", line, err)
			}
			val, _ = strconv.Unquote(q)
			rest = after[len(q):]
		} else {
			val, rest, _ = strings.Cut(after, " ")
		}
		kv[key] = val
	}
	return kv, nil
}
