package depcheck

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// Source is one package's non-test Go files: its import path and each
// file's name and bytes.
type Source struct {
	ImportPath string
	Files      map[string][]byte
}

// LoadSources reads the non-test Go files of the packages of the module
// under dir that CheckExported applies to: every package that is not
// internal (a path with an "internal" element), not a command (package
// main), not test support (TestSupport: only tests, which may use
// internal/ types, import it) and not under test/. Errors name the command
// or the file.
func LoadSources(dir string) ([]Source, error) {
	cmd := exec.Command("go", "list", "-json=ImportPath,Dir,GoFiles,Name", "./...")
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go list in %s: %w\n%s", dir, err, stderr.Bytes())
	}
	var srcs []Source
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p struct {
			ImportPath, Dir, Name string
			GoFiles               []string
		}
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			return nil, fmt.Errorf("go list output: %w", err)
		}
		if !exportRuled(p.ImportPath, p.Name) {
			continue
		}
		s := Source{ImportPath: p.ImportPath, Files: map[string][]byte{}}
		for _, f := range p.GoFiles {
			b, err := os.ReadFile(filepath.Join(p.Dir, f))
			if err != nil {
				return nil, err
			}
			s.Files[f] = b
		}
		srcs = append(srcs, s)
	}
	return srcs, nil
}

// exportRuled reports whether the rule "exported signatures carry no
// internal/ types" applies to the package.
func exportRuled(importPath, name string) bool {
	if !within(importPath, Module) || name == "main" {
		return false
	}
	p := rel(importPath)
	return !isInternal(p) && !within(p, "test") && !TestSupport(p)
}

// ExportedExceptions are the exported identifiers that still carry an
// internal/ type, by package (relative to Module) and identifier, each
// left for a follow-up of issue 26 item 3 (they need an exported
// replacement for internal/strictjson's Node or internal/exitcode's
// Class). The check refuses any other, and its test fails when one of
// these no longer does (the list only shrinks).
var ExportedExceptions = map[string]string{
	"envelope Document.Inner":            "the inner object as decoded (*strictjson.Node): snapshot and envmanifest read the ref and the core from it",
	"envmanifest ParseCore":              "takes the core's *strictjson.Node (from envelope.Document.Inner)",
	"envmanifest ParseCoreCanonical":     "takes the core's *strictjson.Node",
	"envmanifest ParseCoreWithCanonical": "takes the core's *strictjson.Node",
	"resume Class":                       "an alias of exitcode.Class: the verdict's class and its exit code",
}

// ExceptionKey is the key of a violation of CheckExported in
// ExportedExceptions: "<package> <identifier>".
func ExceptionKey(v Violation) string {
	ident, _, _ := strings.Cut(strings.TrimPrefix(v.Rule, "exported "), " (")
	return rel(v.Package) + " " + ident
}

// isInternal reports whether an import path has an "internal" element.
func isInternal(p string) bool {
	return p == "internal" || strings.HasPrefix(p, "internal/") || strings.Contains(p, "/internal/") || strings.HasSuffix(p, "/internal")
}

// CheckExported applies docs/design.md "Layout"'s "exported signatures
// carry no internal/ types" to the packages' sources, syntactically: the
// parameter, result and receiver types of exported functions and of
// exported methods of exported types, the definitions of exported types
// (exported struct fields, interface methods, aliases) and the declared
// types of exported variables and constants may not name a type of a
// package whose path has an "internal" element. The violations (Import:
// the internal package; Rule: the identifier and file) are sorted.
func CheckExported(srcs []Source) ([]Violation, error) {
	var vs []Violation
	for _, s := range srcs {
		fset := token.NewFileSet()
		names := make([]string, 0, len(s.Files))
		for n := range s.Files {
			names = append(names, n)
		}
		sort.Strings(names)
		for _, n := range names {
			f, err := parser.ParseFile(fset, n, s.Files[n], parser.SkipObjectResolution)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", s.ImportPath, err)
			}
			for _, v := range exportedInternal(f) {
				vs = append(vs, Violation{s.ImportPath, v.imp, fmt.Sprintf("exported %s (%s) carries an internal/ type: exported signatures carry no internal/ types", v.ident, n)})
			}
		}
	}
	sort.Slice(vs, func(i, j int) bool {
		if vs[i].Package != vs[j].Package {
			return vs[i].Package < vs[j].Package
		}
		return vs[i].Rule < vs[j].Rule
	})
	return vs, nil
}

