package runspec

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/go-json-experiment/json/jsontext"
)

// BundleRootfs is the root.path of every incarnation: the directory,
// relative to the bundle, where containerd's runtime v2 shims mount the
// container's snapshot ("rootfs", containerd's default spec's).
const BundleRootfs = "rootfs"

// Edit says how Patch edits a runtime spec for a new container
// (docs/design.md "Materialize").
type Edit struct {
	// RootPath is the new root.path (BundleRootfs).
	RootPath string
	// Namespace and ID are the containerd namespace and id of the new
	// container: linux.cgroupsPath becomes CgroupsPath(recorded,
	// Namespace, ID).
	Namespace, ID string
	// DropNamespacePaths removes the "path" of every linux.namespaces
	// entry: a recorded spec's paths name namespaces of the container that
	// was suspended (maybe of another host), so the incarnation gets new
	// private ones. An offered spec's paths passed check 10 and are kept.
	DropNamespacePaths bool
}

// CgroupsPath returns linux.cgroupsPath for container id in containerd
// namespace ns, in the format of the recorded value: systemd's
// "slice:prefix:name" (three colon-separated parts, not starting with
// "/") keeps its slice and prefix and names the new container; anything
// else — containerd's "/<namespace>/<id>", or none — becomes
// "/<ns>/<id>".
func CgroupsPath(recorded, ns, id string) string {
	if parts := strings.Split(recorded, ":"); len(parts) == 3 && !strings.HasPrefix(recorded, "/") {
		return parts[0] + ":" + parts[1] + ":" + id
	}
	return "/" + ns + "/" + id
}

// Patch returns the OCI runtime spec spec (JSON that check 10
// decoded) edited for a new container, as JSON: every member it does not
// edit keeps its bytes, in its place (a spec is never decoded into a Go
// struct and encoded again, which would drop the members the struct does
// not know). The edits: root.path is e.RootPath; linux.cgroupsPath is
// CgroupsPath(recorded, e.Namespace, e.ID); process.terminal, when
// present, is false (a detached task has no console); with
// e.DropNamespacePaths every linux.namespaces entry loses its "path".
// root and linux are created when absent.
//
// It also returns the JSON Pointers the verdict lists in notApplied: of
// process.terminal when it was not false, and of each namespace path
// removed. An error names the pointer of a member that does not have the
// runtime spec's type (Compare would have refused it).
func Patch(spec []byte, e Edit) ([]byte, []string, error) {
	top, err := parseObject(spec, "")
	if err != nil {
		return nil, nil, err
	}
	var notApplied []string

	if v, ok := top.get("process"); ok && !isNull(v) {
		process, err := parseObject(v, "/process")
		if err != nil {
			return nil, nil, err
		}
		if t, ok := process.get("terminal"); ok && string(t) != "false" {
			process.set("terminal", jsontext.Value("false"))
			notApplied = append(notApplied, "/process/terminal")
			top.set("process", process.encode())
		}
	}

	root := &jsonObject{}
	if v, ok := top.get("root"); ok && !isNull(v) {
		if root, err = parseObject(v, "/root"); err != nil {
			return nil, nil, err
		}
	}
	root.set("path", quote(e.RootPath))
	top.set("root", root.encode())

	linux := &jsonObject{}
	if v, ok := top.get("linux"); ok && !isNull(v) {
		if linux, err = parseObject(v, "/linux"); err != nil {
			return nil, nil, err
		}
	}
	recorded := ""
	if v, ok := linux.get("cgroupsPath"); ok && !isNull(v) {
		if recorded, err = unquote(v, "/linux/cgroupsPath"); err != nil {
			return nil, nil, err
		}
	}
	linux.set("cgroupsPath", quote(CgroupsPath(recorded, e.Namespace, e.ID)))
	if v, ok := linux.get("namespaces"); ok && e.DropNamespacePaths && !isNull(v) {
		nss, err := parseArray(v, "/linux/namespaces")
		if err != nil {
			return nil, nil, err
		}
		for i, n := range nss {
			ptr := "/linux/namespaces/" + strconv.Itoa(i)
			ns, err := parseObject(n, ptr)
			if err != nil {
				return nil, nil, err
			}
			if ns.delete("path") {
				notApplied = append(notApplied, ptr+"/path")
				nss[i] = ns.encode()
			}
		}
		linux.set("namespaces", encodeArray(nss))
	}
	top.set("linux", linux.encode())
	return top.encode(), notApplied, nil
}

