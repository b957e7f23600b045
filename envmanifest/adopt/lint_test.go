package adopt

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/containerd/errdefs"
	"github.com/opencontainers/go-digest"

	"github.com/sandbox-resume/sandbox-resume/envmanifest"
	"github.com/sandbox-resume/sandbox-resume/errdef"
)

// TestAdviceTable checks the table itself: one row per key, every
// refused-class property of the property table has a row of its own for its
// class (no wildcard answers for them), every row has advice, and the
// refusal classes lint can meet anywhere have a row.
func TestAdviceTable(t *testing.T) {
	seen := map[adviceKey]bool{}
	for _, r := range adviceTable {
		k := adviceKey{r.Property, r.Class}
		if seen[k] {
			t.Errorf("advice table: two rows for %q %s", r.Property, r.Class)
		}
		seen[k] = true
		if len(r.Advice) < 40 {
			t.Errorf("advice table: %q %s: advice %q is too thin to act on", r.Property, r.Class, r.Advice)
		}
	}
	for _, p := range envmanifest.Properties() {
		var c envmanifest.Class
		switch p.Class {
		case envmanifest.PropExecutesOrWidens:
			c = envmanifest.ClassExecutesOrWidens
		case envmanifest.PropChangesWhatRuns:
			c = envmanifest.ClassChangesWhatRuns
		default:
			continue
		}
		if !seen[adviceKey{p.Name, c}] {
			t.Errorf("advice table: no row for %s (%s)", p.Name, c)
		}
	}
	for _, k := range []adviceKey{
		{AdviceGPU, envmanifest.ClassExecutesOrWidens},
		{AdviceMount, envmanifest.ClassChangesWhatRuns},
		{AdviceEnvVar, envmanifest.ClassReservedEnv},
		{AdviceFeature, envmanifest.ClassLockfile},
		{AdviceDocument, envmanifest.ClassLockfile},
		{AdviceDocument, envmanifest.ClassSyntax},
		{AdviceDocument, envmanifest.ClassLimit},
		{AdviceDocument, envmanifest.ClassEncoding},
		{AdviceAnyProperty, envmanifest.ClassUnknownProperty},
		{AdviceAnyProperty, envmanifest.ClassDuplicateKey},
		{AdviceAnyProperty, envmanifest.ClassNumber},
		{"image", envmanifest.ClassMissing},
	} {
		if !seen[k] {
			t.Errorf("advice table: no row for %q %s", k.property, k.class)
		}
	}
	if r := adviceTable[adviceIndex[adviceKey{AdviceMount, envmanifest.ClassChangesWhatRuns}]]; r.Fix != FixRemoveMount || !strings.Contains(r.Advice, "readonly") {
		t.Errorf("mount options: fix %q, advice %q: want the whole mount removed, and readonly named", r.Fix, r.Advice)
	}
}

func TestAdviceProperty(t *testing.T) {
	for ptr, want := range map[string]string{
		"":                                  AdviceDocument,
		"/postCreateCommand":                "postCreateCommand",
		"/hostRequirements/gpu":             AdviceGPU,
		"/hostRequirements/cpus":            "hostRequirements",
		"/mounts/2":                         AdviceMount,
		"/mounts/2/readonly":                AdviceMount,
		"/mounts":                           "mounts",
		"/features/ghcr.io~1x~1y:1":         AdviceFeature,
		"/features/ghcr.io~1x~1y:1/version": AdviceFeature,
		"/containerEnv/LD_PRELOAD":          AdviceEnvVar,
		"/customizations/vscode/settings":   "customizations",
		"/a~1b":                             "a/b",
		envmanifest.ImageMetadataPointer:    AdviceImageMetadata,
		envmanifest.ImageMetadataPointer + "/0/postCreateCommand": AdviceImageMetadata,
		"/config/Labels/devcontainer.metadataX/0":                 "config",
	} {
		if got := AdviceProperty(ptr); got != want {
			t.Errorf("AdviceProperty(%q) = %q, want %q", ptr, got, want)
		}
	}
}

