package runspec

import (
	"sort"
	"strconv"
	"strings"
)

// compare applies rule n to the recorded value r and the offered value o;
// rp and op are the objects holding them (for rules that look at the
// enclosing mount or namespace).
func (c *specComparer) compare(n *ruleNode, r, o, rp, op *specValue) {
	if r.empty() && o.empty() {
		return
	}
	switch n.rule {
	case RuleMayDiffer, RuleEnv:
		// process.env's containerEnv requirement runs once, after the walk.
	case RuleEqual:
		c.deep(r, o)
	case RuleListed:
		if !sameValue(r, o) {
			c.emit(r, o, true)
		}
	case RuleMembers:
		if !isObjectOrEmpty(r) || !isObjectOrEmpty(o) {
			c.deep(r, o)
			return
		}
		for _, name := range unionNames(r, o) {
			c.compare(n.child(name), r.get(name), o.get(name), r, o)
		}
	case RuleSet:
		c.set(r, o)
	case RuleKeyedSet:
		c.keyedSet(n, r, o)
	case RuleOrdered:
		rl, ol := r.list(), o.list()
		for i := 0; i < len(rl) || i < len(ol); i++ {
			switch {
			case i >= len(ol):
				c.emit(rl[i], nil, false)
			case i >= len(rl):
				c.emit(nil, ol[i], false)
			default:
				c.compare(n.child("*"), rl[i], ol[i], r, o)
			}
		}
	case RuleBindSource:
		if isBindMount(rp) && isBindMount(op) {
			if !sameValue(r, o) {
				c.emit(r, o, o != nil && o.kind == specString && c.bindSourceRefusal(o.str) == "")
			}
			return
		}
		c.deep(r, o)
	case RuleNamespacePath:
		path := o.text()
		if path == "" {
			return // dropped: a new private namespace
		}
		switch {
		case r.text() == "" || c.opts.HostNamespace == nil || c.opts.HostNamespace(op.get("type").text(), path):
			c.emit(r, o, false)
		case op.get("type").text() != "network" && !sameValue(r, o):
			// only the network namespace is the runtime's to re-point;
			// another path joins another container's namespace
			c.emit(r, o, false)
		}
	default:
		panic("runspec: unknown rule " + n.rule)
	}
}

func isObjectOrEmpty(v *specValue) bool { return v.empty() || v.kind == specObject }

// unionNames lists r's member names in order, then o's names r lacks.
func unionNames(r, o *specValue) []string {
	var names []string
	if r != nil && r.kind == specObject {
		names = append(names, r.names...)
	}
	if o != nil && o.kind == specObject {
		for _, name := range o.names {
			if r.get(name) == nil {
				names = append(names, name)
			}
		}
	}
	return names
}

// deep reports every difference between r and o at the deepest members
// that differ: objects by member, arrays by index, an absent, null, empty
// list or empty object equal to each other. A value present on one side
// only (or a container against an empty one) is reported whole.
func (c *specComparer) deep(r, o *specValue) {
	if r.empty() && o.empty() {
		return
	}
	rk, rc := containerKind(r)
	ok, oc := containerKind(o)
	if !rc || !oc || rk != ok || r.empty() || o.empty() {
		if !sameValue(r, o) {
			c.emit(r, o, false)
		}
		return
	}
	if rk == specObject {
		for _, name := range unionNames(r, o) {
			c.deep(r.get(name), o.get(name))
		}
		return
	}
	rl, ol := r.list(), o.list()
	for i := 0; i < len(rl) || i < len(ol); i++ {
		switch {
		case i >= len(ol):
			c.emit(rl[i], nil, false)
		case i >= len(rl):
			c.emit(nil, ol[i], false)
		default:
			c.deep(rl[i], ol[i])
		}
	}
}

func containerKind(v *specValue) (specKind, bool) {
	if v == nil || (v.kind != specObject && v.kind != specArray) {
		return 0, false
	}
	return v.kind, true
}

// sameValue compares two values as parsed JSON with exact numbers.
func sameValue(r, o *specValue) bool {
	if r.empty() && o.empty() {
		return true
	}
	if r == nil || o == nil {
		return false
	}
	return canonical(r) == canonical(o)
}

// canonical is a value's identity text for comparison and set keys: a
// kind tag, strings quoted, integers in canonical decimal, object members
// sorted by name with empty members (null, {}, []) left out.
func canonical(v *specValue) string {
	var b strings.Builder
	writeCanonical(&b, v)
	return b.String()
}

func writeCanonical(b *strings.Builder, v *specValue) {
	if v.empty() {
		b.WriteString("~")
		return
	}
	switch v.kind {
	case specBool:
		b.WriteString(strconv.FormatBool(v.b))
	case specNumber:
		b.WriteString("#" + v.str)
	case specString:
		b.WriteString(strconv.Quote(v.str))
	case specObject:
		names := make([]string, 0, len(v.names))
		for _, n := range v.names {
			if !v.members[n].empty() {
				names = append(names, n)
			}
		}
		sort.Strings(names)
		b.WriteByte('{')
		for _, n := range names {
			b.WriteString(strconv.Quote(n))
			b.WriteByte(':')
			writeCanonical(b, v.members[n])
			b.WriteByte(',')
		}
		b.WriteByte('}')
	case specArray:
		b.WriteByte('[')
		for _, e := range v.elems {
			writeCanonical(b, e)
			b.WriteByte(',')
		}
		b.WriteByte(']')
	}
}

