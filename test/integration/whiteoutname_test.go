package integration

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/core/leases"
	"github.com/containerd/containerd/v2/pkg/cio"
	"github.com/containerd/containerd/v2/pkg/oci"
	"github.com/opencontainers/go-digest"
	"github.com/opencontainers/image-spec/identity"

	"github.com/sandbox-resume/sandbox-resume/envelope"
	"github.com/sandbox-resume/sandbox-resume/runtime/containerd"
	"github.com/sandbox-resume/sandbox-resume/snapshot"
	"github.com/sandbox-resume/sandbox-resume/test/integration/harness"
)

// TestWhiteoutNamesRefused: docs/design.md "Hardening", "Workload file
// names": a container that created files named .wh.* (measured before: a
// file /.wh.etc made the base image's /etc vanish on resume, exit 0
// throughout) cannot be diffed by either differ: the in-process one and
// the diff service's both fail with snapshot.ErrWhiteoutName naming the
// path (suspend: exit 2).
func TestWhiteoutNamesRefused(t *testing.T) {
	d := harness.Start(t, "whname")
	im := harness.ImportBusybox(t, d, "busybox:1")
	ctx := d.Context(t)
	img, err := d.Client.GetImage(ctx, im.Name)
	if err != nil {
		t.Fatal(err)
	}
	if err := img.Unpack(ctx, "overlayfs"); err != nil {
		t.Fatal(err)
	}
	auto := d.Connect(t, "")
	service := d.Connect(t, "", containerd.WithDiffer(containerd.DifferService))
	sn := d.Client.SnapshotService("overlayfs")
	ls := d.Client.LeasesService()
	hold, err := ls.Create(ctx, leases.WithRandomID())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ls.Delete(context.WithoutCancel(ctx), hold, leases.SynchronousDelete) })
	hctx := leases.WithLease(ctx, hold.ID)

	for _, tc := range []struct{ name, script, path string }{
		{"top", `echo gone > /.wh.etc`, "/.wh.etc"},
		{"nested", `mkdir -p /work && touch /work/.wh.keep`, "/work/.wh.keep"},
		{"dir", `mkdir -p /.wh.usr`, "/.wh.usr"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cid := d.ID("whname-" + tc.name)
			if _, err := sn.Prepare(hctx, cid, identity.ChainID([]digest.Digest(im.DiffIDs)).String()); err != nil {
				t.Fatal(err)
			}
			c, err := d.Client.NewContainer(ctx, cid, client.WithSnapshotter("overlayfs"), client.WithSnapshot(cid),
				client.WithNewSpec(oci.WithImageConfig(img), oci.WithProcessArgs("/bin/sh", "-c", tc.script+"; echo READY; exec sleep 3600")))
			if err != nil {
				t.Fatal(err)
			}
			out := &syncBuffer{}
			task, err := c.NewTask(ctx, cio.NewCreator(cio.WithStreams(nil, out, out), cio.WithFIFODir(filepath.Join(d.Dir, "fifo"))))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				task.Kill(context.WithoutCancel(ctx), 9)
				task.Wait(context.WithoutCancel(ctx))
				task.Delete(context.WithoutCancel(ctx), client.WithProcessKill)
				c.Delete(context.WithoutCancel(ctx))
			})
			if err := task.Start(ctx); err != nil {
				t.Fatal(err)
			}
			for deadline := time.Now().Add(30 * time.Second); !strings.Contains(out.String(), "READY"); time.Sleep(20 * time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatalf("the container did not print READY: %q", out.String())
				}
			}
			if err := auto.PauseTask(ctx, cid); err != nil {
				t.Fatal(err)
			}
			sc, err := auto.Container(ctx, cid)
			if err != nil {
				t.Fatal(err)
			}
			for name, rt := range map[string]*containerd.Runtime{"in-process": auto, "diff service": service} {
				lease := snapshot.RunLease("whname-" + tc.name + "-" + strings.ReplaceAll(name, " ", "-"))
				if err := rt.CreateLease(ctx, lease, nil); err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { rt.DeleteLease(context.WithoutCancel(ctx), lease) })
				_, err := rt.CreateDiff(ctx, lease, sc, nil)
				if !errors.Is(err, snapshot.ErrWhiteoutName) || !strings.Contains(err.Error(), tc.path) {
					t.Errorf("%s differ over a container that made %s: %v, want ErrWhiteoutName naming it", name, tc.path, err)
				}
			}
		})
	}
}

// TestSuspendRefusesWhiteoutName: through the CLI, suspending a container
// that made /.wh.etc is exit 2 (bad-input) naming the path, and writes no
// ref.
func TestSuspendRefusesWhiteoutName(t *testing.T) {
	d := harness.Start(t, "whsusp")
	bb := harness.ImportBusybox(t, d, "busybox:1")
	cid := taskContainer(t, d, bb.Name, "whsusp", `echo gone > /.wh.etc; echo READY; exec sleep 3600`, nil)
	dir := t.TempDir()
	cfg := filepath.Join(dir, "devcontainer.json")
	if err := os.WriteFile(cfg, []byte(pinnedConfig(bb)), 0o644); err != nil {
		t.Fatal(err)
	}
	_, key, err := envelope.WriteKeyPair(filepath.Join(dir, "signer"), false)
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "ref.json")
	code, stdout, stderr := srcli(t, d, "", "suspend", "--container", cid, "--config", cfg, "--key", key, "--run", "whsusp-1", "--out", out)
	if code != 2 || !strings.Contains(string(stdout), "/.wh.etc") || !strings.Contains(string(stdout), "bad-input") {
		t.Fatalf("suspend of a container that made /.wh.etc: exit %d, want 2 naming it\nstdout: %s\nstderr: %s", code, stdout, stderr)
	}
	if _, err := os.Stat(out); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a ref was written: %v", err)
	}
}
