package main

import (
	"crypto"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/sandbox-resume/sandbox-resume/envmanifest"
	"github.com/sandbox-resume/sandbox-resume/snapshot"
	"github.com/sandbox-resume/sandbox-resume/suspend"
)

// suspendOptions are the flags of `suspend` (docs/design.md "Suspend").
type suspendOptions struct {
	container, config, key, run, out, lockfile, policy string
	keepRunning, flatten, memory, keepMemory           bool
	keepGenerations                                    int
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
// [--out ref.json] [--keep-running] [--flatten] [--keep-generations K]
// [--lockfile F] [--policy P]` (docs/design.md "Suspend"): suspend.Run
// against the daemon at --address in --namespace and the ledger --ledger
// names, with the diff's progress on stderr when it is a terminal. It
// prints a summary, or with --output json a suspendOutput.
func newSuspendCmd(a *app) *cobra.Command {
	var o suspendOptions
	cmd := &cobra.Command{
		Use:   "suspend --container ID --config PATH --key K [--run ID] [--out ref.json] [--keep-running] [--memory] [--keep-memory] [--flatten] [--keep-generations K] [--lockfile F] [--policy P]",
		Short: "Capture a container's filesystem changes and spec, record the run's next generation in the ledger and write a signed SnapshotRef",
		Long: `Ingests the devcontainer.json and checks that it describes the container
(else exit 3) and that the image's devcontainer.metadata label, if any, passes
(else exit 2, class image-metadata, with the refusals; nothing is paused or
written). For the runtime's own container this is generation 1 of the run:
its snapshot's parent is the chain of the declared image, and its runtime spec
carries the declared containerEnv values and mount targets; an image that does
not resolve is 5; a run id already in the ledger (a tombstone included) is 8.
A container that holds the run (an incarnation created by resume, or a
container kept running by an earlier suspend: label io.sandbox-resume.fence)
writes the next generation: the ledger must name it as the live holder with
that fence (else 8), the declaration must be the recorded one, its parent
generation is the ledger's latest ref, and its layers are those of the
generation it was resumed from plus its own diff (--flatten, or more than 16
layers: one diff against the base image); --policy must then be the recorded
list (else 2). Creates or finds the run lease sandbox-resume.run/<run>, labels
the container io.sandbox-resume.suspending, pauses the task, stores the zstd
rootfs diff (progress on stderr when it is a terminal), the container's runtime
spec and the signed sandbox.snapshot-ref/3 under the lease, and records the
generation in the run ledger while the task is paused. Recorded: it writes the
ref file atomically (default <run>.g<generation>.ref.json) and releases from
the lease the layers no longer named by the latest --keep-generations
generations; then it stops the task — an incarnation is deleted with its
snapshot, the runtime's container labelled io.sandbox-resume.suspended (a
later suspend of it is 8) — or, with --keep-running, resumes it (the
container holds the run: label io.sandbox-resume.fence). A refused or failed
record resumes the task and writes no ref file. Rerunning completes an
interrupted suspend: when the ledger recorded it, from the recorded ref,
without a new diff.`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) > 0 {
				return usageErrorf("suspend: unexpected argument %q", args[0])
			}
			return nil
		},
		RunE: a.command(func(s *session, _ []string) (*result, error) {
			if o.keepGenerations < 1 {
				return nil, usageErrorf("suspend: --keep-generations %d: keep at least 1", o.keepGenerations)
			}
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
			req := suspend.Request{
				ContainerID: o.container, ConfigPath: o.config, Lockfile: o.lockfile, Policy: policy, PolicySet: s.cmd.Flags().Changed("policy"),
				Run: o.run, Keys: []crypto.Signer{key}, Out: o.out, KeepRunning: o.keepRunning, Now: a.now, Rand: a.random,
				Flatten: o.flatten, KeepGenerations: o.keepGenerations, Memory: o.memory, KeepMemory: o.keepMemory,
			}
			done := func() {}
			if w := s.cmd.ErrOrStderr(); isTerminal(w) {
				p := &barProgress{w: w}
				req.Progress, done = p, p.finish
			}
			res, err := suspend.Run(s.ctx, rt, l, req)
			done()
			if err != nil {
				return nil, err
			}
			return &result{
				JSON: suspendOutput{
					Run: res.Ref.Run, Generation: res.Ref.Generation, Ref: res.RefBlob.String(), Out: res.Path,
					KeptRunning: res.Ref.KeptRunning, Fence: res.Fence, PausedMs: res.Paused.Milliseconds(),
				},
				Text: func(w, _ io.Writer) error { writeSuspendText(w, res, o); return nil },
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
	f.BoolVar(&o.memory, "memory", false, "checkpoint the task's memory (runc: CRIU) after the pause and before the diff, so that resume restores the process instead of restarting it")
	f.BoolVar(&o.keepMemory, "keep-memory", false, "keep the parent generation's memory blobs under the run lease (by default they are released once this generation is recorded)")
	f.BoolVar(&o.flatten, "flatten", false, "record one layer, the diff against the base image, instead of the resumed generation's layers plus the new diff")
	f.IntVar(&o.keepGenerations, "keep-generations", suspend.DefaultKeepGenerations, "how many of the latest generations keep their layers under the run lease (ref and spec blobs always stay)")
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
func writeSuspendText(w io.Writer, res *suspend.Result, o suspendOptions) {
	pinned := "unpinned"
	if res.Ref.Pinned {
		pinned = "pinned"
	}
	fmt.Fprintf(w, "run          %s generation %d\nref file     %s (%s)\nmanifest     %s (%s)\nimage        %s (manifest %s)\n",
		res.Ref.Run, res.Ref.Generation, res.Path, res.RefBlob, res.Ref.Manifest, pinned, res.Ref.Base.Name, res.Ref.Base.ManifestDigest)
	if res.Ref.Parent != "" {
		fmt.Fprintf(w, "parent       %s (fence %d)\n", res.Ref.Parent, res.Ref.Fence)
	}
	for i, l := range res.Ref.Layers {
		fmt.Fprintf(w, "layer %d      %s (%d bytes, diffID %s)\n", i, l.Digest, l.Size, l.DiffID)
	}
	if res.Flattened {
		fmt.Fprintln(w, "flattened    one layer: the diff against the base image")
	}
	fmt.Fprintf(w, "spec         %s (%d bytes)\nruntime      %s\nlease        %s\nledger       %s, fence %d\npaused       %s\n",
		res.Ref.Spec.Digest, res.Ref.Spec.Size, res.Ref.Runtime.Name, res.Lease, res.Record.State, res.Record.Fence, res.Paused.Round(time.Millisecond))
	if res.Ref.KeptRunning {
		fmt.Fprintf(w, "kept running: the container holds the run with fence %d\n", res.Fence)
	}
	if len(res.Released) > 0 {
		fmt.Fprintf(w, "released     %d layers of generations older than the latest %d from the run lease\n", len(res.Released), o.keepGenerations)
	}
	if res.Deleted {
		fmt.Fprintf(w, "deleted      incarnation %s with its snapshot (its content lives in the layers)\n", o.container)
	}
	if res.Finished {
		fmt.Fprintln(w, "finished an interrupted suspend from the recorded ref (no new diff)")
	}
}
