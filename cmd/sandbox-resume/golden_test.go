package main

import (
	"context"
	"crypto"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/opencontainers/go-digest"

	"github.com/sandbox-resume/sandbox-resume/host/memhost"
	"github.com/sandbox-resume/sandbox-resume/ledger"
	lfake "github.com/sandbox-resume/sandbox-resume/ledger/fake"
	"github.com/sandbox-resume/sandbox-resume/migrate"
	"github.com/sandbox-resume/sandbox-resume/snapshot"
	"github.com/sandbox-resume/sandbox-resume/suspend"
)

// The golden transcripts: every command over the fakes (world_test.go),
// in text and with --output json, compared with testdata/<command>.golden
// (go test ./cmd/sandbox-resume -update rewrites them). They pin the
// output formats and exit codes of docs/design.md "CLI contract"; the
// checks look at what the command did to the fakes.

// files writes the inputs most commands read: the declaration, the key
// pair and, for r, its ref file.
func files(w *world, r *suspendedRun) {
	w.write(testConfFile, testConfig)
	w.writeKeys()
	if r != nil {
		w.write(testRefFile, string(r.refFile))
	}
}

func TestManifestGolden(t *testing.T) {
	golden(t, "manifest",
		goldenCase{args: []string{"manifest", testConfFile}, setup: func(w *world) { files(w, nil) }},
		goldenCase{args: []string{"manifest", "--policy", "none", "-"}, stdin: `{"image": "busybox:1@sha256:` + digest.FromString("i").Encoded() + `"}`},
		goldenCase{args: []string{"manifest", "refused.json"}, setup: func(w *world) {
			w.write("refused.json", `{"image": "busybox:1", "runArgs": ["--privileged"], "postCreateCommand": "make"}`)
		}},
		goldenCase{args: []string{"manifest", "absent.json"}},
	)
}

func TestLintGolden(t *testing.T) {
	r := newSuspendedRun(t)
	golden(t, "lint",
		goldenCase{args: []string{"lint", "refused.json"}, setup: func(w *world) {
			w.write("refused.json", `{"image": "busybox:1", "runArgs": ["--privileged"], "postCreateCommand": "make"}`)
		}},
		goldenCase{args: []string{"lint", "--fix", "refused.json"}, setup: func(w *world) {
			w.write("refused.json", "{\n  \"image\": \"busybox:1\", // kept\n  \"postCreateCommand\": \"make\"\n}\n")
		}, check: func(t *testing.T, w *world, _ int) {
			if got := string(w.read("refused.json")); strings.Contains(got, "postCreateCommand") || !strings.Contains(got, `"busybox:1" // kept`) {
				t.Errorf("lint --fix wrote %q", got)
			}
		}},
		goldenCase{args: []string{"lint", "--address", "/run/c.sock", testConfFile}, setup: func(w *world) {
			files(w, nil)
			w.withFacts(r)
		}, check: func(t *testing.T, w *world, _ int) {
			if w.connected == nil || w.connected.address != "/run/c.sock" {
				t.Errorf("lint --address connected with %+v", w.connected)
			}
		}},
		goldenCase{args: []string{"lint", "--address", "/run/c.sock", "alpine.json"}, setup: func(w *world) {
			w.write("alpine.json", `{"image": "alpine:3"}`)
			w.withFacts(r)
		}},
	)
}

func TestPinGolden(t *testing.T) {
	r := newSuspendedRun(t)
	golden(t, "pin",
		goldenCase{args: []string{"pin", testConfFile}, setup: func(w *world) {
			files(w, nil)
			w.withFacts(r)
		}},
		goldenCase{args: []string{"pin", "--write", testConfFile}, setup: func(w *world) {
			files(w, nil)
			w.withFacts(r)
		}, check: func(t *testing.T, w *world, _ int) {
			if !regexp.MustCompile(`"busybox:1@sha256:[0-9a-f]{64}"`).Match(w.read(testConfFile)) {
				t.Errorf("pin --write wrote\n%s", w.read(testConfFile))
			}
		}},
		goldenCase{args: []string{"pin", "alpine.json"}, setup: func(w *world) {
			w.write("alpine.json", `{"image": "alpine:3"}`)
			w.withFacts(r)
		}},
	)
}

