package integration

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/containerd/containerd/v2/pkg/oci"
	"github.com/containerd/errdefs"

	"github.com/sandbox-resume/sandbox-resume/envelope"
	"github.com/sandbox-resume/sandbox-resume/envmanifest"
	"github.com/sandbox-resume/sandbox-resume/envmanifest/adopt"
	"github.com/sandbox-resume/sandbox-resume/internal/testimage"
	"github.com/sandbox-resume/sandbox-resume/ledger"
	"github.com/sandbox-resume/sandbox-resume/resume"
	"github.com/sandbox-resume/sandbox-resume/snapshot"
	"github.com/sandbox-resume/sandbox-resume/test/integration/harness"
)

// metaImage is the short image name of a test image labelled with c.
func metaImage(c testimage.MetadataCase) string { return "meta-" + c.Name + ":1" }

// metaConfig is a devcontainer.json declaring image and nothing that is
// refused.
func metaConfig(image string) string {
	return `{"image": "` + image + `", "containerEnv": {"LANG": "C.UTF-8"}, "name": "image metadata"}`
}

// errorOutput is a command's {"error": …} object under --output json.
type errorOutput struct {
	Error struct {
		Class    string                `json:"class"`
		Message  string                `json:"message"`
		Refusals []envmanifest.Refusal `json:"refusals"`
	} `json:"error"`
}

// lintOutput is the part of `lint --output json` these tests read.
type lintOut struct {
	OK            bool                `json:"ok"`
	Image         *adopt.ImageReport  `json:"image"`
	ImageRefusals []adopt.LintRefusal `json:"imageRefusals"`
	Refusals      []adopt.LintRefusal `json:"refusals"`
	Error         *struct {
		Class string `json:"class"`
	} `json:"error"`
}

func pairs(rs []envmanifest.Refusal) []testimage.MetadataRefusal {
	var out []testimage.MetadataRefusal
	for _, r := range rs {
		out = append(out, testimage.MetadataRefusal{Pointer: r.Pointer, Class: string(r.Class)})
	}
	return out
}

