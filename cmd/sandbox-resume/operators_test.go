package main

import (
	"archive/tar"
	"bytes"
	"context"
	"os"
	"strings"
	"testing"
	"time"

	runcoptions "github.com/containerd/containerd/api/types/runc/options"
	"github.com/opencontainers/go-digest"
	"google.golang.org/protobuf/proto"

	"github.com/sandbox-resume/sandbox-resume/ledger"
	"github.com/sandbox-resume/sandbox-resume/snapshot"
)

// The golden transcripts of repin, fork and inspect's spec view
// (docs/design.md "Repin and fork").

// suspendedWithUID records r in w's ledger as its suspend did: generation
// 1 of run UID testRunUID, suspended by box-1.
func suspendedWithUID(w *world, r *suspendedRun) {
	w.t.Helper()
	_, err := w.l.Suspended(context.Background(), ledger.SuspendRequest{Run: r.ref.Run, Generation: 1, Ref: digest.FromBytes(r.refFile),
		Container: ledger.Container{Host: testHostID, Namespace: "sandbox-resume", ID: "box-1"}, RunUID: testRunUID,
		Created: time.Date(2026, 11, 30, 16, 0, 0, 0, time.UTC)})
	if err != nil {
		w.t.Fatal(err)
	}
}

// pinnedTestConfig is testConfig with its image pinned to d.
func pinnedTestConfig(d digest.Digest) string {
	return strings.Replace(testConfig, `"busybox:1"`, `"busybox:1@`+d.String()+`"`, 1)
}

func TestRepinGolden(t *testing.T) {
	r := newSuspendedRun(t)
	setup := func(w *world) {
		files(w, r)
		w.write("pinned.json", pinnedTestConfig(r.manifest.Digest))
		w.write("wrong.json", pinnedTestConfig(digest.FromString("another image")))
		w.write("changed.json", strings.Replace(pinnedTestConfig(r.manifest.Digest), `"vscode"`, `"root"`, 1))
		w.withFacts(r)
		suspendedWithUID(w, r)
	}
	args := func(config string) []string {
		return []string{"repin", "--ref", testRefFile, "--trust", testPubFile, "--config", config, "--key", testKeyFile}
	}
	golden(t, "repin",
		goldenCase{args: args("pinned.json"), setup: setup, check: func(t *testing.T, w *world, code int) {
			rec, err := w.l.Get(context.Background(), testRunID)
			if code != 0 || err != nil || rec.Generation != 2 || rec.State != ledger.StateSuspended || rec.Ref != digest.FromBytes(w.read("demo-1.g2.ref.json")) {
				t.Errorf("repin: exit %d, record %+v (%v)", code, rec, err)
			}
			ref, err := snapshot.OpenRefUnsafe(w.read("demo-1.g2.ref.json"))
			if err != nil || !ref.Pinned || ref.RepinnedFrom != r.ref.Manifest || ref.Parent != digest.FromBytes(r.refFile) {
				t.Errorf("the repinned ref %+v (%v)", ref, err)
			}
			// The old generation is superseded (9).
			if code, _, _ := w.run("resume", "--check", "--ref", testRefFile, "--config", testConfFile, "--trust", testPubFile); code != 9 {
				t.Errorf("resume --check of the repinned generation 1: exit %d, want 9", code)
			}
		}},
		goldenCase{args: append(args("pinned.json"), "--out", "g2.json"), setup: setup, check: func(t *testing.T, w *world, code int) {
			if _, err := os.Stat("g2.json"); code != 0 || err != nil {
				t.Errorf("repin --out: exit %d, %v", code, err)
			}
		}},
		goldenCase{args: args("wrong.json"), setup: setup, check: func(t *testing.T, w *world, code int) {
			if rec, _ := w.l.Get(context.Background(), testRunID); rec.Generation != 1 {
				t.Errorf("a refused repin moved the record: %+v", rec)
			}
		}},
		goldenCase{args: args("changed.json"), setup: setup},
		goldenCase{args: args("pinned.json"), setup: func(w *world) {
			files(w, r)
			w.write("pinned.json", pinnedTestConfig(r.manifest.Digest))
			w.withFacts(r)
		}},
		goldenCase{args: []string{"repin", "--ref", testRefFile}},
	)
}

