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
	"strconv"
	"strings"
	"testing"

	"github.com/opencontainers/go-digest"
	specs "github.com/opencontainers/image-spec/specs-go"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
	"github.com/tailscale/hujson"
	"golang.org/x/text/language"
	"golang.org/x/text/message"

	"github.com/sandbox-resume/sandbox-resume/envelope"
	"github.com/sandbox-resume/sandbox-resume/envmanifest"
	"github.com/sandbox-resume/sandbox-resume/host/memhost"
	"github.com/sandbox-resume/sandbox-resume/internal/testenv"
	"github.com/sandbox-resume/sandbox-resume/ledger"
	lfake "github.com/sandbox-resume/sandbox-resume/ledger/fake"
	"github.com/sandbox-resume/sandbox-resume/resume"
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

// ---- the in-process validator ----

// inProcess returns a function that validates a batch of documents against
// the committed schemas with santhosh-tekuri/jsonschema/v6 (Draft 2020-12,
// formats asserted, as ajv-formats does), reporting like ajv: every error
// that is not a reference or a group, with its instance path, keyword and,
// for additionalProperties and required, the member (one error per
// member). A schema that does not compile fails the test.
func inProcess(t *testing.T) func(docs []ajvDoc) map[string]ajvResult {
	t.Helper()
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.AssertFormat()
	files, err := filepath.Glob("*.schema.json")
	if err != nil || len(files) == 0 {
		t.Fatalf("no schemas: %v", err)
	}
	ids := map[string]string{}
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		id, _ := doc.(map[string]any)["$id"].(string)
		if id == "" {
			t.Fatalf("%s has no $id", f)
		}
		if err := c.AddResource(id, doc); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		ids[f] = id
	}
	compiled := map[string]*jsonschema.Schema{}
	schema := func(name string) *jsonschema.Schema {
		if sch, ok := compiled[name]; ok {
			return sch
		}
		file, frag, _ := strings.Cut(name, "#")
		id, ok := ids[file]
		if !ok {
			t.Fatalf("no schema %s", file)
		}
		if frag != "" {
			id += "#" + frag
		}
		sch, err := c.Compile(id)
		if err != nil {
			t.Fatalf("compile %s: %v", name, err)
		}
		compiled[name] = sch
		return sch
	}
	return func(docs []ajvDoc) map[string]ajvResult {
		out := make(map[string]ajvResult, len(docs))
		for _, d := range docs {
			sch := schema(d.Schema)
			inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(d.Data))
			if err != nil {
				out[d.ID] = ajvResult{ID: d.ID, ParseError: err.Error()}
				continue
			}
			r := ajvResult{ID: d.ID, Valid: true}
			if err := sch.Validate(inst); err != nil {
				var ve *jsonschema.ValidationError
				if !errors.As(err, &ve) {
					t.Fatalf("%s: %v", d.ID, err)
				}
				r.Valid, r.Errors = false, flattenErrors(inst, ve, nil)
			}
			out[d.ID] = r
		}
		return out
	}
}

// flattenErrors appends the errors of the tree under e, an error of
// validating inst, in ajv's shape. Where ajv places an error differently,
// it follows ajv: the errors of a property name are at the object
// (jsonschema/v6 places them in the name, at ""). ajv's "if" errors (a
// failed then or else, always with the branch's own errors) have no
// counterpart: see withoutIf.
func flattenErrors(inst any, e *jsonschema.ValidationError, out []ajvError) []ajvError {
	return flattenAt(inst, e, nil, out)
}

