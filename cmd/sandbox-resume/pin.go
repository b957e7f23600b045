package main

import (
	"context"
	"fmt"
	"io"

	"github.com/opencontainers/go-digest"
	"github.com/spf13/cobra"

	"github.com/sandbox-resume/sandbox-resume/envmanifest"
	"github.com/sandbox-resume/sandbox-resume/envmanifest/adopt"
)

// pinOutput is the `pin --output json` object (docs/design.md "CLI
// contract": address, pinned, changed); "document" is the patched text when
// it was not written.
type pinOutput struct {
	Address  string          `json:"address"`
	Pinned   bool            `json:"pinned"`
	Changed  bool            `json:"changed"`
	Edits    []adopt.PinEdit `json:"edits"`
	Written  string          `json:"written,omitempty"`
	Document *string         `json:"document,omitempty"`
}

// newPinCmd builds `pin [--lockfile F] [--policy P] [--write] PATH`
// (docs/design.md "Adoption"): adopt.PinFile with the
// image resolved through containerd at --address in --namespace.
func newPinCmd(a *app) *cobra.Command {
	var lockfile, policy string
	var write bool
	cmd := &cobra.Command{
		Use:   "pin [--lockfile F] [--policy P] [--write] PATH",
		Short: "Make a devcontainer.json pinned: the image by the digest its name resolves to, features by the lockfile",
		Long: `Rewrite the image reference to name:tag@sha256:<digest>, the digest its name
resolves to in the containerd content store (the index digest when the name
points at an index; a name without a tag gets :latest written out), and each
OCI feature by tag to its lockfile entry's "resolved" reference exactly (so
with the lockfile present the features' part of the manifest does not
change). A feature without a lockfile entry, a tarball or a local feature is
refused (2), naming it; a name that does not resolve is 5. Comments and
layout are kept byte for byte outside the changed strings.

It prints the new address and pinned. With --write, PATH is rewritten in
place (temp file, fsync, rename); without it the patched document goes to
stdout and the summary to stderr (under --output json: one object with the
document in "document"). Containerd is asked only when the image carries no
digest yet.`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) != 1 {
				return usageErrorf("pin takes exactly one PATH, got %d arguments", len(args))
			}
			return nil
		},
		RunE: a.command(func(s *session, args []string) (*result, error) {
			reserved, err := envmanifest.LoadPolicy(policy)
			if err != nil {
				return nil, usageErrorf("--policy: %v", err)
			}
			// Containerd is dialled only when the image needs resolving.
			resolve := func(ctx context.Context, ref string) (digest.Digest, error) {
				rt, err := s.runtime()
				if err != nil {
					return "", err
				}
				base, err := rt.ResolveImage(ctx, ref)
				if err != nil {
					return "", err
				}
				return base.Target(), nil
			}
			res, err := adopt.PinFile(s.ctx, args[0], adopt.PinOptions{
				Options: envmanifest.Options{Lockfile: lockfile, Reserved: reserved}, Write: write, Resolve: resolve,
			})
			if err != nil {
				return nil, err
			}
			out := pinOutput{Address: res.Manifest.Address, Pinned: res.Manifest.IsPinned(), Changed: res.Changed, Edits: res.Edits}
			if out.Edits == nil {
				out.Edits = []adopt.PinEdit{}
			}
			if res.Written {
				out.Written = args[0]
			}
			if !write {
				doc := string(res.Document)
				out.Document = &doc
			}
			return &result{
				JSON: out,
				Text: func(stdout, stderr io.Writer) error {
					summary := stdout
					if !write {
						if _, err := stdout.Write(res.Document); err != nil {
							return err
						}
						summary = stderr
					}
					writePinText(summary, args[0], out)
					return nil
				},
			}, nil
		}),
	}
	cmd.Flags().StringVar(&lockfile, "lockfile", "", "devcontainer-lock.json to take feature digests from (default: discovered beside PATH)")
	cmd.Flags().StringVar(&policy, "policy", "", `reserved-environment policy: "none", or a file of names extending the default list`)
	cmd.Flags().BoolVar(&write, "write", false, "rewrite PATH in place instead of printing the pinned document")
	addDaemonFlags(cmd, a)
	return cmd
}

func writePinText(w io.Writer, path string, out pinOutput) {
	fmt.Fprintf(w, "address: %s\npinned:  %t\n", out.Address, out.Pinned)
	if !out.Changed {
		fmt.Fprintf(w, "%s is already pinned: nothing changed\n", path)
		return
	}
	for _, e := range out.Edits {
		what := "value"
		if e.Key {
			what = "key"
		}
		fmt.Fprintf(w, "%s (%s): %s\n      → %s\n", e.Pointer, what, e.Old, e.New)
	}
	if out.Written != "" {
		fmt.Fprintf(w, "wrote %s\n", out.Written)
	}
}