func TestKeygenGolden(t *testing.T) {
	random := regexp.MustCompile(`ed25519:[0-9a-f]{64}`)
	scrubs = append(scrubs, struct {
		re   *regexp.Regexp
		with string
	}{random, "ed25519:<random key id>"})
	defer func() { scrubs = scrubs[:len(scrubs)-1] }()
	golden(t, "keygen",
		goldenCase{args: []string{"keygen", "--out", "k"}, check: func(t *testing.T, w *world, _ int) {
			if fi, err := os.Stat("k.key"); err != nil || fi.Mode().Perm() != 0o600 {
				t.Errorf("k.key: %v %v", fi, err)
			}
		}},
		goldenCase{args: []string{"keygen", "--out", "k"}, setup: func(w *world) { w.writeKeys() }},
		goldenCase{args: []string{"keygen", "--out", "absent/k"}},
		goldenCase{args: []string{"keygen"}},
	)
}

func TestSignVerifyGolden(t *testing.T) {
	signed := func(w *world) {
		files(w, nil)
		code, out, stderr := w.run("sign", "--key", testKeyFile, testConfFile)
		if code != 0 {
			t.Fatalf("sign: exit %d: %s", code, stderr)
		}
		w.write("signed.json", out)
	}
	golden(t, "sign",
		goldenCase{args: []string{"sign", "--key", testKeyFile, testConfFile}, setup: func(w *world) { files(w, nil) }},
		goldenCase{args: []string{"sign", "--key", testPubFile, testConfFile}, setup: func(w *world) { files(w, nil) }},
		goldenCase{args: []string{"sign", testConfFile}, setup: func(w *world) { files(w, nil) }},
	)
	golden(t, "verify",
		goldenCase{args: []string{"verify", "--trust", testPubFile, "signed.json"}, setup: signed},
		goldenCase{args: []string{"verify", "--trust", testPubFile, testConfFile}, setup: signed},
		goldenCase{args: []string{"verify", "--trust", "other.pub", "signed.json"}, setup: func(w *world) {
			signed(w)
			w.writeKeyPair("other", namedKey("other"))
		}},
	)
}

func TestSuspendGolden(t *testing.T) {
	r := newSuspendedRun(t)
	setup := func(w *world) {
		files(w, nil)
		w.withCapturer(r)
	}
	golden(t, "suspend",
		goldenCase{args: []string{"suspend", "--container", "box-1", "--config", testConfFile, "--key", testKeyFile, "--run", testRunID},
			setup: setup, check: func(t *testing.T, w *world, code int) {
				rec, err := w.l.Get(context.Background(), testRunID)
				if code != 0 || err != nil || rec.State != ledger.StateSuspended || rec.Ref != digest.FromBytes(w.read(testRefFile)) {
					t.Errorf("exit %d; record %+v, %v", code, rec, err)
				}
				if c, err := w.rt.Container(context.Background(), "box-1"); err != nil || c.Task == snapshot.TaskRunning {
					t.Errorf("box-1 after suspend: %+v, %v", c, err)
				}
				if w.connected == nil || w.connected.namespace != "sandbox-resume" || w.opened == nil {
					t.Errorf("connected with %+v, ledger %+v", w.connected, w.opened)
				}
			}},
		goldenCase{args: []string{"suspend", "--container", "box-1", "--config", testConfFile, "--key", testKeyFile, "--keep-running",
			"--out", "kept.ref.json", "--host-id", "my-host"}, setup: setup, check: func(t *testing.T, w *world, _ int) {
			if w.connected == nil || w.connected.hostID != "my-host" {
				t.Errorf("--host-id: connected with %+v", w.connected)
			}
		}},
		// Generation 2 of box-1, kept running by a first suspend: its
		// parent is generation 1, its fence the container's.
		goldenCase{args: []string{"suspend", "--container", "box-1", "--config", testConfFile, "--key", testKeyFile, "--out", "g2.ref.json"},
			setup: func(w *world) {
				setup(w)
				if _, err := suspend.Run(context.Background(), w.rt.Machine, w.l, suspend.Request{ContainerID: "box-1", ConfigPath: testConfFile,
					Run: testRunID, Keys: []crypto.Signer{testKey()}, Out: "g1.ref.json", KeepRunning: true, Policy: []string{},
					Now: func() time.Time { return time.Date(2026, 11, 30, 16, 45, 0, 0, time.UTC) }, Rand: testRandom()}); err != nil {
					w.t.Fatal(err)
				}
			}, check: func(t *testing.T, w *world, code int) {
				rec, err := w.l.Get(context.Background(), testRunID)
				if code != 0 || err != nil || rec.Generation != 2 || rec.State != ledger.StateSuspended || rec.Ref != digest.FromBytes(w.read("g2.ref.json")) {
					t.Errorf("exit %d; record %+v, %v", code, rec, err)
				}
			}},
		goldenCase{args: []string{"suspend", "--container", "box-1", "--config", testConfFile, "--key", testKeyFile, "--keep-generations", "0"}, setup: setup},
		goldenCase{args: []string{"suspend", "--container", "absent", "--config", testConfFile, "--key", testKeyFile}, setup: setup},
		goldenCase{args: []string{"suspend", "--container", "box-1", "--config", testConfFile, "--key", testKeyFile, "--run", "Not_A_Run"}, setup: setup},
		goldenCase{args: []string{"suspend", "--config", testConfFile}, setup: setup},
	)
}