func TestEditDistance(t *testing.T) {
	for _, c := range []struct {
		a, b string
		want int
	}{
		{"", "", 0}, {"", "abc", 3}, {"abc", "", 3}, {"image", "image", 0},
		{"imgae", "image", 1},    // a transposition is one edit
		{"kitten", "sitting", 3}, // Levenshtein's example
		{"ca", "abc", 3},         // optimal string alignment, not full Damerau (2)
		{"remoteusr", "remoteuser", 1},
		{"postcreatecomand", "postcreatecommand", 1},
		{"naïve", "naive", 1}, // runes, not bytes
	} {
		if got := editDistance(c.a, c.b, 100); got != c.want {
			t.Errorf("editDistance(%q, %q) = %d, want %d", c.a, c.b, got, c.want)
		}
		if got := editDistance(c.a, c.b, 2); got != min(c.want, 2) {
			t.Errorf("editDistance(%q, %q, limit 2) = %d, want %d", c.a, c.b, got, min(c.want, 2))
		}
	}
}

func TestSuggestProperty(t *testing.T) {
	for name, want := range map[string]string{
		"Image":             "image",
		"imgae":             "image",
		"remoteUsr":         "remoteUser",
		"postCreateComand":  "postCreateCommand",
		"dockerfile":        "dockerFile",
		"mount":             "mounts",
		"feature":           "features",
		"forwardPort":       "forwardPorts",
		"containerEnvs":     "containerEnv",
		"ContainerEnv":      "containerEnv",
		"postcreatecommand": "postCreateCommand",
		"colour":            "",
		"runArguments":      "",
		"image":             "", // known: nothing to suggest
	} {
		got, ok := SuggestProperty(name)
		if ok != (want != "") || got.Name != want {
			t.Errorf("SuggestProperty(%q) = %q %v, want %q", name, got.Name, ok, want)
		}
	}
	r := Advise(envmanifest.Refusal{Pointer: "/remoteUsr", Class: envmanifest.ClassUnknownProperty, Message: "unknown"})
	if !strings.Contains(r.Advice, `did you mean "remoteUser"`) || r.Fix != FixRemove {
		t.Errorf("Advise(/remoteUsr) = %+v", r)
	}
}

