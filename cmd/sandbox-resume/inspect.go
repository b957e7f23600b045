package main

import (
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/containerd/errdefs"
	"github.com/opencontainers/go-digest"
	"github.com/spf13/cobra"

	"github.com/sandbox-resume/sandbox-resume/internal/exitcode"
	"github.com/sandbox-resume/sandbox-resume/migrate"
	"github.com/sandbox-resume/sandbox-resume/runspec"
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
	// Memory is the generation's memory image, when it has one.
	Memory *snapshot.Memory `json:"memory,omitempty"`
	// RuntimeSpec is the recorded spec decoded, when it was read (through
	// the daemon, --address/--namespace, or from --archive): the process,
	// mounts, namespaces and capabilities, and the spec itself.
	RuntimeSpec *runspec.Description `json:"runtimeSpec,omitempty"`
	// SpecFrom names where the spec was read from ("containerd ADDRESS
	// namespace NS", "archive PATH").
	SpecFrom string `json:"specFrom,omitempty"`
	// RuntimeOptions are the runtime's options decoded, when it has some.
	RuntimeOptions *runspec.RuntimeDescription `json:"runtimeOptions,omitempty"`
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
	var trustPath, archivePath string
	var showEnv bool
	cmd := &cobra.Command{
		Use:   "inspect REF [--trust PUB|DIR] [--address A --namespace N | --archive run.tar] [--show-env]",
		Short: "Show what a SnapshotRef file records (untrusted unless --trust)",
		Long: `Reads a SnapshotRef file and shows its run, run UID, generation, parent, how
many ancestors it lists, what it was repinned or forked from, layers with
their sizes, spec blob, runtime and options, base image, host, fence and
creation time. Without --trust nothing is verified but the file's structure,
schema and the manifest address of its core: do not act on what it shows.
With --trust the signatures are verified first against the trusted keys
(untrusted: exit 6). A file that is not a SnapshotRef is exit 2; a ref whose
manifest or pinned flag disagrees with its core is 6. Needs no daemon, unless
--address or --namespace is given: then the recorded runtime spec blob is read
(its size and digest verified) from that containerd's content store, or with
--archive from a migration archive, and inspect also shows what the ref will
run — the process (args, cwd, user, environment names; values only with
--show-env), mounts, namespaces and capabilities — and, under --output json,
the decoded spec. A spec blob that is absent or another blob is 7.`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) != 1 {
				return usageErrorf("inspect: exactly one ref file argument is required, got %d", len(args))
			}
			return nil
		},
		RunE: a.command(func(s *session, args []string) (*result, error) {
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
			if err := readInspectSpec(s, &out, ref, archivePath, showEnv); err != nil {
				return nil, err
			}
			return &result{JSON: out, Text: func(w, _ io.Writer) error { writeInspectText(w, out); return nil }}, nil
		}),
	}
	cmd.Flags().StringVar(&trustPath, "trust", "", "trusted PKIX PEM public key, or a directory of *.pub / *.pem keys: verify the signatures too")
	cmd.Flags().StringVar(&archivePath, "archive", "", "migration archive (export's OCI layout tar) to read the recorded spec blob from")
	cmd.Flags().BoolVar(&showEnv, "show-env", false, "show the environment's values too (only the names without it)")
	addDaemonFlags(cmd, a)
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
			out.RuntimeOptions = runspec.DescribeRuntime(rt)
		}
	}
	out.Memory = ref.Memory
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
		if d := o.RuntimeOptions; d != nil {
			switch {
			case d.Undecoded != "":
				row("  options", "%s", d.Undecoded)
			case len(d.Options) == 0:
				row("  options", "none set")
			default:
				for _, k := range slices.Sorted(maps.Keys(d.Options)) {
					row("  "+k, "%v", d.Options[k])
				}
			}
		}
	}
	if m := o.Memory; m != nil {
		var size int64
		for _, b := range m.Blobs {
			size += b.Size
		}
		row("memory", "%s: %d blobs, %d bytes", m.Format, len(m.Blobs), size)
		tool := m.Runtime.Tool + " " + m.Runtime.Version
		if m.Runtime.Platform != "" {
			tool += ", platform " + m.Runtime.Platform
		}
		row("  by", "%s (binary %s)", tool, m.Runtime.BinaryDigest)
		row("  on", "kernel %s, %s family %d model %d, %d CPU flags", m.Host.Kernel, m.Host.CPU.Vendor, m.Host.CPU.Family, m.Host.CPU.Model, len(m.Host.CPU.Flags))
	}
	row("host", "%s (%s), containerd %s, %s, %s", o.Host.ID, o.Host.IDSource, o.Host.ContainerdVersion, o.Host.Snapshotter, o.Host.Platform)
	if o.Fence != 0 {
		row("fence", "%d", o.Fence)
	}
	row("kept running", "%t", o.KeptRunning)
	row("created", "%s", o.Created)
	if d := o.RuntimeSpec; d != nil {
		writeSpecRows(row, d, o.SpecFrom)
	}
	tw.Flush()
}

