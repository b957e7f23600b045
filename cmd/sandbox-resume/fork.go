package main

import (
	"crypto"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/sandbox-resume/sandbox-resume/internal/atomicfile"
	"github.com/sandbox-resume/sandbox-resume/internal/inputfile"
	"github.com/sandbox-resume/sandbox-resume/resume"
	"github.com/sandbox-resume/sandbox-resume/snapshot"
	"github.com/sandbox-resume/sandbox-resume/suspend"
)

// forkOutput is what `fork --output json` prints: the new run, its
// generation 1's ref digest and file, its run UID, what it was forked
// from, whether it carries memory, the lease holding it and the notes
// also printed on stderr.
type forkOutput struct {
	Run        string               `json:"run"`
	Generation uint64               `json:"generation"`
	Ref        string               `json:"ref"`
	Out        string               `json:"out"`
	RunUID     string               `json:"runUID"`
	ForkedFrom *snapshot.ForkedFrom `json:"forkedFrom"`
	Memory     bool                 `json:"memory"`
	Lease      string               `json:"lease"`
	Notes      []string             `json:"notes"`
}

// newForkCmd is `fork --ref gN.json --trust T --as NEWRUN --key K
// [--with-memory] [--out …]` (docs/design.md "Repin and fork"):
// resume.Fork against the daemon at --address in --namespace and the
// ledger --ledger names; the ref file it returns is written atomically.
// Its notes (memory absent, memory duplicated) go to stderr.
func newForkCmd(a *app) *cobra.Command {
	var refPath, trustPath, as, key, out string
	var withMemory bool
	cmd := &cobra.Command{
		Use:   "fork --ref gN.json --trust PUB|DIR --as NEWRUN --key K [--with-memory] [--out ref.json]",
		Short: "Start a new run from a generation of another, with lineage",
		Long: `Verifies the ref against --trust (2/6 as resume's checks 1-4; a /1 or /2 ref
is 2), checks that its layers and spec are in this host's content store (else
7), and writes generation 1 of the new run --as: the source's declaration,
base, layers, spec and runtime, a new run UID, this host, and forkedFrom
{run, runUID, generation, ref}. The new run's lease sandbox-resume.run/<NEWRUN>
holds the shared blobs and the base; the ledger records Suspended(NEWRUN, 1)
with forkedFrom (a run id the ledger knows is 8); the source run's record is
untouched. The ref file is written atomically (default NEWRUN.g1.ref.json);
resume it like any generation. A fork copies the filesystem only; with
--with-memory it also copies the generation's memory, duplicating whatever its
processes hold (tokens, sessions, random state), and says so on stderr.`,
		Args: noArgs("fork"),
		RunE: a.command(func(s *session, _ []string) (*result, error) {
			if !snapshot.ValidRunID(as) {
				return nil, usageErrorf("fork: --as %q must match [a-z0-9]+([._-][a-z0-9]+)* and be at most %d characters", as, snapshot.MaxRunIDLen)
			}
			data, err := inputfile.Read(refPath, inputfile.MaxJSON)
			if err != nil {
				return nil, badInput(err)
			}
			trust, err := loadTrust(trustPath)
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
			res, err := resume.Fork(s.ctx, rt, l, resume.ForkRequest{
				RefFile: data, RefSource: refPath, Trust: trust, Run: as, WithMemory: withMemory,
				Keys: []crypto.Signer{k}, Now: a.now, Rand: a.random,
			})
			if err != nil {
				return nil, err
			}
			for _, n := range res.Notes {
				fmt.Fprintf(s.stderr(), "fork: %s\n", n)
			}
			path := out
			if path == "" {
				path = suspend.DefaultOut(res.Ref.Run, 1)
			}
			if err := atomicfile.WriteFile(path, res.File, 0o644); err != nil {
				return nil, err
			}
			notes := res.Notes
			if notes == nil {
				notes = []string{}
			}
			o := forkOutput{Run: res.Ref.Run, Generation: 1, Ref: res.Digest.String(), Out: path, RunUID: res.Ref.RunUID,
				ForkedFrom: res.Ref.ForkedFrom, Memory: res.Memory, Lease: res.Lease, Notes: notes}
			return &result{JSON: o, Text: func(w, _ io.Writer) error {
				f := o.ForkedFrom
				mem := "filesystem only"
				if o.Memory {
					mem = "filesystem and memory"
				}
				_, err := fmt.Fprintf(w, "run          %s generation 1 (run UID %s)\nref file     %s (%s)\nforked from  %s generation %d (run UID %s, ref %s)\ncopied       %s\nlease        %s\nledger       %s, fence %d\n",
					o.Run, o.RunUID, o.Out, o.Ref, f.Run, f.Generation, f.RunUID, f.Ref, mem, o.Lease, res.Record.State, res.Record.Fence)
				return err
			}}, nil
		}),
	}
	f := cmd.Flags()
	f.StringVar(&refPath, "ref", "", "the source generation's SnapshotRef file (required)")
	f.StringVar(&trustPath, "trust", "", "trusted PKIX PEM public key, or a directory of *.pub / *.pem keys (required)")
	f.StringVar(&as, "as", "", "the new run's id (required)")
	f.StringVar(&key, "key", "", "PKCS#8 PEM Ed25519 private key that signs the new ref (required)")
	f.BoolVar(&withMemory, "with-memory", false, "copy the generation's memory too: the fork duplicates what its processes hold (tokens, sessions, random state)")
	f.StringVar(&out, "out", "", "ref file to write (default <NEWRUN>.g1.ref.json)")
	for _, name := range []string{"ref", "trust", "as", "key"} {
		_ = cmd.MarkFlagRequired(name)
	}
	addDaemonFlags(cmd, a)
	addLedgerFlags(cmd, a)
	return cmd
}
