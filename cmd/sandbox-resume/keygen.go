package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/sandbox-resume/sandbox-resume/envelope"
)

// newKeygenCmd is `keygen --out PREFIX [--force]` (docs/design.md "CLI
// contract"): writes PREFIX.key (PKCS#8 PEM, 0600) and PREFIX.pub (PKIX
// PEM); refuses to overwrite either without --force (exit 2).
func newKeygenCmd(a *app) *cobra.Command {
	var out string
	var force bool
	cmd := &cobra.Command{
		Use:   "keygen --out PREFIX [--force]",
		Short: "Generate an Ed25519 signing key pair: PREFIX.key (PKCS#8 PEM, 0600) and PREFIX.pub (PKIX PEM)",
		Args:  sigArgs(cobra.NoArgs),
		RunE: a.command(func(_ *session, _ []string) (*result, error) {
			pubPath, keyPath, err := envelope.WriteKeyPair(out, force)
			switch {
			case errors.Is(err, envelope.ErrKeyExists):
				return nil, fmt.Errorf("%w (use --force to overwrite)", err)
			case errors.Is(err, fs.ErrNotExist), errors.Is(err, syscall.ENOTDIR):
				return nil, badInput(err) // --out names a directory that is not there
			case err != nil:
				return nil, err
			}
			pub, err := envelope.LoadPublicKey(pubPath)
			if err != nil {
				return nil, err
			}
			keyid := envelope.KeyID(pub)
			return &result{
				JSON: map[string]string{"key": keyPath, "pub": pubPath, "keyid": keyid},
				Text: func(w, _ io.Writer) error {
					_, err := fmt.Fprintf(w, "%s\n%s\n%s\n", keyPath, pubPath, keyid)
					return err
				},
			}, nil
		}),
	}
	cmd.Flags().StringVar(&out, "out", "", "output prefix: writes PREFIX.key and PREFIX.pub (required)")
	cmd.Flags().BoolVar(&force, "force", false, "overwrite existing PREFIX.key / PREFIX.pub")
	_ = cmd.MarkFlagRequired("out")
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
