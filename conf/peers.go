package conf

import (
	"errors"
	"fmt"
	"os"
	"strings"

	petrel "github.com/petrelmq/petrel"
	"github.com/petrelmq/petrel/message"
)

// PeerSection is one identity that may connect to this node, with its own
// credentials (petrel.PeerConfig). Listing any switches the listener from
// the shared secret to per-identity credentials.
type PeerSection struct {
	// Name is the identity: a node's name, a client's name, or under mutual
	// TLS its certificate's Common Name.
	Name string `yaml:"name"`
	// Secret is the identity's own secret; after Parse it holds the content
	// of SecretFile when the file names one. Prefer secret_file.
	Secret Secret `yaml:"secret"`
	// SecretFile is the path of a file holding the identity's secret.
	SecretFile string `yaml:"secret_file"`
	// Kind is node (the default) or client.
	Kind string `yaml:"kind"`
	// Relay lets a node identity hand over messages other nodes made.
	Relay bool `yaml:"relay"`
	// ID, in hex, pins the node id the identity must prove; empty binds
	// the id it proves first.
	ID string `yaml:"id"`
}

func (p *PeerSection) check(c *checker, path string) {
	c.required(path, "name", "a peer needs a name: the node's or client's name, or its certificate's Common Name")
	c.name(join(path, "name"), p.Name)
	if c.has(join(path, "kind")) && p.Kind != string(petrel.PeerKindNode) && p.Kind != string(petrel.PeerKindClient) {
		c.fail(join(path, "kind"), reasonf(nil, "%s: want node or client", short(p.Kind)))
	}
	if c.has(join(path, "id")) {
		if _, err := message.ParseNodeID(p.ID); err != nil {
			c.fail(join(path, "id"), reasonf(err, "%s is not a node id (want the 32 hex digits of the node's node.id file): %v", short(p.ID), err))
		}
	}
	secretKeys(c, path, p.Secret, p.SecretFile)
}

// secretKeys checks an item's secret and secret_file, which must not be
// empty when set, and exclude each other.
func secretKeys(c *checker, path string, secret Secret, file string) {
	s, sf := join(path, "secret"), join(path, "secret_file")
	c.nonEmpty(s, string(secret), "leave it out, or prefer secret_file")
	c.nonEmpty(sf, file, "leave it out, or name the file that holds the secret")
	if c.has(s) && c.has(sf) {
		c.fail(sf, reasonf(nil, "set secret or secret_file, not both"))
	}
}

// peerList is the peers section. Rules across sections (a peer named as
// this node, a secret needed without mutual TLS, an id pinned twice) are
// petrel.Config.Validate's.
type peerList []PeerSection

func (l peerList) check(c *checker, path string) {
	seen := map[string]bool{}
	for i := range l {
		item := fmt.Sprintf("%s[%d]", path, i)
		l[i].check(c, item)
		if l[i].Name != "" && seen[l[i].Name] {
			c.fail(join(item, "name"), reasonf(nil, "identity %q is listed twice", l[i].Name))
		}
		seen[l[i].Name] = true
	}
}

// readItemSecrets fills each peer's and neighbour's Secret from its
// secret_file. Like readSecret, it runs with the checks, so a file that
// cannot be read is reported at its line.
func (f *File) readItemSecrets(c *checker) {
	for i := range f.Peers {
		path := fmt.Sprintf("peers[%d]", i)
		if s, ok := readItemSecret(c, path, f.Peers[i].SecretFile); ok {
			f.Peers[i].Secret = s
		}
	}
	for i := range f.Nodes {
		path := fmt.Sprintf("nodes[%d]", i)
		if s, ok := readItemSecret(c, path, f.Nodes[i].SecretFile); ok {
			f.Nodes[i].Secret = s
		}
	}
}

// readItemSecret reads the secret_file of the item at path.
func readItemSecret(c *checker, path, file string) (Secret, bool) {
	key := join(path, "secret_file")
	if file == "" || c.has(join(path, "secret")) {
		return "", false
	}
	data, err := readSecretFile(file)
	if err != nil {
		var pe *os.PathError
		if errors.As(err, &pe) {
			err = pe.Err // the path is in the reason already
		}
		c.fail(key, reasonf(err, "cannot read %s: %v", short(file), err))
		return "", false
	}
	secret := strings.TrimRight(string(data), "\r\n")
	if secret == "" {
		c.fail(key, reasonf(nil, "%s is empty: put the secret in it, or leave secret_file out", short(file)))
		return "", false
	}
	return Secret(secret), true
}

func (f *File) peerConfigs() []petrel.PeerConfig {
	var peers []petrel.PeerConfig
	for _, p := range f.Peers {
		pc := petrel.PeerConfig{Name: p.Name, Secret: string(p.Secret), Kind: petrel.PeerKind(p.Kind), Relay: p.Relay}
		if p.ID != "" {
			pc.ID, _ = message.ParseNodeID(p.ID) // checked
		}
		peers = append(peers, pc)
	}
	return peers
}
