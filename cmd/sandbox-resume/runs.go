package main

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/opencontainers/go-digest"
	"github.com/spf13/cobra"

	"github.com/sandbox-resume/sandbox-resume/ledger"
	"github.com/sandbox-resume/sandbox-resume/snapshot"
)

// newRunsCmd is `runs [--run ID]` (docs/design.md "The run ledger", "CLI
// contract"): the ledger's records, purged ones left out, read without
// writing (a bolt file is opened read-only; a missing file is an empty
// ledger). Under --output json: {"runs": [record, …]}; an unknown --run is
// an empty list. With --run, the forks this ledger knows of the run
// (docs/design.md "Repin and fork") follow: a "forks" list when there are
// any.
func newRunsCmd(a *app) *cobra.Command {
	var run string
	cmd := &cobra.Command{
		Use:   "runs [--run ID]",
		Short: "List the run ledger's records",
		Args:  noArgs("runs"),
		RunE: a.command(func(s *session, _ []string) (*result, error) {
			if run != "" && !snapshot.ValidRunID(run) {
				return nil, usageErrorf("runs: --run %q must match [a-z0-9]+([._-][a-z0-9]+)* and be at most %d characters", run, snapshot.MaxRunIDLen)
			}
			l, err := s.ledger()
			if err != nil {
				return nil, err
			}
			var all []ledger.Record
			var forks []forkOf
			if run != "" {
				r, err := l.Get(s.ctx, run)
				switch {
				case errors.Is(err, ledger.ErrNotFound):
				case err != nil:
					return nil, err
				default:
					all = append(all, r)
				}
				if forks, err = forksOf(s, l, run); err != nil {
					return nil, err
				}
			} else if all, err = l.List(s.ctx); err != nil {
				return nil, err
			}
			recs := make([]ledger.Record, 0, len(all))
			for _, r := range all {
				if r.State != ledger.StatePurged {
					recs = append(recs, r)
				}
			}
			js := map[string]any{"runs": recs}
			if len(forks) > 0 {
				js["forks"] = forks
			}
			return &result{
				JSON: js,
				Text: func(w, _ io.Writer) error {
					if err := writeRunsText(w, recs); err != nil {
						return err
					}
					return writeForks(w, run, forks)
				},
			}, nil
		}),
	}
	cmd.Flags().StringVar(&run, "run", "", "only this run's record")
	addLedgerFlags(cmd, a)
	return cmd
}

// writeRunsText prints the records as a table.
func writeRunsText(w io.Writer, recs []ledger.Record) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
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
	if err := tw.Flush(); err != nil {
		return err
	}
	return writeLineage(w, recs)
}

// writeLineage prints, after the table, one line per record that carries a
// run UID, a handoff, a receipt or a fork's lineage (docs/design.md "The run
// ledger"): `RUN: run UID U; handed off to H at T; received from H at T;
// forked from RUN generation N (run UID U, ref R)`.
func writeLineage(w io.Writer, recs []ledger.Record) error {
	for _, r := range recs {
		var parts []string
		if r.RunUID != "" {
			parts = append(parts, "run UID "+r.RunUID)
		}
		if h := r.HandedOff; h != nil {
			parts = append(parts, fmt.Sprintf("handed off to %s at %s", h.To, h.At.Format(time.RFC3339)))
		}
		if rc := r.Received; rc != nil {
			parts = append(parts, fmt.Sprintf("received from %s at %s", rc.From, rc.At.Format(time.RFC3339)))
		}
		if f := r.ForkedFrom; f != nil {
			parts = append(parts, fmt.Sprintf("forked from %s generation %d (run UID %s, ref %s)", f.Run, f.Generation, f.RunUID, f.Ref))
		}
		if len(parts) == 0 {
			continue
		}
		if _, err := fmt.Fprintf(w, "%s: %s\n", r.Run, strings.Join(parts, "; ")); err != nil {
			return err
		}
	}
	return nil
}

// forkOf is a run the ledger records as forked from another: its id, run
// UID, state and the source generation it was forked from.
type forkOf struct {
	Run        string        `json:"run"`
	RunUID     string        `json:"runUID,omitempty"`
	State      ledger.State  `json:"state"`
	Generation uint64        `json:"generation"`
	Ref        digest.Digest `json:"ref"`
}

// forksOf lists the records whose forkedFrom names run, purged ones left
// out, in the ledger's order.
func forksOf(s *session, l ledger.Ledger, run string) ([]forkOf, error) {
	all, err := l.List(s.ctx)
	if err != nil {
		return nil, err
	}
	var out []forkOf
	for _, r := range all {
		if f := r.ForkedFrom; f != nil && f.Run == run && r.State != ledger.StatePurged {
			out = append(out, forkOf{Run: r.Run, RunUID: r.RunUID, State: r.State, Generation: f.Generation, Ref: f.Ref})
		}
	}
	return out, nil
}

// writeForks prints `RUN: forked into A (from generation N, suspended), …`.
func writeForks(w io.Writer, run string, forks []forkOf) error {
	if len(forks) == 0 {
		return nil
	}
	parts := make([]string, 0, len(forks))
	for _, f := range forks {
		parts = append(parts, fmt.Sprintf("%s (from generation %d, %s)", f.Run, f.Generation, f.State))
	}
	_, err := fmt.Fprintf(w, "%s: forked into %s\n", run, strings.Join(parts, ", "))
	return err
}