// set compares two lists as sets of whole values.
func (c *specComparer) set(r, o *specValue) {
	rl, ol := r.list(), o.list()
	inR := make(map[string]bool, len(rl))
	for _, e := range rl {
		inR[canonical(e)] = true
	}
	inO := make(map[string]bool, len(ol))
	for _, e := range ol {
		inO[canonical(e)] = true
	}
	seen := map[string]bool{}
	for _, e := range rl {
		if k := canonical(e); !inO[k] && !seen[k] {
			seen[k] = true
			c.emit(e, nil, false)
		}
	}
	clear(seen)
	for _, e := range ol {
		if k := canonical(e); !inR[k] && !seen[k] {
			seen[k] = true
			c.emit(nil, e, false)
		}
	}
}

// keyedSet pairs the elements of two lists of objects by n.key and
// compares each pair by n's "*" row.
func (c *specComparer) keyedSet(n *ruleNode, r, o *specValue) {
	rl, ol := r.list(), o.list()
	keyOf := func(e *specValue) string {
		k := e.get(n.key)
		if k != nil && k.kind == specString {
			return k.str
		}
		if k.empty() {
			return "" // absent key: pairs with "" and other absent keys
		}
		return "\x00" + canonical(k)
	}
	byKey := make(map[string][]int, len(ol))
	for j, e := range ol {
		k := keyOf(e)
		byKey[k] = append(byKey[k], j)
	}
	paired := make([]bool, len(ol))
	for _, e := range rl {
		k := keyOf(e)
		js := byKey[k]
		if len(js) == 0 {
			c.emit(e, nil, false)
			continue
		}
		byKey[k] = js[1:]
		paired[js[0]] = true
		c.compare(n.child("*"), e, ol[js[0]], r, o)
	}
	for j, e := range ol {
		if !paired[j] {
			c.emit(nil, e, false)
		}
	}
}

// isBindMount reports whether a mount object is a bind mount: type "bind",
// or options holding "bind" or "rbind" (runc's reading).
func isBindMount(m *specValue) bool {
	if m == nil || m.kind != specObject {
		return false
	}
	if m.get("type").text() == "bind" {
		return true
	}
	for _, opt := range m.get("options").list() {
		if s := opt.text(); s == "bind" || s == "rbind" {
			return true
		}
	}
	return false
}

// requiredEnv checks Options.ContainerEnv against the offered
// process.env: for each NAME whose value holds no "${", NAME=value must be
// there and no other NAME= entry may be. A failure is one entry: Pointer is
// the recorded spec's first NAME= entry ("/process/env" when it has none),
// Recorded the required "NAME=value", Offered the first offered NAME=
// entry with another value (OfferedPointer its place), omitted when
// NAME is simply missing.
func (c *specComparer) requiredEnv(renv, oenv *specValue) {
	names := make([]string, 0, len(c.opts.ContainerEnv))
	for k, v := range c.opts.ContainerEnv {
		if !strings.Contains(v, "${") {
			names = append(names, k)
		}
	}
	sort.Strings(names)
	for _, name := range names {
		want := name + "=" + c.opts.ContainerEnv[name]
		found := false
		var wrong *specValue
		for _, e := range oenv.list() {
			s := e.text()
			if !strings.HasPrefix(s, name+"=") {
				continue
			}
			if s == want {
				found = true
			} else if wrong == nil {
				wrong = e
			}
		}
		if found && wrong == nil {
			continue
		}
		s := sidedSpecDrift{e: SpecDrift{Pointer: "/process/env", Recorded: stringJSON(want)}}
		for _, e := range renv.list() {
			if strings.HasPrefix(e.text(), name+"=") {
				s.e.Pointer = e.ptr
				break
			}
		}
		if wrong != nil {
			s.e.Offered = compactJSON(wrong.raw)
			if wrong.ptr != s.e.Pointer {
				s.e.OfferedPointer = wrong.ptr
			}
		}
		c.out = append(c.out, s)
	}
}

// reservedEnv compares the process.env entries whose name the recorded
// policy reserves (Options.Reserved, case-insensitively) as a set: an
// entry on one side only is reported at its index on that side.
func (c *specComparer) reservedEnv(renv, oenv *specValue) {
	if len(c.opts.Reserved) == 0 {
		return
	}
	reserved := func(e *specValue) bool {
		name, _, _ := strings.Cut(e.text(), "=")
		for _, r := range c.opts.Reserved {
			if strings.EqualFold(r, name) {
				return true
			}
		}
		return false
	}
	filter := func(list []*specValue) *specValue {
		out := &specValue{kind: specArray}
		for _, e := range list {
			if reserved(e) {
				out.elems = append(out.elems, e)
			}
		}
		return out
	}
	c.set(filter(renv.list()), filter(oenv.list()))
}
