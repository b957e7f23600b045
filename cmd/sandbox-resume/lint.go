package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/sandbox-resume/sandbox-resume/envmanifest"
	"github.com/sandbox-resume/sandbox-resume/envmanifest/adopt"
	"github.com/sandbox-resume/sandbox-resume/internal/exitcode"
	"github.com/sandbox-resume/sandbox-resume/snapshot"
)

// checkImageMetadata reads the resolved image's devcontainer.metadata
// label from its config (Runtime.ImageLabels) and classifies its
// members with envmanifest.CheckImageMetadata (docs/design.md "Image
// metadata"): nil when there is no label or it passes. A config absent
// from the content store is an error wrapping errdefs.ErrNotFound (lint
// then exits 5, as for an image that does not resolve). A variable so
// tests can replace it.
var checkImageMetadata = func(ctx context.Context, rt Runtime, base snapshot.Base) ([]envmanifest.Refusal, error) {
	labels, err := rt.ImageLabels(ctx, base.ConfigDigest)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", base.Name, err)
	}
	rs, _ := envmanifest.CheckImageLabels(labels)
	return rs, nil
}

// lintOutput is the `lint --output json` object: the report, and "error"
// (class "refused" or "image-metadata") exactly when the exit code is 2.
type lintOutput struct {
	Path          string              `json:"path"`
	OK            bool                `json:"ok"`
	Refusals      []adopt.LintRefusal `json:"refusals"`
	Image         *adopt.ImageReport  `json:"image,omitempty"`
	ImageRefusals []adopt.LintRefusal `json:"imageRefusals,omitempty"`
	Fix           *lintFixOutput      `json:"fix,omitempty"`
	Address       string              `json:"address,omitempty"`
	Pinned        *bool               `json:"pinned,omitempty"`
	Unpinned      []adopt.Unpinned    `json:"unpinned,omitempty"`
	Excluded      []string            `json:"excluded"`
	Error         *jsonError          `json:"error,omitempty"`
}

// lintFixOutput is what --fix did.
type lintFixOutput struct {
	Removed   []adopt.Removal     `json:"removed"`
	Written   bool                `json:"written"`
	Remaining []adopt.LintRefusal `json:"remaining"`
}

// newLintCmd builds `lint [--lockfile F] [--policy P] [--fix] PATH|-`
// (docs/design.md "Adoption"): adopt.Lint, with the
// image checked through containerd when --address is given or
// $CONTAINERD_ADDRESS is set.
func newLintCmd(a *app) *cobra.Command {
	var lockfile, policy string
	var fix bool
	cmd := &cobra.Command{
		Use:   "lint [--lockfile F] [--policy P] [--fix] PATH|-",
		Short: "Say what to do about each refused member of a devcontainer.json, and optionally remove them",
		Long: `Ingest a devcontainer.json like manifest and print, for each refusal, its
JSON Pointer, its class and what to do about it (from one table keyed by
property and class: where a lifecycle hook goes, what replaces build, who
grants privileges, ...), with a likely spelling for an unknown member. For a
document that ingests it prints the address and what keeps it unpinned
(the image by tag, each feature by tag), and the excluded members.

When --address is given or $CONTAINERD_ADDRESS is set, the image is also
resolved through containerd (a name that does not resolve is exit 5) and its
devcontainer.metadata label is checked.

--fix rewrites PATH atomically without the refused members it can remove
(lifecycle hooks, build, privileges, unknown members, reserved environment
names, hostRequirements.gpu, keeping the last of a repeated name; a mount with
a refused option is removed whole, never just the option, which could make a
read-only mount writable), keeping the comments and layout of the rest, and
prints what it removed. Without --fix nothing is written.

Exit 0 when the document (with --fix: the written one) ingests and the
image label, when checked, has no refusal; 2 otherwise. Under --output json
the report is one object, with "error" ({"class": "refused" or
"image-metadata"}) exactly when the exit code is 2; each refusal carries
"property", "advice" and "fix" (remove, remove-mount, keep-last, or absent
for a hand edit).`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) != 1 {
				return usageErrorf("lint takes exactly one PATH or -, got %d arguments", len(args))
			}
			if args[0] == "-" && fix {
				return usageErrorf("lint --fix needs a file to rewrite, not -")
			}
			return nil
		},
		RunE: a.command(func(s *session, args []string) (*result, error) {
			reserved, err := envmanifest.LoadPolicy(policy)
			if err != nil {
				return nil, usageErrorf("--policy: %v", err)
			}
			opts := adopt.LintOptions{Options: envmanifest.Options{Lockfile: lockfile, Reserved: reserved}, Fix: fix}
			if s.cmd.Flags().Changed("address") || os.Getenv("CONTAINERD_ADDRESS") != "" {
				rt, err := s.runtime()
				if err != nil {
					return nil, err
				}
				opts.Image = inspectImage(rt)
			}
			var res *adopt.LintResult
			if args[0] == "-" {
				data, rerr := readStdin(s)
				if rerr != nil {
					return nil, rerr
				}
				res, err = adopt.Lint(s.ctx, data, opts)
			} else {
				res, err = adopt.LintFile(s.ctx, args[0], opts)
			}
			if err != nil {
				return nil, err
			}
			out := &result{
				JSON: lintReport(res),
				Text: func(w, _ io.Writer) error { writeLintText(w, res); return nil },
			}
			if !res.OK() {
				// Reported in full, with the class of lintReport.
				out.Class = lintClass(res)
			}
			return out, nil
		}),
	}
	cmd.Flags().StringVar(&lockfile, "lockfile", "", "devcontainer-lock.json to pin features with (default: discovered beside PATH)")
	cmd.Flags().StringVar(&policy, "policy", "", `reserved-environment policy: "none", or a file of names extending the default list`)
	cmd.Flags().BoolVar(&fix, "fix", false, "rewrite PATH without the refused members lint can remove (comments and layout kept)")
	addDaemonFlags(cmd, a)
	return cmd
}