// TestLintCorpus lints every file of shared/corpus/devcontainer: every
// refusal gets advice from the table (none falls to the generic text), a
// refusal of a known property gets that property's own row, and --fix
// (on a copy) leaves a document that ingests, or is refused only at
// /image where the original was (image missing: build, dockerFile or
// compose removed, or none declared; image invalid). Fixing again removes
// nothing.
func TestLintCorpus(t *testing.T) {
	dir := filepath.Join(vecShared(t), "corpus", "devcontainer")
	files, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no corpus files in %s (%v)", dir, err)
	}
	ctx := context.Background()
	tmp := t.TempDir()
	var refusals, removed, accepted, imageOnly int
	for _, f := range files {
		name := filepath.Base(f)
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		res, err := Lint(ctx, data, LintOptions{Options: envmanifest.Options{Path: f}})
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		var origImage *LintRefusal
		for i, r := range res.Refusals {
			refusals++
			rule, ok := adviceFor(r.Refusal)
			switch {
			case !ok:
				t.Errorf("%s: %s fell to the generic advice", name, r.Refusal)
			case r.Class == envmanifest.ClassExecutesOrWidens || r.Class == envmanifest.ClassChangesWhatRuns:
				if rule.Property != AdviceProperty(r.Pointer) {
					t.Errorf("%s: %s got the row of %q, not its own", name, r.Refusal, rule.Property)
				}
			}
			if r.Advice == "" || r.Advice == genericAdvice {
				t.Errorf("%s: %s: no specific advice", name, r.Refusal)
			}
			if r.Pointer == "/image" {
				origImage = &res.Refusals[i]
			}
		}
		if res.Document != nil || res.Written {
			t.Errorf("%s: lint without --fix produced a document", name)
		}

		path := filepath.Join(tmp, name)
		if err := os.WriteFile(path, data, 0o640); err != nil {
			t.Fatal(err)
		}
		fixed, err := LintFile(ctx, path, LintOptions{Fix: true})
		if err != nil {
			t.Errorf("%s: --fix: %v", name, err)
			continue
		}
		removed += len(fixed.Removed)
		onDisk, _ := os.ReadFile(path)
		if !bytes.Equal(onDisk, fixed.Document) {
			t.Errorf("%s: the file on disk is not the fixed document", name)
		}
		if fixed.Written != (len(fixed.Removed) > 0) || fixed.Written == bytes.Equal(onDisk, data) {
			t.Errorf("%s: written %v with %d removals", name, fixed.Written, len(fixed.Removed))
		}
		if fi, err := os.Stat(path); err == nil && fi.Mode().Perm() != 0o640 {
			t.Errorf("%s: --fix changed the mode to %v", name, fi.Mode().Perm())
		}
		switch {
		case len(fixed.Remaining) == 0:
			accepted++
			if fixed.Manifest == nil || !fixed.OK() {
				t.Errorf("%s: no refusal left but no manifest", name)
			}
		case len(fixed.Remaining) == 1 && fixed.Remaining[0].Pointer == "/image" && origImage != nil && fixed.Remaining[0].Class == origImage.Class:
			imageOnly++
			if fixed.Remaining[0].Class == envmanifest.ClassMissing && !strings.Contains(fixed.Remaining[0].Advice, "build") {
				t.Errorf("%s: the missing-image advice does not say what to do about build: %s", name, fixed.Remaining[0].Advice)
			}
		default:
			t.Errorf("%s: after --fix still refused: %v", name, fixed.Remaining)
		}
		for _, rm := range fixed.Removed {
			if rm.Fix == FixNone || rm.Count < 1 {
				t.Errorf("%s: removal %+v", name, rm)
			}
		}
		again, err := LintFile(ctx, path, LintOptions{Fix: true})
		if err != nil || len(again.Removed) != 0 {
			t.Errorf("%s: a second --fix removed %v (%v)", name, again.Removed, err)
		}
	}
	if accepted+imageOnly != len(files) {
		t.Errorf("%d files accepted after --fix and %d refused only at /image, of %d", accepted, imageOnly, len(files))
	}
	t.Logf("corpus: %d files, %d refusals, %d removals by --fix; after --fix %d ingest, %d need an image", len(files), refusals, removed, accepted, imageOnly)
}

// lintGolden is what the golden files record of a lint --fix run.
type lintGolden struct {
	Refusals  []LintRefusal `json:"refusals"`
	Removed   []Removal     `json:"removed"`
	Remaining []LintRefusal `json:"remaining"`
	Excluded  []string      `json:"excluded"`
	Unpinned  []Unpinned    `json:"unpinned"`
	Address   string        `json:"address,omitempty"`
	Pinned    bool          `json:"pinned"`
}

