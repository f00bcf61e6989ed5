package conf

import (
	"fmt"
	"strings"

	petrel "github.com/petrelmq/petrel"
	"github.com/petrelmq/petrel/address"
)

// NeighbourSection is another node that this node reaches directly, and
// how.
type NeighbourSection struct {
	// Name is the node's name, as that node calls itself.
	Name string `yaml:"name"`
	// Connector is how to reach it; see address.ParseConnectors.
	Connector address.Connectors `yaml:"connector"`
	// Secret is the secret this node proves to that node when dialing it
	// (its own entry in that node's peers); after Parse it holds the
	// content of SecretFile when the file names one. Empty: the shared
	// secret, or this node's peers entry for that node.
	Secret Secret `yaml:"secret"`
	// SecretFile is the path of a file holding that secret.
	SecretFile string `yaml:"secret_file"`
}

func (n *NeighbourSection) check(c *checker, path string) {
	c.required(path, "name", "a node needs a name")
	c.name(join(path, "name"), n.Name)
	c.required(path, "connector", "a node needs a connector, such as tcp://host:7400")
	secretKeys(c, path, n.Secret, n.SecretFile)
}

// parseConnectors parses a connector URI with the address package, so that
// the file and the node agree on what one is.
func parseConnectors(s string) (any, error) {
	c, err := address.ParseConnectors(s)
	if err != nil {
		// The address package's text ends with its sentinel's words,
		// which read oddly after a field path; the sentinel stays in Err.
		reason := strings.TrimSuffix(err.Error(), ": "+address.ErrConnector.Error())
		if strings.Contains(s, ":(") && !strings.Contains(s, ")") {
			// YAML ends a plain value at a comma inside {...} or [...].
			reason += " (inside {...} or [...], quote a list of connectors, or YAML cuts it at the first comma)"
		}
		return nil, reasonf(err, "%s", reason)
	}
	return c, nil
}

// nodeList is the nodes section. Rules across items (a name given twice,
// this node's own name) are petrel.Config.Validate's.
type nodeList []NeighbourSection

func (l nodeList) check(c *checker, path string) {
	for i := range l {
		l[i].check(c, fmt.Sprintf("%s[%d]", path, i))
	}
}

// RouteSection says that traffic for Node goes through the neighbour Via.
type RouteSection struct {
	Node string `yaml:"node"`
	Via  string `yaml:"via"`
}

func (r *RouteSection) check(c *checker, path string) {
	c.required(path, "node", "a route needs the node it leads to")
	c.required(path, "via", "a route needs via, the neighbour that carries its traffic")
	c.name(join(path, "node"), r.Node)
	c.name(join(path, "via"), r.Via)
	if r.Node != "" && r.Node == r.Via {
		c.fail(join(path, "via"), reasonf(nil, "a route to %q through itself: a neighbour needs no route", r.Node))
	}
}

// routeList is the routes section. Rules across items and sections (two
// routes to one node, via a node that is not in nodes) are
// petrel.Config.Validate's.
type routeList []RouteSection

func (l routeList) check(c *checker, path string) {
	for i := range l {
		l[i].check(c, fmt.Sprintf("%s[%d]", path, i))
	}
}

func (f *File) nodeConfigs() []petrel.NodeConfig {
	var nodes []petrel.NodeConfig
	for _, n := range f.Nodes {
		nodes = append(nodes, petrel.NodeConfig{Name: n.Name, Connector: n.Connector.String(), Secret: string(n.Secret)})
	}
	return nodes
}

func (f *File) routeConfigs() []petrel.RouteConfig {
	var routes []petrel.RouteConfig
	for _, r := range f.Routes {
		routes = append(routes, petrel.RouteConfig{Node: r.Node, Via: r.Via})
	}
	return routes
}