// inspectImage is lint's adopt.ImageInspector over rt: the image
// resolved for the host platform (the index digest when the name is an
// index), and its label through checkImageMetadata when there is one.
func inspectImage(rt Runtime) adopt.ImageInspector {
	return func(ctx context.Context, ref string) (*adopt.ImageReport, error) {
		base, err := rt.ResolveImage(ctx, ref)
		if err != nil {
			return nil, err
		}
		rep := &adopt.ImageReport{Reference: base.Name, Digest: base.Target()}
		if checkImageMetadata != nil {
			rep.Metadata, err = checkImageMetadata(ctx, rt, base)
			if err != nil {
				return nil, err
			}
			rep.MetadataChecked = true
		}
		return rep, nil
	}
}

// lintReport builds the JSON report; a result that is not OK gets an error
// of class "refused", or "image-metadata" when only the label is refused.
func lintReport(res *adopt.LintResult) lintOutput {
	out := lintOutput{
		Path: res.Source, OK: res.OK(), Refusals: res.Refusals, Image: res.Image,
		ImageRefusals: res.ImageRefusals, Unpinned: res.Unpinned, Excluded: res.Excluded,
	}
	if out.Refusals == nil {
		out.Refusals = []adopt.LintRefusal{}
	}
	if out.Excluded == nil {
		out.Excluded = []string{}
	}
	if res.Fixed {
		out.Fix = &lintFixOutput{Removed: res.Removed, Written: res.Written, Remaining: res.Remaining}
		if out.Fix.Removed == nil {
			out.Fix.Removed = []adopt.Removal{}
		}
		if out.Fix.Remaining == nil {
			out.Fix.Remaining = []adopt.LintRefusal{}
		}
	}
	if res.Manifest != nil {
		pinned := res.Manifest.IsPinned()
		out.Address, out.Pinned = res.Manifest.Address, &pinned
	}
	if !res.OK() {
		n := len(res.Refusals)
		if res.Fixed {
			n = len(res.Remaining)
		}
		msg := fmt.Sprintf("%s: refused (%d)", res.Source, n)
		class := lintClass(res)
		if class == exitcode.ClassImageMetadata {
			msg = fmt.Sprintf("%s: the image's devcontainer.metadata label is refused (%d)", res.Source, len(res.ImageRefusals))
		}
		out.Error = &jsonError{Class: string(class), Message: msg}
	}
	return out
}