func TestResumeGolden(t *testing.T) {
	r := newSuspendedRun(t)
	setup := func(w *world) {
		files(w, r)
		w.withFacts(r)
		w.suspended(r)
	}
	args := func(extra ...string) []string {
		return append([]string{"resume", "--ref", testRefFile, "--config", testConfFile, "--trust", testPubFile}, extra...)
	}
	// copySetup is the world of a ref whose generation this ledger never
	// recorded: the files and the daemon's content, no ledger record.
	copySetup := func(w *world) {
		files(w, r)
		w.withFacts(r)
	}
	golden(t, "resume",
		goldenCase{args: args("--check"), setup: setup, check: func(t *testing.T, w *world, _ int) {
			if rec, _ := w.l.Get(context.Background(), testRunID); rec.State != ledger.StateSuspended || len(w.rt.Containers()) != 0 {
				t.Errorf("--check changed something: record %+v, containers %v", rec, w.rt.Containers())
			}
		}},
		goldenCase{args: args("--check"), setup: func(w *world) {
			setup(w)
			w.write(testConfFile, `{"image": "busybox:1", "containerEnv": {"LANG": "C"}, "remoteUser": "vscode"}`)
		}},
		goldenCase{args: args("--check"), setup: func(w *world) {
			setup(w)
			w.writeKeyPair("k", namedKey("other")) // trust a key that did not sign
		}},
		goldenCase{args: args("--start"), setup: setup, check: func(t *testing.T, w *world, code int) {
			rec, _ := w.l.Get(context.Background(), testRunID)
			c, ok := w.rt.Incarnation(resumeContainer)
			if code != 0 || rec.State != ledger.StateLive || !ok || c.Pid == 0 || rec.Holder == nil || rec.Holder.ID != resumeContainer {
				t.Errorf("exit %d; record %+v; container %+v (%t)", code, rec, c, ok)
			}
		}},
		goldenCase{args: args("--container", "mine"), setup: func(w *world) {
			setup(w)
			w.rt.PutContainer("mine", nil, 0)
		}},
		goldenCase{args: args("--check", "--start"), setup: setup},
		goldenCase{args: []string{"resume", "--check", "--config", testConfFile}, setup: setup},
		// Offered specs: another hostname and the declared LANG (accepted,
		// nothing listed); without LANG, and with one more capability
		// (spec-drift, nothing created).
		goldenCase{args: args("--check", "--spec", "offered.json"), setup: func(w *world) {
			setup(w)
			w.write("offered.json", strings.NewReplacer(`"hostname":"box-1"`, `"hostname":"box-2"`,
				`"env":["PATH=/usr/bin:/bin"]`, `"env":["PATH=/usr/bin:/bin","LANG=C.UTF-8"]`).Replace(string(recordedSpec())))
		}},
		goldenCase{args: args("--spec", "widened.json"), setup: func(w *world) {
			setup(w)
			w.write("widened.json", strings.Replace(string(recordedSpec()), `"cwd":"/"`, `"cwd":"/","capabilities":{"bounding":["CAP_SYS_ADMIN"]}`, 1))
		}, check: func(t *testing.T, w *world, code int) {
			if code != 3 || len(w.rt.Containers()) != 0 {
				t.Errorf("widened spec: exit %d, containers %v", code, w.rt.Containers())
			}
		}},
		goldenCase{args: args("--check", "--spec", "absent.json"), setup: setup},
		// Turn 3: a generation this ledger never recorded (no handoff) is
		// 9, not-handed-off; --copy resumes it and says copy: true.
		goldenCase{args: args("--check"), setup: copySetup},
		goldenCase{args: args("--copy"), setup: copySetup, check: func(t *testing.T, w *world, code int) {
			if rec, _ := w.l.Get(context.Background(), testRunID); code != 0 || rec.State != ledger.StateLive {
				t.Errorf("resume --copy: exit %d, record %+v", code, rec)
			}
		}},
	)
}

