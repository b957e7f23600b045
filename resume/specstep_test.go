package resume_test

import (
	"encoding/json"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/opencontainers/go-digest"

	"github.com/sandbox-resume/sandbox-resume/host/memhost"
	"github.com/sandbox-resume/sandbox-resume/ledger"
	"github.com/sandbox-resume/sandbox-resume/resume"
	"github.com/sandbox-resume/sandbox-resume/snapshot"
)

// recordedSpec is a runtime spec as containerd holds it for a container
// run by a devcontainer runtime: a console, a bind mount of host data,
// namespace paths of the old host, systemd's cgroupsPath, a member no Go
// struct knows, and an unlimited rlimit beyond 2^53.
const recordedSpec = `{
  "ociVersion": "1.2.1",
  "process": {
    "terminal": true,
    "user": {"uid": 1000, "gid": 1000},
    "args": ["/bin/sh", "-c", "echo hi; exec sleep 86400"],
    "env": ["PATH=/usr/local/bin:/usr/bin:/bin", "A=1", "LANG=C.UTF-8"],
    "cwd": "/work",
    "capabilities": {"bounding": ["CAP_CHOWN", "CAP_KILL"], "effective": ["CAP_CHOWN", "CAP_KILL"], "permitted": ["CAP_CHOWN", "CAP_KILL"]},
    "rlimits": [{"type": "RLIMIT_NOFILE", "hard": 18446744073709551615, "soft": 1024}],
    "noNewPrivileges": true
  },
  "root": {"path": "/old/bundle/rootfs"},
  "hostname": "box",
  "mounts": [
    {"destination": "/proc", "type": "proc", "source": "proc"},
    {"destination": "/work", "type": "bind", "source": "/srv/host-a/work", "options": ["rbind", "rw"]}
  ],
  "x-runtime-extension": {"kept": [1, 2, 3]},
  "linux": {
    "cgroupsPath": "system.slice:sr:demo-1",
    "namespaces": [{"type": "pid"}, {"type": "network", "path": "/var/run/netns/old"}, {"type": "mount"}, {"type": "ipc"}, {"type": "uts"}]
  }
}`

// specFixture is a materializable /2 fixture recording recordedSpec.
func specFixture(t *testing.T) (*fixture, *memhost.Machine) {
	t.Helper()
	fx, m := materializable(t, baseConfig)
	fx.setSpec(recordedSpec)
	return fx, m
}

// withSpec returns the request of fx with an offered spec.
func withSpec(fx *fixture, spec string) resume.Request {
	req := fx.request(fx.signed())
	req.Spec, req.SpecSource = []byte(spec), "offered.json"
	return req
}

// edit applies old→new replacements to recordedSpec.
func edit(t *testing.T, pairs ...string) string {
	t.Helper()
	s := recordedSpec
	for i := 0; i < len(pairs); i += 2 {
		if !strings.Contains(s, pairs[i]) {
			t.Fatalf("%q not in recordedSpec", pairs[i])
		}
		s = strings.Replace(s, pairs[i], pairs[i+1], 1)
	}
	return s
}

// TestResumeFromRecordedSpec: without --spec the incarnation is created
// from the recorded spec bytes, edited as JSON: root.path and
// linux.cgroupsPath for the new container (systemd's format kept),
// process.terminal false and the namespace paths removed (both in
// notApplied); every other member as recorded, numbers exact; the recorded
// runtime and options.
func TestResumeFromRecordedSpec(t *testing.T) {
	fx, m := specFixture(t)
	v := resumeWith(fx, m, resume.ResumeOptions{})
	wantVerdict(t, v, 0, "", "")
	if v.SpecDrift != nil {
		t.Errorf("specDrift %v without --spec", v.SpecDrift)
	}
	if want := []string{"/process/terminal", "/linux/namespaces/1/path"}; !slices.Equal(v.NotApplied, want) {
		t.Errorf("notApplied %v, want %v", v.NotApplied, want)
	}
	id := resume.DefaultContainerID(testRun, 1)
	c, ok := m.Incarnation(id)
	if !ok {
		t.Fatalf("no container %s", id)
	}
	got := string(c.Spec.Spec)
	for _, want := range []string{
		`"terminal":false`, `"root":{"path":"rootfs"}`, `"cgroupsPath":"system.slice:sr:` + id + `"`,
		`"namespaces":[{"type": "pid"},{"type":"network"},{"type": "mount"},{"type": "ipc"},{"type": "uts"}]`,
		`"hard": 18446744073709551615`, `"x-runtime-extension":{"kept": [1, 2, 3]}`,
		`["/bin/sh", "-c", "echo hi; exec sleep 86400"]`, `"source": "/srv/host-a/work"`,
	} {
		if !strings.Contains(got, want) {
			t.Errorf("created spec lacks %s:\n%s", want, got)
		}
	}
	var doc map[string]json.RawMessage
	if err := json.Unmarshal(c.Spec.Spec, &doc); err != nil {
		t.Fatalf("created spec is not JSON: %v", err)
	}
	var names []string
	for k := range doc {
		names = append(names, k)
	}
	slices.Sort(names)
	if want := []string{"hostname", "linux", "mounts", "ociVersion", "process", "root", "x-runtime-extension"}; !slices.Equal(names, want) {
		t.Errorf("created spec members %v, want %v", names, want)
	}
	if c.Spec.Runtime.Name != "io.containerd.runc.v2" {
		t.Errorf("runtime %+v", c.Spec.Runtime)
	}
	if !slices.Contains(c.Env, "A=1") {
		t.Errorf("env %v, want the recorded process.env", c.Env)
	}
}