// TestLintGolden runs lint --fix on the three real-shaped examples of
// testdata/lint (a Node app with build and lifecycle hooks, a Python
// service with runArgs and mounts with options, a Go tool with locked
// features, hooks, capabilities, a GPU and a misspelt member) and compares
// the report and the fixed file with lint.golden.json and
// fixed.golden.jsonc. `go test ./envmanifest -run TestLintGolden -update`
// rewrites them; review the diff.
func TestLintGolden(t *testing.T) {
	for _, name := range []string{"node", "python", "go"} {
		t.Run(name, func(t *testing.T) {
			src := filepath.Join("testdata", "lint", name)
			tmp := t.TempDir()
			for _, f := range []string{"devcontainer.json", "devcontainer-lock.json"} {
				data, err := os.ReadFile(filepath.Join(src, f))
				if errors.Is(err, os.ErrNotExist) {
					continue
				} else if err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(filepath.Join(tmp, f), data, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			res, err := LintFile(context.Background(), filepath.Join(tmp, "devcontainer.json"), LintOptions{Options: envmanifest.Options{Reserved: defaultPolicy(t)}, Fix: true})
			if err != nil {
				t.Fatal(err)
			}
			g := lintGolden{Refusals: res.Refusals, Removed: res.Removed, Remaining: res.Remaining, Excluded: res.Excluded, Unpinned: res.Unpinned}
			if res.Manifest != nil {
				g.Address, g.Pinned = res.Manifest.Address, res.Manifest.IsPinned()
			}
			report, err := json.MarshalIndent(g, "", "  ")
			if err != nil {
				t.Fatal(err)
			}
			report = append(bytes.ReplaceAll(report, []byte(tmp), []byte(src)), '\n')
			compareGolden(t, filepath.Join(src, "lint.golden.json"), report)
			compareGolden(t, filepath.Join(src, "fixed.golden.jsonc"), res.Document)
		})
	}
}

// compareGolden compares got with the file at path, or writes it there
// under -update.
func compareGolden(t *testing.T, path string, got []byte) {
	t.Helper()
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (go test ./envmanifest -run TestLintGolden -update writes it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs (go test ./envmanifest -run TestLintGolden -update rewrites it)\n--- got\n%s", path, got)
	}
}

// lintFix runs lint --fix on doc in a temporary file and returns the result
// and the file's bytes afterwards.
func lintFix(t *testing.T, doc string, opts envmanifest.Options) (*LintResult, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "devcontainer.json")
	if err := os.WriteFile(path, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	res, err := LintFile(context.Background(), path, LintOptions{Options: opts, Fix: true})
	if err != nil {
		t.Fatal(err)
	}
	after, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return res, string(after)
}

func TestLintFix(t *testing.T) {
	const img = `"image": "debian:12"`
	for _, c := range []struct {
		name, in, want string
		removed        []string // pointer×count
		ok             bool
	}{{
		name:    "a mount with readonly goes whole, its neighbours and their comments stay",
		in:      "{\n  " + img + ",\n  \"mounts\": [\n    // cache\n    \"source=c,target=/c,type=volume\",\n    // fixtures, never written\n    \"source=/f,target=/f,type=bind,readonly\",\n    \"type=bind,source=/g,target=/g\"\n  ]\n}\n",
		want:    "{\n  " + img + ",\n  \"mounts\": [\n    // cache\n    \"source=c,target=/c,type=volume\",\n    \"type=bind,source=/g,target=/g\"\n  ]\n}\n",
		removed: []string{"/mounts/1×1"}, ok: true,
	}, {
		name:    "an object mount with a refused option goes whole, never only the option",
		in:      `{` + img + `, "mounts": [{"type": "bind", "source": "/a", "target": "/a", "readonly": true}, {"type": "volume", "source": "v", "target": "/v"}, {"type": "bind", "source": "/b", "target": "/b", "bind-propagation": "rshared"}]}`,
		want:    `{` + img + `, "mounts": [ {"type": "volume", "source": "v", "target": "/v"}]}`,
		removed: []string{"/mounts/0×1", "/mounts/2×1"}, ok: true,
	}, {
		name:    "a repeated refused member goes with every occurrence",
		in:      "{\n\t" + img + ",\n\t\"postCreateCommand\": \"a\",\n\t\"postCreateCommand\": \"b\"\n}",
		want:    "{\n\t" + img + "\n}",
		removed: []string{"/postCreateCommand×2"}, ok: true,
	}, {
		name:    "a repeated accepted member keeps its last occurrence",
		in:      `{` + img + `, "name": "x", "name": "y", "remoteUser": "u"}`,
		want:    `{` + img + `, "name": "y", "remoteUser": "u"}`,
		removed: []string{"/name×1"}, ok: true,
	}, {
		name:    "hostRequirements keeps all but gpu",
		in:      `{` + img + `, "hostRequirements": {"cpus": 2, "gpu": true, "memory": "4gb"}}`,
		want:    `{` + img + `, "hostRequirements": {"cpus": 2, "memory": "4gb"}}`,
		removed: []string{"/hostRequirements/gpu×1"}, ok: true,
	}, {
		name:    "a reserved name goes, the other variables stay",
		in:      `{` + img + `, "containerEnv": {"A": "1", "ld_preload": "/x.so", "B": "2"}}`,
		want:    `{` + img + `, "containerEnv": {"A": "1", "B": "2"}}`,
		removed: []string{"/containerEnv/ld_preload×1"}, ok: true,
	}, {
		name:    "BOM, CRLF and a final line comment without a newline are kept",
		in:      "\ufeff{\r\n  " + img + ",\r\n  \"init\": true\r\n}\r\n// end",
		want:    "\ufeff{\r\n  " + img + "\r\n}\r\n// end",
		removed: []string{"/init×1"}, ok: true,
	}, {
		name:    "a trailing comma after a removed last member goes with it",
		in:      "{\n  \"runArgs\": [\"--init\"],\n  " + img + ",\n  \"privileged\": false,\n}\n",
		want:    "{\n  " + img + "\n}\n",
		removed: []string{"/privileged×1", "/runArgs×1"}, ok: true,
	}, {
		name: "build goes and image is missing: the file is written, still refused",
		in:   `{"build": {"dockerfile": "Dockerfile"}, "name": "x"}`,
		want: `{ "name": "x"}`, removed: []string{"/build×1"}, ok: false,
	}, {
		name: "a repeated feature key with a refused id goes in a second round",
		in:   `{` + img + `, "features": {"devcontainers/features/go@v0.0.1": {}, "devcontainers/features/go@v0.0.1": {"version": "1.22"}, "ghcr.io/devcontainers/features/node:1": {}}}`,
		want: `{` + img + `, "features": { "ghcr.io/devcontainers/features/node:1": {}}}`, removed: []string{"/features/devcontainers~1features~1go@v0.0.1×1", "/features/devcontainers~1features~1go@v0.0.1×1"}, ok: true,
	}, {
		name: "an invalid image and a mount conflict are left for a hand edit",
		in:   `{"image": "${localEnv:IMG:debian:12}", "mounts": ["type=volume,target=/a", "type=volume,target=/a/"]}`,
		want: `{"image": "${localEnv:IMG:debian:12}", "mounts": ["type=volume,target=/a", "type=volume,target=/a/"]}`, ok: false,
	}, {
		name: "nothing refused: nothing written",
		in:   "{ " + img + " } // ok", want: "{ " + img + " } // ok", ok: true,
	}} {
		t.Run(c.name, func(t *testing.T) {
			res, after := lintFix(t, c.in, envmanifest.Options{Reserved: defaultPolicy(t)})
			if after != c.want {
				t.Errorf("fixed file:\n%q\nwant\n%q", after, c.want)
			}
			if string(res.Document) != c.want {
				t.Errorf("Document %q, want the file", res.Document)
			}
			var got []string
			for _, r := range res.Removed {
				got = append(got, fmt.Sprintf("%s×%d", r.Pointer, r.Count))
			}
			if !slices.Equal(got, c.removed) {
				t.Errorf("removed %q, want %q", got, c.removed)
			}
			if res.Written != (len(c.removed) > 0) {
				t.Errorf("written %v", res.Written)
			}
			if res.OK() != c.ok {
				t.Errorf("OK %v, want %v; remaining %v", res.OK(), c.ok, res.Remaining)
			}
		})
	}
}

func TestLintAdvice(t *testing.T) {
	in := `{"image": "${localEnv:HVE_IMAGE:mcr.microsoft.com/devcontainers/base:2-jammy}", "imgae": "x",
		"features": {"devcontainers/features/go@v0.0.1": {}}, "postCreateCommand": "make"}`
	res, err := Lint(context.Background(), []byte(in), LintOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"/image": "the variable's default is mcr.microsoft.com/devcontainers/base:2-jammy",
		"/imgae": `did you mean "image"`,
		"/features/devcontainers~1features~1go@v0.0.1": "ghcr.io/devcontainers/features/go",
		"/postCreateCommand":                           "Dockerfile",
	}
	for _, r := range res.Refusals {
		if w, ok := want[r.Pointer]; ok && !strings.Contains(r.Advice, w) {
			t.Errorf("%s: advice %q lacks %q", r.Pointer, r.Advice, w)
		}
		delete(want, r.Pointer)
	}
	if len(want) > 0 {
		t.Errorf("no refusal at %v", want)
	}
	if res.OK() || res.Manifest != nil {
		t.Error("a refused document is OK")
	}

	// Whole-document refusals: advice, nothing to fix, nothing written.
	res, err = Lint(context.Background(), []byte(`{"image": "x",,}`), LintOptions{Fix: true, Options: envmanifest.Options{Path: filepath.Join(t.TempDir(), "absent.json")}})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Refusals) != 1 || res.Refusals[0].Class != envmanifest.ClassSyntax || res.Refusals[0].Property != AdviceDocument || res.Written || len(res.Remaining) != 1 {
		t.Errorf("syntax error: %+v", res)
	}

	// Fix of stdin with something to remove has nowhere to write.
	if _, err := Lint(context.Background(), []byte(`{"image": "x", "init": true}`), LintOptions{Fix: true}); err == nil {
		t.Error("--fix of stdin wrote nowhere without an error")
	}
}

func TestLintUnpinned(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "devcontainer.json")
	doc := `{"image": "debian:12", "features": {
		"ghcr.io/devcontainers/features/node:1": {},
		"ghcr.io/devcontainers/features/go:1": {},
		"ghcr.io/devcontainers/features/git@sha256:` + strings.Repeat("a", 64) + `": {},
		"https://example.com/x/devcontainer-feature-tool.tgz": {},
		"./local": {}}}`
	lock := `{"features": {"ghcr.io/devcontainers/features/node:1": {"version": "1.6.1",
		"resolved": "ghcr.io/devcontainers/features/node@sha256:` + strings.Repeat("b", 64) + `", "integrity": "sha256:` + strings.Repeat("b", 64) + `"}}}`
	if err := os.WriteFile(path, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, envmanifest.LockfileName), []byte(lock), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, "local"), 0o755); err != nil {
		t.Fatal(err)
	}
	inspect := func(_ context.Context, ref string) (*ImageReport, error) {
		return &ImageReport{Reference: ref, Digest: digest.Digest("sha256:" + strings.Repeat("c", 64)), MetadataChecked: true}, nil
	}
	res, err := LintFile(context.Background(), path, LintOptions{Image: inspect})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, u := range res.Unpinned {
		got[u.Pointer] = u.Advice
	}
	want := map[string]string{
		"/image": "sha256:" + strings.Repeat("c", 64),
		"/features/ghcr.io~1devcontainers~1features~1go:1":                  "has no entry",
		"/features/https:~1~1example.com~1x~1devcontainer-feature-tool.tgz": "tarball",
		"/features/.~1local": "local feature",
	}
	if len(got) != len(want) {
		t.Errorf("unpinned %v, want %v", got, want)
	}
	for p, w := range want {
		if !strings.Contains(got[p], w) {
			t.Errorf("unpinned %s: advice %q lacks %q", p, got[p], w)
		}
	}
	if !res.OK() || res.Manifest.IsPinned() {
		t.Errorf("OK %v pinned %v", res.OK(), res.Manifest.IsPinned())
	}
}

