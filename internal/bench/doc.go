// Package bench measures Petrel: the runners behind `petrel bench local`,
// `link`, `client`, `file`, `fanout` and `mqtt`, and the agents (`petrel
// bench agent ...`) that the multi-process benches run as their nodes.
//
// The local bench runs one embedded node in this process. The others re-run
// the petrel binary (os.Executable) as node processes on loopback, through
// a procRun and package nodeproc: `petrel node` for plain nodes and relays,
// `petrel bench agent produce|consume|sendfile|recvfile` for the nodes that
// do the bench's work. An agent prints its ready line, then JSON event
// lines (produced, drained, consumed, sent, handed, received) that carry
// its own clock readings and peak RSS; the runner turns them into figures.
// The MQTT bench drives paho clients (MQTT 5) against a `petrel node`
// with its MQTT listener, or any broker, and runs Eclipse Mosquitto as
// its baseline (Mosquitto).
// The CLI owns the commands, their flags and their help; this package owns
// what they do.
//
// Invariants:
//   - With --json, stdout holds exactly one JSON object and nothing else;
//     progress goes to stderr. The JSON field names of every result are a
//     contract with the scripts that compare runs: add, never rename.
//   - Every node process a run started is stopped before the run returns,
//     on success, failure, timeout or SIGINT alike; one that has to be
//     killed, or that stops badly, fails the bench.
//   - The bench directory (configurations, data, stderr of each node) is
//     removed at the end unless the user asked to keep it.
//   - A flag value a bench cannot run with is a *UsageError, returned
//     before anything starts.
//   - Timings are measured here but never asserted: tests check that the
//     figures exist and are plausible, not how fast they are.
//
// bench imports the root package, message and queue for their types, and
// nodeproc for the node processes; never conf (the CLI reads an agent's
// configuration file and hands over an OpenFunc). Nothing but cmd/petrel
// imports bench.
package bench