// TestSpecCheck runs check 10 over offered specs.
func TestSpecCheck(t *testing.T) {
	type want struct {
		code    int
		class   resume.Class
		failAt  string
		detail  string   // in the failed check's detail, or the spec check's
		drift   []string // pointers of specDrift entries, "+" suffix for allowed
		created bool
	}
	hostB := strconv.Quote(t.TempDir()) // an offered bind source must exist here (runspec.CheckBindSource)
	bind := edit(t, `"/srv/host-a/work"`, hostB)
	for _, tc := range []struct {
		name  string
		spec  string
		setup func(*fixture)
		want  want
	}{
		{"same spec", recordedSpec, nil, want{0, "", "", "does not widen", []string{}, true}},
		{"bind source differs", bind, nil, want{0, "", "", "/mounts/1/source", []string{"/mounts/1/source+"}, true}},
		{"args, env, cwd differ", edit(t, `exec sleep 86400"`, `exec sleep 1"`, `"cwd": "/work"`, `"cwd": "/tmp"`), nil, want{0, "", "", "does not widen", []string{}, true}},
		{"CAP_SYS_ADMIN added", edit(t, `"bounding": ["CAP_CHOWN", "CAP_KILL"]`, `"bounding": ["CAP_CHOWN", "CAP_KILL", "CAP_SYS_ADMIN"]`), nil,
			want{3, resume.ClassSpecDrift, resume.CheckSpec, "/process/capabilities/bounding", []string{"/process/capabilities/bounding/2"}, false}},
		{"CAP_SYS_ADMIN and a bind source", edit(t, `"effective": ["CAP_CHOWN", "CAP_KILL"]`, `"effective": ["CAP_SYS_ADMIN"]`, `"/srv/host-a/work"`, hostB), nil,
			want{3, resume.ClassSpecDrift, resume.CheckSpec, "/process/capabilities/effective", nil, false}},
		{"noNewPrivileges off", edit(t, `"noNewPrivileges": true`, `"noNewPrivileges": false`), nil,
			want{3, resume.ClassSpecDrift, resume.CheckSpec, "/process/noNewPrivileges", []string{"/process/noNewPrivileges"}, false}},
		{"host pid 1 namespace", edit(t, `"/var/run/netns/old"`, `"/proc/1/ns/net"`), nil,
			want{3, resume.ClassSpecDrift, resume.CheckSpec, "/linux/namespaces/1", nil, false}},
		{"unknown top-level member", edit(t, `"hostname": "box",`, `"hostname": "box", "x-new": 1,`), nil,
			want{3, resume.ClassSpecDrift, resume.CheckSpec, "/x-new", []string{"/x-new"}, false}},
		{"containerEnv entry missing", edit(t, `"A=1", `, ``), nil,
			want{3, resume.ClassSpecDrift, resume.CheckSpec, "/process/env", nil, false}},
		{"bind source re-pointed at the containerd socket", edit(t, `"/srv/host-a/work"`, `"/run/containerd/containerd.sock"`), nil,
			want{3, resume.ClassSpecDrift, resume.CheckSpec, "/mounts/1/source", []string{"/mounts/1/source"}, false}},
		{"bind source that does not exist here", edit(t, `"/srv/host-a/work"`, strconv.Quote(filepath.Join(t.TempDir(), "gone"))), nil,
			want{3, resume.ClassSpecDrift, resume.CheckSpec, "/mounts/1/source", []string{"/mounts/1/source"}, false}},
		{"reserved env name added", edit(t, `"A=1", `, `"A=1", "LD_PRELOAD=/tmp/x.so", `), func(fx *fixture) { fx.ref.Policy = []string{"LD_PRELOAD"} },
			want{3, resume.ClassSpecDrift, resume.CheckSpec, "/process/env/2", []string{"/process/env/2"}, false}},
		{"not JSON", `{"ociVersion": `, nil, want{2, resume.ClassBadInput, resume.CheckSpec, "offered spec", nil, false}},
		{"not a spec", `["ociVersion"]`, nil, want{2, resume.ClassBadInput, resume.CheckSpec, "offered.json: offered spec", nil, false}},
		{"wrong type", edit(t, `"terminal": true`, `"terminal": "yes"`), nil, want{2, resume.ClassBadInput, resume.CheckSpec, "/process/terminal", nil, false}},
		{"duplicate key", edit(t, `"hostname": "box",`, `"hostname": "box", "hostname": "other",`), nil, want{2, resume.ClassBadInput, resume.CheckSpec, "duplicate", nil, false}},
		{"recorded spec does not decode", recordedSpec, func(fx *fixture) { fx.setSpec(`{"ociVersion": 1}`) },
			want{7, resume.ClassSnapshotMissing, resume.CheckSpec, "/ref/spec", nil, false}},
		{"recorded spec blob corrupt", recordedSpec, func(fx *fixture) {
			fx.setSpec(recordedSpec)
			fx.facts.DeleteBlob(fx.ref.Spec.Digest)
			fx.facts.PutBlob([]byte("other bytes"))
			fx.ref.Spec.Size = int64(len("other bytes"))
		}, want{7, resume.ClassSnapshotMissing, resume.CheckSnapshot, "/ref/spec", nil, false}},
		{"/1 ref: the built spec offered back", "", func(fx *fixture) { fx.v1() }, want{0, "", "", "built from image config", []string{}, true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fx, m := specFixture(t)
			if tc.setup != nil {
				tc.setup(fx)
			}
			spec := tc.spec
			if spec == "" { // the spec a /1 resume builds, offered as is
				b, err := fx.facts.BuildSpec(t.Context(), resume.DefaultContainerID(testRun, 1), fx.ref.Base, fx.ref.Layers, []string{"A=1", "LANG=C.UTF-8"})
				if err != nil {
					t.Fatal(err)
				}
				spec = string(b)
			}
			for _, mode := range []string{"decide", "resume"} {
				req := withSpec(fx, spec)
				var v *resume.Verdict
				if mode == "decide" {
					v = resume.Decide(t.Context(), fx.facts, fx.ledger, req)
				} else {
					v = resume.Resume(t.Context(), fx.facts, fx.ledger, m, req, resume.ResumeOptions{})
				}
				wantVerdict(t, v, tc.want.code, tc.want.class, tc.want.failAt)
				at := resume.CheckSpec
				if tc.want.failAt != "" {
					at = tc.want.failAt
				}
				if d := v.Check(at).Detail; !strings.Contains(d, tc.want.detail) {
					t.Errorf("%s: %s detail %q lacks %q", mode, at, d, tc.want.detail)
				}
				if tc.want.drift != nil {
					var got []string
					for _, d := range v.SpecDrift {
						p := d.Pointer
						if d.Allowed {
							p += "+"
						}
						got = append(got, p)
					}
					if !slices.Equal(got, tc.want.drift) && !(len(got) == 0 && len(tc.want.drift) == 0) {
						t.Errorf("%s: specDrift %v, want %v", mode, got, tc.want.drift)
					}
					if v.SpecDrift == nil {
						t.Errorf("%s: no specDrift in a verdict that compared an offered spec", mode)
					}
				}
				if mode == "resume" {
					if created := len(m.Containers()) > 0; created != tc.want.created {
						t.Errorf("containers %v, want created %t", m.Containers(), tc.want.created)
					}
					if !tc.want.created && fx.record() != nil {
						t.Errorf("a refused spec claimed the run: %v", fx.record())
					}
				}
			}
		})
	}
}

