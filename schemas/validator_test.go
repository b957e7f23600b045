package schemas

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/opencontainers/go-digest"
	specs "github.com/opencontainers/image-spec/specs-go"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"github.com/tailscale/hujson"

	"github.com/sandbox-resume/sandbox-resume/envelope"
	"github.com/sandbox-resume/sandbox-resume/envmanifest"
	"github.com/sandbox-resume/sandbox-resume/resume"
	"github.com/sandbox-resume/sandbox-resume/resume/fake"
	"github.com/sandbox-resume/sandbox-resume/snapshot"
)

// ---- the stock validator as a process ----

type ajvDoc struct {
	ID     string `json:"id"`
	Schema string `json:"schema"`
	Data   []byte `json:"data"` // base64 on the wire
}

type ajvError struct {
	InstancePath string         `json:"instancePath"`
	Keyword      string         `json:"keyword"`
	Params       map[string]any `json:"params"`
	Message      string         `json:"message"`
}

type ajvResult struct {
	ID         string     `json:"id"`
	Valid      bool       `json:"valid"`
	ParseError string     `json:"parseError"`
	Errors     []ajvError `json:"errors"`
}

// ajv returns a function that validates a batch of documents in one node
// process (schemas/testdata/ajv-batch.js, ajv 8 Draft 2020-12, strict
// mode, ajv-formats) against the committed schemas. It skips the test when
// node or .tools/node_modules (make deps) is missing, and fails under CI=true.
func ajv(t *testing.T) func(docs []ajvDoc) map[string]ajvResult {
	t.Helper()
	modules, err := filepath.Abs(filepath.Join("..", ".tools", "node_modules"))
	if err != nil {
		t.Fatal(err)
	}
	node, err := exec.LookPath("node")
	if err == nil {
		_, err = os.Stat(filepath.Join(modules, "ajv", "dist", "2020.js"))
	}
	if err == nil {
		_, err = os.Stat(filepath.Join(modules, "ajv-formats"))
	}
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("stock validator missing (run make deps: node, .tools/node_modules/ajv, ajv-formats): %v", err)
		}
		t.Skipf("stock validator missing (run make deps): %v", err)
	}
	return func(docs []ajvDoc) map[string]ajvResult {
		t.Helper()
		job, err := json.Marshal(map[string]any{"dir": ".", "docs": docs})
		if err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(node, filepath.Join("testdata", "ajv-batch.js"))
		cmd.Env = append(os.Environ(), "NODE_PATH="+modules)
		cmd.Stdin = bytes.NewReader(job)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("ajv-batch.js: %v\n%s", err, stderr.String())
		}
		var res []ajvResult
		if err := json.Unmarshal(out, &res); err != nil {
			t.Fatalf("ajv-batch.js output: %v", err)
		}
		if len(res) != len(docs) {
			t.Fatalf("ajv-batch.js: %d results for %d documents", len(res), len(docs))
		}
		m := make(map[string]ajvResult, len(res))
		for _, r := range res {
			m[r.ID] = r
		}
		return m
	}
}

// TestStockValidatorCompilesSchemas runs the ajv CLI (ajv-cli 5, the
// 2020 dialect, strict mode) over every committed schema.
func TestStockValidatorCompilesSchemas(t *testing.T) {
	validate := ajv(t) // skips or fails as the batch validator does
	_ = validate
	bin, _ := filepath.Abs(filepath.Join("..", ".tools", "node_modules", ".bin", "ajv"))
	files, err := filepath.Glob("*.schema.json")
	if err != nil || len(files) == 0 {
		t.Fatalf("no schemas: %v", err)
	}
	args := []string{"compile", "--spec=draft2020", "--strict=true", "-c", "ajv-formats"}
	for _, f := range files {
		args = append(args, "-s", f)
	}
	out, err := exec.Command(bin, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("ajv compile: %v\n%s", err, out)
	}
	if n := strings.Count(string(out), " is valid"); n != len(files) {
		t.Fatalf("ajv compile reported %d valid schemas of %d:\n%s", n, len(files), out)
	}
}

// ---- pointers ----

func escapeToken(s string) string {
	return strings.NewReplacer("~", "~0", "/", "~1").Replace(s)
}