func TestInspectGolden(t *testing.T) {
	r := newSuspendedRun(t)
	golden(t, "inspect",
		goldenCase{args: []string{"inspect", testRefFile}, setup: func(w *world) { files(w, r) }},
		goldenCase{args: []string{"inspect", "--trust", testPubFile, testRefFile}, setup: func(w *world) { files(w, r) }},
		goldenCase{args: []string{"inspect", testConfFile}, setup: func(w *world) { files(w, r) }},
	)
}

// resumeContainer is the container resume creates for testRunID.
const resumeContainer = testRunID + "-g2"

func TestRunsGolden(t *testing.T) {
	r := newSuspendedRun(t)
	setup := func(w *world) {
		w.suspended(r)
		_, err := w.l.Suspended(context.Background(), ledger.SuspendRequest{Run: "other-run", Generation: 1, Ref: digest.FromString("other"),
			Container: ledger.Container{Host: testHostID, Namespace: "sandbox-resume", ID: "box-2"}, Keep: true,
			Created: time.Date(2026, 11, 30, 16, 5, 0, 0, time.UTC)})
		if err != nil {
			t.Fatal(err)
		}
	}
	golden(t, "runs",
		goldenCase{args: []string{"runs"}, setup: setup, check: func(t *testing.T, w *world, _ int) {
			if w.connected != nil {
				t.Error("runs connected to containerd")
			}
		}},
		goldenCase{args: []string{"runs", "--run", testRunID}, setup: setup},
		goldenCase{args: []string{"runs", "--run", "unknown"}, setup: setup},
		goldenCase{args: []string{"runs", "--ledger-timeout", "0s"}},
		// Turn 3: a handed-off record and the lineage members.
		goldenCase{args: []string{"runs"}, setup: lineageSetup(t)},
	)
}