// TestImageMetadataSuspendAndLint is issue 18 item 3 against a real
// daemon, for each test image (harness.ImportBusyboxLabelled with
// testimage.MetadataCases): a container created from the labelled image is
// suspended through the CLI, and `lint` with the daemon named checks the
// same declaration. A refused label is exit 2, class image-metadata, with
// exactly the label's refusals (pointers under
// /config/Labels/devcontainer.metadata), and the suspend leaves the
// container as it was (task running, no labels, no run lease, no ref
// file, no ledger record). A label that passes suspends, and the ref then passes
// `resume --check` on the same host (check 8 reads the label again).
func TestImageMetadataSuspendAndLint(t *testing.T) {
	d := harness.Start(t, "imgmeta")
	rt := d.Connect(t, "")
	for _, c := range testimage.MetadataCases {
		t.Run(c.Name, func(t *testing.T) {
			bb := harness.ImportBusyboxLabelled(t, d, metaImage(c), c)
			// The container carries the declared LANG, as suspend checks.
			cid := scriptContainerWith(t, d, bb.Name, "meta-"+c.Name, workload, oci.WithEnv([]string{"LANG=C.UTF-8"}))
			dir := t.TempDir()
			cfg := filepath.Join(dir, "devcontainer.json")
			if err := os.WriteFile(cfg, []byte(metaConfig(metaImage(c))), 0o644); err != nil {
				t.Fatal(err)
			}
			pub, key, err := envelope.WriteKeyPair(filepath.Join(dir, "signer"), false)
			if err != nil {
				t.Fatal(err)
			}
			run := "meta-" + c.Name
			refPath := filepath.Join(dir, "ref.json")

			// lint with the daemon named (--address, as srcli passes it).
			lintCode, stdout, stderr := srcli(t, d, "", "lint", cfg)
			var lint lintOut
			if err := json.Unmarshal(stdout, &lint); err != nil {
				t.Fatalf("lint: exit %d, stdout not JSON: %v\n%s\n%s", lintCode, err, stdout, stderr)
			}
			if lint.Image == nil || !lint.Image.MetadataChecked || lint.Image.Digest != bb.Index || len(lint.Refusals) != 0 {
				t.Errorf("lint: image %+v, refusals %v", lint.Image, lint.Refusals)
			}
			var lintGot []envmanifest.Refusal
			for _, r := range lint.ImageRefusals {
				lintGot = append(lintGot, r.Refusal)
				if r.Property != adopt.AdviceImageMetadata || r.Advice == "" {
					t.Errorf("lint: refusal %s has property %q advice %q", r.Pointer, r.Property, r.Advice)
				}
			}
			if fmt.Sprint(pairs(lintGot)) != fmt.Sprint(c.Refused) {
				t.Errorf("lint: image refusals %v, want %v", pairs(lintGot), c.Refused)
			}

			code, stdout, stderr := srcli(t, d, "", "suspend", "--container", cid, "--config", cfg, "--key", key, "--run", run, "--out", refPath)
			if len(c.Refused) == 0 {
				if code != 0 || lintCode != 0 || !lint.OK || lint.Error != nil {
					t.Fatalf("suspend exit %d, lint exit %d ok %t (%+v), want 0 and ok\n%s\n%s", code, lintCode, lint.OK, lint.Error, stdout, stderr)
				}
				file, err := os.ReadFile(refPath)
				if err != nil {
					t.Fatal(err)
				}
				trust, err := envelope.LoadTrust(pub)
				if err != nil {
					t.Fatal(err)
				}
				ref, err := snapshot.OpenRef(file, trust)
				if err != nil {
					t.Fatal(err)
				}
				if ref.Base.ConfigDigest != bb.Config || ref.Base.IndexDigest != bb.Index {
					t.Errorf("ref base %+v, image %+v", ref.Base, bb)
				}
				code, stdout, stderr = srcli(t, d, "", "resume", "--check", "--ref", refPath, "--config", cfg, "--trust", pub)
				var v resume.Verdict
				if err := json.Unmarshal(stdout, &v); err != nil {
					t.Fatalf("resume --check: exit %d, not a verdict: %v\n%s\n%s", code, err, stdout, stderr)
				}
				wantRefused(t, code, &v, 0, "", "")
				if img := v.Checks[7]; !strings.Contains(img.Detail, "devcontainer.metadata label passes") {
					t.Errorf("check image: %+v", img)
				}
				return
			}

			if lintCode != 2 || lint.OK || lint.Error == nil || lint.Error.Class != "image-metadata" {
				t.Errorf("lint: exit %d ok %t error %+v, want 2 and class image-metadata", lintCode, lint.OK, lint.Error)
			}
			var out errorOutput
			if err := json.Unmarshal(stdout, &out); err != nil {
				t.Fatalf("suspend: exit %d, stdout not JSON: %v\n%s\n%s", code, err, stdout, stderr)
			}
			if code != 2 || out.Error.Class != "image-metadata" {
				t.Errorf("suspend: exit %d class %q, want 2 image-metadata\n%s", code, out.Error.Class, stdout)
			}
			if got := pairs(out.Error.Refusals); fmt.Sprint(got) != fmt.Sprint(c.Refused) {
				t.Errorf("suspend: refusals %v, want %v", got, c.Refused)
			}
			for _, r := range c.Refused {
				if !strings.Contains(out.Error.Message, r.Pointer) {
					t.Errorf("suspend: message %q does not name %s", out.Error.Message, r.Pointer)
				}
			}
			// Nothing paused, leased, labelled or written.
			if _, err := os.Stat(refPath); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("a refused suspend left %s (%v)", refPath, err)
			}
			ctr, err := rt.Container(d.Context(t), cid)
			if err != nil || ctr.Task != snapshot.TaskRunning {
				t.Errorf("task %q (err %v), want running", ctr.Task, err)
			}
			if ctr.Labels[snapshot.LabelRun] != "" || ctr.Labels[snapshot.LabelManifest] != "" || ctr.Labels[snapshot.LabelSuspending] != "" {
				t.Errorf("labels after a refused suspend: %v", ctr.Labels)
			}
			if _, err := rt.Lease(d.Context(t), snapshot.RunLease(run)); !errdefs.IsNotFound(err) {
				t.Errorf("run lease after a refused suspend: err %v", err)
			}
			l := daemonLedger(t, d, "")
			rec, err := l.Get(d.Context(t), run)
			l.Close()
			if !errors.Is(err, ledger.ErrNotFound) {
				t.Errorf("ledger after a refused suspend: record %+v, err %v; want none", rec, err)
			}
		})
	}

	// $CONTAINERD_ADDRESS alone (no --address) makes lint check the label.
	c := testimage.MetadataCases[0]
	harness.ImportBusyboxLabelled(t, d, metaImage(c), c)
	cfg := filepath.Join(t.TempDir(), "devcontainer.json")
	if err := os.WriteFile(cfg, []byte(metaConfig(metaImage(c))), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(cli(t), "--namespace", d.Namespace, "--output", "json", "lint", cfg)
	cmd.Env = append(os.Environ(), "CONTAINERD_ADDRESS="+d.Address)
	var stdout bytes.Buffer
	cmd.Stdout = &stdout
	err := cmd.Run()
	var ee *exec.ExitError
	var lint lintOut
	if !errors.As(err, &ee) || ee.ExitCode() != 2 || json.Unmarshal(stdout.Bytes(), &lint) != nil ||
		lint.Error == nil || lint.Error.Class != "image-metadata" || len(lint.ImageRefusals) != 1 ||
		lint.ImageRefusals[0].Pointer != c.Refused[0].Pointer {
		t.Errorf("lint with $CONTAINERD_ADDRESS: %v\n%s", err, stdout.Bytes())
	}
}

