package main

import (
	"crypto"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/sandbox-resume/sandbox-resume/envmanifest"
	"github.com/sandbox-resume/sandbox-resume/snapshot"
	"github.com/sandbox-resume/sandbox-resume/snapshot/suspend"
)

// suspendOptions are the flags of `suspend` (docs/design.md "Suspend").
type suspendOptions struct {
	container, config, key, run, out, lockfile, policy string
	keepRunning                                        bool
}

// suspendOutput is what `suspend --output json` prints (docs/design.md
// "CLI contract"): the run, the generation written, the digest of the ref
// file's bytes, the file, whether the container was kept running (then
// with the fence it holds the run with) and how long the task was paused,
// in milliseconds.
type suspendOutput struct {
	Run         string `json:"run"`
	Generation  uint64 `json:"generation"`
	Ref         string `json:"ref"`
	Out         string `json:"out"`
	KeptRunning bool   `json:"keptRunning"`
	Fence       uint64 `json:"fence,omitempty"`
	PausedMs    int64  `json:"pausedMs"`
}

// newSuspendCmd is `suspend --container ID --config PATH --key K [--run ID]
// [--out ref.json] [--keep-running] [--lockfile F] [--policy P]`
// (docs/design.md "Suspend"): suspend.Run against the daemon at --address
// in --namespace and the ledger --ledger names. It prints a summary, or
// with --output json a suspendOutput.
func newSuspendCmd(a *app) *cobra.Command {
	var o suspendOptions
	cmd := &cobra.Command{
		Use:   "suspend --container ID --config PATH --key K [--run ID] [--out ref.json] [--keep-running] [--lockfile F] [--policy P]",
		Short: "Capture a container's filesystem changes and spec, record the generation in the ledger and write a signed SnapshotRef",
		Long: `Ingests the devcontainer.json, checks that it describes the container (its
snapshot's parent is the chain of the declared image: else exit 3; an image
that does not resolve is 5) and that the image's devcontainer.metadata label,
if any, passes (else exit 2, class image-metadata, with the refusals; nothing
is paused or written), creates the run lease sandbox-resume.run/<run>,
labels the container io.sandbox-resume.suspending, pauses the task, stores
the zstd rootfs diff, the container's runtime spec and the signed
sandbox.snapshot-ref/2 under the lease, and records generation 1 in the run
ledger while the task is paused. Recorded: it writes the ref file atomically
(default <run>.g<generation>.ref.json), then stops the task (the container is
labelled io.sandbox-resume.suspended) or, with --keep-running, resumes it (the
container holds the run: label io.sandbox-resume.fence). A run id already in
the ledger (a tombstone included), or a container already suspended, is 8; a
container that holds a resumed run is 2 (suspending a resumed run needs
generations). A refused or failed record resumes the task and writes no ref
file. Rerunning completes an interrupted suspend: when the ledger recorded
it, from the recorded ref, without a new diff.`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) > 0 {
				return usageErrorf("suspend: unexpected argument %q", args[0])
			}
			return nil
		},
		RunE: a.command(func(s *session, _ []string) (*result, error) {
			if o.run != "" && !snapshot.ValidRunID(o.run) {
				return nil, usageErrorf("suspend: --run %q must match [a-z0-9]+([._-][a-z0-9]+)* and be at most %d characters", o.run, snapshot.MaxRunIDLen)
			}
			key, err := loadKey(o.key)
			if err != nil {
				return nil, err
			}
			policy, err := envmanifest.LoadPolicy(o.policy)
			if err != nil {
				return nil, badInput(err)
			}
			l, err := s.ledger()
			if err != nil {
				return nil, err
			}
			rt, err := s.runtime()
			if err != nil {
				return nil, err
			}
			res, err := suspend.Run(s.ctx, rt, l, suspend.Request{
				ContainerID: o.container, ConfigPath: o.config, Lockfile: o.lockfile, Policy: policy,
				Run: o.run, Keys: []crypto.Signer{key}, Out: o.out, KeepRunning: o.keepRunning, Now: a.now,
			})
			if err != nil {
				return nil, err
			}
			return &result{
				JSON: suspendOutput{
					Run: res.Ref.Run, Generation: res.Ref.Generation, Ref: res.RefBlob.String(), Out: res.Path,
					KeptRunning: res.Ref.KeptRunning, Fence: res.Fence, PausedMs: res.Paused.Milliseconds(),
				},
				Text: func(w, _ io.Writer) error { writeSuspendText(w, res); return nil },
			}, nil
		}),
	}
	f := cmd.Flags()
	f.StringVar(&o.container, "container", "", "id of the container to suspend (required)")
	f.StringVar(&o.config, "config", "", "the run's devcontainer.json (required)")
	f.StringVar(&o.key, "key", "", "PKCS#8 PEM Ed25519 private key that signs the ref (required)")
	f.StringVar(&o.run, "run", "", "run id (default: the container's io.sandbox-resume.run label, else the container id lower-cased when it is a valid run id)")
	f.StringVar(&o.out, "out", "", "ref file to write (default <run>.g<generation>.ref.json)")
	f.BoolVar(&o.keepRunning, "keep-running", false, "resume the task once the generation is recorded instead of stopping it (the container then holds the run)")
	f.StringVar(&o.lockfile, "lockfile", "", "lockfile to use instead of discovering one beside --config")
	f.StringVar(&o.policy, "policy", "", `reserved-environment policy: "none", or a file of names extending the default list`)
	for _, name := range []string{"container", "config", "key"} {
		_ = cmd.MarkFlagRequired(name)
	}
	addDaemonFlags(cmd, a)
	addHostIDFlag(cmd, a)
	addLedgerFlags(cmd, a)
	return cmd
}

// writeSuspendText prints what suspend did for people.
func writeSuspendText(w io.Writer, res *suspend.Result) {
	pinned := "unpinned"
	if res.Ref.Pinned {
		pinned = "pinned"
	}
	fmt.Fprintf(w, "run          %s generation %d\nref file     %s (%s)\nmanifest     %s (%s)\nimage        %s (manifest %s)\n",
		res.Ref.Run, res.Ref.Generation, res.Path, res.RefBlob, res.Ref.Manifest, pinned, res.Ref.Base.Name, res.Ref.Base.ManifestDigest)
	for i, l := range res.Ref.Layers {
		fmt.Fprintf(w, "layer %d      %s (%d bytes, diffID %s)\n", i, l.Digest, l.Size, l.DiffID)
	}
	fmt.Fprintf(w, "spec         %s (%d bytes)\nruntime      %s\nlease        %s\nledger       %s, fence %d\npaused       %s\n",
		res.Ref.Spec.Digest, res.Ref.Spec.Size, res.Ref.Runtime.Name, res.Lease, res.Record.State, res.Record.Fence, res.Paused.Round(time.Millisecond))
	if res.Ref.KeptRunning {
		fmt.Fprintf(w, "kept running: the container holds the run with fence %d\n", res.Fence)
	}
	if res.Finished {
		fmt.Fprintln(w, "finished an interrupted suspend from the recorded ref (no new diff)")
	}
}