// flattenAt is flattenErrors with the instance path of every error forced
// to *at when at is not nil.
func flattenAt(inst any, e *jsonschema.ValidationError, at *string, out []ajvError) []ajvError {
	loc := e.InstanceLocation
	if k, ok := e.ErrorKind.(*kind.PropertyNames); ok {
		loc = propertyNamesLocation(inst, e, k.Property)
	}
	path := ""
	for _, tok := range loc {
		path += "/" + escapeToken(tok)
	}
	if at != nil {
		path = *at
	}
	switch k := e.ErrorKind.(type) {
	case *kind.PropertyNames:
		out = append(out, ajvError{InstancePath: path, Keyword: "propertyNames", Params: map[string]any{"propertyName": k.Property}})
		for _, c := range e.Causes {
			out = flattenAt(inst, c, &path, out)
		}
		return out
	case *kind.AdditionalProperties:
		for _, p := range k.Properties {
			out = append(out, ajvError{InstancePath: path, Keyword: "additionalProperties", Params: map[string]any{"additionalProperty": p}})
		}
	case *kind.Required:
		for _, m := range k.Missing {
			out = append(out, ajvError{InstancePath: path, Keyword: "required", Params: map[string]any{"missingProperty": m}})
		}
	case *kind.Group, *kind.Schema, *kind.Reference, *kind.AllOf:
		// containers of the errors below, which ajv does not report
	default:
		kw := "false schema"
		if p := e.ErrorKind.KeywordPath(); len(p) > 0 {
			kw = p[len(p)-1]
		}
		out = append(out, ajvError{InstancePath: path, Keyword: kw, Message: e.ErrorKind.LocalizedString(message.NewPrinter(language.English))})
	}
	for _, c := range e.Causes {
		out = flattenAt(inst, c, at, out)
	}
	return out
}

// propertyNamesLocation returns the location of the object whose member
// name a propertyNames error e is about. jsonschema/v6.0.3 stores the
// validator's location slice in that error without a copy, so a sibling
// validated later can overwrite its elements, though not its length
// (santhosh-tekuri/jsonschema#269, open; seen here as "/image" for an
// error in "/containerEnv"). So: the one object in inst at that depth
// that has a member named name, under the member the schema names
// (".../properties/<member>/propertyNames"); else the stored location.
func propertyNamesLocation(inst any, e *jsonschema.ValidationError, name string) []string {
	under := ""
	if toks := strings.Split(e.SchemaURL, "/"); len(toks) >= 3 && toks[len(toks)-3] == "properties" {
		under = toks[len(toks)-2]
	}
	var found [][]string
	var walk func(v any, loc []string)
	walk = func(v any, loc []string) {
		if len(loc) == len(e.InstanceLocation) {
			if m, ok := v.(map[string]any); ok && (under == "" || (len(loc) > 0 && loc[len(loc)-1] == under)) {
				if _, has := m[name]; has {
					found = append(found, slices.Clone(loc))
				}
			}
			return
		}
		switch x := v.(type) {
		case map[string]any:
			for k, c := range x {
				walk(c, append(loc, k))
			}
		case []any:
			for i, c := range x {
				walk(c, append(loc, strconv.Itoa(i)))
			}
		}
	}
	walk(inst, nil)
	if len(found) == 1 {
		return found[0]
	}
	return e.InstanceLocation
}

// TestSchemasCompileInProcess: every committed schema, and every $defs
// entry of it, compiles with jsonschema/v6 (which validates each against
// the Draft 2020-12 meta-schema).
func TestSchemasCompileInProcess(t *testing.T) {
	validate := inProcess(t)
	files, _ := filepath.Glob("*.schema.json")
	var batch []ajvDoc
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var doc struct {
			Defs map[string]json.RawMessage `json:"$defs"`
		}
		if err := json.Unmarshal(raw, &doc); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		batch = append(batch, ajvDoc{ID: f, Schema: f, Data: []byte("null")})
		for name := range doc.Defs {
			batch = append(batch, ajvDoc{ID: f + "#" + name, Schema: f + "#/$defs/" + name, Data: []byte("null")})
		}
	}
	if res := validate(batch); len(res) != len(batch) || len(files) == 0 {
		t.Fatalf("%d results for %d schemas and definitions of %d files", len(res), len(batch), len(files))
	}
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
		testenv.Missing(t, "the stock validator (node, .tools/node_modules/ajv, ajv-formats; make deps installs them): %v", err)
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
	return testenv.Shared(t)
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
// BOM removed (docs/design.md "Reading strictly": BOM), then comments and trailing
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
// of the value there (docs/design.md "Normalization": the identity members' types),
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

