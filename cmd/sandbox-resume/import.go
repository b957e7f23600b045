package main

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/sandbox-resume/sandbox-resume/migrate"
)

// newImportCmd is `import run.tar --trust PUB|DIR [--out ref.json]`
// (docs/design.md "Moving runs"): migrate.ImportFile pre-scans the archive,
// verifies its ref, imports it under the run lease and verifies every blob
// and the diff's diffID.
func newImportCmd(a *app) *cobra.Command {
	var trustPath, out string
	cmd := &cobra.Command{
		Use:   "import run.tar --trust PUB|DIR [--out ref.json]",
		Short: "Import a migration archive written by export (verified before use)",
		Long: `Pre-scans the archive (only oci-layout, index.json and blobs/sha256/<hex>
regular files, the blobs/ directory entries, no links, no duplicates, every
blob's sha256 equal to its name), verifies the ref against the trusted keys
before using it, imports the blobs under the run lease, checks each blob's
digest and size and the diff's diffID (decompression bounded by the recorded
uncompressedSize), and writes the ref file to --out. A refused archive is
exit 2 and leaves nothing stored; an untrusted or tampered ref is 6.
Progress is drawn on stderr when stderr is a terminal, never otherwise.`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) != 1 {
				return usageErrorf("import: exactly one archive argument is required, got %d", len(args))
			}
			return nil
		},
		RunE: a.command(func(s *session, args []string) (*result, error) {
			trust, err := loadTrust(trustPath)
			if err != nil {
				return nil, err
			}
			rt, err := s.runtime()
			if err != nil {
				return nil, err
			}
			popts, done := moveProgress(s.cmd)
			res, err := migrate.ImportFile(s.ctx, rt, args[0], trust, out, popts...)
			done()
			if err != nil {
				return nil, err
			}
			return &result{JSON: res, Text: func(w, _ io.Writer) error {
				pinned := "unpinned"
				if res.Pinned {
					pinned = "pinned"
				}
				fmt.Fprintf(w, "imported run %s (%s, %s): artifact %s, %d blobs held by lease %s\n",
					res.Run, res.Manifest, pinned, res.Artifact.Digest, res.Blobs, res.Lease)
				if out != "" {
					fmt.Fprintf(w, "wrote %s\n", out)
				}
				return nil
			}}, nil
		}),
	}
	f := cmd.Flags()
	f.StringVar(&trustPath, "trust", "", "trusted PKIX PEM public key, or a directory of *.pub / *.pem keys (required)")
	f.StringVar(&out, "out", "", "write the verified ref file here")
	_ = cmd.MarkFlagRequired("trust")
	addDaemonFlags(cmd, a)
	return cmd
}