// writeSpecRows prints the recorded spec's process, mounts, namespaces
// and capabilities, one row each.
func writeSpecRows(row func(k, format string, args ...any), d *runspec.Description, from string) {
	row("spec read", "from %s (size and digest verified)", from)
	if p := d.Process; p != nil {
		row("process", "%s", strings.Join(quoteAll(p.Args), " "))
		row("  cwd", "%s", p.Cwd)
		u := fmt.Sprintf("uid %d gid %d", p.User.UID, p.User.GID)
		if len(p.User.AdditionalGids) > 0 {
			u += fmt.Sprintf(" groups %v", p.User.AdditionalGids)
		}
		if p.User.Username != "" {
			u += " (" + p.User.Username + ")"
		}
		row("  user", "%s", u)
		if p.EnvValues != nil {
			row("  env", "%s", strings.Join(quoteAll(p.EnvValues), " "))
		} else {
			row("  env", "%s (values hidden: --show-env)", strings.Join(p.Env, " "))
		}
		if p.Terminal {
			row("  terminal", "true")
		}
	}
	if d.Hostname != "" {
		row("hostname", "%s", d.Hostname)
	}
	if r := d.Root; r != nil {
		row("root", "%s (readonly %t)", r.Path, r.Readonly)
	}
	row("mounts", "%d", len(d.Mounts))
	for _, m := range d.Mounts {
		opts := ""
		if len(m.Options) > 0 {
			opts = " (" + strings.Join(m.Options, ",") + ")"
		}
		row("  "+m.Destination, "%s %s%s", m.Type, m.Source, opts)
	}
	ns := make([]string, 0, len(d.Namespaces))
	for _, n := range d.Namespaces {
		s := string(n.Type)
		if n.Path != "" {
			s += "=" + n.Path
		}
		ns = append(ns, s)
	}
	row("namespaces", "%s", orNone(strings.Join(ns, " ")))
	if c := d.Capabilities; c != nil {
		row("capabilities", "bounding %s", orNone(strings.Join(c.Bounding, " ")))
		row("  effective", "%s", orNone(strings.Join(c.Effective, " ")))
		row("  permitted", "%s", orNone(strings.Join(c.Permitted, " ")))
		if len(c.Inheritable) > 0 {
			row("  inheritable", "%s", strings.Join(c.Inheritable, " "))
		}
		if len(c.Ambient) > 0 {
			row("  ambient", "%s", strings.Join(c.Ambient, " "))
		}
	} else {
		row("capabilities", "none")
	}
}

func quoteAll(ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = strconv.Quote(s)
	}
	return out
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

// readInspectSpec reads the ref's recorded spec blob for inspect — from the
// archive when --archive is given, else through the daemon when --address
// or --namespace is — and describes it into out (runspec.Describe). Without
// either it reads nothing (inspect needs no daemon), nor for a /1 ref,
// which records no spec.
func readInspectSpec(s *session, out *inspectOutput, ref *snapshot.Ref, archive string, showEnv bool) error {
	fl := s.cmd.Flags()
	viaDaemon := fl.Changed("address") || fl.Changed("namespace")
	if archive == "" && !viaDaemon {
		return nil
	}
	if ref.Spec == nil {
		// A /1 ref records no spec (it resumes from the image's config):
		// there is nothing to read, and the rest of inspect still stands.
		return nil
	}
	var spec []byte
	var err error
	if archive != "" {
		f, ferr := os.Open(archive)
		if ferr != nil {
			return badInput(ferr)
		}
		defer f.Close()
		spec, err = migrate.ArchiveSpec(f, *ref.Spec)
		out.SpecFrom = "archive " + archive
	} else {
		rt, rerr := s.runtime()
		if rerr != nil {
			return rerr
		}
		spec, err = rt.ReadSpec(s.ctx, *ref.Spec)
		d := s.app.flags.daemon
		out.SpecFrom = fmt.Sprintf("containerd %s namespace %s", d.address, d.namespace)
	}
	switch {
	case errdefs.IsNotFound(err):
		return &exitError{class: exitcode.ClassSnapshotMissing, err: fmt.Errorf("inspect: /ref/spec: %w", err)}
	case err != nil:
		return fmt.Errorf("inspect: /ref/spec: %w", err)
	}
	desc, err := runspec.Describe(spec, showEnv)
	if err != nil {
		return &exitError{class: exitcode.ClassSnapshotMissing, err: fmt.Errorf("inspect: /ref/spec %s: %w", ref.Spec.Digest, err)}
	}
	out.RuntimeSpec = desc
	return nil
}
