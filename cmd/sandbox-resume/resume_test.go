package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sandbox-resume/sandbox-resume/envelope"
	"github.com/sandbox-resume/sandbox-resume/envmanifest"
	"github.com/sandbox-resume/sandbox-resume/internal/exitcode"
	"github.com/sandbox-resume/sandbox-resume/resume"
)

func resumeRun(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(context.Background(), args, strings.NewReader(""), &out, &errb)
	return code, out.String(), errb.String()
}

// resumeFiles writes a ref file (not a valid one: these tests stop before
// the decision), a config and a trusted key; it returns their paths.
func resumeFiles(t *testing.T) (ref, cfg, pub string) {
	t.Helper()
	dir := t.TempDir()
	prefix := filepath.Join(dir, "k")
	if _, _, err := envelope.WriteKeyPair(prefix, false); err != nil {
		t.Fatal(err)
	}
	ref = filepath.Join(dir, "ref.json")
	cfg = filepath.Join(dir, "devcontainer.json")
	for p, s := range map[string]string{ref: `{"ref": {}, "signatures": []}`, cfg: `{"image": "busybox:1"}`} {
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return ref, cfg, prefix + ".pub"
}

func TestResumeCmdUsage(t *testing.T) {
	ref, cfg, pub := resumeFiles(t)
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"resume", "--check"}, `required flag(s) "config", "ref", "trust" not set`},
		{[]string{"resume", "--check", "--ref", ref, "--trust", pub}, `required flag(s) "config" not set`},
		{[]string{"resume", "--check", "--container", "c1", "--ref", ref, "--config", cfg, "--trust", pub}, "[check container] were all set"},
		{[]string{"resume", "--container", "not/an id", "--ref", ref, "--config", cfg, "--trust", pub}, "not a containerd identifier"},
		{[]string{"resume", "--check", "--start", "--ref", ref, "--config", cfg, "--trust", pub}, "[check start] were all set"},
		{[]string{"resume", "--check", "--ref", ref, "--config", cfg, "--trust", pub, "extra"}, "unexpected argument"},
		{[]string{"resume", "--check", "--bogus"}, "unknown flag"},
	} {
		code, out, stderr := resumeRun(t, tt.args...)
		if code != exitcode.Usage || !strings.Contains(stderr, tt.want) || out != "" {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want 64 and %q", tt.args, code, out, stderr, tt.want)
		}
	}
}

func TestResumeCmdInputErrors(t *testing.T) {
	ref, cfg, pub := resumeFiles(t)
	noDaemon := filepath.Join(t.TempDir(), "containerd.sock")
	for _, tt := range []struct {
		name  string
		args  []string
		code  int
		class string
		names string
	}{
		{"ref missing", []string{"--ref", ref + ".missing", "--config", cfg, "--trust", pub}, 2, "bad-input", ref + ".missing"},
		{"config missing", []string{"--ref", ref, "--config", cfg + ".missing", "--trust", pub}, 2, "bad-input", cfg + ".missing"},
		{"trust not a key", []string{"--ref", ref, "--config", cfg, "--trust", cfg}, 2, "bad-input", cfg},
		{"no daemon", []string{"--ref", ref, "--config", cfg, "--trust", pub}, 1, "internal", noDaemon},
	} {
		t.Run(tt.name, func(t *testing.T) {
			args := append([]string{"--address", noDaemon, "--output", "json", "resume", "--check"}, tt.args...)
			code, out, _ := resumeRun(t, args...)
			dec := json.NewDecoder(strings.NewReader(out))
			var obj struct {
				Error struct{ Class, Message string } `json:"error"`
			}
			if err := dec.Decode(&obj); err != nil {
				t.Fatalf("stdout %q: %v", out, err)
			}
			if dec.More() {
				t.Errorf("more than one JSON object on stdout: %q", out)
			}
			if code != tt.code || obj.Error.Class != tt.class || !strings.Contains(obj.Error.Message, tt.names) {
				t.Errorf("exit %d %+v; want %d %s naming %s", code, obj.Error, tt.code, tt.class, tt.names)
			}
		})
	}
}

func TestWriteVerdictText(t *testing.T) {
	v := &resume.Verdict{
		Class:    resume.ClassManifestMismatch,
		ExitCode: 3,
		Checks: []resume.CheckResult{
			{Name: "ref-parse", Result: "pass", Detail: "ok"},
			{Name: "manifest", Result: "fail", Detail: "offered blake3:b is not the recorded blake3:a"},
			{Name: "host", Result: "skipped", Detail: "not run: manifest failed"},
		},
		Refusals: []envmanifest.Refusal{{Pointer: "/runArgs", Class: envmanifest.ClassExecutesOrWidens, Message: "no"}},
		Drift: []resume.DriftEntry{
			{Pointer: "/containerEnv/A", Recorded: json.RawMessage(`"1"`), Offered: json.RawMessage(`"2"`)},
			{Pointer: "/features/1", OfferedPointer: "/features/2", Recorded: json.RawMessage(`{}`), Offered: json.RawMessage(`[]`)},
			{Pointer: "/remoteUser", Recorded: json.RawMessage(`"vscode"`)},
		},
	}
	var b bytes.Buffer
	writeVerdictText(&b, v)
	for _, want := range []string{
		"pass     ref-parse  ok\n",
		"fail     manifest   offered blake3:b",
		"skipped  host       not run",
		"/runArgs: executes-or-widens: no",
		`/containerEnv/A: recorded "1", offered "2"`,
		"/features/1 (offered at /features/2): recorded {}, offered []",
		`/remoteUser: recorded "vscode", offered absent`,
		"refused: manifest-mismatch (exit 3)",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("text output lacks %q:\n%s", want, b.String())
		}
	}
}

// TestNoArgsCommands: the commands that take no positional argument refuse
// one as a usage error naming the command and the argument.
func TestNoArgsCommands(t *testing.T) {
	for _, name := range []string{"discard", "fork", "recall", "repin", "runs"} {
		code, out, stderr := resumeRun(t, name, "extra")
		want := name + `: unexpected argument "extra"`
		if code != exitcode.Usage || !strings.Contains(stderr, want) || out != "" {
			t.Errorf("%s extra: exit %d, stdout %q, stderr %q; want 64 and %q", name, code, out, stderr, want)
		}
	}
}