// ingesterDocuments returns every corpus file (when shared/ is there), its
// stripped variant and every C7 vector with the ingester's outcome, and
// the batch of those a validator can see (hujson-standardized) against
// devcontainer.schema.json.
func ingesterDocuments(t *testing.T) ([]docCase, []ajvDoc) {
	t.Helper()
	var docs []docCase
	if sharedAvailable() {
		docs = loadCorpus(t)
	}
	docs = append(docs, loadC7(t)...)
	var batch []ajvDoc
	for _, d := range docs {
		if d.std != nil {
			batch = append(batch, ajvDoc{ID: d.id, Schema: FileDevcontainer, Data: d.std})
		}
	}
	return docs, batch
}

// TestSchemaAgreesWithIngester validates every corpus file, its stripped
// variant and every C7 vector in process against devcontainer.schema.json
// and compares with the ingester:
//
//   - every refusal decided by a top-level name (executes-or-widens,
//     changes-what-runs, unknown-property), missing image, reserved-env and
//     every type error of an identity member is reported by the schema at
//     the same top-level pointer;
//   - the schema never reports a top-level pointer the ingester does not;
//   - accept/refuse agree exactly, except for the documents in
//     testdata/skip.json, each of which must still disagree (no stale
//     entries).
func TestSchemaAgreesWithIngester(t *testing.T) {
	docs, batch := ingesterDocuments(t)
	res := inProcess(t)(batch)
	skips := skipList(t)
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

// TestSchemaAcceptsOurDocuments: every manifest core and signed manifest
// of an accepted corpus file or C7 vector, every SnapshotRef fixture
// (snapshot/testdata, signed here) and every verdict the decision produces
// validates in process against its schema.
func TestSchemaAcceptsOurDocuments(t *testing.T) {
	batch := ourDocuments(t)
	for id, r := range inProcess(t)(batch) {
		if !r.Valid {
			t.Errorf("%s does not validate: %s %+v", id, r.ParseError, r.Errors)
		}
	}
}

// ourDocuments returns the documents this project writes, each with the
// schema it must validate against (TestSchemaAcceptsOurDocuments).
func ourDocuments(t *testing.T) []ajvDoc {
	t.Helper()
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
	for _, v := range refVectors(t) {
		if v.Accepted {
			fixtures = append(fixtures, filepath.Join("..", "snapshot", "testdata", v.Dir, v.File))
		}
	}
	for _, dir := range refVectorDirs {
		fixtures = append(fixtures, filepath.Join("..", "snapshot", "testdata", dir, "g1.core.jcs"), filepath.Join("..", "snapshot", "testdata", dir, "g2.core.jcs"))
	}
	refs := 0
	for _, f := range fixtures {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		id := "snapshot/" + strings.TrimPrefix(filepath.ToSlash(f), "../snapshot/testdata/")
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

	t.Logf("%d documents (%d cores, %d refs, %d verdicts)", len(batch), cores, refs, len(verdicts))
	return batch
}

// brokenCase is a valid document edited so that its schema must refuse it
// at pointer ("" for a refused SnapshotRef vector: a oneOf over both ref
// schemas does not say where).
type brokenCase struct {
	id, schema, pointer string
	data                []byte
}

// TestSchemaRefusesBrokenDocuments: the schemas are not `true`: each edit
// of a valid document is refused, in process, at the edited pointer.
func TestSchemaRefusesBrokenDocuments(t *testing.T) {
	cases := brokenDocuments(t)
	var batch []ajvDoc
	for _, c := range cases {
		batch = append(batch, ajvDoc{ID: c.id, Schema: c.schema, Data: c.data})
	}
	res := inProcess(t)(batch)
	for _, c := range cases {
		r := res[c.id]
		if r.Valid {
			t.Errorf("%s: valid, want refused at %s", c.id, c.pointer)
			continue
		}
		if got := schemaPointers(r); c.pointer != "" && !slices.Contains(got, c.pointer) {
			t.Errorf("%s: refused at %v, want %s: %+v", c.id, got, c.pointer, r.Errors)
		}
	}
}

// brokenDocuments returns the edits of TestSchemaRefusesBrokenDocuments.
func brokenDocuments(t *testing.T) []brokenCase {
	t.Helper()
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
	// The refused SnapshotRef vectors (snapshot/testdata/ref2, ref3) are
	// refused by the schema too, but for the rules across members JSON
	// Schema cannot state (marked schemaCannotTell, with why).
	var refused []brokenCase
	for _, v := range refVectors(t) {
		if v.Accepted || v.SchemaCannotTell != "" {
			continue
		}
		data, err := os.ReadFile(filepath.Join("..", "snapshot", "testdata", v.Dir, v.File))
		if err != nil {
			t.Fatal(err)
		}
		refused = append(refused, brokenCase{v.Dir + "-" + v.File, FileSnapshotRef + "#/$defs/Ref", "", data})
	}
	return append(refused, []brokenCase{
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
	}...)
}

// refVector is an entry of snapshot/testdata/ref2/vectors.json or
// ref3/vectors.json (Dir), as far as these tests read it.
type refVector struct {
	Dir              string `json:"-"`
	File             string `json:"file"`
	Accepted         bool   `json:"accepted"`
	SchemaCannotTell string `json:"schemaCannotTell"`
}

// refVectorDirs are the SnapshotRef vector directories under
// snapshot/testdata.
var refVectorDirs = []string{"ref2", "ref3"}

// refVectors reads the SnapshotRef vectors' expectations tables; files
// outside their directory (the /1 golden refs) are left out, the glob has
// them.
func refVectors(t *testing.T) []refVector {
	t.Helper()
	var out []refVector
	for _, dir := range refVectorDirs {
		b, err := os.ReadFile(filepath.Join("..", "snapshot", "testdata", dir, "vectors.json"))
		if err != nil {
			t.Fatal(err)
		}
		var table struct {
			Vectors []refVector `json:"vectors"`
		}
		if err := json.Unmarshal(b, &table); err != nil {
			t.Fatal(err)
		}
		for _, v := range table.Vectors {
			if !strings.HasPrefix(v.File, "../") {
				v.Dir = dir
				out = append(out, v)
			}
		}
	}
	return out
}

// withoutIf drops ajv's "if" errors from r: ajv reports a failed then or
// else both as the branch's errors and as an "if" error at the value that
// has the if; jsonschema/v6 reports the branch's errors only.
func withoutIf(r ajvResult) ajvResult {
	r.Errors = slices.DeleteFunc(slices.Clone(r.Errors), func(e ajvError) bool { return e.Keyword == "if" })
	return r
}

// TestStockValidatorAgreesInProcess is the interoperability check with the
// stock tool: ajv (node; make deps) gives every document of the three
// in-process tests above the same verdict as the in-process validator, at
// the same top-level pointers. It skips without ajv, and fails under
// CI=true.
func TestStockValidatorAgreesInProcess(t *testing.T) {
	stock := ajv(t)
	_, batch := ingesterDocuments(t)
	batch = append(batch, ourDocuments(t)...)
	for _, c := range brokenDocuments(t) {
		batch = append(batch, ajvDoc{ID: "broken/" + c.id, Schema: c.schema, Data: c.data})
	}
	ours, theirs := inProcess(t)(batch), stock(batch)
	for _, d := range batch {
		o, a := ours[d.ID], withoutIf(theirs[d.ID])
		if o.Valid != a.Valid || !slices.Equal(schemaPointers(o), schemaPointers(a)) {
			t.Errorf("%s: in process valid=%v at %q, ajv valid=%v at %q\n  in process: %s %+v\n  ajv: %s %+v",
				d.ID, o.Valid, schemaPointers(o), a.Valid, schemaPointers(a), o.ParseError, o.Errors, a.ParseError, a.Errors)
		}
	}
	t.Logf("%d documents, one verdict", len(batch))
}

// sharedAvailable reports whether the corpus parts can run: the shared
// folder is there, or CI=true (where loadCorpus fails when it is missing).
// Without it the C7 parts still run.
func sharedAvailable() bool { return testenv.HasShared() }

// verdictFixtures runs resume.Decide against the in-memory host for one
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
		spec      string // the offered --spec, "" for none
		label     string // the image's devcontainer.metadata label, when not ""
		noCopy    bool   // no --copy: the hand-signed generation was never recorded by the ledger
		// record puts the run's ledger record in place; ref is the
		// digest of the ref file decided.
		record func(l *lfake.Ledger, ref digest.Digest)
	}
	run := func(s setup) []byte {
		facts := memhost.New(host)
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
		// the namespaces of containerd's default spec: without them the
		// recorded spec shares the host's and is judged (runspec.JudgeRecorded)
		spec := []byte(`{"ociVersion":"1.2.0","linux":{"namespaces":[{"type":"pid"},{"type":"network"},{"type":"ipc"},{"type":"uts"},{"type":"mount"}]},"mounts":[{"destination":"/work","type":"bind","source":"/a","options":["rbind"]}]}`)
		ref := snapshot.Ref{Schema: snapshot.RefSchema, Run: "demo-1", RunUID: "ruid:0123456789abcdef0123456789abcdef", Generation: 1, Manifest: m.Address, Core: m.Core, Pinned: m.Core.IsPinned(),
			Policy: []string{}, Host: recHost, Base: base,
			Layers: []snapshot.Layer{{MediaType: ocispec.MediaTypeImageLayerZstd, Digest: diffDigest, Size: int64(len(diff)),
				DiffID: digest.FromString("uncompressed"), UncompressedSize: 4096}},
			Spec:    &snapshot.Descriptor{MediaType: snapshot.MediaTypeSpec, Digest: facts.PutBlob(spec), Size: int64(len(spec))},
			Runtime: &snapshot.Runtime{Name: "io.containerd.runc.v2"},
			Created: "2026-11-30T17:00:00Z"}
		refFile := s.refFile
		if refFile == nil {
			refFile, err = snapshot.SignRef(&ref, key)
			if err != nil {
				t.Fatal(err)
			}
		}
		if s.noImage {
			facts = memhost.New(host)
		}
		offered := config
		if s.offered != "" {
			offered = s.offered
		}
		tr := trust
		if s.trust != nil {
			tr = s.trust
		}
		l := lfake.New()
		if s.record != nil {
			s.record(l, digest.FromBytes(refFile))
		}
		// The refs are signed here, not suspended through the ledger: a
		// resume of one is a copy (docs/design.md "Exactly once across hosts").
		req := resume.Request{RefFile: refFile, RefSource: "ref.json", Config: []byte(offered), ConfigPath: cfgPath, Trust: tr, Copy: !s.noCopy}
		if s.spec != "" {
			req.Spec, req.SpecSource = []byte(s.spec), "spec.json"
		}
		v := resume.Decide(context.Background(), facts, l, req)
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
		"spec-allowed":      run(setup{spec: `{"ociVersion":"1.2.0","linux":{"namespaces":[{"type":"pid"},{"type":"network"},{"type":"ipc"},{"type":"uts"},{"type":"mount"}]},"mounts":[{"destination":"/work","type":"bind","source":"/tmp","options":["rbind"]}]}`}),
		"spec-drift": run(setup{spec: `{"ociVersion":"1.2.0","process":{"capabilities":{"bounding":["CAP_SYS_ADMIN"]}},"linux":{"namespaces":[{"type":"pid"},{"type":"network"},{"type":"ipc"},{"type":"uts"},{"type":"mount"}]},` +
			`"mounts":[{"destination":"/work","type":"bind","source":"/b","options":["rbind"]}]}`}),
		"spec-bad-input": run(setup{spec: `{"ociVersion": 1}`}),
		"image-metadata": run(setup{label: `[{"id":"ghcr.io/devcontainers/features/node:1"},{"postCreateCommand":"npm ci"}]`}),
		"not-handed-off": run(setup{noCopy: true}),
		"superseded": run(setup{record: func(l *lfake.Ledger, _ digest.Digest) {
			l.Discard(context.Background(), "demo-1", false)
		}}),
		"forked": run(setup{record: func(l *lfake.Ledger, _ digest.Digest) {
			l.Suspended(context.Background(), ledger.SuspendRequest{Run: "demo-1", Generation: 1, Ref: digest.FromString("another ref"),
				Container: ledger.Container{Host: "h", Namespace: "ns", ID: "c"}})
		}}),
		"claim-conflict": run(setup{record: func(l *lfake.Ledger, ref digest.Digest) {
			l.Suspended(context.Background(), ledger.SuspendRequest{Run: "demo-1", Generation: 1, Ref: ref,
				Container: ledger.Container{Host: "h", Namespace: "ns", ID: "c"}, Keep: true})
		}}),
	}
}
