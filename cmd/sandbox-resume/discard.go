package main

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/sandbox-resume/sandbox-resume/resume"
	"github.com/sandbox-resume/sandbox-resume/snapshot"
)

// newDiscardCmd is `discard --run ID [--force] [--purge]` (docs/design.md
// "The run ledger", "CLI contract"): resume.Discard — the ledger's Discard
// (a tombstone), with --purge its Purge, then what the run holds in
// containerd on this host (the run lease, the previous release's claim
// lease, stopped incarnations) is deleted.
func newDiscardCmd(a *app) *cobra.Command {
	var run string
	var opt resume.DiscardOptions
	cmd := &cobra.Command{
		Use:   "discard --run ID [--force] [--purge]",
		Short: "End a run: tombstone it in the ledger and delete what it holds on this host",
		Long: `Records the run as discarded in the run ledger (a tombstone: no generation of it
resumes again, exit 9), and with --purge purges the tombstone (the run id is
free again, from its fence on). A live or resuming run is refused (8) unless
--force, which fences its holder out. Then deletes what the run holds in
containerd on this host: its run lease (the layers, refs and base content only
it held are collected), the claim lease of the previous release, and stopped
incarnations; a running incarnation is kept and named.`,
		Args: noArgs("discard"),
		RunE: a.command(func(s *session, _ []string) (*result, error) {
			if !snapshot.ValidRunID(run) {
				return nil, usageErrorf("discard: --run %q must match [a-z0-9]+([._-][a-z0-9]+)* and be at most %d characters", run, snapshot.MaxRunIDLen)
			}
			rt, err := s.runtime()
			if err != nil {
				return nil, err
			}
			l, err := s.ledger()
			if err != nil {
				return nil, err
			}
			res, err := resume.Discard(s.ctx, l, rt, run, opt)
			if err != nil {
				return nil, err
			}
			return &result{JSON: res, Text: func(w, _ io.Writer) error {
				fmt.Fprintf(w, "run %s: %s\n", res.Run, res.State)
				for _, id := range res.Deleted {
					fmt.Fprintf(w, "deleted %s\n", id)
				}
				for _, id := range res.Kept {
					fmt.Fprintf(w, "kept %s: its task runs (stop and delete it; it can no longer record a generation)\n", id)
				}
				return nil
			}}, nil
		}),
	}
	f := cmd.Flags()
	f.StringVar(&run, "run", "", "run id (required)")
	f.BoolVar(&opt.Force, "force", false, "discard a live or resuming run too, fencing its holder out")
	f.BoolVar(&opt.Purge, "purge", false, "then purge the tombstone (only the run id and its fence are kept)")
	_ = cmd.MarkFlagRequired("run")
	addDaemonFlags(cmd, a)
	addLedgerFlags(cmd, a)
	return cmd
}
