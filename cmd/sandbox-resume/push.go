package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/sandbox-resume/sandbox-resume/migrate"
)

// newPushCmd is `push [--plain-http] --ref ref.json REG/REPO:TAG` (DESIGN
// "Moving runs"): migrate.Push sends the base by digest to the
// same repository, then the artifact under the tag.
func newPushCmd(g *globalOptions) *cobra.Command {
	var ref string
	var plainHTTP bool
	cmd := &cobra.Command{
		Use:   "push [--plain-http] --ref ref.json REG/REPO:TAG",
		Short: "Push a suspended run (and its base image, by digest) to an OCI registry",
		Long: `Pushes the base image's platform manifest (and its index when complete here)
by digest to REG/REPO, then the run's migration artifact as REG/REPO:TAG.
Each push uses a new resolver. --plain-http is accepted only for a loopback
registry (127.0.0.1, ::1, localhost). No credentials are sent.
Progress is drawn on stderr when stderr is a terminal, never otherwise.`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) != 1 {
				return usageErrorf("push: exactly one REG/REPO:TAG argument is required, got %d", len(args))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if ref == "" {
				return usageErrorf("push: --ref is required")
			}
			target, err := remoteArg("push", args[0], false, plainHTTP)
			if err != nil {
				return err
			}
			refFile, err := readInput(ref)
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			rt, err := g.connect(ctx)
			if err != nil {
				return err
			}
			defer rt.Close()
			popts, done := moveProgress(cmd)
			res, err := migrate.Push(ctx, rt, rt.Registry(plainHTTP), refFile, target, popts...)
			done()
			if err != nil {
				return fmt.Errorf("push %s: %w", ref, err)
			}
			if g.output == outputJSON {
				writeJSON(cmd.OutOrStdout(), res)
				return nil
			}
			fmt.Fprintf(cmd.OutOrStdout(), "pushed run %s to %s: artifact %s; base by digest: %v\n", res.Run, res.Target, res.Artifact.Digest, res.Base)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&ref, "ref", "", "SnapshotRef file written by suspend (required)")
	f.BoolVar(&plainHTTP, "plain-http", false, "use http, not https (loopback registries only)")
	return cmd
}

// remoteArg parses a registry reference argument; a bad one, or
// --plain-http for a registry that is not loopback, is a usage error.
func remoteArg(cmdName, s string, allowDigest, plainHTTP bool) (*migrate.RemoteRef, error) {
	target, err := migrate.ParseRemoteRef(s, allowDigest)
	if err != nil {
		return nil, usageErrorf("%s: %v", cmdName, err)
	}
	if plainHTTP && !target.Loopback {
		return nil, usageErrorf("%s: --plain-http is accepted only for a loopback registry, not %s", cmdName, s)
	}
	return target, nil
}
