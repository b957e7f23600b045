package main

import (
	"crypto"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/sandbox-resume/sandbox-resume/envelope"
	"github.com/sandbox-resume/sandbox-resume/envmanifest"
	"github.com/sandbox-resume/sandbox-resume/internal/exitcode"
	"github.com/sandbox-resume/sandbox-resume/snapshot"
	"github.com/sandbox-resume/sandbox-resume/snapshot/suspend"
)

// suspendOptions are the flags of `suspend` (DESIGN "Suspend").
type suspendOptions struct {
	container, config, key, run, out, lockfile, policy string
	keepRunning                                        bool
}

// newSuspendCmd is `suspend --container ID --config PATH --key K [--run ID]
// [--out ref.json] [--keep-running] [--lockfile F] [--policy P]` (DESIGN
// "Suspend"): suspend.Run against the daemon at --address in
// --namespace. It prints a summary, or with --output json the signed ref.
func newSuspendCmd(g *globalOptions) *cobra.Command {
	var o suspendOptions
	cmd := &cobra.Command{
		Use:   "suspend --container ID --config PATH --key K [--run ID] [--out ref.json] [--keep-running] [--lockfile F] [--policy P]",
		Short: "Capture a container's filesystem changes and write a signed SnapshotRef",
		Long: `Ingests the devcontainer.json, checks that it describes the container (its
snapshot's parent is the chain of the declared image: else exit 3; an image
that does not resolve is 5) and that the image's devcontainer.metadata label,
if any, passes (else exit 2, class image-metadata, with the refusals; nothing
is paused or written), creates the run lease sandbox-resume.run/<run>,
pauses the task, stores the zstd rootfs diff under the lease, stops the task
(or resumes it with --keep-running), stores the signed ref as a blob, labels
the container and writes the ref file atomically (default <run>.ref.json).
Rerunning with the same --run completes an interrupted suspend.`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) > 0 {
				return usageErrorf("suspend: unexpected argument %q", args[0])
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, _ []string) error {
			for _, f := range []struct{ name, v string }{{"--container", o.container}, {"--config", o.config}, {"--key", o.key}} {
				if f.v == "" {
					return usageErrorf("suspend: %s is required", f.name)
				}
			}
			if o.run != "" && !snapshot.ValidRunID(o.run) {
				return usageErrorf("suspend: --run %q must match [a-z0-9]+([._-][a-z0-9]+)* and be at most %d characters", o.run, snapshot.MaxRunIDLen)
			}
			key, err := envelope.LoadPrivateKey(o.key)
			if err != nil {
				return &exitError{class: exitcode.ClassBadInput, err: err}
			}
			policy, err := envmanifest.LoadPolicy(o.policy)
			if err != nil {
				return &exitError{class: exitcode.ClassBadInput, err: err}
			}
			ctx := cmd.Context()
			rt, err := g.connect(ctx)
			if err != nil {
				return err
			}
			defer rt.Close()
			res, err := suspend.Run(ctx, rt, suspend.Request{
				ContainerID: o.container, ConfigPath: o.config, Lockfile: o.lockfile, Policy: policy,
				Run: o.run, Keys: []crypto.Signer{key}, Out: o.out, KeepRunning: o.keepRunning,
			})
			if err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			if g.output == outputJSON {
				_, err = w.Write(res.File)
				return err
			}
			pinned := "unpinned"
			if res.Ref.Pinned {
				pinned = "pinned"
			}
			fmt.Fprintf(w, "run       %s\nref       %s\nmanifest  %s (%s)\nimage     %s (manifest %s)\ndiff      %s (%d bytes, diffID %s)\nref blob  %s\nlease     %s\nkept running: %t\n",
				res.Ref.Run, res.Path, res.Ref.Manifest, pinned, res.Ref.Base.Name, res.Ref.Base.ManifestDigest,
				res.Ref.RootfsDiff.Digest, res.Ref.RootfsDiff.Size, res.Ref.RootfsDiff.DiffID, res.RefBlob, res.Lease, res.Ref.KeptRunning)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.container, "container", "", "id of the container to suspend (required)")
	f.StringVar(&o.config, "config", "", "the run's devcontainer.json (required)")
	f.StringVar(&o.key, "key", "", "PKCS#8 PEM Ed25519 private key that signs the ref (required)")
	f.StringVar(&o.run, "run", "", "run id (default: the container id, lower-cased, when it is a valid run id)")
	f.StringVar(&o.out, "out", "", "ref file to write (default <run>.ref.json)")
	f.BoolVar(&o.keepRunning, "keep-running", false, "resume the task after the diff instead of stopping it")
	f.StringVar(&o.lockfile, "lockfile", "", "lockfile to use instead of discovering one beside --config")
	f.StringVar(&o.policy, "policy", "", `reserved-environment policy: "none", or a file of names extending the default list`)
	return cmd
}