func TestLintImage(t *testing.T) {
	doc := []byte(`{"image": "busybox:1", "postCreateCommand": "x"}`)
	var asked string
	label := []envmanifest.Refusal{
		{Pointer: envmanifest.ImageMetadataPointer + "/0/postCreateCommand", Class: envmanifest.ClassExecutesOrWidens, Message: "lifecycle command in the label"},
		{Pointer: envmanifest.ImageMetadataPointer + "/1/privileged", Class: envmanifest.ClassExecutesOrWidens, Message: "privileged in the label"},
	}
	inspect := func(_ context.Context, ref string) (*ImageReport, error) {
		asked = ref
		return &ImageReport{Reference: ref, Digest: digest.Digest("sha256:" + strings.Repeat("d", 64)), MetadataChecked: true, Metadata: label}, nil
	}
	res, err := Lint(context.Background(), doc, LintOptions{Image: inspect})
	if err != nil {
		t.Fatal(err)
	}
	if asked != "docker.io/library/busybox:1" {
		t.Errorf("inspected %q, want the normalized reference", asked)
	}
	if len(res.ImageRefusals) != 2 || res.ImageRefusals[0].Property != AdviceImageMetadata || !strings.Contains(res.ImageRefusals[0].Advice, "rebuild the image") {
		t.Errorf("image refusals %+v", res.ImageRefusals)
	}

	// A clean declaration over a label with a hook is not OK either.
	res, err = Lint(context.Background(), []byte(`{"image": "busybox:1"}`), LintOptions{Image: inspect})
	if err != nil || res.Manifest == nil || res.OK() {
		t.Errorf("clean declaration, refused label: OK %v (%v)", res.OK(), err)
	}

	// A name that does not resolve.
	missing := func(context.Context, string) (*ImageReport, error) {
		return nil, fmt.Errorf("image %q: %w", "x", errdefs.ErrNotFound)
	}
	if _, err := Lint(context.Background(), doc, LintOptions{Image: missing}); !errors.Is(err, errdef.ErrImageUnresolved) {
		t.Errorf("unresolved image: %v, want errdef.ErrImageUnresolved", err)
	}
	down := func(context.Context, string) (*ImageReport, error) { return nil, errdefs.ErrUnavailable }
	if _, err := Lint(context.Background(), doc, LintOptions{Image: down}); err == nil || errors.Is(err, errdef.ErrImageUnresolved) {
		t.Errorf("daemon down: %v, want an error that is not errdef.ErrImageUnresolved", err)
	}
	// No valid image: the inspector is not asked.
	asked = ""
	if _, err := Lint(context.Background(), []byte(`{"build": {}}`), LintOptions{Image: inspect}); err != nil || asked != "" {
		t.Errorf("asked %q for a document without an image (%v)", asked, err)
	}
}

