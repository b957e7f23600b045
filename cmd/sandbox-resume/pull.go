package main

import (
	"fmt"
	"io"

	"github.com/sandbox-resume/sandbox-resume/migrate"
	"github.com/sandbox-resume/sandbox-resume/snapshot"

	"github.com/spf13/cobra"
)

// newPullCmd is `pull [--plain-http] [--registry-config F]
// [--registry-cacert F] --trust PUB|DIR (REG/REPO:TAG | REG/REPO@DIGEST |
// REG/REPO --run RUN) --out ref.json` (docs/design.md "Moving runs"):
// migrate.Pull fetches and verifies the artifact, and the base by digest
// when it is missing.
func newPullCmd(a *app) *cobra.Command {
	var trustPath, out, run string
	var rf registryFlags
	cmd := &cobra.Command{
		Use:   "pull [--plain-http] [--registry-config F] [--registry-cacert F] --trust PUB|DIR (REG/REPO:TAG | REG/REPO --run RUN) --out ref.json",
		Short: "Pull a run pushed with push, verify its ref, and fetch its base by digest when missing",
		Long: `Fetches the migration artifact REG/REPO:TAG (or REG/REPO@sha256:..., or, with
--run RUN and a bare REG/REPO, the tag RUN.g<n> of the highest generation n
among the repository's tags), verifies its ref against the trusted keys
before using it, stores the artifact and its diff (diffID checked) under the
run lease, and, when the base image is not here, fetches it from
REG/REPO@<base.manifestDigest> (never by tag), then the recorded index alone
when the registry has it, and creates the ref's base name pointing at the
recorded index (or manifest) digest if no image has that name; an existing
name is never re-pointed (the output says which). Writes the ref file to
--out.
Credentials and TLS as for push; a blob whose fetch fails transiently is
fetched again whole (--debug logs each retry). A pull that fails leaves
nothing stored and no --out file. --plain-http is accepted only for a
loopback registry.
An artifact carrying a handoff statement is taken as import takes it: verified
(6, or 2), refused with 9 when it names another host (nothing stored), else
--out is written and the run ledger's Received runs before the run lease
takes the content.
Progress is drawn on stderr when stderr is a terminal, never otherwise.`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) != 1 {
				return usageErrorf("pull: exactly one REG/REPO:TAG (or REG/REPO with --run) argument is required, got %d", len(args))
			}
			return nil
		},
		RunE: a.command(func(s *session, args []string) (*result, error) {
			source, err := remoteArg("pull", args[0], true, rf.plainHTTP)
			if err != nil {
				return nil, err
			}
			var popts []migrate.Option
			switch {
			case run != "" && !source.Bare():
				return nil, usageErrorf("pull: --run needs a repository without tag or digest (REG/REPO), not %s", args[0])
			case run != "" && !snapshot.ValidRunID(run):
				return nil, usageErrorf("pull: --run %q is not a run id ([a-z0-9]+([._-][a-z0-9]+)*, at most %d characters)", run, snapshot.MaxRunIDLen)
			case run != "":
				popts = append(popts, migrate.WithRun(run))
			case source.Bare():
				return nil, usageErrorf("pull: %s names no tag or digest; give REG/REPO:TAG, or --run RUN for the run's latest generation", args[0])
			}
			trust, err := loadTrust(trustPath)
			if err != nil {
				return nil, err
			}
			rt, reg, err := rf.open(s)
			if err != nil {
				return nil, err
			}
			recv := receiver(s, rt)
			progress, done := moveProgress(s.cmd)
			res, err := migrate.PullFile(s.ctx, rt, reg, source, trust, out, append(append(popts, progress...), recv)...)
			done()
			if err != nil {
				return nil, err
			}
			return &result{JSON: res, Text: func(w, _ io.Writer) error {
				fmt.Fprintf(w, "pulled run %s from %s: artifact %s, held by lease %s", res.Run, res.Source, res.Artifact.Digest, res.Lease)
				if res.BaseFrom != "" {
					fmt.Fprintf(w, "; base pulled from %s", res.BaseFrom)
				}
				fmt.Fprintln(w)
				printBaseName(w, res.BaseName)
				printReceived(w, res.Run, res.Received)
				fmt.Fprintf(w, "wrote %s\n", out)
				return nil
			}}, nil
		}),
	}
	f := cmd.Flags()
	f.StringVar(&trustPath, "trust", "", "trusted PKIX PEM public key, or a directory of *.pub / *.pem keys (required)")
	f.StringVar(&out, "out", "", "write the verified ref file here (required)")
	f.StringVar(&run, "run", "", "with a bare REG/REPO: pull the highest generation tagged RUN.g<n>")
	rf.add(f)
	_ = cmd.MarkFlagRequired("trust")
	_ = cmd.MarkFlagRequired("out")
	addDaemonFlags(cmd, a)
	addHostIDFlag(cmd, a)
	addLedgerFlags(cmd, a)
	return cmd
}
