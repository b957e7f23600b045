package main

import (
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/opencontainers/go-digest"
	"github.com/spf13/cobra"

	"github.com/sandbox-resume/sandbox-resume/internal/exitcode"
	"github.com/sandbox-resume/sandbox-resume/snapshot"
)

// inspectOutput is the `inspect --output json` object: what a ref file
// records, read without trusting it unless Verified.
type inspectOutput struct {
	Ref        digest.Digest `json:"ref"` // sha256 of the file's bytes: the ledger's ref, the ref label
	Schema     string        `json:"schema"`
	Run        string        `json:"run"`
	Generation uint64        `json:"generation"`
	Parent     digest.Digest `json:"parent,omitempty"`
	// RunUID is the run's UID (a /3 ref; absent for /1 and /2).
	RunUID string `json:"runUID,omitempty"`
	// AncestorCount is how many earlier refs of the run a /3 ref lists
	// (its ancestors, the parent last); absent when none.
	AncestorCount int                  `json:"ancestorCount,omitempty"`
	RepinnedFrom  string               `json:"repinnedFrom,omitempty"` // the manifest address a repin replaced
	ForkedFrom    *snapshot.ForkedFrom `json:"forkedFrom,omitempty"`   // the generation a fork started from
	Manifest      string               `json:"manifest"`
	Pinned        bool                 `json:"pinned"`
	Layers        []snapshot.Layer     `json:"layers"`
	LayersSize    int64                `json:"layersSize"` // bytes of every layer blob
	Unpacked      int64                `json:"unpacked"`   // bytes of every layer uncompressed
	Spec          *snapshot.Descriptor `json:"spec"`       // null for a /1 ref
	Runtime       *inspectRuntime      `json:"runtime"`    // null for a /1 ref
	Base          snapshot.Base        `json:"base"`
	Host          snapshot.Host        `json:"host"`
	Fence         uint64               `json:"fence,omitempty"`
	KeptRunning   bool                 `json:"keptRunning"`
	Created       string               `json:"created"`
	Signatures    int                  `json:"signatures"`
	Verified      bool                 `json:"verified"`           // --trust given and the signatures verified
	SignedBy      []string             `json:"signedBy,omitempty"` // the keyids that verified
}

// inspectRuntime is a ref's runtime with its options' value in base64, as
// the ref writes it.
type inspectRuntime struct {
	Name    string          `json:"name"`
	Options *inspectOptions `json:"options,omitempty"`
}

type inspectOptions struct {
	TypeURL string `json:"typeUrl"`
	Value   string `json:"value"`
}

// newInspectCmd is `inspect REF [--trust PUB|DIR]` (docs/design.md "CLI
// contract"): what a ref file records — run, generation, parent, layers
// with sizes, spec, runtime, base, host, created — read with
// snapshot.OpenRefUnsafe (parse, schema, integrity; no signature), or with
// --trust through snapshot.OpenRef, which verifies the signatures first.
func newInspectCmd(a *app) *cobra.Command {
	var trustPath string
	cmd := &cobra.Command{
		Use:   "inspect REF [--trust PUB|DIR]",
		Short: "Show what a SnapshotRef file records (untrusted unless --trust)",
		Long: `Reads a SnapshotRef file and shows its run, run UID, generation, parent, how
many ancestors it lists, what it was repinned or forked from, layers with
their sizes, spec blob, runtime and options, base image, host, fence and
creation time. Without --trust nothing is verified but the file's structure,
schema and the manifest address of its core: do not act on what it shows.
With --trust the signatures are verified first against the trusted keys
(untrusted: exit 6). A file that is not a SnapshotRef is exit 2; a ref whose
manifest or pinned flag disagrees with its core is 6. Needs no daemon.`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) != 1 {
				return usageErrorf("inspect: exactly one ref file argument is required, got %d", len(args))
			}
			return nil
		},
		RunE: a.command(func(_ *session, args []string) (*result, error) {
			data, err := readInput(args[0])
			if err != nil {
				return nil, err
			}
			var ref *snapshot.Ref
			if trustPath != "" {
				trust, err := loadTrust(trustPath)
				if err != nil {
					return nil, err
				}
				if ref, err = snapshot.OpenRef(data, trust); err != nil {
					return nil, openRefError(args[0], err)
				}
			} else if ref, err = snapshot.OpenRefUnsafe(data); err != nil {
				return nil, openRefError(args[0], err)
			}
			out := inspectOf(data, ref, trustPath != "")
			return &result{JSON: out, Text: func(w, _ io.Writer) error { writeInspectText(w, out); return nil }}, nil
		}),
	}
	cmd.Flags().StringVar(&trustPath, "trust", "", "trusted PKIX PEM public key, or a directory of *.pub / *.pem keys: verify the signatures too")
	return cmd
}

