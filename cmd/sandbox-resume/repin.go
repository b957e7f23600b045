package main

import (
	"crypto"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/sandbox-resume/sandbox-resume/internal/atomicfile"
	"github.com/sandbox-resume/sandbox-resume/resume"
	"github.com/sandbox-resume/sandbox-resume/suspend"
)

// repinOutput is what `repin --output json` prints: the run, the
// generation written, the digest of its ref file's bytes, the file, the
// new manifest address and the one it replaced, and the ledger's state.
type repinOutput struct {
	Run          string `json:"run"`
	Generation   uint64 `json:"generation"`
	Ref          string `json:"ref"`
	Out          string `json:"out"`
	Manifest     string `json:"manifest"`
	RepinnedFrom string `json:"repinnedFrom"`
	State        string `json:"state"`
}

// newRepinCmd is `repin --ref gN.json --trust T --config pinned.json --key K
// [--lockfile F] [--out …]` (docs/design.md "Repin and fork"):
// resume.Repin against the daemon at --address in --namespace and the
// ledger --ledger names; the ref file it returns is written atomically.
func newRepinCmd(a *app) *cobra.Command {
	var refPath, trustPath, config, key, lockfile, out string
	cmd := &cobra.Command{
		Use:   "repin --ref gN.json --trust PUB|DIR --config pinned.json --key K [--lockfile F] [--out ref.json]",
		Short: "Write the pinned next generation of a run suspended unpinned, so that it can resume on another host",
		Long: `A run suspended with an unpinned declaration cannot resume on another host
(exit 4), and pinning its file afterwards changes its address (exit 3). Repin
is the signed way across. The ref is verified against --trust (2/6 as resume's
checks 1-4); it must be an unpinned sandbox.snapshot-ref/3 ref (else 2) whose
features are all addressed by digest. The offered --config must ingest with the
recorded policy, be pinned, and differ from the recorded declaration only in its
image, which must be the recorded name with the recorded digest (the index
digest, else the manifest digest): otherwise 3, naming each member. The ledger
must hold the run suspended at this generation with this ref (else 8). Repin
then signs generation N+1 (the pinned core; the same base, layers, spec,
runtime, memory and run UID; parent N; repinnedFrom the old manifest address;
this host), stores it under the run lease, records Repinned in the ledger (the
old generation is superseded: resuming it is 9) and writes the ref file
atomically (default <run>.g<N+1>.ref.json). Nothing else changes in
containerd. Rerun after a repin whose ref file was not written, it writes the
recorded ref again from the run lease.`,
		Args: noArgs("repin"),
		RunE: a.command(func(s *session, _ []string) (*result, error) {
			req, err := resume.LoadRequest(refPath, config, lockfile, trustPath)
			if err != nil {
				return nil, err
			}
			k, err := loadKey(key)
			if err != nil {
				return nil, err
			}
			l, err := s.ledger()
			if err != nil {
				return nil, err
			}
			rt, err := s.runtime()
			if err != nil {
				return nil, err
			}
			res, err := resume.Repin(s.ctx, rt, l, resume.RepinRequest{
				RefFile: req.RefFile, RefSource: refPath, Trust: req.Trust, Config: req.Config, ConfigPath: config,
				Lockfile: lockfile, Keys: []crypto.Signer{k}, Now: a.now,
			})
			if err != nil {
				return nil, err
			}
			path := out
			if path == "" {
				path = suspend.DefaultOut(res.Ref.Run, res.Ref.Generation)
			}
			if err := atomicfile.WriteFile(path, res.File, 0o644); err != nil {
				return nil, err
			}
			o := repinOutput{Run: res.Ref.Run, Generation: res.Ref.Generation, Ref: res.Digest.String(), Out: path,
				Manifest: res.Ref.Manifest, RepinnedFrom: res.From, State: string(res.Record.State)}
			return &result{JSON: o, Text: func(w, _ io.Writer) error {
				_, err := fmt.Fprintf(w, "run          %s generation %d (repinned from generation %d)\nref file     %s (%s)\nmanifest     %s (pinned)\nrepinned     from %s\nimage        %s\nledger       %s, fence %d\n",
					o.Run, o.Generation, o.Generation-1, o.Out, o.Ref, o.Manifest, o.RepinnedFrom, res.Ref.Core.Image, o.State, res.Record.Fence)
				if err == nil && res.Finished {
					_, err = fmt.Fprintln(w, "finished     an earlier repin the ledger had recorded: its ref, read back from the run lease")
				}
				return err
			}}, nil
		}),
	}
	f := cmd.Flags()
	f.StringVar(&refPath, "ref", "", "the unpinned generation's SnapshotRef file (required)")
	f.StringVar(&trustPath, "trust", "", "trusted PKIX PEM public key, or a directory of *.pub / *.pem keys (required)")
	f.StringVar(&config, "config", "", "the pinned devcontainer.json (required)")
	f.StringVar(&key, "key", "", "PKCS#8 PEM Ed25519 private key that signs the new ref (required)")
	f.StringVar(&lockfile, "lockfile", "", "lockfile to use instead of discovering one beside --config")
	f.StringVar(&out, "out", "", "ref file to write (default <run>.g<generation>.ref.json)")
	for _, name := range []string{"ref", "trust", "config", "key"} {
		_ = cmd.MarkFlagRequired(name)
	}
	addDaemonFlags(cmd, a)
	addHostIDFlag(cmd, a)
	addLedgerFlags(cmd, a)
	return cmd
}