// forkSetup is r's world with r's blobs and image on its host and r
// recorded suspended.
func forkSetup(r *suspendedRun) func(w *world) {
	return func(w *world) {
		files(w, r)
		w.withFacts(r)
		suspendedWithUID(w, r)
	}
}

func TestForkGolden(t *testing.T) {
	r := newSuspendedRun(t)
	args := []string{"fork", "--ref", testRefFile, "--trust", testPubFile, "--as", "demo-2", "--key", testKeyFile}
	forked := func(w *world) {
		forkSetup(r)(w)
		if code, _, stderr := w.run(args...); code != 0 {
			w.t.Fatalf("fork: exit %d: %s", code, stderr)
		}
	}
	golden(t, "fork",
		goldenCase{args: args, setup: forkSetup(r), check: func(t *testing.T, w *world, code int) {
			rec, err := w.l.Get(context.Background(), "demo-2")
			if code != 0 || err != nil || rec.Generation != 1 || rec.ForkedFrom == nil || rec.ForkedFrom.Run != testRunID || rec.RunUID == testRunUID {
				t.Errorf("fork: exit %d, record %+v (%v)", code, rec, err)
			}
			if src, _ := w.l.Get(context.Background(), testRunID); src.Generation != 1 || src.State != ledger.StateSuspended {
				t.Errorf("the source's record changed: %+v", src)
			}
			ref, err := snapshot.OpenRefUnsafe(w.read("demo-2.g1.ref.json"))
			if err != nil || ref.ForkedFrom == nil || ref.ForkedFrom.Ref != digest.FromBytes(r.refFile) {
				t.Errorf("the fork's ref %+v (%v)", ref, err)
			}
			lease := snapshot.RunLease("demo-2")
			for _, d := range []digest.Digest{r.ref.Layers[0].Digest, r.ref.Spec.Digest, r.manifest.Digest, digest.FromBytes(w.read("demo-2.g1.ref.json"))} {
				if !w.rt.Holds(lease, d) {
					t.Errorf("the fork's lease %s does not hold %s", lease, d)
				}
			}
		}},
		goldenCase{args: append(args, "--with-memory"), setup: forkSetup(r)},
		goldenCase{args: args, setup: func(w *world) {
			forkSetup(r)(w)
			_, err := w.l.Suspended(context.Background(), ledger.SuspendRequest{Run: "demo-2", Generation: 1, Ref: digest.FromString("x"),
				Container: ledger.Container{Host: testHostID, Namespace: "sandbox-resume", ID: "box-2"}, Created: time.Unix(0, 0)})
			if err != nil {
				w.t.Fatal(err)
			}
		}},
		goldenCase{args: []string{"fork", "--ref", "memory.ref.json", "--trust", testPubFile, "--as", "demo-2", "--key", testKeyFile, "--with-memory"}, setup: func(w *world) {
			forkSetup(r)(w)
			w.write("memory.ref.json", string(memoryRef(t, r)))
			w.rt.PutBlob(memoryImage)
		}, check: func(t *testing.T, w *world, code int) {
			ref, err := snapshot.OpenRefUnsafe(w.read("demo-2.g1.ref.json"))
			if code != 0 || err != nil || ref.Memory == nil {
				t.Errorf("fork --with-memory: exit %d, ref %+v (%v)", code, ref, err)
			}
		}},
		goldenCase{args: []string{"fork", "--ref", "memory.ref.json", "--trust", testPubFile, "--as", "demo-2", "--key", testKeyFile}, setup: func(w *world) {
			forkSetup(r)(w)
			w.write("memory.ref.json", string(memoryRef(t, r)))
		}},
		goldenCase{args: []string{"fork", "--ref", testRefFile, "--trust", testPubFile, "--as", "Demo 2", "--key", testKeyFile}, setup: forkSetup(r)},
		goldenCase{args: []string{"fork", "--ref", testRefFile, "--trust", testPubFile, "--as", testRunID, "--key", testKeyFile}, setup: forkSetup(r)},
		// Lineage both ways: the source lists its forks, the fork names its
		// source.
		goldenCase{args: []string{"runs", "--run", testRunID}, setup: forked},
		goldenCase{args: []string{"runs", "--run", "demo-2"}, setup: forked},
		goldenCase{args: []string{"inspect", "demo-2.g1.ref.json"}, setup: forked},
	)
}