// TestImageMetadataResumeCheck is check 8's label condition through the
// CLI against a real daemon, for each test image: a ref signed over the
// labelled image (as a release before the label check, or another signer,
// could have recorded it; suspend itself refuses such an image) is refused
// by `resume --check` with class image-metadata, exit 2, exactly the
// label's refusals in the verdict's refusals, and the check's detail
// naming them; a label that passes is accepted.
func TestImageMetadataResumeCheck(t *testing.T) {
	d := harness.Start(t, "imgmetark")
	for _, c := range testimage.MetadataCases {
		t.Run(c.Name, func(t *testing.T) {
			bb := harness.ImportBusyboxLabelled(t, d, metaImage(c), c)
			config := metaConfig(metaImage(c))
			s := suspend(t, d, config)
			if s.ref.Base.ConfigDigest != bb.Config {
				t.Fatalf("the ref's base config %s is not the labelled image's %s", s.ref.Base.ConfigDigest, bb.Config)
			}
			code, v := check(t, d, "", s, config)
			if len(c.Refused) == 0 {
				wantRefused(t, code, v, 0, "", "")
				if len(v.Refusals) != 0 {
					t.Errorf("refusals %v", v.Refusals)
				}
				return
			}
			wantRefused(t, code, v, 2, resume.ClassImageMetadata, resume.CheckImage)
			if got := pairs(v.Refusals); fmt.Sprint(got) != fmt.Sprint(c.Refused) {
				t.Errorf("refusals %v, want %v", got, c.Refused)
			}
			if f := v.Failed(); f != nil {
				for _, r := range c.Refused {
					if !strings.Contains(f.Detail, r.Pointer) {
						t.Errorf("detail %q does not name %s", f.Detail, r.Pointer)
					}
				}
			}
		})
	}
}
