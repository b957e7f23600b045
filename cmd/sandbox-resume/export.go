package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/sandbox-resume/sandbox-resume/migrate"
)

// newExportCmd is `export --ref ref.json --out run.tar [--with-base]`
// (DESIGN "Moving runs"): migrate.ExportFile writes the run's migration
// artifact from the daemon's content store as an OCI layout archive,
// atomically.
func newExportCmd(g *globalOptions) *cobra.Command {
	var ref, out string
	var withBase bool
	cmd := &cobra.Command{
		Use:   "export --ref ref.json --out run.tar [--with-base]",
		Short: "Write a suspended run as an OCI image layout archive (migration artifact)",
		Long: `Builds the run's migration artifact in the content store (an OCI image manifest
with artifactType application/vnd.sandbox-resume.snapshot.v1: the ref file as
its config, the rootfs diff as its one layer, the base image's platform
manifest as its subject) and writes it as an OCI image layout tar, atomically.
--with-base adds the base image (its index when complete, else its platform
manifest). Exit 5 when the base manifest is absent, 7 when the diff is.
Progress is drawn on stderr when stderr is a terminal, never otherwise.`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) > 0 {
				return usageErrorf("export: unexpected argument %q (give the ref with --ref and the archive with --out)", args[0])
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, _ []string) error {
			if ref == "" || out == "" {
				return usageErrorf("export: --ref and --out are required")
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
			res, err := migrate.ExportFile(ctx, rt, refFile, out, withBase, popts...)
			done()
			if err != nil {
				return fmt.Errorf("export %s: %w", ref, err)
			}
			if g.output == outputJSON {
				writeJSON(cmd.OutOrStdout(), res)
				return nil
			}
			fmt.Fprintf(cmd.OutOrStdout(), "exported run %s to %s (%d bytes): artifact %s", res.Run, res.Path, res.Size, res.Artifact.Digest)
			if len(res.Base) > 0 {
				fmt.Fprintf(cmd.OutOrStdout(), ", base %s", res.Base[0])
			}
			fmt.Fprintln(cmd.OutOrStdout())
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&ref, "ref", "", "SnapshotRef file written by suspend (required)")
	f.StringVar(&out, "out", "", "archive file to write (required)")
	f.BoolVar(&withBase, "with-base", false, "include the base image in the archive")
	return cmd
}