// jsonObject is a JSON object as its members' names and raw values, in
// document order: editing one member leaves the others' bytes alone.
type jsonObject struct {
	names []string
	vals  []jsontext.Value
}

// parseObject reads a JSON object; ptr names it in errors.
func parseObject(v []byte, ptr string) (*jsonObject, error) {
	dec := jsontext.NewDecoder(bytes.NewReader(v))
	tok, err := dec.ReadToken()
	if err != nil {
		return nil, specPointerError(ptr, err)
	}
	if tok.Kind() != '{' {
		return nil, fmt.Errorf("runtime spec %s: an object is needed, not %s", pointerText(ptr), tok.Kind())
	}
	o := &jsonObject{}
	for dec.PeekKind() != '}' {
		tok, err := dec.ReadToken()
		if err != nil {
			return nil, specPointerError(ptr, err)
		}
		name := tok.String() // before the next read voids the token
		val, err := dec.ReadValue()
		if err != nil {
			return nil, specPointerError(ptr, err)
		}
		o.names = append(o.names, name)
		o.vals = append(o.vals, val.Clone())
	}
	if _, err := dec.ReadToken(); err != nil {
		return nil, specPointerError(ptr, err)
	}
	if _, err := dec.ReadToken(); !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("runtime spec %s: data after the object", pointerText(ptr))
	}
	return o, nil
}

// parseArray reads a JSON array as its elements' raw values.
func parseArray(v []byte, ptr string) ([]jsontext.Value, error) {
	dec := jsontext.NewDecoder(bytes.NewReader(v))
	tok, err := dec.ReadToken()
	if err != nil {
		return nil, specPointerError(ptr, err)
	}
	if tok.Kind() != '[' {
		return nil, fmt.Errorf("runtime spec %s: an array is needed, not %s", pointerText(ptr), tok.Kind())
	}
	var out []jsontext.Value
	for dec.PeekKind() != ']' {
		val, err := dec.ReadValue()
		if err != nil {
			return nil, specPointerError(ptr, err)
		}
		out = append(out, val.Clone())
	}
	if _, err := dec.ReadToken(); err != nil {
		return nil, specPointerError(ptr, err)
	}
	return out, nil
}

func (o *jsonObject) index(name string) int {
	for i, n := range o.names {
		if n == name {
			return i
		}
	}
	return -1
}

func (o *jsonObject) get(name string) (jsontext.Value, bool) {
	if i := o.index(name); i >= 0 {
		return o.vals[i], true
	}
	return nil, false
}

// set replaces member name's value in its place, or appends the member.
func (o *jsonObject) set(name string, v jsontext.Value) {
	if i := o.index(name); i >= 0 {
		o.vals[i] = v
		return
	}
	o.names = append(o.names, name)
	o.vals = append(o.vals, v)
}

// delete removes member name and reports whether it was there.
func (o *jsonObject) delete(name string) bool {
	i := o.index(name)
	if i < 0 {
		return false
	}
	o.names = append(o.names[:i], o.names[i+1:]...)
	o.vals = append(o.vals[:i], o.vals[i+1:]...)
	return true
}

// encode writes the object: each name quoted, each value's bytes as they
// are.
func (o *jsonObject) encode() jsontext.Value {
	b := []byte{'{'}
	for i, n := range o.names {
		if i > 0 {
			b = append(b, ',')
		}
		b, _ = jsontext.AppendQuote(b, n) // names came from valid JSON: valid UTF-8
		b = append(b, ':')
		b = append(b, o.vals[i]...)
	}
	return append(b, '}')
}

func encodeArray(vs []jsontext.Value) jsontext.Value {
	b := []byte{'['}
	for i, v := range vs {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, v...)
	}
	return append(b, ']')
}

func quote(s string) jsontext.Value {
	b, _ := jsontext.AppendQuote(nil, s) // our own strings: valid UTF-8
	return b
}

func unquote(v jsontext.Value, ptr string) (string, error) {
	if v.Kind() != '"' {
		return "", fmt.Errorf("runtime spec %s: a string is needed, not %s", pointerText(ptr), v.Kind())
	}
	b, err := jsontext.AppendUnquote(nil, v)
	if err != nil {
		return "", specPointerError(ptr, err)
	}
	return string(b), nil
}

func isNull(v jsontext.Value) bool { return v.Kind() == 'n' }

func pointerText(ptr string) string {
	if ptr == "" {
		return `""`
	}
	return ptr
}

func specPointerError(ptr string, err error) error {
	return fmt.Errorf("runtime spec %s: %w", pointerText(ptr), err)
}
