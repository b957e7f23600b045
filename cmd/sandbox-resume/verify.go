package main

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/sandbox-resume/sandbox-resume/envmanifest"
)

// verifyOutput is the `verify --output json` object.
type verifyOutput struct {
	Address     string   `json:"address"`
	Pinned      bool     `json:"pinned"`
	ImagePinned bool     `json:"imagePinned"`
	KeyIDs      []string `json:"keyids"`
}

// newVerifyCmd is `verify --trust PUB|DIR FILE` (docs/design.md "CLI
// contract", "Signed documents"): checks a signed manifest in the order of
// resume's checks 1–3 (exit 2 / 6 / 2) and prints the address derived from
// its core.
func newVerifyCmd(a *app) *cobra.Command {
	var trustPath string
	cmd := &cobra.Command{
		Use:   "verify --trust PUB|DIR FILE",
		Short: "Verify a signed manifest and print the address derived from its core",
		Args:  sigArgs(cobra.ExactArgs(1)),
		RunE: a.command(func(_ *session, args []string) (*result, error) {
			trust, err := loadTrust(trustPath)
			if err != nil {
				return nil, err
			}
			vm, err := envmanifest.VerifySignedManifestFile(args[0], trust)
			if err != nil {
				return nil, err
			}
			return &result{
				JSON: verifyOutput{Address: vm.Address, Pinned: vm.Pinned, ImagePinned: vm.ImagePinned, KeyIDs: vm.KeyIDs},
				Text: func(stdout, stderr io.Writer) error {
					fmt.Fprintln(stdout, vm.Address)
					label := "pinned"
					if !vm.Pinned {
						label = "unpinned"
					}
					fmt.Fprintf(stderr, "verified: %s manifest, signed by %v\n", label, vm.KeyIDs)
					return nil
				},
			}, nil
		}),
	}
	cmd.Flags().StringVar(&trustPath, "trust", "", "trusted PKIX PEM public key, or a directory of *.pub / *.pem keys (required)")
	_ = cmd.MarkFlagRequired("trust")
	return cmd
}
