package main

import (
	"errors"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/sandbox-resume/sandbox-resume/ledger"
	"github.com/sandbox-resume/sandbox-resume/snapshot"
)

// newRunsCmd is `runs [--run ID]` (docs/design.md "The run ledger", "CLI
// contract"): the ledger's records, purged ones left out, read without
// writing (a bolt file is opened read-only; a missing file is an empty
// ledger). Under --output json: {"runs": [record, …]}; an unknown --run is
// an empty list.
func newRunsCmd(g *globalOptions) *cobra.Command {
	var run string
	cmd := &cobra.Command{
		Use:   "runs [--run ID]",
		Short: "List the run ledger's records",
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) > 0 {
				return usageErrorf("runs: unexpected argument %q", args[0])
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, _ []string) error {
			if run != "" && !snapshot.ValidRunID(run) {
				return usageErrorf("runs: --run %q must match [a-z0-9]+([._-][a-z0-9]+)* and be at most %d characters", run, snapshot.MaxRunIDLen)
			}
			ctx := cmd.Context()
			l, err := g.openLedger(ctx)
			if err != nil {
				return err
			}
			defer l.Close()
			var all []ledger.Record
			if run != "" {
				r, err := l.Get(ctx, run)
				switch {
				case errors.Is(err, ledger.ErrNotFound):
				case err != nil:
					return err
				default:
					all = append(all, r)
				}
			} else if all, err = l.List(ctx); err != nil {
				return err
			}
			recs := make([]ledger.Record, 0, len(all))
			for _, r := range all {
				if r.State != ledger.StatePurged {
					recs = append(recs, r)
				}
			}
			if g.output == outputJSON {
				writeJSON(cmd.OutOrStdout(), map[string]any{"runs": recs})
				return nil
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "RUN\tSTATE\tGENERATION\tFENCE\tHOLDER\tUPDATED")
			for _, r := range recs {
				holder := "-"
				if r.Holder != nil {
					holder = fmt.Sprintf("%s/%s@%s", r.Holder.Namespace, r.Holder.ID, r.Holder.Host)
					if r.Holder.PID != 0 {
						holder += fmt.Sprintf(" (resumer pid %d)", r.Holder.PID)
					}
				}
				fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%s\t%s\n", r.Run, r.State, r.Generation, r.Fence, holder, r.Updated.Format(time.RFC3339))
			}
			return tw.Flush()
		},
	}
	cmd.Flags().StringVar(&run, "run", "", "only this run's record")
	addLedgerFlags(cmd, g)
	return cmd
}
