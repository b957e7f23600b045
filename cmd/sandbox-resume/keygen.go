package main

import (
	"errors"
	"fmt"
	"io/fs"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/sandbox-resume/sandbox-resume/envelope"
)

// newKeygenCmd is `keygen --out PREFIX [--force]` (DESIGN "CLI contract"):
// writes PREFIX.key (PKCS#8 PEM, 0600) and PREFIX.pub (PKIX PEM); refuses to
// overwrite either without --force (exit 2).
func newKeygenCmd(g *globalOptions) *cobra.Command {
	var out string
	var force bool
	cmd := &cobra.Command{
		Use:   "keygen --out PREFIX [--force]",
		Short: "Generate an Ed25519 signing key pair: PREFIX.key (PKCS#8 PEM, 0600) and PREFIX.pub (PKIX PEM)",
		Args:  sigArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if out == "" {
				return usageErrorf("keygen: --out PREFIX is required")
			}
			pubPath, keyPath, err := envelope.WriteKeyPair(out, force)
			switch {
			case errors.Is(err, envelope.ErrKeyExists):
				return fmt.Errorf("%w (use --force to overwrite)", err)
			case errors.Is(err, fs.ErrNotExist), errors.Is(err, syscall.ENOTDIR):
				return badInput(err) // --out names a directory that is not there
			case err != nil:
				return err
			}
			pub, err := envelope.LoadPublicKey(pubPath)
			if err != nil {
				return err
			}
			keyid := envelope.KeyID(pub)
			if g.output == outputJSON {
				writeJSON(cmd.OutOrStdout(), map[string]string{"key": keyPath, "pub": pubPath, "keyid": keyid})
				return nil
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s\n%s\n%s\n", keyPath, pubPath, keyid)
			return nil
		},
	}
	cmd.Flags().StringVar(&out, "out", "", "output prefix: writes PREFIX.key and PREFIX.pub")
	cmd.Flags().BoolVar(&force, "force", false, "overwrite existing PREFIX.key / PREFIX.pub")
	return cmd
}

// sigArgs turns a cobra positional-argument error into a usage error (64).
func sigArgs(check cobra.PositionalArgs) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if err := check(cmd, args); err != nil {
			return usageErrorf("%s: %v", cmd.Name(), err)
		}
		return nil
	}
}
