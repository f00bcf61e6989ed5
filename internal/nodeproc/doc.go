// Package nodeproc runs petrel nodes as child processes, for the benches
// and for the tests that kill nodes: it starts `petrel node` or `petrel
// bench agent`, reads the ready line and the JSON event lines they print,
// writes their configuration files, and stops them.
//
// Invariants:
//   - A child never outlives its parent. Its stdin is a pipe the parent
//     holds, and agents stop when it closes; on Linux the child also gets
//     SIGKILL when the thread that started it ends, and Start keeps that
//     thread locked while the child runs.
//   - A child's stdout is read line by line to its end before the process
//     is waited for, so no line it printed whole is lost; a line cut short
//     by a kill is dropped.
//   - A child's stderr goes to a file whose tail every error of that child
//     quotes.
//   - The ready line is written by `petrel node` and the agents and parsed
//     here; QuoteValue and ParseReady are its two ends.
//
// nodeproc imports only the standard library: it talks to nodes through
// their command line, their stdout and their configuration file, never
// through the petrel packages.
package nodeproc
