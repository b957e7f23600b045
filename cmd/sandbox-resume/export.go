package main

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/sandbox-resume/sandbox-resume/migrate"
)

// newExportCmd is `export --ref ref.json --out run.tar [--with-base]`
// (docs/design.md "Moving runs"): migrate.ExportFile writes the run's migration
// artifact from the daemon's content store as an OCI layout archive,
// atomically.
func newExportCmd(a *app) *cobra.Command {
	var ref, out string
	var withBase bool
	var ho handoffFlags
	cmd := &cobra.Command{
		Use:   "export --ref ref.json --out run.tar [--with-base]",
		Short: "Write a suspended run as an OCI image layout archive (migration artifact)",
		Long: `Builds the run's migration artifact in the content store (an OCI image manifest
with artifactType application/vnd.sandbox-resume.snapshot.v1: the ref file as
its config, the rootfs diff as its one layer, the base image's platform
manifest as its subject) and writes it as an OCI image layout tar, atomically.
--with-base adds the base image (its index when complete, else its platform
manifest). Exit 5 when the base manifest is absent, 7 when the diff is.
--handoff HOST_ID --key K hands the run over to that host (docs/design.md
"Exactly once across hosts"): the run ledger's HandedOff runs first (the
record becomes a handed-off tombstone: this host never resumes the generation
again, 9), then the signed handoff statement is the artifact's last layer.
Retried with the same host and key, it writes the same bytes; another host is
8, this host 2, a ref without a run UID 2.
Progress is drawn on stderr when stderr is a terminal, never otherwise.`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) > 0 {
				return usageErrorf("export: unexpected argument %q (give the ref with --ref and the archive with --out)", args[0])
			}
			return nil
		},
		RunE: a.command(func(s *session, _ []string) (*result, error) {
			refFile, err := readInput(ref)
			if err != nil {
				return nil, err
			}
			rt, err := s.runtime()
			if err != nil {
				return nil, err
			}
			popts, done := moveProgress(s.cmd)
			hopts, err := ho.options(s, rt)
			if err != nil {
				done()
				return nil, err
			}
			res, err := migrate.ExportFile(s.ctx, rt, refFile, out, withBase, append(popts, hopts...)...)
			done()
			if err != nil {
				return nil, fmt.Errorf("export %s: %w", ref, err)
			}
			warnUnpinned(s.stderr(), "export", ref, refFile)
			return &result{JSON: res, Text: func(w, _ io.Writer) error {
				fmt.Fprintf(w, "exported run %s to %s (%d bytes): artifact %s", res.Run, res.Path, res.Size, res.Artifact.Digest)
				if len(res.Base) > 0 {
					fmt.Fprintf(w, ", base %s", res.Base[0])
				}
				fmt.Fprintln(w)
				printHandedOff(w, res.Run, res.Handoff)
				return nil
			}}, nil
		}),
	}
	f := cmd.Flags()
	f.StringVar(&ref, "ref", "", "SnapshotRef file written by suspend (required)")
	f.StringVar(&out, "out", "", "archive file to write (required)")
	f.BoolVar(&withBase, "with-base", false, "include the base image in the archive")
	_ = cmd.MarkFlagRequired("ref")
	_ = cmd.MarkFlagRequired("out")
	ho.add(cmd, a)
	addDaemonFlags(cmd, a)
	return cmd
}