// topLevel returns the first reference token of a JSON Pointer as a pointer
// ("/runArgs" for "/runArgs/2"; "" for "").
func topLevel(p string) string {
	if p == "" {
		return ""
	}
	if i := strings.IndexByte(p[1:], '/'); i >= 0 {
		return p[:i+1]
	}
	return p
}

// schemaPointers returns the top-level pointers ajv's errors name: the
// member of an additionalProperties or required error, else the error's
// instance path. A document node could not parse counts as "".
func schemaPointers(r ajvResult) []string {
	set := map[string]bool{}
	if r.ParseError != "" {
		set[""] = true
	}
	for _, e := range r.Errors {
		p := e.InstancePath
		switch e.Keyword {
		case "additionalProperties":
			p += "/" + escapeToken(fmt.Sprint(e.Params["additionalProperty"]))
		case "required":
			p += "/" + escapeToken(fmt.Sprint(e.Params["missingProperty"]))
		}
		set[topLevel(p)] = true
	}
	return sortedKeys(set)
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// ---- shared folder, corpus, C7 vectors ----

func sharedDir(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("SANDBOX_RESUME_SHARED")
	if dir == "" {
		dir = filepath.Join("..", "..", "shared")
	}
	if _, err := os.Stat(filepath.Join(dir, "corpus", "devcontainer")); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("shared folder missing (set SANDBOX_RESUME_SHARED): %v", err)
		}
		t.Skipf("shared folder missing: %v", err)
	}
	return dir
}

// c7Vector is the part of a C7 vector (envmanifest/testdata/c7) this test
// needs to ingest it the way TestC7 does.
type c7Vector struct {
	Input         *string `json:"input"`
	InputBase64   string  `json:"inputBase64"`
	InputTemplate []struct {
		Text   string `json:"text"`
		Repeat int    `json:"repeat"`
	} `json:"inputTemplate"`
	ConfigName   string  `json:"configName"`
	Lockfile     *string `json:"lockfile"`
	LockfileName string  `json:"lockfileName"`
	LockfileFlag bool    `json:"lockfileFlag"`
}

// docCase is one devcontainer.json with the ingester's outcome.
type docCase struct {
	id       string // "corpus/<file>", "corpus-stripped/<file>", "c7/<file>"
	data     []byte // raw input
	std      []byte // hujson-standardized bytes; nil when hujson cannot parse
	refusals []envmanifest.Refusal
	accepted bool
	manifest *envmanifest.Manifest
}

// ingest runs the ingester with the default reserved-environment policy
// (the one the schema encodes). path names the config file (lockfile
// discovery, ./ features).
func ingest(t *testing.T, id string, data []byte, opts envmanifest.Options) docCase {
	t.Helper()
	policy, err := envmanifest.LoadPolicy("")
	if err != nil {
		t.Fatal(err)
	}
	opts.Reserved = policy
	c := docCase{id: id, data: data}
	m, err := envmanifest.Ingest(data, opts)
	var re *envmanifest.RefusedError
	switch {
	case err == nil:
		c.accepted, c.manifest = true, m
	case errors.As(err, &re):
		c.refusals = re.Refusals
	default:
		t.Fatalf("%s: ingest: %v", id, err)
	}
	c.std = standardize(data)
	return c
}

// standardize returns the JSON a stock validator sees: one leading UTF-8
// BOM removed (DESIGN "Precise rules": BOM), then comments and trailing
// commas removed by hujson (a newline appended first: JSONC lets a line
// comment end the file, hujson does not). nil when hujson cannot parse it.
func standardize(data []byte) []byte {
	buf := append(bytes.TrimPrefix(slices.Clone(data), []byte("\xef\xbb\xbf")), '\n')
	std, err := hujson.Standardize(buf)
	if err != nil {
		return nil
	}
	return std
}

