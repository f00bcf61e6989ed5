// Command petrel is the CLI and daemon of Petrel: `petrel node` runs a node,
// `petrel demo` shows the embedding API at work, and `petrel bench` measures
// it. This package is wiring and commands: the commands live one per file,
// with their flags and help, and root.go wires them and maps errors to exit
// statuses. What the benches and the demo do lives in internal/bench and
// internal/demo; internal/nodeproc runs nodes as child processes for the
// benches and the tests.
package main

import "os"

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}
