package main

import (
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/spf13/cobra"
)

// version is set at release time with
//
//	go build -ldflags "-X main.version=v1.2.3" ./cmd/petrel
//
// "dev" means a build from a working tree.
var version = "dev"

func newVersionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version of petrel and the Go toolchain that built it",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			_, err := fmt.Fprintln(cmd.OutOrStdout(), versionString())
			return err
		},
	}
}

// versionString says which petrel this is and what built it. A binary made
// by `go install module@v1.2.3` has no ldflags but carries its module
// version in the build info, so that is used when version was not set.
func versionString() string {
	v, goVersion := version, runtime.Version()
	if info, ok := debug.ReadBuildInfo(); ok {
		goVersion = info.GoVersion
		if v == "dev" && info.Main.Version != "" && info.Main.Version != "(devel)" {
			v = info.Main.Version
		}
	}
	return fmt.Sprintf("petrel %s (%s %s/%s)", v, goVersion, runtime.GOOS, runtime.GOARCH)
}
