// Package depcheck checks the import rules of docs/design.md "Layout"
// over the package graph `go list -deps` reports: the dependency
// direction between the packages of sandbox-resume (items 1–8), what the
// deciding packages may never reach (the containerd client module, etcd,
// bbolt, cobra), what adapters may not import, and that nothing outside
// test/ imports test/. Its test runs the check on this module as it is,
// and with forbidden imports planted through go list's -overlay.
package depcheck

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"sort"
	"strings"
)

// Module is the module path of sandbox-resume.
const Module = "github.com/sandbox-resume/sandbox-resume"

// Graph maps the import path of every package `go list -deps` reported
// (the module's and their dependencies, standard library included) to its
// direct imports (non-test files of the build).
type Graph map[string][]string

// Load runs `go list -deps -json` on patterns in the module directory dir
// (with -overlay when overlay is not "", a file in the format `go help
// build` describes) and returns the import graph. Errors name the command
// and carry its output.
func Load(dir, overlay string, patterns ...string) (Graph, error) {
	args := []string{"list", "-deps", "-json=ImportPath,Imports,Error"}
	if overlay != "" {
		args = append(args, "-overlay", overlay)
	}
	args = append(args, patterns...)
	cmd := exec.Command("go", args...)
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go %s in %s: %w\n%s", strings.Join(args, " "), dir, err, stderr.Bytes())
	}
	g := Graph{}
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p struct {
			ImportPath string
			Imports    []string
			Error      *struct{ Err string }
		}
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			return nil, fmt.Errorf("go list output: %w", err)
		}
		if p.Error != nil {
			return nil, fmt.Errorf("go list: package %s: %s", p.ImportPath, p.Error.Err)
		}
		g[p.ImportPath] = p.Imports
	}
	return g, nil
}

// Kind is the role of a package of the module in the layout.
type Kind int

// The kinds of package.
const (
	// Library: a package of items 1–6 — a deciding package.
	Library Kind = iota
	// Adapter: runtime/containerd, ledger/bolt, ledger/etcd (item 7).
	Adapter
	// Command: cmd/sandbox-resume (item 8), and the programs under
	// examples/ and bench/, which the layout does not list: they may
	// import anything but test/.
	Command
	// Test: code under test/, which may import anything.
	Test
)

// Place is where a package stands in the layout: its item (docs/design.md
// "Layout", dependency direction 1–8), its family (packages of one item
// that may import each other: a package with its fake and its conformance
// suite) and its kind.
type Place struct {
	Item   int
	Family string
	Kind   Kind
}

// Layout places the packages of the module, by path relative to Module; a
// package takes the place of its longest listed prefix (so ledger/bolt's
// own subpackages are ledger/bolt). The ledger packages are placed before
// they exist so that the rules hold when they appear.
var Layout = map[string]Place{
	"internal/strictjson": {1, "internal/strictjson", Library},
	"internal/exitcode":   {1, "internal/exitcode", Library},
	"internal/atomicfile": {1, "internal/atomicfile", Library},
	// inputfile: the one bounded reader of input files (docs/design.md
	// "Hardening", "Bounded reads").
	"internal/inputfile":  {1, "internal/inputfile", Library},
	"internal/faultpoint": {1, "internal/faultpoint", Library},
	// testimage builds OCI images in memory for fakes, suites and the
	// harness; it imports nothing of ours.
	"internal/testimage": {1, "internal/testimage", Library},
	// testenv decides skip or fail for a missing prerequisite and gives
	// the random trials their seed; tests and conformance suites import it.
	"internal/testenv":  {1, "internal/testenv", Library},
	"internal/depcheck": {1, "internal/depcheck", Library},

	// envelope: strictjson and JCS (and the atomic writer, for key files).
	"envelope":    {2, "envelope", Library},
	"envmanifest": {3, "envmanifest", Library},

	"snapshot":      {4, "snapshot", Library},
	"snapshot/fake": {4, "snapshot", Library},

	"ledger":            {5, "ledger", Library},
	"ledger/fake":       {5, "ledger", Library},
	"ledger/ledgertest": {5, "ledger", Library},

	// runspec and envmanifest/adopt (docs/design.md "Layout": after host
	// and ledger, before suspend, resume and migrate): placed at item 6,
	// so they import only items 1–5 and never resume, suspend or migrate;
	// resume imports runspec through extra.
	"runspec":           {6, "runspec", Library},
	"envmanifest/adopt": {6, "envmanifest/adopt", Library},

	"migrate":                 {6, "migrate", Library},
	"migrate/fake":            {6, "migrate", Library},
	"snapshot/suspend":        {6, "suspend", Library},
	"snapshot/capturertest":   {6, "suspend", Library}, // the Capturer suite runs suspend
	"resume":                  {6, "resume", Library},
	"resume/fake":             {6, "resume", Library},
	"resume/facttest":         {6, "resume", Library},
	"resume/materializertest": {6, "resume", Library},
	// schemas: items 1–4 and, for the verdict's schema, resume's types
	// (docs/design.md lists items 1–4 only; the verdict schema is
	// generated from resume.Verdict).
	"schemas": {6, "schemas", Library},

	"runtime/containerd": {7, "runtime/containerd", Adapter},
	"ledger/bolt":        {7, "ledger/bolt", Adapter},
	"ledger/etcd":        {7, "ledger/etcd", Adapter},

	"cmd":      {8, "cmd", Command},
	"examples": {8, "examples", Command},
	"bench":    {8, "bench", Command},
	"test":     {9, "test", Test},
}