func loadCorpus(t *testing.T) []docCase {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(sharedDir(t), "corpus", "devcontainer", "*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no corpus files: %v", err)
	}
	sort.Strings(files)
	var out []docCase
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		c := ingest(t, "corpus/"+filepath.Base(f), data, envmanifest.Options{Path: f})
		out = append(out, c)
		// The variant with every member the ingester refused at the top
		// level removed (what a user does to make a file ingest).
		if c.accepted || c.std == nil {
			continue
		}
		var ops []map[string]string
		seen := map[string]bool{}
		for _, r := range c.refusals {
			if top := topLevel(r.Pointer); top != "" && top != "/image" && !seen[top] && topLevelClass(r.Class) {
				seen[top] = true
				ops = append(ops, map[string]string{"op": "remove", "path": top})
			}
		}
		if len(ops) == 0 {
			continue
		}
		v, err := hujson.Parse(slices.Clone(data))
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		patch, _ := json.Marshal(ops)
		if err := v.Patch(patch); err != nil {
			t.Fatalf("%s: remove %s: %v", f, patch, err)
		}
		out = append(out, ingest(t, "corpus-stripped/"+filepath.Base(f), v.Pack(), envmanifest.Options{Path: f}))
	}
	return out
}

func loadC7(t *testing.T) []docCase {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("..", "envmanifest", "testdata", "c7", "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("no C7 vectors in envmanifest/testdata/c7")
	}
	sort.Strings(files)
	var out []docCase
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var v c7Vector
		if err := json.Unmarshal(raw, &v); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		var data []byte
		switch {
		case v.Input != nil:
			data = []byte(*v.Input)
		case v.InputBase64 != "":
			if data, err = base64.StdEncoding.DecodeString(v.InputBase64); err != nil {
				t.Fatalf("%s: %v", f, err)
			}
		default:
			var b bytes.Buffer
			for _, p := range v.InputTemplate {
				b.WriteString(strings.Repeat(p.Text, max(p.Repeat, 1)))
			}
			data = b.Bytes()
		}
		dir := t.TempDir()
		name := v.ConfigName
		if name == "" {
			name = "devcontainer.json"
		}
		cfg := filepath.Join(dir, name)
		if err := os.WriteFile(cfg, data, 0o644); err != nil {
			t.Fatal(err)
		}
		opts := envmanifest.Options{Path: cfg}
		if v.Lockfile != nil {
			ln := v.LockfileName
			if ln == "" {
				ln = "devcontainer-lock.json"
				if strings.HasPrefix(name, ".") {
					ln = ".devcontainer-lock.json"
				}
			}
			lf := filepath.Join(dir, ln)
			if err := os.WriteFile(lf, []byte(*v.Lockfile), 0o644); err != nil {
				t.Fatal(err)
			}
			if v.LockfileFlag {
				opts.Lockfile = lf
			}
		}
		out = append(out, ingest(t, "c7/"+strings.TrimSuffix(filepath.Base(f), ".json"), data, opts))
	}
	return out
}

// topLevelClass reports the refusal classes decided by a top-level member's
// name alone, which the schema must report at the same pointer.
func topLevelClass(c envmanifest.Class) bool {
	switch c {
	case envmanifest.ClassExecutesOrWidens, envmanifest.ClassChangesWhatRuns, envmanifest.ClassUnknownProperty:
		return true
	}
	return false
}

// typeError reports whether the refusal at r.Pointer is about the JSON type
// of the value there (DESIGN "Normalization": the identity members' types),
// judged from the standardized document.
func typeError(std []byte, r envmanifest.Refusal) bool {
	if r.Class != envmanifest.ClassInvalidValue {
		return false
	}
	v, err := hujson.Parse(slices.Clone(std))
	if err != nil {
		return false
	}
	found := v.Find(r.Pointer)
	if found == nil {
		return false
	}
	kind := found.Value.Kind()
	parts := strings.Split(r.Pointer, "/")
	want := ""
	switch {
	case r.Pointer == "/image" || r.Pointer == "/remoteUser":
		want = `"`
	case r.Pointer == "/features" || r.Pointer == "/containerEnv":
		want = "{"
	case r.Pointer == "/mounts":
		want = "["
	case len(parts) == 3 && parts[1] == "containerEnv":
		want = `"`
	case len(parts) == 3 && parts[1] == "features":
		want = `{"t` // object, string or true
	case len(parts) == 3 && parts[1] == "mounts":
		want = `{"`
	default:
		return false
	}
	return !strings.ContainsRune(want, rune(kind))
}

// skipList is schemas/testdata/skip.json: documents whose schema verdict
// may differ from the ingester's, each with the reason a schema cannot
// express the rule.
func skipList(t *testing.T) map[string]string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", "skip.json"))
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]string
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatalf("testdata/skip.json: %v", err)
	}
	for k, v := range m {
		if strings.TrimSpace(v) == "" {
			t.Errorf("testdata/skip.json: %s has no reason", k)
		}
	}
	return m
}

