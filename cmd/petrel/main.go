// Command petrel is the CLI and daemon of Petrel: `petrel node` runs a node,
// `petrel demo` shows the embedding API at work, and `petrel bench` measures
// it. The commands live one per file; root.go wires them and maps errors to
// exit statuses.
package main

import "os"

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}