// lintClass is the class of a result that is not OK: "refused" when the
// document (fixed, with --fix) does not ingest, else "image-metadata" (the
// document ingests; only the image's label is refused). Both exit 2.
func lintClass(res *adopt.LintResult) exitcode.Class {
	if res.Manifest != nil {
		return exitcode.ClassImageMetadata
	}
	return exitcode.ClassRefused
}

// fixText says what --fix does about a refusal.
func fixText(r adopt.LintRefusal) string {
	switch r.Fix {
	case adopt.FixRemove:
		return "--fix removes " + r.Pointer
	case adopt.FixRemoveMount:
		return "--fix removes the whole mount " + mountPointer(r.Pointer)
	case adopt.FixKeepLast:
		return "--fix keeps the last " + r.Pointer + " and removes the others"
	}
	return "--fix leaves it: edit it by hand"
}

// mountPointer returns /mounts/N of a pointer at or inside a mount.
func mountPointer(p string) string {
	parts := strings.SplitN(p, "/", 4)
	if len(parts) >= 3 {
		return "/" + parts[1] + "/" + parts[2]
	}
	return p
}

func writeLintRefusals(w io.Writer, rs []adopt.LintRefusal, withFix bool) {
	for _, r := range rs {
		p := r.Pointer
		if p == "" {
			p = `""`
		}
		fmt.Fprintf(w, "\n%s  %s\n    %s\n    what to do: %s\n", p, r.Class, r.Message, r.Advice)
		if withFix {
			fmt.Fprintf(w, "    %s\n", fixText(r))
		}
	}
}

func writeLintText(w io.Writer, res *adopt.LintResult) {
	if len(res.Refusals) == 0 {
		fmt.Fprintf(w, "%s: no refusals\n", res.Source)
	} else {
		fmt.Fprintf(w, "%s: %s\n", res.Source, plural(len(res.Refusals), "refusal"))
		writeLintRefusals(w, res.Refusals, true)
	}
	if res.Image != nil {
		checked := "devcontainer.metadata not checked (no metadata check in this build)"
		if res.Image.MetadataChecked {
			checked = "devcontainer.metadata checked: " + plural(len(res.ImageRefusals), "refusal")
		}
		fmt.Fprintf(w, "\nimage %s resolves to %s; %s\n", res.Image.Reference, res.Image.Digest, checked)
		writeLintRefusals(w, res.ImageRefusals, false)
	}
	if res.Fixed {
		switch {
		case len(res.Removed) == 0:
			fmt.Fprintf(w, "\n--fix: nothing to remove; %s not written\n", res.Source)
		default:
			fmt.Fprintf(w, "\n--fix removed %s and wrote %s:\n", plural(len(res.Removed), "member"), res.Source)
			for _, rm := range res.Removed {
				times := ""
				if rm.Count > 1 {
					times = fmt.Sprintf(" (%d occurrences)", rm.Count)
				}
				why := ""
				if rm.Because != rm.Pointer {
					why = " for " + rm.Because
				}
				fmt.Fprintf(w, "    %s%s  %s%s\n", rm.Pointer, times, rm.Class, why)
			}
		}
		if len(res.Remaining) > 0 && len(res.Removed) > 0 {
			fmt.Fprintf(w, "\nafter --fix, %s left:\n", plural(len(res.Remaining), "refusal"))
			writeLintRefusals(w, res.Remaining, false)
		}
	}
	if len(res.Excluded) > 0 {
		fmt.Fprintf(w, "\nexcluded (not in the address): %s\n", strings.Join(res.Excluded, " "))
	}
	if res.Manifest != nil {
		pinned := "pinned"
		if !res.Manifest.IsPinned() {
			pinned = "unpinned"
		}
		fmt.Fprintf(w, "\naddress: %s (%s)\n", res.Manifest.Address, pinned)
		for _, u := range res.Unpinned {
			fmt.Fprintf(w, "unpinned: %s %s\n    what to do: %s\n", u.Pointer, u.Reference, u.Advice)
		}
	}
}

// plural writes n and noun, with an "s" unless n is 1.
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
