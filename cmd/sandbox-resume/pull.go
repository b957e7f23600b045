package main

import (
	"fmt"

	"github.com/sandbox-resume/sandbox-resume/internal/atomicfile"

	"github.com/spf13/cobra"

	"github.com/sandbox-resume/sandbox-resume/migrate"
)

// newPullCmd is `pull [--plain-http] --trust PUB|DIR REG/REPO:TAG --out
// ref.json` (DESIGN "Moving runs"): migrate.Pull fetches and
// verifies the artifact, and the base by digest when it is missing.
func newPullCmd(g *globalOptions) *cobra.Command {
	var trustPath, out string
	var plainHTTP bool
	cmd := &cobra.Command{
		Use:   "pull [--plain-http] --trust PUB|DIR REG/REPO:TAG --out ref.json",
		Short: "Pull a run pushed with push, verify its ref, and fetch its base by digest when missing",
		Long: `Fetches the migration artifact REG/REPO:TAG (or REG/REPO@sha256:...), verifies
its ref against the trusted keys before using it, stores the artifact and its
diff (diffID checked) under the run lease, and, when the base image is not
here, fetches it from REG/REPO@<base.manifestDigest> (never by tag). Writes
the ref file to --out. --plain-http is accepted only for a loopback registry.
Progress is drawn on stderr when stderr is a terminal, never otherwise.`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) != 1 {
				return usageErrorf("pull: exactly one REG/REPO:TAG argument is required, got %d", len(args))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if trustPath == "" || out == "" {
				return usageErrorf("pull: --trust and --out are required")
			}
			source, err := remoteArg("pull", args[0], true, plainHTTP)
			if err != nil {
				return err
			}
			trust, err := loadTrust(trustPath)
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
			res, err := migrate.Pull(ctx, rt, rt.Registry(plainHTTP), source, trust, popts...)
			done()
			if err != nil {
				return err
			}
			if err := atomicfile.WriteFile(out, res.RefFile, 0o644); err != nil {
				return err
			}
			if g.output == outputJSON {
				writeJSON(cmd.OutOrStdout(), res)
				return nil
			}
			fmt.Fprintf(cmd.OutOrStdout(), "pulled run %s from %s: artifact %s, held by lease %s", res.Run, res.Source, res.Artifact.Digest, res.Lease)
			if res.BaseFrom != "" {
				fmt.Fprintf(cmd.OutOrStdout(), "; base pulled from %s", res.BaseFrom)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "\nwrote %s\n", out)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&trustPath, "trust", "", "trusted PKIX PEM public key, or a directory of *.pub / *.pem keys (required)")
	f.StringVar(&out, "out", "", "write the verified ref file here (required)")
	f.BoolVar(&plainHTTP, "plain-http", false, "use http, not https (loopback registries only)")
	return cmd
}
