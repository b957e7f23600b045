package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/sandbox-resume/sandbox-resume/snapshot"
)

// newDiscardCmd is `discard --run ID` (DESIGN "Materialize, claim, run
// lifecycle"): snapshot.Discard deletes the run and claim leases with
// leases.SynchronousDelete. A run with neither lease is exit 2.
func newDiscardCmd(g *globalOptions) *cobra.Command {
	var run string
	cmd := &cobra.Command{
		Use:   "discard --run ID",
		Short: "Delete a run's leases (its diff, ref blob and base content are then collected)",
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) > 0 {
				return usageErrorf("discard: unexpected argument %q", args[0])
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, _ []string) error {
			if run == "" {
				return usageErrorf("discard: --run is required")
			}
			if !snapshot.ValidRunID(run) {
				return usageErrorf("discard: --run %q must match [a-z0-9]+([._-][a-z0-9]+)* and be at most %d characters", run, snapshot.MaxRunIDLen)
			}
			ctx := cmd.Context()
			rt, err := g.connect(ctx)
			if err != nil {
				return err
			}
			defer rt.Close()
			deleted, err := snapshot.Discard(ctx, rt, run)
			if err != nil {
				return err
			}
			if g.output == outputJSON {
				writeJSON(cmd.OutOrStdout(), map[string]any{"run": run, "deletedLeases": deleted})
				return nil
			}
			for _, id := range deleted {
				fmt.Fprintf(cmd.OutOrStdout(), "deleted lease %s\n", id)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&run, "run", "", "run id (required)")
	addLedgerFlags(cmd, g)
	return cmd
}
