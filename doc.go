// Package petrel is the embedding API of Petrel, a store-and-forward
// messaging middleware: open a Node in your program, make messages with its
// Producer, and consume them with a Consumer that polls, blocks or listens.
//
//	node, err := petrel.Open(ctx, petrel.Config{Name: "plant-7", DataDir: "/var/lib/petrel"})
//	if err != nil { ... }
//	defer node.Close()
//
//	p := node.Producer()
//	m := p.CreateCommandMessage("orders")
//	m.Command.Command = "start"
//	if err := p.Send(ctx, m); err != nil { ... } // durable once Send returns
//
//	c, _ := node.Consumer("orders")
//	d, err := c.Receive(ctx)
//	...
//	d.Ack()
//
// A process that does not embed a node dials one instead, and gets the same
// Producer and Consumer (both *Node and *Client are an Endpoint):
//
//	node, err := petrel.Dial(ctx, "tcp://plant-7:7400", petrel.DialOptions{Name: "billing"})
//
// Invariants: Send returns nil only once the message is committed to the
// node's store (fsynced, with the default sync mode). Delivery to consumers
// is at-least-once: a message comes back until it is acked.
//
// The root package assembles the fx modules of the packages below it; it
// must not import conf or cmd. Its exported identifiers are what an
// embedder uses, and testdata/exports.golden lists them (TestExports): the
// admin HTTP API's wire types and client are in internal/adminapi, the
// admin server's handlers are methods of an unexported type.
package petrel
