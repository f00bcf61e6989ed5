package conf

import (
	"fmt"
	"time"

	petrel "github.com/petrelmq/petrel"
	"github.com/petrelmq/petrel/address"
	"github.com/petrelmq/petrel/queue"
)

// AddressSection declares one address of this node, with its role and, for a
// receive address, the consumer-side policy of its queue (queue.Policy). Zero
// values mean the queue package's defaults.
type AddressSection struct {
	// Name of the address, without "@node". A name ending in ".dlq" is an
	// ordinary name, so a dead-letter queue can be declared with a policy of
	// its own.
	Name string `yaml:"name"`
	// Role is receive, send or relay. Default receive.
	Role address.Role `yaml:"role"`
	// Node is, for a send address, the node that hosts it (required); the
	// other roles take none.
	Node string `yaml:"node"`
	// ReceivedDir is where files received for a receive address are
	// placed. Default <files.received>/<name>.
	ReceivedDir string `yaml:"received_dir"`

	MaxDeliveries      int      `yaml:"max_deliveries"`
	DeadLetter         string   `yaml:"dead_letter"`
	ExpiryAddress      string   `yaml:"expiry_address"`
	LeaseTimeout       Duration `yaml:"lease_timeout"`
	RedeliveryDelay    Duration `yaml:"redelivery_delay"`
	MaxRedeliveryDelay Duration `yaml:"max_redelivery_delay"`
}

// consumerKeys are the policy keys that only mean something where consumers
// read the queue. On a send or relay address they would be silently ignored,
// so they are refused instead.
var consumerKeys = []string{"received_dir", "max_deliveries", "dead_letter", "lease_timeout", "redelivery_delay", "max_redelivery_delay"}

func (a *AddressSection) check(c *checker, path string) {
	c.required(path, "name", "an address needs a name")
	c.name(join(path, "name"), a.Name)
	a.checkNode(c, join(path, "node"))
	if a.Role != 0 && a.Role != address.RoleReceive {
		for _, k := range consumerKeys {
			if c.has(join(path, k)) {
				c.fail(join(path, k), reasonf(nil, "applies only to receive addresses, and this one is %s", a.Role))
			}
		}
	}
	c.atLeast(join(path, "max_deliveries"), int64(a.MaxDeliveries), 1)
	a.checkTarget(c, join(path, "dead_letter"), a.DeadLetter)
	a.checkTarget(c, join(path, "expiry_address"), a.ExpiryAddress)
	c.positive(join(path, "lease_timeout"), a.LeaseTimeout)
	c.positive(join(path, "redelivery_delay"), a.RedeliveryDelay)
	c.positive(join(path, "max_redelivery_delay"), a.MaxRedeliveryDelay)
	// Only when both are written: the defaults are the queue package's, and
	// conf does not repeat them.
	if a.RedeliveryDelay > 0 && a.MaxRedeliveryDelay > 0 && a.RedeliveryDelay > a.MaxRedeliveryDelay {
		c.fail(join(path, "redelivery_delay"), reasonf(nil, "%s is more than max_redelivery_delay %s", a.RedeliveryDelay, a.MaxRedeliveryDelay))
	}
}

// checkNode checks the node key. That a send address has one, and that the
// node can be reached, are petrel.Config.Validate's rules; what conf adds is
// that the key is refused where it would be silently ignored.
func (a *AddressSection) checkNode(c *checker, path string) {
	if !c.has(path) {
		return
	}
	if a.Role != address.RoleSend {
		role := a.Role
		if role == 0 {
			role = address.RoleReceive
		}
		c.fail(path, reasonf(nil, "applies only to send addresses, and this one is %s (add role: send to forward it to that node)", role))
		return
	}
	c.name(path, a.Node)
}

// checkTarget checks an address that takes this one's messages (dead letters,
// expired messages). Pointing it at the address itself would loop.
func (a *AddressSection) checkTarget(c *checker, path, target string) {
	if !c.has(path) {
		return
	}
	c.name(path, target)
	if target == a.Name {
		c.fail(path, reasonf(nil, "is the address itself (%q); name another address", target))
	}
}

func (a *AddressSection) fill() {
	if a.Role == 0 {
		a.Role = address.RoleReceive
	}
}

func (a *AddressSection) addressConfig() petrel.AddressConfig {
	role := a.Role
	if role == 0 {
		role = address.RoleReceive
	}
	return petrel.AddressConfig{
		Name:        a.Name,
		Role:        role,
		Node:        a.Node,
		ReceivedDir: a.ReceivedDir,
		Queue: queue.Policy{
			MaxDeliveries:      a.MaxDeliveries,
			DeadLetter:         a.DeadLetter,
			ExpiryAddress:      a.ExpiryAddress,
			LeaseTimeout:       time.Duration(a.LeaseTimeout),
			RedeliveryDelay:    time.Duration(a.RedeliveryDelay),
			MaxRedeliveryDelay: time.Duration(a.MaxRedeliveryDelay),
		},
	}
}

func parseRole(s string) (any, error) {
	r, err := address.ParseRole(s)
	if err != nil {
		return nil, reasonf(err, "unknown address role %s (want receive, send or relay)", short(s))
	}
	return r, nil
}

// addressList is the addresses section: each item's checks, and the rule
// across items that names are unique.
type addressList []AddressSection

func (l addressList) check(c *checker, path string) {
	first := make(map[string]int, len(l))
	for i := range l {
		item := fmt.Sprintf("%s[%d]", path, i)
		l[i].check(c, item)
		if l[i].Name == "" {
			continue
		}
		if j, dup := first[l[i].Name]; dup {
			c.fail(join(item, "name"), reasonf(nil, "address %q is declared twice (first as %s[%d])", l[i].Name, path, j))
			continue
		}
		first[l[i].Name] = i
	}
}
