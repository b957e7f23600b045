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
uncompressedSize) and the spec blob's digest, and writes the ref file to
--out. When the base image is complete here (an archive made with
export --with-base), the ref's base name is created pointing at the
recorded index (or manifest) digest if no image has that name; an existing
name is never re-pointed (the output says which). Entries may carry a
leading ./ (an archive repacked with tar -C DIR .). A refused archive is
exit 2 and leaves nothing stored; an untrusted or tampered ref is 6.
An archive carrying a handoff statement (export --handoff) has it verified
against the same keys (6; 2 when it names another ref); when it names this
host (--host-id or introspection), the ref is written to --out and the run
ledger's Received records the generation before the run lease takes the
content, so a rerun finishes a killed import. A statement naming another
host is 9 and nothing is stored; Received may refuse with 6, 8 or 9.
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
			recv := receiver(s, rt)
			popts, done := moveProgress(s.cmd)
			res, err := migrate.ImportFile(s.ctx, rt, args[0], trust, out, append(popts, recv)...)
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
				printBaseName(w, res.BaseName)
				printReceived(w, res.Run, res.Received)
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
	addHostIDFlag(cmd, a)
	addLedgerFlags(cmd, a)
	return cmd
}

// printBaseName says what a move did about the base image's name.
func printBaseName(w io.Writer, bn *migrate.BaseName) {
	if bn != nil {
		fmt.Fprintf(w, "base name %s: %s\n", bn.Name, bn.Note)
	}
}
