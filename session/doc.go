// Package session is Petrel's wire protocol between two nodes: frames, the
// binary codec of packets, the connection handshake with shared-secret or
// per-identity authentication (Config.Credentials) and version negotiation, sessions multiplexed on one TCP
// connection, windows, heartbeats and limits.
//
// A Conn is one connection, made by Client on the dialing node and Server on
// the listening one. The client opens Sessions (Conn.Open) for the
// addresses whose send queues it serves; the server takes them with
// Conn.Accept and accepts or refuses each. A session is one-way: the client
// sends Data packets with sequence numbers, the server acknowledges them
// cumulatively (DataAck) or refuses single ones (Refuse). What the numbers
// mean, and what is durable, is for the sender and receiver packages.
//
// # Wire
//
// Every frame is a 10-byte header (type, flags, session id, payload length;
// see frames.go) and a payload whose layout is drawn on each packet type
// (packets_conn.go, packets_session.go, packets_client.go). Session 0 is
// the connection itself.
//
//	client (sender)                              server (receiver)
//	                 <---- Hello                    session 0: the handshake,
//	Auth             ---->                          see handshake.go
//	                 <---- AuthOK
//	SessionCreate    ---->                          session n, chosen by the client
//	                 <---- SessionCreateResponse    accepted, or refused with a reason
//	Data seq=1..k    ---->                          at most Window not yet taken by Recv
//	                 <---- DataAck seq=k            cumulative, after the receiver's commit
//	                 <---- Refuse seq=j             this one will never be stored
//	                 <---- Error CodeFull           no room now (Session.Abort): the session
//	                 <---- SessionClose             ends, the sender tries a new one later
//	SessionClose     ---->                          either side may close
//	                 <---- SessionCloseResponse
//	Ping / Pong      <--->                          session 0, when nothing was written
//	Error            <--->                          session 0: the connection ends;
//	                                                session n: that session ends
//
// # Clients
//
// A client is a process that is not a node but produces and consumes
// through one (see client.go). It authenticates as a node does, with a name
// and an id, and opens sessions whose SessionCreate carries a flag:
//
//	client                                        server (node)
//	SessionCreate +FlagPublish     ---->           publish session, no address
//	Data seq=1..k                  ---->           each message routed by its own destination
//	                               <----  DataAck seq=k       durable, cumulative
//	                               <----  Refuse seq=j        refused for good;
//	                                                          +FlagDenied: by the access rules
//	SessionCreate +FlagSubscribe   ---->           subscribe session for one address;
//	  window=W                                     W is the initial credit
//	                               <----  SessionCreateResponse (+FlagDenied if the rules refuse)
//	                               <----  Deliver tag, attempt, reason, message
//	                                                          one credit each; the server
//	                                                          holds the lease under the tag
//	Credit n                       ---->           n more deliveries allowed
//	Settle op, tags..., reason     ---->           ack | nack | release | reject a batch
//	SessionClose                   ---->           the server gives back the leases
//	                                               not settled
//	                               <----  Error CodeDenied    the rules changed (Session.Abort):
//	                               <----  SessionClose        the subscription ends, its leases
//	                                                          go back
//	SessionCreate +FlagSubscribe   ---->           the same, on a topic subscription:
//	  +FlagTopic, address=pattern,                 made or joined by name; the
//	  subscription, options                        server ends a non-durable one
//	                                               with the session
//
// The server sends a Deliver only with credit, which starts at W and grows
// by what the client grants; the client grants one credit per delivery its
// application took, so at most W deliveries are ever on their way or
// buffered (a server that sends more is ErrWindow). Settles are bounded by
// what the server holds unsettled. The client takes deliveries in the
// order they came, so the k-th credit it grants past W tells the server
// that the k-th delivery was taken (Session.WaitGranted): the server
// starts a delivery's lease then, not when it sent it.
//
// A publish session's window is the least of the client's request and the
// server's, which Config.PublishWindow may raise above a link's: a client
// bounds its flight in bytes too, and the server's buffer is bounded in
// bytes (MaxConnBuffer), so the count only has to keep commits full.
//
// # Goroutines
//
// Each Conn owns exactly two: readLoop, which reads frames and dispatches
// them by session id, and writeLoop, which writes the queued frames in
// batches and sends Pings. Both stop when the connection dies, for whatever
// reason, and Close waits for them. No goroutine is started per session or
// per frame. The read loop never blocks on anything but the socket, so a
// session whose application is slow cannot stall the others.
//
// # Invariants
//
//   - Nothing read from the network is trusted. Every length is checked
//     before anything of that size is allocated: against 4 KiB before
//     authentication, against MaxFrame for Data and a fixed bound for other
//     packets after it. Decoders check every field against the bytes that
//     remain, refuse trailing bytes and never panic. Nothing is decoded by
//     reflection.
//   - No session can be opened, and no frame but Hello, Auth, AuthOK and
//     Error is accepted, before authentication completes. Every handshake
//     read and write has a deadline.
//   - A peer that breaks the protocol (a bad frame, an unknown type, a
//     window overflow) gets an ErrorPacket with the reason, best effort, and
//     its connection is closed; only that connection. Data, acks or
//     refusals for a session that is not open get a session-level
//     ErrorPacket and are otherwise ignored: they can be in flight when a
//     session ends.
//   - Memory is bounded: per session by Window × MaxFrame of Data (or, on
//     a subscribe session's client side, Deliver) waiting to be taken, per
//     connection by MaxSessions, the write queue bounds and the read buffer.
//     A server connection holds at most MaxConnBuffer bytes of Data for its
//     sessions' Recv, all together (budget.go): past it the read loop stops
//     reading the socket until Recv takes frames, and a session that ends
//     or begins to close gives its bytes back at once.
//   - A peer silent for IdleTimeout is dropped (ErrIdle); a write that
//     makes no progress for WriteTimeout fails the connection. Each side
//     sends a Ping after PingInterval without writing, so a healthy idle
//     connection stays up.
//   - When a Conn dies every one of its sessions ends: Done closes, Acks
//     closes, Recv returns the error once the Data already queued is taken,
//     blocked SendData and Accept return.
//   - Sessions pass Data through in arrival order. They do not reorder,
//     dedupe or check sequence numbers; a new session on a new connection
//     starts wherever the sender says.
//
// # Imports
//
// session imports message (for NodeID) and the standard library only. It
// must not import queue, address, conf, sender, receiver or anything above
// it: the store and the routing are its callers' business.
package session
