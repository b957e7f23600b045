package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/sandbox-resume/sandbox-resume/envmanifest"
	"github.com/sandbox-resume/sandbox-resume/internal/strictjson"
)

// manifestOutput is the `manifest --output json` object (docs/design.md
// "CLI contract"), members in the documented order.
type manifestOutput struct {
	Address     string          `json:"address"`
	Pinned      bool            `json:"pinned"`
	ImagePinned bool            `json:"imagePinned"`
	Manifest    json.RawMessage `json:"manifest"`
	Excluded    []string        `json:"excluded"`
	Policy      []string        `json:"policy"`
}

// newManifestCmd builds `manifest [--lockfile F] PATH|-`: ingest a
// devcontainer.json and print its address, pinned-ness, core and excluded
// members. Refused input exits 2.
func newManifestCmd(a *app) *cobra.Command {
	var lockfile, policy string
	cmd := &cobra.Command{
		Use:   "manifest [--lockfile F] [--policy P] PATH|-",
		Short: "Compute the environment manifest and its address from a devcontainer.json",
		Long: `Ingest a devcontainer.json (JSONC) strictly, normalize it into the manifest
core and print its BLAKE3 address, whether it is pinned (image and every
feature by digest), whether the image is pinned, the excluded (cosmetic and
networking) members and the core. "-" reads stdin: lockfile discovery is then
off and ./ features are checked relative to the current directory.

containerEnv names on the reserved-environment policy are refused in any
letter case (class reserved-env): the default list, a file of names that
extends it (--policy FILE), or none (--policy none).`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) != 1 {
				return usageErrorf("manifest takes exactly one PATH or -, got %d arguments", len(args))
			}
			return nil
		},
		RunE: a.command(func(s *session, args []string) (*result, error) {
			reserved, err := envmanifest.LoadPolicy(policy)
			if err != nil {
				return nil, usageErrorf("--policy: %v", err)
			}
			opts := envmanifest.Options{Lockfile: lockfile, Reserved: reserved}
			var m *envmanifest.Manifest
			if args[0] == "-" {
				data, rerr := readStdin(s)
				if rerr != nil {
					return nil, rerr
				}
				m, err = envmanifest.Ingest(data, opts)
			} else {
				m, err = envmanifest.IngestFile(args[0], opts)
			}
			if err != nil {
				return nil, err
			}
			return &result{
				JSON: manifestJSON(m, reserved),
				Text: func(w, _ io.Writer) error { return writeManifestText(w, m, reserved) },
			}, nil
		}),
	}
	cmd.Flags().StringVar(&lockfile, "lockfile", "", "devcontainer-lock.json to pin features with (default: discovered beside PATH)")
	cmd.Flags().StringVar(&policy, "policy", "", `reserved-environment policy: "none", or a file of names extending the default list`)
	return cmd
}

// manifestJSON is the manifestOutput of m under policy.
func manifestJSON(m *envmanifest.Manifest, policy []string) manifestOutput {
	excluded := m.Excluded
	if excluded == nil {
		excluded = []string{}
	}
	return manifestOutput{
		Address:     m.Address,
		Pinned:      m.IsPinned(),
		ImagePinned: m.ImagePinned(),
		Manifest:    json.RawMessage(m.Canonical),
		Excluded:    excluded,
		Policy:      policy,
	}
}

// readStdin reads a document given as "-" (at most
// strictjson.MaxInputBytes and one byte, so that ingestion refuses a
// longer one).
func readStdin(s *session) ([]byte, error) {
	data, err := io.ReadAll(io.LimitReader(s.stdin(), strictjson.MaxInputBytes+1))
	if err != nil {
		return nil, fmt.Errorf("read stdin: %w", err)
	}
	return data, nil
}

func writeManifestText(w io.Writer, m *envmanifest.Manifest, policy []string) error {
	pinned := "unpinned"
	if m.IsPinned() {
		pinned = "pinned"
	}
	imagePinned := "false (image by tag)"
	if m.ImagePinned() {
		imagePinned = "true (image by digest)"
	}
	excluded := "none"
	if len(m.Excluded) > 0 {
		excluded = strings.Join(m.Excluded, " ")
	}
	var core bytes.Buffer
	if err := json.Indent(&core, m.Canonical, "", "  "); err != nil {
		return fmt.Errorf("format manifest core: %w", err)
	}
	fmt.Fprintf(w, "address:     %s\n", m.Address)
	fmt.Fprintf(w, "pinned:      %s\n", pinned)
	fmt.Fprintf(w, "imagePinned: %s\n", imagePinned)
	if m.Lockfile != "" {
		fmt.Fprintf(w, "lockfile:    %s %s\n", m.Lockfile, m.LockfilePath)
	}
	fmt.Fprintf(w, "excluded:    %s\n", excluded)
	fmt.Fprintf(w, "policy:      %d reserved environment names\n", len(policy))
	fmt.Fprintf(w, "manifest:\n%s\n", core.String())
	if !m.IsPinned() {
		fmt.Fprintln(w, "note: this manifest is unpinned: its address names a declaration, not bytes, and never supports a cross-host claim")
	}
	return nil
}
