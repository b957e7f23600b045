// Package depcheck checks the import rules of docs/design.md "Layout"
// over the package graph `go list -deps` reports: the dependency
// direction between the packages of sandbox-resume (items 1–9), what the
// deciding packages may never reach (the containerd client module, etcd,
// bbolt, cobra, oras, grpc, zap), what adapters may not import, that
// fakes, suites and the testkit stay in tests and examples, that the
// binary links none of them and no "testing", and that nothing outside
// test/ imports test/; and (CheckExported) that exported signatures of
// the non-internal packages carry no internal/ types. Its test runs the
// checks on this module as it is, and with forbidden imports and exported
// identifiers planted (through go list's -overlay, or beside the sources).
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
	// Library: a package of items 1–7 — a deciding package.
	Library Kind = iota
	// Adapter: runtime/containerd, ledger/bolt, ledger/etcd (item 8).
	Adapter
	// Command: cmd/sandbox-resume (item 9), and the programs under
	// examples/ and bench/, which the layout does not list: they may
	// import anything but test/.
	Command
	// Test: code under test/, which may import anything.
	Test
)

// Place is where a package stands in the layout: its item (docs/design.md
// "Layout", dependency direction 1–9), its family (packages of one item
// that may import each other: a package with its fake and its conformance
// suite) and its kind.
type Place struct {
	Item   int
	Family string
	Kind   Kind
}

// Layout places the packages of the module, by path relative to Module; a
// package takes the place of its longest listed prefix (so ledger/bolt's
// own subpackages are ledger/bolt, suspend/suspendtest is suspend's).
// Packages the layout names before they exist (errdef, runspec,
// envmanifest/adopt) are placed so that the rules hold when they appear.
var Layout = map[string]Place{
	// 1: machinery and errdef.
	"internal/strictjson": {1, "internal/strictjson", Library},
	"internal/exitcode":   {1, "internal/exitcode", Library},
	"internal/atomicfile": {1, "internal/atomicfile", Library},
	// inputfile: the one bounded reader of input files (docs/design.md
	// "Hardening", "Bounded reads").
	"internal/inputfile":  {1, "internal/inputfile", Library},
	"internal/faultpoint": {1, "internal/faultpoint", Library},
	"internal/procfs":     {1, "internal/procfs", Library},
	"internal/depcheck":   {1, "internal/depcheck", Library},
	"errdef":              {1, "errdef", Library},
	// The testkit (test support only, TestSupport): testimage builds OCI
	// images in memory for the in-memory host, the suites and the
	// harness; testenv decides skip or fail for a missing prerequisite
	// and gives the random trials their seed. They import nothing of
	// ours.
	"internal/testimage": {1, "internal/testimage", Library},
	"internal/testenv":   {1, "internal/testenv", Library},
	"internal/testkit":   {1, "internal/testkit", Library},

	"envelope":    {2, "envelope", Library},
	"envmanifest": {3, "envmanifest", Library},
	"snapshot":    {4, "snapshot", Library},

	// 5: the host seam and the run ledger, each with its in-memory
	// implementation and its suite.
	"host":   {5, "host", Library},
	"ledger": {5, "ledger", Library},

	"runspec":           {6, "runspec", Library},
	"envmanifest/adopt": {6, "envmanifest/adopt", Library},

	"suspend": {7, "suspend", Library},
	"resume":  {7, "resume", Library},
	"migrate": {7, "migrate", Library},
	// schemas: the verdict's schema is generated from resume.Verdict
	// (extra).
	"schemas": {7, "schemas", Library},

	"runtime/containerd": {8, "runtime/containerd", Adapter},
	"ledger/bolt":        {8, "ledger/bolt", Adapter},
	"ledger/etcd":        {8, "ledger/etcd", Adapter},

	"cmd":      {9, "cmd", Command},
	"examples": {9, "examples", Command},
	"bench":    {9, "bench", Command},
	"test":     {10, "test", Test},
}

// extra lists what a package may import beyond earlier items and its own
// family: schemas imports resume for the verdict's types and migrate for
// the handoff statement's.
var extra = map[string][]string{
	"schemas": {"resume", "migrate"},
}

// TestSupport reports whether the package p (path relative to Module) is
// test support: a fake (…/fake), a conformance suite (a last element
// ending in "test": ledgertest, hosttest, suspendtest), the in-memory host
// (host/memhost) or the testkit (internal/testkit, internal/testimage,
// internal/testenv). Only tests and examples import them (docs/design.md
// "Layout").
func TestSupport(p string) bool {
	last := p[strings.LastIndex(p, "/")+1:]
	switch {
	case last == "fake", strings.HasSuffix(last, "test"), within(p, "host/memhost"):
		return true
	case within(p, "internal/testkit"), within(p, "internal/testimage"), within(p, "internal/testenv"):
		return true
	}
	return false
}

// Binary is the program whose dependencies may hold no test support and
// no "testing" (docs/design.md "Layout": the binary links none of them).
const Binary = "cmd/sandbox-resume"

// Forbidden are the module paths (with everything under them) that no
// deciding package may reach, even through another package.
var Forbidden = []string{
	"github.com/containerd/containerd/v2",
	"go.etcd.io/etcd",
	"go.etcd.io/bbolt",
	"github.com/spf13/cobra",
	"oras.land/oras-go",
	"google.golang.org/grpc",
	"go.uber.org/zap",
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
//     and those extra names for it (schemas: resume), so items 1 import
//     nothing of ours and suspend, resume and migrate never import one
//     another;
//   - adapters import items 1–5 only (host, snapshot, ledger types and
//     machinery: never runspec, suspend, resume, migrate or cmd), and
//     never each other or test/;
//   - nothing outside test/ imports anything under test/;
//   - test support (TestSupport: fakes, suites, memhost, the testkit) is
//     imported only by tests (test files, which go list does not report,
//     and test/), examples and other test support;
//   - the binary (Binary) reaches no test support and no "testing";
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
		if p == Binary {
			for _, dep := range reach(g, pkg) {
				if dep == "testing" || (within(dep, Module) && TestSupport(rel(dep))) {
					vs = append(vs, Violation{pkg, dep, "the binary links no test support and no testing"})
				}
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
	if place.Kind == Test {
		return ""
	}
	if TestSupport(q) && !TestSupport(p) && !within(p, "examples") {
		return "fakes, suites, memhost and the testkit are imported only by tests and examples"
	}
	if place.Kind == Command {
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
		case qplace.Item > 5:
			return "adapters import items 1–5 only (never runspec, suspend, resume or migrate)"
		}
	}
	if place.Item == 1 {
		return "items 1 (internal/..., errdef) import nothing of ours"
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
	if qplace.Item == 7 && place.Item == 7 {
		return "suspend, resume and migrate never import one another (item 7)"
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
