package petrel

// Action is what a peer asks to do with an address; see Node.Authorize.
type Action string

// The actions access rules govern.
const (
	ActionSend    Action = "send"    // put messages on the address
	ActionConsume Action = "consume" // take messages from the address
	ActionRelay   Action = "relay"   // forward messages for the address to another node
)

// Authorize decides whether identity (a client's or node's authenticated
// name) may do action on addr. It returns nil when allowed, or an error
// wrapping ErrDenied.
//
// Access rules are not configurable yet: everything is allowed.
func (n *Node) Authorize(identity string, action Action, addr string) error {
	return nil
}