// inexpressible says, for a refusal class, why a schema cannot check it;
// it suggests reasons for new skip.json entries.
var inexpressible = map[envmanifest.Class]string{
	envmanifest.ClassSyntax:       "syntax: the JSONC rules (BOM, commas, empty input) are below JSON Schema",
	envmanifest.ClassEncoding:     "encoding: invalid UTF-8, lone surrogates and noncharacters are below JSON Schema",
	envmanifest.ClassLimit:        "limit: input size and nesting depth are not JSON Schema keywords",
	envmanifest.ClassNumber:       "number: I-JSON number limits apply to the token as written, which a validator never sees",
	envmanifest.ClassDuplicateKey: "duplicate-key: JSON.parse keeps the last member, so the validator never sees the duplicate",
	envmanifest.ClassConflict:     "conflict: equality of normalized feature ids or cleaned mount targets",
	envmanifest.ClassLockfile:     "lockfile: a second file",
	envmanifest.ClassInvalidValue: "invalid-value: a grammar the schema does not carry (feature ids, path escapes, mount strings, reference rules)",
	envmanifest.ClassMissing:      "missing: a member required inside a string form",
}

// TestStockValidatorAgreesWithIngester validates every corpus file, its
// stripped variant and every C7 vector with ajv against
// devcontainer.schema.json and compares with the ingester:
//
//   - every refusal decided by a top-level name (executes-or-widens,
//     changes-what-runs, unknown-property), missing image, reserved-env and
//     every type error of an identity member is reported by the schema at
//     the same top-level pointer;
//   - the schema never reports a top-level pointer the ingester does not;
//   - accept/refuse agree exactly, except for the documents in
//     testdata/skip.json, each of which must still disagree (no stale
//     entries).
func TestStockValidatorAgreesWithIngester(t *testing.T) {
	validate := ajv(t)
	var docs []docCase
	if sharedAvailable() {
		docs = loadCorpus(t)
	}
	docs = append(docs, loadC7(t)...)
	skips := skipList(t)
	var batch []ajvDoc
	for _, d := range docs {
		if d.std != nil {
			batch = append(batch, ajvDoc{ID: d.id, Schema: FileDevcontainer, Data: d.std})
		}
	}
	res := validate(batch)
	var missing []string
	counts := map[string]int{}
	for _, d := range docs {
		if d.std == nil {
			// hujson cannot parse it: nothing for a validator to see.
			if d.accepted {
				t.Errorf("%s: hujson cannot standardize it but the ingester accepts it", d.id)
			}
			counts["not JSON"]++
			continue
		}
		r := res[d.id]
		got := schemaPointers(r)
		ing := map[string]bool{}
		for _, rf := range d.refusals {
			ing[topLevel(rf.Pointer)] = true
			must := (topLevelClass(rf.Class) && rf.Pointer == topLevel(rf.Pointer)) || rf.Class == envmanifest.ClassReservedEnv ||
				(rf.Class == envmanifest.ClassMissing && rf.Pointer == "/image") || typeError(d.std, rf)
			if must && !slices.Contains(got, topLevel(rf.Pointer)) {
				t.Errorf("%s: the ingester refuses %s (%s) but the schema reports %q", d.id, rf.Pointer, rf.Class, got)
			}
		}
		for _, p := range got {
			if !ing[p] {
				t.Errorf("%s: the schema reports %q, which the ingester does not refuse (ingester: %v; ajv: %+v)", d.id, p, d.refusals, r.Errors)
			}
		}
		reason, skipped := skips[d.id]
		agree := d.accepted == r.Valid
		switch {
		case agree && skipped:
			t.Errorf("testdata/skip.json: %s is listed (%s) but schema and ingester agree; remove it", d.id, reason)
		case !agree && !skipped:
			var why []string
			for _, rf := range d.refusals {
				why = append(why, inexpressible[rf.Class])
			}
			slices.Sort(why)
			missing = append(missing, fmt.Sprintf("  %q: %q,", d.id, strings.Join(slices.Compact(why), "; ")))
			t.Errorf("%s: ingester accepted=%v, schema valid=%v (refusals %v)", d.id, d.accepted, r.Valid, d.refusals)
		case agree:
			counts["agree"]++
		default:
			counts["skipped"]++
		}
		delete(skips, d.id)
	}
	for id := range skips {
		t.Errorf("testdata/skip.json: %s is not a document of this test; remove it", id)
	}
	if len(missing) > 0 {
		t.Logf("entries to review for testdata/skip.json:\n%s", strings.Join(missing, "\n"))
	}
	t.Logf("%d documents: %v", len(docs), counts)
}

