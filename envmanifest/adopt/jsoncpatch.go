package adopt

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/tailscale/hujson"

	"github.com/sandbox-resume/sandbox-resume/envmanifest"
)

// jsoncBOM is the UTF-8 byte order mark Decode strips (one, leading).
var jsoncBOM = []byte("\xef\xbb\xbf")

// jsoncDoc is a devcontainer.json held as a tailscale/hujson syntax tree,
// which packs back to the input byte for byte where nothing was changed:
// lint --fix and pin edit it, so comments and layout outside the edits
// are kept (docs/design.md "Adoption").
type jsoncDoc struct {
	v       hujson.Value
	bom     bool // a leading UTF-8 BOM was set aside
	addedNL bool // a newline was added to close a final line comment
	crlf    bool // every line of the input ends in CR LF
}

// parseJSONC parses data (already accepted by Decode) for editing. A
// leading BOM is set aside, and a final line comment without a newline,
// which hujson does not accept, gets one that pack takes away again.
func parseJSONC(data []byte) (*jsoncDoc, error) {
	d := &jsoncDoc{}
	if n := bytes.Count(data, []byte("\n")); n > 0 && bytes.Count(data, []byte("\r\n")) == n {
		d.crlf = true
	}
	if bytes.HasPrefix(data, jsoncBOM) {
		data, d.bom = data[len(jsoncBOM):], true
	}
	v, err := hujson.Parse(data)
	if err != nil {
		buf := make([]byte, len(data), len(data)+1)
		copy(buf, data)
		v2, err2 := hujson.Parse(append(buf, '\n'))
		if err2 != nil {
			return nil, fmt.Errorf("JSONC patch: %w", err)
		}
		v, d.addedNL = v2, true
	}
	d.v = v
	return d, nil
}

// pack returns the document's bytes, with the BOM put back and the added
// newline taken away. In a CR LF document, a line end hujson wrote as a
// bare LF (it splits CR LF when it moves a member's trailing newline) gets
// its CR back.
func (d *jsoncDoc) pack() []byte {
	out := d.v.Pack()
	if d.addedNL && len(out) > 0 && out[len(out)-1] == '\n' {
		out = out[:len(out)-1]
	}
	if d.crlf && bytes.Count(out, []byte("\n")) != bytes.Count(out, []byte("\r\n")) {
		out = bytes.ReplaceAll(bytes.ReplaceAll(out, []byte("\r\n"), []byte("\n")), []byte("\n"), []byte("\r\n"))
	}
	if d.bom {
		out = append(append([]byte{}, jsoncBOM...), out...)
	}
	return out
}

// remove applies one RFC 6902 "remove" at ptr (hujson moves the comments
// that belong to the member out with it).
func (d *jsoncDoc) remove(ptr string) error {
	op, err := json.Marshal([]map[string]string{{"op": "remove", "path": ptr}})
	if err != nil {
		return err
	}
	return d.v.Patch(op)
}

// count returns how many members of the object at the parent of ptr carry
// ptr's last name (0 when there is no such object).
func (d *jsoncDoc) count(ptr string) int {
	i := strings.LastIndexByte(ptr, '/')
	if i < 0 {
		return 0
	}
	parent := d.v.Find(ptr[:i])
	if parent == nil {
		return 0
	}
	obj, ok := parent.Value.(*hujson.Object)
	if !ok {
		if parent.Find(ptr[i:]) != nil {
			return 1 // an array element
		}
		return 0
	}
	toks := pointerTokens(ptr[i:])
	n := 0
	for _, m := range obj.Members {
		if lit, ok := m.Name.Value.(hujson.Literal); ok && lit.String() == toks[0] {
			n++
		}
	}
	return n
}

// fixDocument removes from data the members the refusals' fix actions
// name (docs/design.md "Adoption"): FixRemove the member
// (every occurrence), FixRemoveMount the whole /mounts/N, FixKeepLast
// every occurrence but the last. A member inside one that is removed is
// not removed on its own. It returns the new bytes and the removals sorted
// by pointer.
func fixDocument(data []byte, refusals []LintRefusal) ([]byte, []Removal, error) {
	type action struct {
		fix     FixAction
		because string
		class   envmanifest.Class
	}
	acts := map[string]action{}
	for _, r := range refusals {
		ptr := r.Pointer
		switch r.Fix {
		case FixNone:
			continue
		case FixRemoveMount:
			toks := pointerTokens(ptr)
			if len(toks) < 2 || toks[0] != "mounts" {
				continue
			}
			ptr = "/mounts/" + toks[1]
		}
		if ptr == "" {
			continue
		}
		prev, seen := acts[ptr]
		if !seen || (prev.fix == FixKeepLast && r.Fix != FixKeepLast) {
			acts[ptr] = action{r.Fix, r.Pointer, r.Class}
		}
	}
	ptrs := make([]string, 0, len(acts))
	for p := range acts {
		removedAbove := false
		for q, a := range acts {
			if a.fix != FixKeepLast && strings.HasPrefix(p, q+"/") {
				removedAbove = true
				break
			}
		}
		if !removedAbove {
			ptrs = append(ptrs, p)
		}
	}
	// Later siblings first, so array indices still name what they named.
	sort.Slice(ptrs, func(i, j int) bool { return comparePointers(ptrs[i], ptrs[j]) > 0 })

	doc, err := parseJSONC(data)
	if err != nil {
		return nil, nil, err
	}
	var removed []Removal
	for _, p := range ptrs {
		a := acts[p]
		n := doc.count(p)
		if a.fix == FixKeepLast {
			n--
		}
		for k := 0; k < n; k++ {
			if err := doc.remove(p); err != nil {
				return nil, nil, fmt.Errorf("remove %s: %w", p, err)
			}
		}
		if n > 0 {
			removed = append(removed, Removal{Pointer: p, Count: n, Fix: a.fix, Because: a.because, Class: a.class})
		}
	}
	sort.Slice(removed, func(i, j int) bool { return comparePointers(removed[i].Pointer, removed[j].Pointer) < 0 })
	return doc.pack(), removed, nil
}

// comparePointers orders JSON Pointers token by token, array indices
// (decimal tokens) by value, other tokens in byte order; a pointer sorts
// before those inside it.
func comparePointers(a, b string) int {
	ta, tb := pointerTokens(a), pointerTokens(b)
	for i := 0; i < len(ta) && i < len(tb); i++ {
		if ta[i] == tb[i] {
			continue
		}
		na, ea := strconv.Atoi(ta[i])
		nb, eb := strconv.Atoi(tb[i])
		if ea == nil && eb == nil {
			if na < nb {
				return -1
			}
			return 1
		}
		return strings.Compare(ta[i], tb[i])
	}
	return len(ta) - len(tb)
}