// TestOfferedSpecIsCreated: an accepted offered spec is what the
// incarnation runs, its namespace paths kept (check 10 passed them),
// terminal set false.
func TestOfferedSpecIsCreated(t *testing.T) {
	fx, m := specFixture(t)
	hostB := strconv.Quote(t.TempDir()) // an offered bind source must exist here (runspec.CheckBindSource)
	offered := edit(t, `"/srv/host-a/work"`, hostB, `"/var/run/netns/old"`, `"/var/run/netns/new"`)
	v := resume.Resume(t.Context(), fx.facts, fx.ledger, m, withSpec(fx, offered), resume.ResumeOptions{Container: "offered"})
	wantVerdict(t, v, 0, "", "")
	if want := []string{"/process/terminal"}; !slices.Equal(v.NotApplied, want) {
		t.Errorf("notApplied %v, want %v", v.NotApplied, want)
	}
	c, _ := m.Incarnation("offered")
	for _, want := range []string{hostB, `"path": "/var/run/netns/new"`, `"terminal":false`, `"cgroupsPath":"system.slice:sr:offered"`} {
		if !strings.Contains(string(c.Spec.Spec), want) {
			t.Errorf("created spec lacks %s:\n%s", want, c.Spec.Spec)
		}
	}
	if len(v.SpecDrift) != 1 || !v.SpecDrift[0].Allowed || v.SpecDrift[0].Pointer != "/mounts/1/source" {
		t.Errorf("specDrift %s", dump(v.SpecDrift))
	}
}