// openRefError classifies a ref that does not open: a file that is not a
// SnapshotRef is bad-input; a signature or integrity failure keeps its
// class (untrusted, tampered).
func openRefError(path string, err error) error {
	err = fmt.Errorf("%s: %w", path, err)
	var oe *snapshot.OpenError
	if errors.As(err, &oe) && (oe.Step == snapshot.StepParse || oe.Step == snapshot.StepSchema) {
		return &exitError{class: exitcode.ClassBadInput, err: err}
	}
	return err
}

func inspectOf(data []byte, ref *snapshot.Ref, verified bool) inspectOutput {
	p := ref.Provenance()
	out := inspectOutput{
		Ref: digest.FromBytes(data), Schema: ref.Schema, Run: ref.Run, Generation: ref.Gen(), Parent: ref.Parent,
		Manifest: ref.Manifest, Pinned: ref.Pinned, Layers: ref.Layers, Spec: ref.Spec, Base: ref.Base, Host: ref.Host,
		Fence: ref.Fence, KeptRunning: ref.KeptRunning, Created: ref.Created,
		RunUID: ref.RunUID, AncestorCount: len(ref.Ancestors), RepinnedFrom: ref.RepinnedFrom, ForkedFrom: ref.ForkedFrom,
		Signatures: p.Signatures, Verified: verified, SignedBy: p.SignedBy,
	}
	if out.Layers == nil {
		out.Layers = []snapshot.Layer{}
	}
	for _, l := range ref.Layers {
		out.LayersSize += l.Size
		out.Unpacked += l.UncompressedSize
	}
	if rt := ref.Runtime; rt != nil {
		out.Runtime = &inspectRuntime{Name: rt.Name}
		if o := rt.Options; o != nil {
			out.Runtime.Options = &inspectOptions{TypeURL: o.TypeURL, Value: base64.StdEncoding.EncodeToString(o.Value)}
		}
	}
	return out
}

// writeInspectText prints the ref for people.
func writeInspectText(w io.Writer, o inspectOutput) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	trust := "NOT verified (no --trust): do not act on it"
	if o.Verified {
		trust = "verified, signed by " + strings.Join(o.SignedBy, ", ")
	}
	row := func(k, format string, args ...any) { fmt.Fprintf(tw, "%s\t%s\n", k, fmt.Sprintf(format, args...)) }
	row("ref", "%s (%s)", o.Ref, o.Schema)
	row("signatures", "%d, %s", o.Signatures, trust)
	row("run", "%s", o.Run)
	if o.RunUID != "" {
		row("run uid", "%s", o.RunUID)
	}
	row("generation", "%d", o.Generation)
	if o.Parent != "" {
		row("parent", "%s", o.Parent)
	}
	if o.AncestorCount > 0 {
		row("ancestors", "%d (the parent last)", o.AncestorCount)
	}
	if f := o.ForkedFrom; f != nil {
		row("forked from", "run %s (%s) generation %d, ref %s", f.Run, f.RunUID, f.Generation, f.Ref)
	}
	pinned := "unpinned"
	if o.Pinned {
		pinned = "pinned"
	}
	row("manifest", "%s (%s)", o.Manifest, pinned)
	if o.RepinnedFrom != "" {
		row("repinned from", "%s", o.RepinnedFrom)
	}
	row("base", "%s", o.Base.Name)
	if o.Base.IndexDigest != "" {
		row("  index", "%s", o.Base.IndexDigest)
	}
	row("  manifest", "%s (%s)", o.Base.ManifestDigest, o.Base.Platform)
	row("  config", "%s", o.Base.ConfigDigest)
	row("layers", "%d: %d bytes, %d bytes uncompressed", len(o.Layers), o.LayersSize, o.Unpacked)
	for i, l := range o.Layers {
		row(fmt.Sprintf("  %d", i), "%s %d bytes (diffID %s, %d bytes) %s", l.Digest, l.Size, l.DiffID, l.UncompressedSize, l.MediaType)
	}
	if o.Spec != nil {
		row("spec", "%s %d bytes", o.Spec.Digest, o.Spec.Size)
	} else {
		row("spec", "none (a %s ref: the image config and containerEnv)", o.Schema)
	}
	if o.Runtime != nil {
		opts := "no options"
		if op := o.Runtime.Options; op != nil {
			opts = fmt.Sprintf("options %s %q", op.TypeURL, op.Value)
		}
		row("runtime", "%s, %s", o.Runtime.Name, opts)
	}
	row("host", "%s (%s), containerd %s, %s, %s", o.Host.ID, o.Host.IDSource, o.Host.ContainerdVersion, o.Host.Snapshotter, o.Host.Platform)
	if o.Fence != 0 {
		row("fence", "%d", o.Fence)
	}
	row("kept running", "%t", o.KeptRunning)
	row("created", "%s", o.Created)
	tw.Flush()
}