// ---- documents this project writes ----

func testKey(name string) ed25519.PrivateKey {
	seed := sha256.Sum256([]byte("sandbox-resume schemas test key " + name))
	return ed25519.NewKeyFromSeed(seed[:])
}

// TestStockValidatorAcceptsOurDocuments: every manifest core and signed
// manifest of an accepted corpus file or C7 vector, every SnapshotRef
// fixture (snapshot/testdata, signed here) and every verdict the decision
// produces validates against its schema.
func TestStockValidatorAcceptsOurDocuments(t *testing.T) {
	validate := ajv(t)
	var batch []ajvDoc
	key := testKey("a")
	add := func(id, schema string, data []byte) {
		batch = append(batch, ajvDoc{ID: id, Schema: schema, Data: data})
	}
	var docs []docCase
	if sharedAvailable() {
		docs = loadCorpus(t)
	}
	docs = append(docs, loadC7(t)...)
	cores := 0
	for _, d := range docs {
		if !d.accepted {
			continue
		}
		cores++
		add(d.id+"#core", FileManifestCore, d.manifest.Canonical)
		signed, err := envelope.Sign(envelope.MemberManifest, d.manifest.Canonical, key)
		if err != nil {
			t.Fatal(err)
		}
		add(d.id+"#signed", FileSignedManifest, signed)
	}
	if cores == 0 {
		t.Fatal("no accepted documents")
	}

	// SnapshotRef fixtures: the inner refs and cores as committed, and each
	// ref signed into a file.
	fixtures, _ := filepath.Glob(filepath.Join("..", "snapshot", "testdata", "*.jcs"))
	refs := 0
	for _, f := range fixtures {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		id := "snapshot/" + filepath.Base(f)
		switch {
		case strings.HasSuffix(f, ".ref.jcs"):
			refs++
			add(id, FileSnapshotRef+"#/$defs/Ref", data)
			doc, err := envmanifest.ParseSigned(append(append([]byte(`{"ref":`), data...), '}'), envelope.MemberRef)
			if err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			signed, err := envelope.Sign(envelope.MemberRef, doc.Canonical, key)
			if err != nil {
				t.Fatal(err)
			}
			add(id+"#signed", FileSnapshotRef, signed)
		case strings.HasSuffix(f, ".core.jcs"):
			add(id, FileManifestCore, data)
		}
	}
	if refs == 0 {
		t.Fatal("no SnapshotRef fixtures in snapshot/testdata")
	}

	verdicts := verdictFixtures(t)
	classes := map[any]bool{}
	for name, v := range verdicts {
		add("verdict/"+name, FileVerdict, v)
		var m map[string]any
		if err := json.Unmarshal(v, &m); err != nil {
			t.Fatal(err)
		}
		classes[m["class"]] = true
	}
	// The fixtures must cover acceptance and several refusal classes.
	if len(classes) < 7 || !classes[nil] {
		t.Fatalf("verdict fixtures cover only the classes %v", classes)
	}

	for id, r := range validate(batch) {
		if !r.Valid {
			t.Errorf("%s does not validate: %s %+v", id, r.ParseError, r.Errors)
		}
	}
	t.Logf("%d documents validated (%d cores, %d refs, %d verdicts)", len(batch), cores, refs, len(verdicts))
}