// lineageSetup records a run handed off to another host, a run received
// from one, and a fork, with run UIDs (docs/design.md "The run ledger").
func lineageSetup(t *testing.T) func(w *world) {
	return func(w *world) {
		ctx := context.Background()
		ctr := func(id string) ledger.Container {
			return ledger.Container{Host: testHostID, Namespace: "sandbox-resume", ID: id}
		}
		made := time.Date(2026, 11, 30, 16, 0, 0, 0, time.UTC)
		g1 := digest.FromString("moved g1")
		if _, err := w.l.Suspended(ctx, ledger.SuspendRequest{Run: "moved", Generation: 1, Ref: g1, Container: ctr("box-m"), Created: made,
			RunUID: "ruid:0123456789abcdef0123456789abcdef"}); err != nil {
			t.Fatal(err)
		}
		if _, err := w.l.HandedOff(ctx, ledger.HandOffRequest{Run: "moved", Generation: 1, Ref: g1, RunUID: "ruid:0123456789abcdef0123456789abcdef",
			To: "host-b", Host: testHostID}); err != nil {
			t.Fatal(err)
		}
		if _, err := w.l.Received(ctx, ledger.ReceiveRequest{Run: "arrived", Generation: 3, Ref: digest.FromString("arrived g3"),
			RunUID: "ruid:fedcba9876543210fedcba9876543210", From: "host-c", To: testHostID, Fence: 4}); err != nil {
			t.Fatal(err)
		}
		if _, err := w.l.Suspended(ctx, ledger.SuspendRequest{Run: "forked", Generation: 1, Ref: digest.FromString("forked g1"), Container: ctr("box-f"), Created: made,
			RunUID:     "ruid:00000000000000000000000000000001",
			ForkedFrom: &ledger.ForkedFrom{Run: "moved", RunUID: "ruid:0123456789abcdef0123456789abcdef", Generation: 1, Ref: g1}}); err != nil {
			t.Fatal(err)
		}
	}
}

func TestDiscardGolden(t *testing.T) {
	r := newSuspendedRun(t)
	setup := func(w *world) {
		w.withFacts(r)
		w.suspended(r)
		// The run lease (a stored ref), a stopped incarnation and another
		// run's container.
		if err := w.rt.StoreRef(context.Background(), testRunID, r.refFile); err != nil {
			t.Fatal(err)
		}
		w.rt.PutContainer("demo-1-old", map[string]string{snapshot.LabelRun: testRunID, snapshot.LabelGeneration: "1"}, 0)
		w.rt.PutContainer("demo-1-running", map[string]string{snapshot.LabelRun: testRunID, snapshot.LabelGeneration: "1"}, 4242)
		w.rt.PutContainer("box-9", map[string]string{snapshot.LabelRun: "other"}, 0)
	}
	live := func(w *world) {
		w.withFacts(r)
		_, err := w.l.Suspended(context.Background(), ledger.SuspendRequest{Run: testRunID, Generation: 1, Ref: digest.FromBytes(r.refFile),
			Container: ledger.Container{Host: testHostID, Namespace: "sandbox-resume", ID: "box-1"}, Keep: true,
			Created: time.Date(2026, 11, 30, 16, 0, 0, 0, time.UTC)})
		if err != nil {
			t.Fatal(err)
		}
	}
	golden(t, "discard",
		goldenCase{args: []string{"discard", "--run", testRunID}, setup: setup, check: func(t *testing.T, w *world, _ int) {
			if got := w.rt.Containers(); !slices.Equal(got, []string{"box-9", "demo-1-running"}) {
				t.Errorf("containers left: %v", got)
			}
		}},
		goldenCase{args: []string{"discard", "--run", testRunID, "--purge"}, setup: setup},
		goldenCase{args: []string{"discard", "--run", testRunID}, setup: live},
		goldenCase{args: []string{"discard", "--run", testRunID, "--force"}, setup: live},
		goldenCase{args: []string{"discard", "--run", "unknown"}, setup: setup},
		goldenCase{args: []string{"discard", "--run", "Bad_Run"}, setup: setup},
	)
}

// exported writes run.tar: r exported from a store of its own.
func exported(t *testing.T, w *world, r *suspendedRun) {
	t.Helper()
	src := memhost.New(testHost())
	for _, b := range r.blobs {
		src.Put(b)
	}
	if _, err := migrate.ExportFile(context.Background(), src, r.refFile, "run.tar", false); err != nil {
		t.Fatal(err)
	}
}