// specArchive is an OCI layout tar holding only the blobs given.
func specArchive(t *testing.T, blobs ...[]byte) []byte {
	t.Helper()
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	put := func(name string, data []byte) {
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(data)), Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write(data); err != nil {
			t.Fatal(err)
		}
	}
	put("oci-layout", []byte(`{"imageLayoutVersion":"1.0.0"}`))
	put("index.json", []byte(`{"schemaVersion":2,"manifests":[]}`))
	for _, blob := range blobs {
		put("blobs/sha256/"+digest.FromBytes(blob).Encoded(), blob)
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func TestInspectSpecGolden(t *testing.T) {
	r := newSuspendedRun(t)
	golden(t, "inspect-spec",
		goldenCase{args: []string{"inspect", "--address", "/run/c.sock", testRefFile}, setup: func(w *world) {
			files(w, r)
			w.withFacts(r)
		}, check: func(t *testing.T, w *world, code int) {
			if code != 0 || w.connected == nil || w.connected.address != "/run/c.sock" {
				t.Errorf("inspect --address: exit %d, connected %+v", code, w.connected)
			}
		}},
		goldenCase{args: []string{"inspect", "--namespace", "sandbox-resume", "--show-env", testRefFile}, setup: func(w *world) {
			files(w, r)
			w.withFacts(r)
		}},
		goldenCase{args: []string{"inspect", "--archive", "run.tar", testRefFile}, setup: func(w *world) {
			files(w, r)
			w.write("run.tar", string(specArchive(t, recordedSpec())))
		}, check: func(t *testing.T, w *world, code int) {
			if code != 0 || w.connected != nil {
				t.Errorf("inspect --archive: exit %d, connected %+v", code, w.connected)
			}
		}},
		goldenCase{args: []string{"inspect", "--archive", "empty.tar", testRefFile}, setup: func(w *world) {
			files(w, r)
			w.write("empty.tar", string(specArchive(t)))
		}},
		goldenCase{args: []string{"inspect", "--address", "/run/c.sock", testRefFile}, setup: func(w *world) {
			files(w, r)
			w.withFacts(r)
			w.rt.DeleteBlob(r.ref.Spec.Digest)
		}},
		// The memory summary and decoded runtime options need no daemon.
		goldenCase{args: []string{"inspect", "memory.ref.json"}, setup: func(w *world) {
			files(w, r)
			w.write("memory.ref.json", string(memoryRef(t, r)))
		}},
	)
}

// memoryImage stands for a CRIU image's one blob.
var memoryImage = []byte("criu image directory, as a tar")

// memoryRef is r's ref with a CRIU memory image (memoryImage) and runc
// options (SystemdCgroup), signed with testKey.
func memoryRef(t *testing.T, r *suspendedRun) []byte {
	t.Helper()
	ref := *r.ref
	opts, err := proto.Marshal(&runcoptions.Options{SystemdCgroup: true})
	if err != nil {
		t.Fatal(err)
	}
	ref.Runtime = &snapshot.Runtime{Name: "io.containerd.runc.v2", Options: &snapshot.RuntimeOptions{TypeURL: "containerd.runc.v1.Options", Value: opts}}
	ref.Memory = &snapshot.Memory{Format: snapshot.MemoryFormatCRIU,
		Blobs:   []snapshot.Descriptor{{MediaType: snapshot.MediaTypeMemoryCRIUZstd, Digest: digest.FromBytes(memoryImage), Size: int64(len(memoryImage))}},
		Runtime: snapshot.MemoryRuntime{Tool: snapshot.MemoryToolCRIU, Version: "4.1.1", BinaryDigest: digest.FromString("criu binary")},
		Host:    snapshot.MemoryHost{Kernel: "6.1.0-28-amd64", CPU: snapshot.CPU{Vendor: "GenuineIntel", Family: 6, Model: 85, Flags: []string{"avx2", "sse4_2"}}}}
	file, err := snapshot.SignRef(&ref, testKey())
	if err != nil {
		t.Fatal(err)
	}
	return file
}