// TestStockValidatorRefusesBrokenDocuments: the schemas are not `true`:
// each edit of a valid document is refused at the edited pointer.
func TestStockValidatorRefusesBrokenDocuments(t *testing.T) {
	validate := ajv(t)
	ref, err := os.ReadFile(filepath.Join("..", "snapshot", "testdata", "minimal.ref.jcs"))
	if err != nil {
		t.Fatal(err)
	}
	edit := func(doc []byte, f func(m map[string]any)) []byte {
		var m map[string]any
		if err := json.Unmarshal(doc, &m); err != nil {
			t.Fatal(err)
		}
		f(m)
		b, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	verdict := verdictFixtures(t)["accepted"]
	cases := []struct {
		id, schema, pointer string
		data                []byte
	}{
		{"ref-unknown-member", FileSnapshotRef + "#/$defs/Ref", "/extra", edit(ref, func(m map[string]any) { m["extra"] = 1 })},
		{"ref-bad-run", FileSnapshotRef + "#/$defs/Ref", "/run", edit(ref, func(m map[string]any) { m["run"] = "Demo" })},
		{"ref-bad-digest", FileSnapshotRef + "#/$defs/Ref", "/rootfsDiff", edit(ref, func(m map[string]any) { m["rootfsDiff"].(map[string]any)["digest"] = "sha256:ABC" })},
		{"ref-no-host", FileSnapshotRef + "#/$defs/Ref", "/host", edit(ref, func(m map[string]any) { delete(m, "host") })},
		{"ref-bad-created", FileSnapshotRef + "#/$defs/Ref", "/created", edit(ref, func(m map[string]any) { m["created"] = "yesterday" })},
		{"verdict-class-exit", FileVerdict, "/exitCode", edit(verdict, func(m map[string]any) { m["exitCode"] = 3 })},
		{"verdict-nine-checks", FileVerdict, "/checks", edit(verdict, func(m map[string]any) { m["checks"] = m["checks"].([]any)[:9] })},
		{"core-null-env", FileManifestCore, "/containerEnv", []byte(`{"schema":"sandbox.env-manifest/1","image":"docker.io/library/busybox:1","containerEnv":null}`)},
		{"dev-privileged-false", FileDevcontainer, "/privileged", []byte(`{"image":"busybox","privileged":false}`)},
		{"dev-gpu", FileDevcontainer, "/hostRequirements", []byte(`{"image":"busybox","hostRequirements":{"gpu":"optional"}}`)},
		{"dev-reserved-any-case", FileDevcontainer, "/containerEnv", []byte(`{"image":"busybox","containerEnv":{"ld_Preload":"x"}}`)},
		{"dev-case-variant", FileDevcontainer, "/Image", []byte(`{"image":"busybox","Image":"busybox"}`)},
	}
	var batch []ajvDoc
	for _, c := range cases {
		batch = append(batch, ajvDoc{ID: c.id, Schema: c.schema, Data: c.data})
	}
	res := validate(batch)
	for _, c := range cases {
		r := res[c.id]
		if r.Valid {
			t.Errorf("%s: valid, want refused at %s", c.id, c.pointer)
			continue
		}
		if got := schemaPointers(r); !slices.Contains(got, c.pointer) {
			t.Errorf("%s: refused at %v, want %s", c.id, got, c.pointer)
		}
	}
}

// sharedAvailable reports whether the corpus parts can run: the shared
// folder is there, or CI=true (where loadCorpus fails when it is missing).
// Without it the C7 parts still run.
func sharedAvailable() bool {
	if os.Getenv("SANDBOX_RESUME_SHARED") != "" || os.Getenv("CI") != "" {
		return true
	}
	fi, err := os.Stat(filepath.Join("..", "..", "shared", "corpus", "devcontainer"))
	return err == nil && fi.IsDir()
}

// verdictFixtures runs resume.Decide against the in-memory fake for one
// accepted run and one run per refusal it can produce without a daemon,
// and returns each verdict's JSON.
func verdictFixtures(t *testing.T) map[string][]byte {
	t.Helper()
	const image = "docker.io/library/busybox:1"
	host := snapshot.Host{ID: "11111111-2222-3333-4444-555555555555", IDSource: snapshot.IDSourceIntrospection,
		ContainerdVersion: "2.4.2", Snapshotter: "overlayfs", Platform: "linux/amd64"}
	config := `{"image": "busybox:1", "containerEnv": {"LANG": "C.UTF-8"}, "features": {"ghcr.io/devcontainers/features/node:1": "20"},
		"mounts": [{"type": "volume", "source": "cache", "target": "/cache"}], "remoteUser": "vscode"}`
	key := testKey("verdict")
	trust := envelope.NewKeyRing(key.Public().(ed25519.PublicKey))

	type setup struct {
		offered   string
		trust     *envelope.KeyRing
		refFile   []byte
		noDiff    bool
		noImage   bool
		otherHost bool
		label     string // the image's devcontainer.metadata label, when not ""
	}
	run := func(s setup) []byte {
		facts, err := fake.NewFacts(host)
		if err != nil {
			t.Fatal(err)
		}
		dir := t.TempDir()
		cfgPath := filepath.Join(dir, "devcontainer.json")
		layer := facts.PutBlob([]byte("base layer"))
		img := ocispec.Image{Platform: ocispec.Platform{OS: "linux", Architecture: "amd64"},
			RootFS: ocispec.RootFS{Type: "layers", DiffIDs: []digest.Digest{digest.FromString("diffid")}}}
		if s.label != "" {
			img.Config.Labels = map[string]string{envmanifest.ImageMetadataLabel: s.label}
		}
		cfg, _ := json.Marshal(img)
		cd := facts.PutBlob(cfg)
		mb, _ := json.Marshal(ocispec.Manifest{Versioned: specs.Versioned{SchemaVersion: 2}, MediaType: ocispec.MediaTypeImageManifest,
			Config: ocispec.Descriptor{MediaType: ocispec.MediaTypeImageConfig, Digest: cd, Size: int64(len(cfg))},
			Layers: []ocispec.Descriptor{{MediaType: ocispec.MediaTypeImageLayer, Digest: layer, Size: int64(len("base layer"))}}})
		md := facts.PutBlob(mb)
		desc := ocispec.Descriptor{MediaType: ocispec.MediaTypeImageManifest, Digest: md, Size: int64(len(mb))}
		if err := facts.SetImage(image, desc); err != nil {
			t.Fatal(err)
		}
		m, err := envmanifest.Ingest([]byte(config), envmanifest.Options{Path: cfgPath})
		if err != nil {
			t.Fatal(err)
		}
		base, err := facts.ResolveImage(context.Background(), image)
		if err != nil {
			t.Fatal(err)
		}
		diff := []byte("zstd rootfs diff")
		diffDigest := digest.FromBytes(diff)
		if !s.noDiff {
			diffDigest = facts.PutBlob(diff)
		}
		recHost := host
		if s.otherHost {
			recHost.ID = "99999999-2222-3333-4444-555555555555"
		}
		ref := snapshot.Ref{Schema: snapshot.RefSchema, Run: "demo-1", Manifest: m.Address, Core: m.Core, Pinned: m.Core.IsPinned(),
			Policy: []string{}, Host: recHost, Base: base,
			RootfsDiff: snapshot.Diff{MediaType: ocispec.MediaTypeImageLayerZstd, Digest: diffDigest, Size: int64(len(diff)),
				DiffID: digest.FromString("uncompressed"), UncompressedSize: 4096},
			Created: "2026-11-30T17:00:00Z"}
		refFile := s.refFile
		if refFile == nil {
			refFile, err = snapshot.SignRef(&ref, key)
			if err != nil {
				t.Fatal(err)
			}
		}
		if s.noImage {
			facts, err = fake.NewFacts(host)
			if err != nil {
				t.Fatal(err)
			}
		}
		offered := config
		if s.offered != "" {
			offered = s.offered
		}
		tr := trust
		if s.trust != nil {
			tr = s.trust
		}
		v := resume.Decide(context.Background(), facts, fake.NewClaims(), resume.Request{
			RefFile: refFile, RefSource: "ref.json", Config: []byte(offered), ConfigPath: cfgPath, Trust: tr})
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	other := testKey("other")
	return map[string][]byte{
		"accepted":          run(setup{}),
		"bad-input-ref":     run(setup{refFile: []byte(`{"ref": 1}`)}),
		"untrusted":         run(setup{trust: envelope.NewKeyRing(other.Public().(ed25519.PublicKey))}),
		"offered-refused":   run(setup{offered: `{"image": "busybox:1", "postCreateCommand": "make"}`}),
		"manifest-mismatch": run(setup{offered: `{"image": "busybox:1", "containerEnv": {"LANG": "C"}, "remoteUser": "root"}`}),
		"cross-host":        run(setup{otherHost: true}),
		"image-unresolved":  run(setup{noImage: true}),
		"snapshot-missing":  run(setup{noDiff: true}),
		"image-metadata":    run(setup{label: `[{"id":"ghcr.io/devcontainers/features/node:1"},{"postCreateCommand":"npm ci"}]`}),
	}
}