func TestExportImportGolden(t *testing.T) {
	r := newSuspendedRun(t)
	golden(t, "export",
		goldenCase{args: []string{"export", "--ref", testRefFile, "--out", "run.tar"}, setup: func(w *world) {
			files(w, r)
			w.withStore(r)
		}, check: func(t *testing.T, w *world, _ int) {
			if len(w.read("run.tar")) == 0 || !w.rt.Holds(snapshot.RunLease(testRunID), r.ref.Layers[0].Digest) {
				t.Error("export wrote no archive, or the run lease does not hold the diff")
			}
		}},
		goldenCase{args: []string{"export", "--ref", testRefFile, "--out", "run.tar"}, setup: func(w *world) {
			files(w, r)
			w.withStore(r)
			w.rt.DeleteBlob(r.ref.Layers[0].Digest)
		}},
		goldenCase{args: []string{"export", "--ref", "absent.json", "--out", "run.tar"}},
	)
	golden(t, "import",
		goldenCase{args: []string{"import", "run.tar", "--trust", testPubFile, "--out", "imported.ref.json"}, setup: func(w *world) {
			files(w, nil)
			exported(t, w, r)
			w.rt.Machine = memhost.New(testHost())
		}, check: func(t *testing.T, w *world, _ int) {
			if string(w.read("imported.ref.json")) != string(r.refFile) {
				t.Error("import wrote another ref file")
			}
		}},
		goldenCase{args: []string{"import", "run.tar", "--trust", "other.pub"}, setup: func(w *world) {
			files(w, nil)
			exported(t, w, r)
			w.rt.Machine = memhost.New(testHost())
			w.writeKeyPair("other", namedKey("other"))
		}},
		goldenCase{args: []string{"import", "run.tar"}},
	)
}

func TestPushPullGolden(t *testing.T) {
	r := newSuspendedRun(t)
	golden(t, "push",
		goldenCase{args: []string{"push", "--ref", testRefFile, "127.0.0.1:5000/runs"}, setup: func(w *world) {
			files(w, r)
			w.withStore(r)
		}, check: func(t *testing.T, w *world, _ int) {
			if p := w.rt.registry.Pushes(); len(p) != 2 {
				t.Errorf("pushes %v", p)
			}
		}},
		goldenCase{args: []string{"push", "--plain-http", "--ref", testRefFile, "reg.example/runs:t"}, setup: func(w *world) { files(w, r) }},
		goldenCase{args: []string{"push", "--registry-config", "absent.json", "--ref", testRefFile, "127.0.0.1:5000/runs"},
			setup: func(w *world) { files(w, r) }},
	)
	pushed := func(w *world) {
		files(w, nil)
		w.withStore(r)
		target, err := migrate.ParseRemoteRef("127.0.0.1:5000/runs", false)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := migrate.Push(context.Background(), w.rt.Machine, w.rt.registry, r.refFile, target); err != nil {
			t.Fatal(err)
		}
		w.rt.Machine = memhost.New(testHost()) // the other host's
		w.rt.registry.Local = w.rt.Machine
	}
	golden(t, "pull",
		goldenCase{args: []string{"pull", "--trust", testPubFile, "--out", "pulled.ref.json", "127.0.0.1:5000/runs:demo-1.g1"}, setup: pushed},
		goldenCase{args: []string{"pull", "--trust", testPubFile, "--out", "pulled.ref.json", "--run", testRunID, "127.0.0.1:5000/runs"}, setup: pushed},
		goldenCase{args: []string{"pull", "--trust", testPubFile, "--out", "pulled.ref.json", "--run", testRunID, "127.0.0.1:5000/runs:t"}, setup: pushed},
		goldenCase{args: []string{"pull", "--trust", testPubFile, "--out", "pulled.ref.json", "127.0.0.1:5000/runs:absent"}, setup: pushed},
	)
}

// TestRecallGolden: recall --force of a handed-off run, without --force
// (64), of a suspended run (8), of an unknown run (1: no record), a bad
// run id (64).
func TestRecallGolden(t *testing.T) {
	r := newSuspendedRun(t)
	handedOff := func(w *world) {
		w.withFacts(r)
		w.suspended(r)
		if _, err := w.l.HandedOff(context.Background(), ledger.HandOffRequest{Run: testRunID, Generation: 1, Ref: digest.FromBytes(r.refFile),
			RunUID: "ruid:0123456789abcdef0123456789abcdef", To: "host-b", Host: testHostID}); err != nil {
			t.Fatal(err)
		}
	}
	golden(t, "recall",
		goldenCase{args: []string{"recall", "--run", testRunID, "--force"}, setup: handedOff, check: func(t *testing.T, w *world, _ int) {
			if rec, _ := w.l.Get(context.Background(), testRunID); rec.State != ledger.StateSuspended {
				t.Errorf("record after recall: %s", rec)
			}
		}},
		goldenCase{args: []string{"recall", "--run", testRunID}, setup: handedOff},
		goldenCase{args: []string{"recall", "--run", testRunID, "--force"}, setup: func(w *world) { w.withFacts(r); w.suspended(r) }},
		goldenCase{args: []string{"recall", "--run", "unknown", "--force"}},
		goldenCase{args: []string{"recall", "--run", "Bad_Run", "--force"}},
	)
}

