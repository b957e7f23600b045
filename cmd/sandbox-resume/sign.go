package main

import (
	"github.com/spf13/cobra"

	"github.com/sandbox-resume/sandbox-resume/envelope"
	"github.com/sandbox-resume/sandbox-resume/envmanifest"
)

// newSignCmd is `sign --key K [--lockfile F] [--policy P] PATH` (DESIGN
// "CLI contract", "Signed documents"): ingests the devcontainer.json at PATH
// as `manifest` does and prints the signed manifest file on stdout.
func newSignCmd(g *globalOptions) *cobra.Command {
	var keyPath, lockfile, policy string
	cmd := &cobra.Command{
		Use:   "sign --key K [--lockfile F] [--policy P] PATH",
		Short: "Ingest a devcontainer.json and print its signed manifest",
		Args:  sigArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			if keyPath == "" {
				return usageErrorf("sign: --key K is required")
			}
			key, err := envelope.LoadPrivateKey(keyPath)
			if err != nil {
				return badInput(err) // a key file of the wrong kind is bad input (2), as for suspend
			}
			reserved, err := envmanifest.LoadPolicy(policy)
			if err != nil {
				return err
			}
			file, err := envmanifest.SignManifestFile(args[0], envmanifest.Options{Lockfile: lockfile, Reserved: reserved}, key)
			if err != nil {
				return err
			}
			_, err = cmd.OutOrStdout().Write(file)
			return err
		},
	}
	cmd.Flags().StringVar(&keyPath, "key", "", "PKCS#8 PEM Ed25519 private key")
	cmd.Flags().StringVar(&lockfile, "lockfile", "", "devcontainer-lock.json to use instead of discovery")
	cmd.Flags().StringVar(&policy, "policy", "", `reserved-environment policy: a file extending the default list, or "none"`)
	return cmd
}
