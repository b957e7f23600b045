package schemas

import (
	"encoding/json"
	"fmt"
	"reflect"
	"sort"
	"strings"
	"unicode"
)

// fieldOverlay adjusts the schema reflected for one struct field. base is the
// schema the field's Go type produced; the result replaces it. Optional
// marks a member that may be absent although its Go field has no omitempty
// (a MarshalJSON that omits it).
type fieldOverlay struct {
	apply    func(base map[string]any) map[string]any
	optional bool
	required bool // a member that is always present although the field has omitempty
	absent   bool // a field the document (a schema version) does not have
}

// reflector turns Go types into Draft 2020-12 schema objects. Named struct
// types become $defs entries (by their Go name) and are referenced with
// "#/$defs/<Name>", so every schema it builds is self-contained.
type reflector struct {
	defs    map[string]any
	byType  map[reflect.Type]string
	types   map[reflect.Type]func() map[string]any // whole-type replacements
	fields  map[string]fieldOverlay                // "<TypeName>.<json name>"
	descrip map[string]string                      // "<TypeName>" → description of the $defs entry
}

func newReflector() *reflector {
	return &reflector{
		defs:    map[string]any{},
		byType:  map[reflect.Type]string{},
		types:   map[reflect.Type]func() map[string]any{},
		fields:  map[string]fieldOverlay{},
		descrip: map[string]string{},
	}
}

var rawMessageType = reflect.TypeFor[json.RawMessage]()

// schemaFor returns the schema of t: a {"$ref"} for named structs, an inline
// schema otherwise.
func (r *reflector) schemaFor(t reflect.Type) map[string]any {
	if f, ok := r.types[t]; ok {
		return f()
	}
	switch t.Kind() {
	case reflect.Pointer:
		return r.schemaFor(t.Elem())
	case reflect.String:
		return map[string]any{"type": "string"}
	case reflect.Bool:
		return map[string]any{"type": "boolean"}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return map[string]any{"type": "integer"}
	case reflect.Float32, reflect.Float64:
		return map[string]any{"type": "number"}
	case reflect.Slice, reflect.Array:
		if t == rawMessageType {
			return map[string]any{} // any JSON value
		}
		return map[string]any{"type": "array", "items": r.schemaFor(t.Elem())}
	case reflect.Map:
		if t.Key().Kind() != reflect.String {
			panic(fmt.Sprintf("schemas: map key %s is not a string", t.Key()))
		}
		return map[string]any{"type": "object", "additionalProperties": r.schemaFor(t.Elem())}
	case reflect.Interface:
		return map[string]any{}
	case reflect.Struct:
		return r.structRef(t)
	}
	panic(fmt.Sprintf("schemas: no schema for Go type %s", t))
}

// structRef defines t under $defs (once) and returns a reference to it.
func (r *reflector) structRef(t reflect.Type) map[string]any {
	name, ok := r.byType[t]
	if !ok {
		name = t.Name()
		if name == "" {
			panic(fmt.Sprintf("schemas: anonymous struct %s", t))
		}
		if _, taken := r.defs[name]; taken {
			panic(fmt.Sprintf("schemas: two Go types named %s", name))
		}
		r.byType[t] = name
		r.defs[name] = nil // reserve against recursion
		r.defs[name] = r.structSchema(t, name)
	}
	return map[string]any{"$ref": "#/$defs/" + name}
}

// structSchema reflects the exported fields of t: the member name is the
// json tag's name, or the field name with its first letter lower-cased when
// the field has no tag (the wire names of a hand-written MarshalJSON, which
// the validator test checks against marshalled values); members without
// omitempty/omitzero are required. Unknown members are refused
// (additionalProperties false), as the strict decoders do.
func (r *reflector) structSchema(t reflect.Type, name string) map[string]any {
	props := map[string]any{}
	var required []string
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		jname, opts, _ := strings.Cut(f.Tag.Get("json"), ",")
		if jname == "-" {
			continue
		}
		if jname == "" {
			rs := []rune(f.Name)
			rs[0] = unicode.ToLower(rs[0])
			jname = string(rs)
		}
		omit := strings.Contains(","+opts+",", ",omitempty,") || strings.Contains(","+opts+",", ",omitzero,")
		ov, has := r.fields[name+"."+jname]
		if has && ov.absent {
			continue
		}
		s := r.schemaFor(f.Type)
		if has && ov.apply != nil {
			s = ov.apply(s)
		}
		props[jname] = s
		if (!omit && !(has && ov.optional)) || (has && ov.required) {
			required = append(required, jname)
		}
	}
	sort.Strings(required)
	s := map[string]any{
		"type":                 "object",
		"properties":           props,
		"additionalProperties": false,
	}
	if len(required) > 0 {
		s["required"] = required
	}
	if d, ok := r.descrip[name]; ok {
		s["description"] = d
	}
	return s
}

// with returns base with the keywords of extra added (extra wins).
func with(base map[string]any, extra map[string]any) map[string]any {
	out := make(map[string]any, len(base)+len(extra))
	for k, v := range base {
		out[k] = v
	}
	for k, v := range extra {
		out[k] = v
	}
	return out
}

// set returns an overlay that adds keywords to the reflected schema.
func set(extra map[string]any) fieldOverlay {
	return fieldOverlay{apply: func(b map[string]any) map[string]any { return with(b, extra) }}
}

// replace returns an overlay that replaces the reflected schema.
func replace(s map[string]any) fieldOverlay {
	return fieldOverlay{apply: func(map[string]any) map[string]any { return s }}
}
