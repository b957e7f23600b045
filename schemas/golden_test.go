package schemas

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/sandbox-resume/sandbox-resume/internal/atomicfile"

	"github.com/sandbox-resume/sandbox-resume/envmanifest"
)

var update = flag.Bool("update", false, "rewrite the committed *.schema.json files from Generate")

// TestSchemasGolden byte-compares every committed schema with the generator
// output; -update rewrites them (temp file, fsync, rename).
func TestSchemasGolden(t *testing.T) {
	files, err := Generate()
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{}
	for _, f := range files {
		want[f.Name] = true
		if *update {
			if err := atomicfile.WriteFile(f.Name, f.Data, 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		got, err := os.ReadFile(f.Name)
		if err != nil {
			t.Errorf("%s: %v (run: go test ./schemas -run TestSchemasGolden -update)", f.Name, err)
			continue
		}
		if !bytes.Equal(got, f.Data) {
			t.Errorf("%s is stale: it differs from the generator output at byte %d (run: go test ./schemas -run TestSchemasGolden -update)", f.Name, firstDiff(got, f.Data))
		}
	}
	// No committed schema without a generator.
	committed, _ := filepath.Glob("*.schema.json")
	for _, c := range committed {
		if !want[c] {
			t.Errorf("%s is committed but not generated; remove it", c)
		}
	}
}

func firstDiff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

// TestGenerateDeterministic generates twice and compares: map iteration
// order must never leak into the bytes.
func TestGenerateDeterministic(t *testing.T) {
	a, err := Generate()
	if err != nil {
		t.Fatal(err)
	}
	for range 5 {
		b, err := Generate()
		if err != nil {
			t.Fatal(err)
		}
		for i := range a {
			if !bytes.Equal(a[i].Data, b[i].Data) {
				t.Fatalf("%s: two runs of Generate differ", a[i].Name)
			}
		}
	}
	for _, f := range a {
		if !bytes.HasSuffix(f.Data, []byte("}\n")) || bytes.HasSuffix(f.Data, []byte("\n\n")) {
			t.Errorf("%s: want exactly one final newline", f.Name)
		}
		// Self-contained: every $ref is local.
		for _, line := range strings.Split(string(f.Data), "\n") {
			if strings.Contains(line, `"$ref"`) && !strings.Contains(line, `"#/$defs/`) {
				t.Errorf("%s: non-local $ref: %s", f.Name, strings.TrimSpace(line))
			}
		}
		var m map[string]any
		if err := json.Unmarshal(f.Data, &m); err != nil {
			t.Fatalf("%s: %v", f.Name, err)
		}
		if m["$schema"] != Dialect {
			t.Errorf("%s: $schema %v", f.Name, m["$schema"])
		}
		checkRefsResolve(t, f.Name, m, m)
	}
}

// checkRefsResolve walks v and fails for a "#/$defs/X" that the document
// does not define.
func checkRefsResolve(t *testing.T, name string, doc map[string]any, v any) {
	t.Helper()
	switch v := v.(type) {
	case map[string]any:
		if ref, ok := v["$ref"].(string); ok {
			defs, _ := doc["$defs"].(map[string]any)
			if _, ok := defs[strings.TrimPrefix(ref, "#/$defs/")]; !ok {
				t.Errorf("%s: $ref %s does not resolve", name, ref)
			}
		}
		for _, x := range v {
			checkRefsResolve(t, name, doc, x)
		}
	case []any:
		for _, x := range v {
			checkRefsResolve(t, name, doc, x)
		}
	}
}

func devSchema(t *testing.T, props []envmanifest.PropertyInfo, reserved []envmanifest.ReservedEnv) map[string]any {
	t.Helper()
	s, err := devcontainerSchema(props, reserved)
	if err != nil {
		t.Fatal(err)
	}
	data, err := Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// TestDevcontainerSchemaFollowsClassTable adds rows to a copy of the class
// table and sees the schema change: the table is the one source.
func TestDevcontainerSchemaFollowsClassTable(t *testing.T) {
	base := envmanifest.Properties()
	reserved := envmanifest.DefaultReservedEnv()
	before := devSchema(t, base, reserved)
	props := func(m map[string]any) map[string]any { return m["properties"].(map[string]any) }
	if _, ok := props(before)["fooCommand"]; ok {
		t.Fatal("fooCommand already in the schema")
	}
	// Every table row is a property of the schema, with the right shape.
	for _, p := range base {
		got, ok := props(before)[p.Name]
		if !ok {
			t.Errorf("%s (class %s) missing from the schema", p.Name, p.Class)
			continue
		}
		refused := p.Class == envmanifest.PropExecutesOrWidens || p.Class == envmanifest.PropChangesWhatRuns
		if (got == false) != refused {
			t.Errorf("%s (class %s): schema %v", p.Name, p.Class, got)
		}
	}
	if len(props(before)) != len(base) {
		t.Errorf("schema has %d properties, table %d", len(props(before)), len(base))
	}

	added := append(slices.Clone(base),
		envmanifest.PropertyInfo{Name: "fooCommand", Class: envmanifest.PropExecutesOrWidens, Note: "test row"},
		envmanifest.PropertyInfo{Name: "fooLabel", Class: envmanifest.PropCosmetic, Note: "test row"},
	)
	after := devSchema(t, added, reserved)
	if got := props(after)["fooCommand"]; got != false {
		t.Errorf("added executes-or-widens row: schema %v, want false", got)
	}
	if got, ok := props(after)["fooLabel"].(map[string]any); !ok || got["$comment"] == nil {
		t.Errorf("added cosmetic row: schema %v, want an allowing schema", props(after)["fooLabel"])
	}
	enum := after["$defs"].(map[string]any)["properties_executes_or_widens"].(map[string]any)["enum"].([]any)
	if !slices.Contains(enum, any("fooCommand")) {
		t.Errorf("class list %v lacks the added row", enum)
	}

	// Reclassifying a row changes it too.
	moved := slices.Clone(base)
	for i := range moved {
		if moved[i].Name == "name" {
			moved[i].Class = envmanifest.PropChangesWhatRuns
		}
	}
	if got := props(devSchema(t, moved, reserved))["name"]; got != false {
		t.Errorf("name reclassified as changes-what-runs: schema %v", got)
	}

	// An identity row without an input shape, or an unknown class, is an error.
	if _, err := devcontainerSchema(append(slices.Clone(base), envmanifest.PropertyInfo{Name: "newIdentity", Class: envmanifest.PropIdentity}), reserved); err == nil {
		t.Error("identity row without an input shape: no error")
	}
	if _, err := devcontainerSchema(append(slices.Clone(base), envmanifest.PropertyInfo{Name: "x", Class: "mystery"}), reserved); err == nil {
		t.Error("unknown class: no error")
	}
}

// TestDevcontainerSchemaFollowsReservedList changes the reserved list and
// sees the containerEnv rule change.
func TestDevcontainerSchemaFollowsReservedList(t *testing.T) {
	s := devSchema(t, envmanifest.Properties(), []envmanifest.ReservedEnv{{Name: "FOO_1", Reason: "test"}})
	got := s["$defs"].(map[string]any)["reserved_any_case"].(map[string]any)["pattern"]
	if got != "^(?:[Ff][Oo][Oo]_1)$" {
		t.Errorf("pattern %v", got)
	}
	none := devSchema(t, envmanifest.Properties(), nil)
	if none["$defs"].(map[string]any)["reserved_any_case"] != false {
		t.Errorf("empty policy: %v", none["$defs"].(map[string]any)["reserved_any_case"])
	}
}
