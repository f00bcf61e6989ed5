package filetransfer

// State is where a file transfer stands, as a node reports it: one
// vocabulary for the sending side (a sender's active files, the outcome
// of a file sent from the node) and the receiving side (the transfers a
// receiver holds), so that the status, the metrics and the CLI match
// them against the same words.
type State string

// States of a file being sent, in the order a transfer goes through them.
const (
	// StateWaiting: queued, or leased while its link is down.
	StateWaiting State = "waiting"
	StateSending State = "sending"
	// StateBackingOff: the link broke; the transfer resumes after a
	// backoff, from where the next hop stands.
	StateBackingOff State = "backing off"
	// StateHandedOver: the next hop has it; this node is done with it.
	StateHandedOver State = "handed over"
	// StateDelivered: it was for this node, and it is in its folder.
	StateDelivered State = "delivered"
	// StateFailed: given up for good; the error says why.
	StateFailed State = "failed"
)

// States of a file being received.
const (
	StateReceiving State = "receiving"
	// StatePaused: stopped short (a cut link, a full spool); it resumes
	// when its sender comes back.
	StatePaused State = "paused"
	// StateHeld: whole and verified at a relay, which holds it until it
	// has forwarded it (a file for this node ends delivered instead).
	StateHeld State = "held"
)
