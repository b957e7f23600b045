package main

import (
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/sandbox-resume/sandbox-resume/migrate"
	"github.com/sandbox-resume/sandbox-resume/snapshot"
)

// newRecallCmd is `recall --run ID --force` (docs/design.md "Exactly once
// across hosts"): migrate.Recall runs the ledger's Recalled.
func newRecallCmd(a *app) *cobra.Command {
	var run string
	var force bool
	cmd := &cobra.Command{
		Use:   "recall --run ID --force",
		Short: "Undo a handoff the named host never took up (an operator's decision)",
		Long: `Turns the run's handed-off record back into suspended (the ledger's Recalled,
fence + 1), so this host may resume the generation again. It is an operator's
decision, like resume --take-over: if the host it was handed to imported the
artifact, both hosts can now resume it, so check runs --run ID there first.
Without --force: 64. A run that is not handed off is 8.`,
		Args: noArgs("recall"),
		RunE: a.command(func(s *session, _ []string) (*result, error) {
			if !force {
				return nil, usageErrorf("recall: --force is required: if the host the run was handed to imported it, both hosts can resume it after a recall (check runs --run %s there first)", run)
			}
			if !snapshot.ValidRunID(run) {
				return nil, usageErrorf("recall: --run %q must match [a-z0-9]+([._-][a-z0-9]+)* and be at most %d characters", run, snapshot.MaxRunIDLen)
			}
			l, err := s.ledger()
			if err != nil {
				return nil, err
			}
			before, after, err := migrate.Recall(s.ctx, l, run)
			if err != nil {
				return nil, err
			}
			to, at := "", ""
			if h := before.HandedOff; h != nil {
				to, at = h.To, h.At.UTC().Format(time.RFC3339)
			}
			warning := fmt.Sprintf("if host %s imported the artifact, both hosts can now resume run %s: check `runs --run %s` there first", to, run, run)
			out := struct {
				Run          string `json:"run"`
				Generation   uint64 `json:"generation"`
				State        string `json:"state"`
				Fence        uint64 `json:"fence"`
				RecalledFrom string `json:"recalledFrom"`
				HandedOffAt  string `json:"handedOffAt"`
				Warning      string `json:"warning"`
			}{run, after.Generation, string(after.State), after.Fence, to, at, warning}
			return &result{JSON: out, Text: func(w, _ io.Writer) error {
				fmt.Fprintf(w, "recalled run %s generation %d from host %s (handed off at %s): %s here again, fence %d (an operator's decision)\n",
					run, after.Generation, to, at, after.State, after.Fence)
				fmt.Fprintf(w, "warning: %s\n", warning)
				return nil
			}}, nil
		}),
	}
	f := cmd.Flags()
	f.StringVar(&run, "run", "", "run id (required)")
	f.BoolVar(&force, "force", false, "recall the handoff (an operator's decision: both hosts may then resume the run)")
	_ = cmd.MarkFlagRequired("run")
	addLedgerFlags(cmd, a)
	return cmd
}
