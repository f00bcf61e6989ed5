package main

import (
	"encoding/json"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
)

func newNodesCmd() *cobra.Command {
	var server, cfgPath, dataDir, tokenFile string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "nodes [-c file | --data-dir dir]",
		Short: "List the nodes a running node knows: static and discovered",
		Long: `List the node directory of a running node: each node's name, unique id (for
discovered nodes), connectors, source (static, from the configuration, or
discovered, from announcements) and how long ago it was last heard.

Like petrel stat, it reads the node through the admin socket in its data
directory: give the node's configuration with -c, or the directory with
--data-dir.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			st, err := readNodeStatus(cmd.Context(), server, cfgPath, dataDir, tokenFile)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if asJSON {
				return json.NewEncoder(out).Encode(st.Nodes)
			}
			tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "NAME\tID\tCONNECTORS\tSOURCE\tAGE")
			for _, e := range st.Nodes {
				age := "-"
				if !e.LastSeen.IsZero() {
					age = time.Since(e.LastSeen).Round(100 * time.Millisecond).String()
				}
				id := e.ID
				if id == "" {
					id = "-"
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", e.Name, id, e.Connectors, e.Source, age)
			}
			return tw.Flush()
		},
	}
	cmd.Flags().StringVarP(&cfgPath, "config", "c", "", "the node's YAML configuration `file`")
	cmd.Flags().StringVar(&dataDir, "data-dir", "", "the node's data `directory`")
	cmd.Flags().StringVar(&server, "server", "", "the node's admin `address` (host:port or http://host:port)")
	addTokenFlag(cmd, &tokenFile)
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the directory as one JSON array")
	return cmd
}