// handedOffArchive writes run.tar: r exported from a store of its own by
// host-a with --handoff to host, signed with testKey.
func handedOffArchive(t *testing.T, r *suspendedRun, host string) {
	t.Helper()
	src := memhost.New(testHost())
	for _, b := range r.blobs {
		src.Put(b)
	}
	la := lfake.New(lfake.WithClock(func() time.Time { return time.Date(2026, 11, 30, 16, 30, 0, 0, time.UTC) }))
	if _, err := la.Suspended(context.Background(), ledger.SuspendRequest{Run: r.ref.Run, Generation: 1, Ref: digest.FromBytes(r.refFile),
		Container: ledger.Container{Host: "host-a", Namespace: "sandbox-resume", ID: "box-1"}, RunUID: r.ref.RunUID,
		Created: time.Date(2026, 11, 30, 16, 0, 0, 0, time.UTC)}); err != nil {
		t.Fatal(err)
	}
	if _, err := migrate.ExportFile(context.Background(), src, r.refFile, "run.tar", false,
		migrate.WithHandoff(&migrate.Handoff{Ledger: la, Host: "host-a", To: host, Key: testKey()})); err != nil {
		t.Fatal(err)
	}
}

// TestHandoffGolden: export --handoff (and its refusals: no --key 64, this
// host 2), and import of a handed-over archive on the host it names
// (Received) and on another host (9, nothing stored).
func TestHandoffGolden(t *testing.T) {
	r := newSuspendedRun(t)
	here := func(w *world) {
		files(w, r)
		w.withFacts(r)
		w.withStore(r)
		w.suspended(r)
	}
	golden(t, "handoff",
		goldenCase{args: []string{"export", "--ref", testRefFile, "--out", "run.tar", "--handoff", "host-b", "--key", testKeyFile}, setup: here,
			check: func(t *testing.T, w *world, _ int) {
				if rec, _ := w.l.Get(context.Background(), testRunID); rec.State != ledger.StateHandedOff {
					t.Errorf("record after export --handoff: %s", rec)
				}
			}},
		goldenCase{args: []string{"export", "--ref", testRefFile, "--out", "run.tar", "--handoff", "host-b"}, setup: here},
		goldenCase{args: []string{"export", "--ref", testRefFile, "--out", "run.tar", "--handoff", testHostID, "--key", testKeyFile}, setup: here},
		goldenCase{args: []string{"import", "run.tar", "--trust", testPubFile, "--out", "imported.ref.json"}, setup: func(w *world) {
			files(w, nil)
			handedOffArchive(t, r, testHostID)
			w.rt.Machine = memhost.New(testHost())
		}, check: func(t *testing.T, w *world, _ int) {
			if rec, _ := w.l.Get(context.Background(), testRunID); rec.State != ledger.StateSuspended || rec.Received == nil {
				t.Errorf("record after the import: %s", rec)
			}
		}},
		goldenCase{args: []string{"import", "run.tar", "--trust", testPubFile, "--out", "imported.ref.json"}, setup: func(w *world) {
			files(w, nil)
			handedOffArchive(t, r, "host-c")
			w.rt.Machine = memhost.New(testHost())
		}, check: func(t *testing.T, w *world, _ int) {
			if w.rt.Len() != 0 {
				t.Errorf("a refused import stored %d blobs", w.rt.Len())
			}
		}},
	)
}