type finding struct{ ident, imp string }

// exportedInternal returns the exported identifiers of f whose types name
// an internal package, with that package's path.
func exportedInternal(f *ast.File) []finding {
	internal := map[string]string{} // local name → import path
	for _, im := range f.Imports {
		p, err := strconv.Unquote(im.Path.Value)
		if err != nil || !isInternal(strings.TrimPrefix(p, Module+"/")) {
			continue
		}
		name := path.Base(p)
		if im.Name != nil {
			name = im.Name.Name
		}
		internal[name] = p
	}
	if len(internal) == 0 {
		return nil
	}
	var out []finding
	check := func(ident string, e ast.Node) {
		if e == nil {
			return
		}
		ast.Inspect(e, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.FuncLit, *ast.BlockStmt:
				return false
			case *ast.SelectorExpr:
				if x, ok := n.X.(*ast.Ident); ok {
					if p, ok := internal[x.Name]; ok {
						out = append(out, finding{ident, p})
					}
				}
			}
			return true
		})
	}
	for _, d := range f.Decls {
		switch d := d.(type) {
		case *ast.FuncDecl:
			if !d.Name.IsExported() {
				continue
			}
			name := d.Name.Name
			if d.Recv != nil && len(d.Recv.List) == 1 {
				recv := recvName(d.Recv.List[0].Type)
				if !ast.IsExported(recv) {
					continue
				}
				name = recv + "." + name
				check(name, d.Recv)
			}
			check(name, d.Type)
		case *ast.GenDecl:
			for _, sp := range d.Specs {
				switch sp := sp.(type) {
				case *ast.TypeSpec:
					if !sp.Name.IsExported() {
						continue
					}
					if sp.TypeParams != nil {
						check(sp.Name.Name, sp.TypeParams)
					}
					checkTypeDef(sp.Name.Name, sp.Type, check)
				case *ast.ValueSpec:
					for _, n := range sp.Names {
						if n.IsExported() {
							check(n.Name, sp.Type)
						}
					}
				}
			}
		}
	}
	return out
}

// checkTypeDef checks the exported parts of a type definition: a struct's
// exported (and embedded) fields, an interface's methods and embedded
// types, anything else whole.
func checkTypeDef(name string, t ast.Expr, check func(string, ast.Node)) {
	switch t := t.(type) {
	case *ast.StructType:
		for _, fl := range t.Fields.List {
			if len(fl.Names) == 0 {
				check(name, fl.Type)
				continue
			}
			for _, n := range fl.Names {
				if n.IsExported() {
					check(name+"."+n.Name, fl.Type)
				}
			}
		}
	case *ast.InterfaceType:
		for _, m := range t.Methods.List {
			if len(m.Names) == 0 {
				check(name, m.Type)
				continue
			}
			for _, n := range m.Names {
				if n.IsExported() {
					check(name+"."+n.Name, m.Type)
				}
			}
		}
	default:
		check(name, t)
	}
}

// recvName is the type name of a method receiver (T, *T, T[P], *T[P]).
func recvName(e ast.Expr) string {
	for {
		switch t := e.(type) {
		case *ast.StarExpr:
			e = t.X
		case *ast.IndexExpr:
			e = t.X
		case *ast.IndexListExpr:
			e = t.X
		case *ast.Ident:
			return t.Name
		default:
			return ""
		}
	}
}