// extra lists what a package may import beyond earlier items and its own
// family: adapters import the packages whose seams they implement, schemas
// imports resume for the verdict's types and migrate for the handoff
// statement's, resume imports runspec (the spec
// policy check 10 runs).
var extra = map[string][]string{
	"runtime/containerd": {"resume", "migrate"},
	"ledger/bolt":        {"resume", "migrate"},
	"ledger/etcd":        {"resume", "migrate"},
	"schemas":            {"resume", "migrate"},
	"resume":             {"runspec"},
}

// Forbidden are the module paths (with everything under them) that no
// deciding package may reach, even through another package.
var Forbidden = []string{
	"github.com/containerd/containerd/v2",
	"go.etcd.io/etcd",
	"go.etcd.io/bbolt",
	"github.com/spf13/cobra",
}

// Violation is one import the rules refuse: Package imports (or, for the
// deciding-package rule, reaches) Import; Rule says which rule, in
// docs/design.md's words.
type Violation struct {
	Package string
	Import  string
	Rule    string
}

// String renders "<package> imports <import>: <rule>", paths relative to
// Module.
func (v Violation) String() string {
	return fmt.Sprintf("%s imports %s: %s", rel(v.Package), rel(v.Import), v.Rule)
}

func rel(p string) string {
	if p == Module {
		return "."
	}
	return strings.TrimPrefix(p, Module+"/")
}

// placeOf returns the place of a package of the module (path relative to
// Module) by its longest listed prefix, and whether there is one.
func placeOf(p string) (Place, string, bool) {
	for q := p; ; {
		if pl, ok := Layout[q]; ok {
			return pl, q, true
		}
		i := strings.LastIndex(q, "/")
		if i < 0 {
			return Place{}, "", false
		}
		q = q[:i]
	}
}

func within(path, prefix string) bool {
	return path == prefix || strings.HasPrefix(path, prefix+"/")
}

// Check applies the rules of docs/design.md "Layout" to the packages of
// the module in g and returns every violation, sorted:
//
//   - every package of the module has a place in Layout;
//   - a package imports only packages of earlier items, of its own family,
//     and those extra names for it (adapters: the seams they implement,
//     resume and migrate), so items 1 import nothing of ours and migrate,
//     snapshot/suspend and resume never import one another;
//   - adapters never import snapshot/suspend, cmd, each other or test/;
//   - nothing outside test/ imports anything under test/;
//   - the deciding packages (every library: all but adapters, commands and
//     test/; fakes and conformance suites included) never reach Forbidden,
//     directly or through another package.
func Check(g Graph) []Violation {
	var vs []Violation
	for pkg, imports := range g {
		if !within(pkg, Module) {
			continue
		}
		p := rel(pkg)
		place, key, ok := placeOf(p)
		if !ok {
			vs = append(vs, Violation{pkg, pkg, "the package has no place in docs/design.md \"Layout\" (add it to depcheck.Layout)"})
			continue
		}
		for _, imp := range imports {
			if !within(imp, Module) {
				continue
			}
			q := rel(imp)
			if rule := refuse(p, key, place, q); rule != "" {
				vs = append(vs, Violation{pkg, imp, rule})
			}
		}
		if place.Kind == Library {
			for _, dep := range reach(g, pkg) {
				for _, f := range Forbidden {
					if within(dep, f) {
						vs = append(vs, Violation{pkg, dep, "a deciding package never reaches " + f})
					}
				}
			}
		}
	}
	sort.Slice(vs, func(i, j int) bool {
		if vs[i].Package != vs[j].Package {
			return vs[i].Package < vs[j].Package
		}
		return vs[i].Import < vs[j].Import
	})
	return vs
}

// refuse returns the rule a direct import of q by p (placed at key, place)
// breaks, or "".
func refuse(p, key string, place Place, q string) string {
	if within(q, "test") && place.Kind != Test {
		return "nothing outside test/ imports test/"
	}
	if place.Kind == Test || place.Kind == Command {
		return ""
	}
	qplace, _, ok := placeOf(q)
	if !ok {
		return "" // reported for q itself
	}
	if place.Kind == Adapter {
		switch {
		case qplace.Kind == Adapter && qplace.Family != place.Family:
			return "adapters never import each other"
		case qplace.Kind == Command:
			return "adapters never import cmd"
		case within(q, "snapshot/suspend"):
			return "adapters never import snapshot/suspend"
		}
	}
	if place.Item == 1 {
		return "items 1 (internal/...) import nothing of ours"
	}
	if qplace.Family == place.Family {
		return ""
	}
	for _, e := range extra[key] {
		if q == e {
			return ""
		}
	}
	if qplace.Kind == Library && qplace.Item < place.Item {
		return ""
	}
	if qplace.Item == 6 && place.Item == 6 {
		return "migrate, snapshot/suspend and resume never import one another (item 6)"
	}
	return fmt.Sprintf("a package of item %d imports only packages of earlier items and its own family (%s is item %d)", place.Item, q, qplace.Item)
}

// reach returns every package pkg depends on, directly or not.
func reach(g Graph, pkg string) []string {
	seen := map[string]bool{}
	var out []string
	var walk func(string)
	walk = func(p string) {
		for _, q := range g[p] {
			if !seen[q] {
				seen[q] = true
				out = append(out, q)
				walk(q)
			}
		}
	}
	walk(pkg)
	sort.Strings(out)
	return out
}