// TestRecordedSpecFromAnotherHost: a recorded spec and runtime are judged
// against the local policy (runspec.JudgeRecorded) unless this ledger
// recorded the generation from a suspend on this host, or the request
// trusts them (docs/design.md "Hardening"): OCI hooks and a runc
// BinaryName are spec-drift (3) naming the recording host.
func TestRecordedSpecFromAnotherHost(t *testing.T) {
	hooked := edit(t, `"hostname": "box",`, `"hostname": "box", "hooks": {"prestart": [{"path": "/usr/bin/nsenter"}]},`)
	binary := &snapshot.Runtime{Name: resume.DefaultRuntime, Options: &snapshot.RuntimeOptions{TypeURL: "containerd.runc.v1.Options",
		Value: []byte("\x32\x10/run/rootfs/runc")}} // field 6, binary_name
	for _, tc := range []struct {
		name   string
		setup  func(*fixture)
		detail string
	}{
		{"hooks", func(fx *fixture) { fx.setSpec(hooked) }, "/hooks/prestart"},
		{"runc BinaryName", func(fx *fixture) { fx.ref.Runtime = binary }, "/ref/runtime/options/binary_name"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fx, m := specFixture(t)
			tc.setup(fx)
			req := fx.request(fx.signed())
			for _, mode := range []string{"decide", "resume"} {
				var v *resume.Verdict
				if mode == "decide" {
					v = resume.Decide(t.Context(), fx.facts, fx.ledger, req)
				} else {
					v = resume.Resume(t.Context(), fx.facts, fx.ledger, m, req, resume.ResumeOptions{})
				}
				wantVerdict(t, v, 3, resume.ClassSpecDrift, resume.CheckSpec)
				if d := v.Check(resume.CheckSpec).Detail; !strings.Contains(d, "recorded spec from host "+testHostID+" carries "+tc.detail) {
					t.Errorf("%s: detail %q", mode, d)
				}
			}
			if len(m.Containers()) != 0 || fx.record() != nil {
				t.Errorf("a judged spec created %v, claimed %v", m.Containers(), fx.record())
			}
			req.TrustRecordedSpec = true
			wantVerdict(t, resume.Decide(t.Context(), fx.facts, fx.ledger, req), 0, "", "")
		})
	}
	t.Run("recorded here", func(t *testing.T) {
		fx, _ := specFixture(t)
		fx.setSpec(hooked)
		refFile := fx.signed()
		if _, err := fx.ledger.Suspended(t.Context(), ledger.SuspendRequest{Run: testRun, Generation: 1, Ref: digest.FromBytes(refFile),
			Container: ledger.Container{Host: testHostID, Namespace: fx.facts.Namespace(), ID: "src"}, Created: time.Now()}); err != nil {
			t.Fatal(err)
		}
		wantVerdict(t, resume.Decide(t.Context(), fx.facts, fx.ledger, fx.request(refFile)), 0, "", "")
	})
}
