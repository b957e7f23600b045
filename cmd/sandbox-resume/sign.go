package main

import (
	"io"

	"github.com/spf13/cobra"

	"github.com/sandbox-resume/sandbox-resume/envmanifest"
)

// newSignCmd is `sign --key K [--lockfile F] [--policy P] PATH`
// (docs/design.md "CLI contract", "Signed documents"): ingests the
// devcontainer.json at PATH as `manifest` does and prints the signed
// manifest file on stdout, under --output json too (it is JSON).
func newSignCmd(a *app) *cobra.Command {
	var keyPath, lockfile, policy string
	cmd := &cobra.Command{
		Use:   "sign --key K [--lockfile F] [--policy P] PATH",
		Short: "Ingest a devcontainer.json and print its signed manifest",
		Args:  sigArgs(cobra.ExactArgs(1)),
		RunE: a.command(func(_ *session, args []string) (*result, error) {
			key, err := loadKey(keyPath) // a key file of the wrong kind is bad input (2), as for suspend
			if err != nil {
				return nil, err
			}
			reserved, err := envmanifest.LoadPolicy(policy)
			if err != nil {
				return nil, err
			}
			file, err := envmanifest.SignManifestFile(args[0], envmanifest.Options{Lockfile: lockfile, Reserved: reserved}, key)
			if err != nil {
				return nil, err
			}
			return &result{Text: func(w, _ io.Writer) error {
				_, err := w.Write(file)
				return err
			}}, nil
		}),
	}
	cmd.Flags().StringVar(&keyPath, "key", "", "PKCS#8 PEM Ed25519 private key (required)")
	cmd.Flags().StringVar(&lockfile, "lockfile", "", "devcontainer-lock.json to use instead of discovery")
	cmd.Flags().StringVar(&policy, "policy", "", `reserved-environment policy: a file extending the default list, or "none"`)
	_ = cmd.MarkFlagRequired("key")
	return cmd
}