// TestLintRuntimeSocket: a mount whose source is a runtime socket
// (docker.sock, containerd.sock, any *.sock) is flagged executes-or-widens
// with advice (docs/design.md "Hardening"), though the manifest ingests;
// other binds are not; --fix removes the mount whole and the fixed file
// is clean.
func TestLintRuntimeSocket(t *testing.T) {
	ctx := context.Background()
	for _, src := range []string{"/var/run/docker.sock", "/run/containerd/containerd.sock", "/home/dev/.podman/podman.sock"} {
		doc := `{"image": "debian:12", "mounts": ["source=/srv/data,target=/data,type=bind", "source=` + src + `,target=/var/run/docker.sock,type=bind"]}`
		if _, err := envmanifest.Ingest([]byte(doc), envmanifest.Options{}); err != nil {
			t.Fatalf("%s: the document should ingest: %v", src, err)
		}
		res, err := Lint(ctx, []byte(doc), LintOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if res.OK() || len(res.Refusals) != 1 {
			t.Fatalf("%s: OK %v refusals %+v, want one flag", src, res.OK(), res.Refusals)
		}
		r := res.Refusals[0]
		if r.Pointer != "/mounts/1" || r.Class != envmanifest.ClassExecutesOrWidens || !strings.Contains(r.Message, src) || r.Property != AdviceMount || !strings.Contains(r.Advice, "socket") || r.Fix != FixRemoveMount {
			t.Errorf("%s: %+v", src, r)
		}
		fixed, after := lintFix(t, doc, envmanifest.Options{})
		if !fixed.OK() || len(fixed.Remaining) != 0 || strings.Contains(after, src) || !strings.Contains(after, "/srv/data") {
			t.Errorf("%s: --fix OK %v remaining %v:\n%s", src, fixed.OK(), fixed.Remaining, after)
		}
	}
	res, err := Lint(ctx, []byte(`{"image": "debian:12", "mounts": [{"type": "volume", "source": "x.sock", "target": "/v"}, "source=/srv/socks,target=/s,type=bind"]}`), LintOptions{})
	if err != nil || !res.OK() {
		t.Errorf("a volume named x.sock or a directory is no socket: %+v, %v", res, err)
	}
}
