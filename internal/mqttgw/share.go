package mqttgw

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"

	mqtt "github.com/mochi-mqtt/server/v2"
)

// Shared subscriptions: $share/<group>/<filter> (MQTT 5 4.8.2, and as
// Mosquitto takes them from MQTT 3.1.1 clients too).
//
// The members of a group, sessions holding the same $share/<group>/
// <filter>, compete for one durable Petrel subscription named after the
// group and filter (shareName): each message goes to one member, and one
// a member had in flight when it went goes back to the others. mochi
// parses and validates the filter (MQTT-4.8.2-1, -2), refuses No Local on
// it (MQTT-3.8.3-4) and sends no retained message on subscribe (4.8.2);
// it routes nothing here, as for any subscription.
//
// The Petrel subscription is durable whatever its members, so that
// persistent and clean sessions may share it, and lives while the group
// has a member: a persistent session is one while it exists, connected or
// not, so what comes meanwhile waits for the group; a clean session until
// its connection ends. The last member leaving deletes it, and at start
// a group left by a crash with only clean members (shareOrphans).
type shares struct {
	mu      sync.Mutex                     // serialises joins and leaves with the Petrel subscriptions they make and delete
	members map[string]map[string]struct{} // by share name, client ids
}

func newShares() *shares { return &shares{members: map[string]map[string]struct{}{}} }

// sharePrefix starts the names of the groups' Petrel subscriptions; a
// persistent session's own ones start with "mqtt.", so never meet them.
const sharePrefix = "mqtt-share."

// ErrShare is returned for a $share filter with no group name.
var ErrShare = errors.New("mqtt shared subscription without a share name")

// splitShared splits a shared subscription's filter into its group and
// its topic filter; shared is false for any other filter. mochi has
// checked the rest of MQTT-4.8.2-1 and -2; an empty group passes it.
func splitShared(filter string) (group, rest string, shared bool, err error) {
	after, ok := strings.CutPrefix(filter, "$share/")
	if !ok {
		return "", filter, false, nil
	}
	group, rest, ok = strings.Cut(after, "/")
	if !ok || group == "" || rest == "" || strings.ContainsAny(group, "+#") {
		return "", "", true, fmt.Errorf("filter %q: %w ($share/<name>/<filter>)", clip(filter), ErrShare)
	}
	return group, rest, true, nil
}

// badFilter reports whether filter breaks the rules of wildcards
// (MQTT-4.7.1) or of shared subscriptions (MQTT-4.8.2-1).
func badFilter(filter string) bool {
	_, rest, _, err := splitShared(filter)
	return err != nil || errors.Is(checkFilter(rest), errWildcard)
}

// petrelFilter maps a filter, shared or not, to its Petrel pattern.
func petrelFilter(filter string) (string, error) {
	_, rest, _, err := splitShared(filter)
	if err != nil {
		return "", err
	}
	return FilterToPetrel(rest)
}

// shareName names a group's Petrel subscription: the prefix, up to 40
// bytes of the group that are name bytes, and a hash of group and filter,
// which makes it unique.
func shareName(group, filter string) string {
	var b strings.Builder
	b.WriteString(sharePrefix)
	for i := 0; i < len(group) && b.Len() < len(sharePrefix)+40; i++ {
		c := group[i]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' {
			b.WriteByte(c)
		}
	}
	h := sha256.Sum256([]byte(group + "\x00" + filter))
	b.WriteByte('.')
	b.WriteString(hex.EncodeToString(h[:8]))
	return b.String()
}

// joinShare makes clientID a member of the group of filter ($share/…)
// and subscribes to its Petrel subscription, under the lock that keeps a
// last member's leave from deleting it meanwhile.
func (g *Gateway) joinShare(ctx context.Context, clientID, filter, pattern string, c Conn) (Subscription, error) {
	group, rest, _, _ := splitShared(filter)
	name := shareName(group, rest)
	g.shares.mu.Lock()
	defer g.shares.mu.Unlock()
	ps, err := g.be.Subscribe(ctx, pattern, name, true, c)
	if err != nil {
		return nil, err
	}
	m := g.shares.members[name]
	if m == nil {
		m = map[string]struct{}{}
		g.shares.members[name] = m
	}
	m[clientID] = struct{}{}
	return ps, nil
}

// leaveShare ends clientID's membership of the group of filter, and
// deletes the group's Petrel subscription when it was the last member.
func (g *Gateway) leaveShare(clientID, filter string) {
	group, rest, _, err := splitShared(filter)
	if err != nil {
		return
	}
	name := shareName(group, rest)
	g.shares.mu.Lock()
	defer g.shares.mu.Unlock()
	m := g.shares.members[name]
	delete(m, clientID)
	if len(m) > 0 {
		return
	}
	delete(g.shares.members, name)
	if err := g.be.Unsubscribe(g.ctx, name); err != nil && !errors.Is(err, context.Canceled) {
		g.log.Warn("mqtt shared subscription not deleted", slog.String("group", clip(group)), slog.String("filter", clip(rest)), slog.Any("error", err))
	}
}

// loadShares, at start, counts the kept persistent sessions as the
// members of their groups, and deletes the groups' Petrel subscriptions
// that have none: their members were clean sessions, whose connections
// the node's stop or crash ended.
func (g *Gateway) loadShares(clients map[string]*mqtt.Client) {
	g.shares.mu.Lock()
	defer g.shares.mu.Unlock()
	for id, cl := range clients {
		for filter := range cl.State.Subscriptions.GetAll() {
			group, rest, shared, err := splitShared(filter)
			if !shared || err != nil {
				continue
			}
			name := shareName(group, rest)
			if g.shares.members[name] == nil {
				g.shares.members[name] = map[string]struct{}{}
			}
			g.shares.members[name][id] = struct{}{}
		}
	}
	for _, name := range g.be.Subscriptions() {
		if strings.HasPrefix(name, sharePrefix) && g.shares.members[name] == nil {
			if err := g.be.Unsubscribe(g.ctx, name); err != nil {
				g.log.Warn("mqtt shared subscription without members not deleted", slog.String("name", name), slog.Any("error", err))
			}
		}
	}
}

// sharedGroups counts the groups with members.
func (g *Gateway) sharedGroups() int {
	g.shares.mu.Lock()
	defer g.shares.mu.Unlock()
	return len(g.shares.members)
}
