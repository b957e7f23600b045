package envmanifest

import (
	"encoding/csv"
	"path"
	"sort"
	"strconv"
	"strings"

	"github.com/sandbox-resume/sandbox-resume/internal/strictjson"
)

// Mount kinds in the core.
const (
	MountBind   = "bind"
	MountVolume = "volume"
	MountTmpfs  = "tmpfs"
)

// dockerMountOptions are the docker --mount options (docker/cli
// opts/mount.go) that the v1 core cannot carry: they change what runs, so
// they are refused as "changes-what-runs". Any other unknown key is an
// "invalid-value".
var dockerMountOptions = map[string]bool{
	"readonly": true, "ro": true,
	"bind-propagation": true, "bind-nonrecursive": true, "bind-recursive": true, "bind-create-src": true,
	"volume-nocopy": true, "volume-label": true, "volume-driver": true, "volume-opt": true, "volume-subpath": true,
	"tmpfs-size": true, "tmpfs-mode": true,
	"image-subpath": true,
}

// mountKeyAliases maps the keys of a mount string to the one key each
// names.
var mountKeyAliases = map[string]string{
	"type": "type", "source": "source", "src": "source",
	"target": "target", "dst": "target", "destination": "target",
	"consistency": "consistency",
}

// mounts normalizes the mounts array (docs/design.md "Normalization": mount
// strings, mount objects, mount targets).
func (in *ingester) mounts(v *strictjson.Node) {
	if v.Kind != strictjson.KindArray {
		in.refuse(v.Pointer, ClassInvalidValue, "mounts must be an array, not %s", v.Kind)
		return
	}
	type placed struct {
		m   Mount
		ptr string
	}
	var ms []placed
	for _, e := range v.Elems {
		var m Mount
		var ok bool
		switch e.Kind {
		case strictjson.KindString:
			m, ok = in.mountString(e)
		case strictjson.KindObject:
			m, ok = in.mountObject(e)
		default:
			in.refuse(e.Pointer, ClassInvalidValue, "a mount must be a docker --mount string or an object, not %s", e.Kind)
		}
		if ok {
			ms = append(ms, placed{m, e.Pointer})
		}
	}
	byTarget := make(map[string]int, len(ms))
	for _, p := range ms {
		byTarget[path.Clean(p.m.Target)]++
	}
	out := make([]Mount, 0, len(ms))
	for _, p := range ms {
		if byTarget[path.Clean(p.m.Target)] > 1 {
			in.refuse(p.ptr, ClassConflict, "more than one mount targets %s", path.Clean(p.m.Target))
			continue
		}
		out = append(out, p.m)
		in.sites = append(in.sites, MountSite{Pointer: p.ptr, Mount: p.m})
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Target < out[j].Target })
	if len(out) > 0 {
		in.m.Core.Mounts = out
	}
}

// mountFields splits a mount string (no CR or LF) into its fields as
// encoding/csv reads one record. A string without a double quote has no
// quoting for csv to undo, and csv then splits it at every comma: that case
// skips building a csv.Reader (and its 4 KiB buffer). FuzzMountString
// checks the two paths agree.
func mountFields(s string) ([]string, error) {
	if s != "" && !strings.Contains(s, `"`) {
		return strings.Split(s, ","), nil
	}
	return csvFields(s)
}

// csvFields reads one encoding/csv record from s.
func csvFields(s string) ([]string, error) {
	return csv.NewReader(strings.NewReader(s)).Read()
}

// mountString parses docker --mount syntax: comma-separated key=value
// fields with encoding/csv quoting, keys and the type value
// case-insensitive, type defaulting to volume. consistency is dropped. A
// key given twice (aliases count as one key: source=… src=…) is refused
// as invalid-value at the mount's pointer: docker's last value wins, and
// a reader that takes the first would mount something else
// (docs/design.md "Hardening").
func (in *ingester) mountString(e *strictjson.Node) (Mount, bool) {
	s := e.Str
	if strings.ContainsAny(s, "\r\n") {
		in.refuse(e.Pointer, ClassInvalidValue, "a mount string must not contain CR or LF")
		return Mount{}, false
	}
	fields, err := mountFields(s)
	if err != nil {
		in.refuse(e.Pointer, ClassInvalidValue, "mount %q does not parse as docker --mount fields: %v", s, err)
		return Mount{}, false
	}
	m := Mount{Kind: MountVolume}
	ok := true
	seen := map[string]string{}
	for _, f := range fields {
		key, val, hasVal := strings.Cut(f, "=")
		key = strings.ToLower(key)
		if canon, known := mountKeyAliases[key]; known && hasVal {
			if first, dup := seen[canon]; dup {
				in.refuse(e.Pointer, ClassInvalidValue, "mount key %q is repeated (first as %q): a repeated key is refused", key, first)
				ok = false
				continue
			}
			seen[canon] = key
		}
		switch {
		case dockerMountOptions[key]:
			in.refuse(e.Pointer, ClassChangesWhatRuns, "mount option %q is refused: it changes what runs and the v1 manifest cannot carry it", f)
			ok = false
			continue
		case !hasVal:
			in.refuse(e.Pointer, ClassInvalidValue, "mount field %q must be key=value", f)
			ok = false
			continue
		}
		switch key {
		case "type":
			switch t := strings.ToLower(val); t {
			case MountBind, MountVolume, MountTmpfs:
				m.Kind = t
			default:
				in.refuse(e.Pointer, ClassInvalidValue, "mount type %q must be bind, volume or tmpfs", val)
				ok = false
			}
		case "source", "src":
			m.Source = val
		case "target", "dst", "destination":
			m.Target = val
		case "consistency":
			// a macOS performance hint: dropped
		default:
			in.refuse(e.Pointer, ClassInvalidValue, "unknown mount option %q", key)
			ok = false
		}
	}
	if ok && m.Target == "" {
		in.refuse(e.Pointer, ClassMissing, "mount %q has no target", s)
		return Mount{}, false
	}
	return m, ok
}

// mountObject reads the object form {type, source?, target}; type is bind
// or volume; consistency is dropped; any other key is refused at its
// pointer.
func (in *ingester) mountObject(e *strictjson.Node) (Mount, bool) {
	var m Mount
	ok := true
	hasType, hasTarget := false, false
	for _, mem := range e.Members {
		v := mem.Value
		if mem.Duplicate {
			hasType = hasType || mem.Name == "type"
			hasTarget = hasTarget || mem.Name == "target"
			ok = false
			continue
		}
		switch mem.Name {
		case "type":
			hasType = true
			if v.Kind != strictjson.KindString || (v.Str != MountBind && v.Str != MountVolume) {
				in.refuse(v.Pointer, ClassInvalidValue, "mount type must be \"bind\" or \"volume\", not %s", v.Raw)
				ok = false
				continue
			}
			m.Kind = v.Str
		case "source", "target":
			if mem.Name == "target" {
				hasTarget = true
			}
			if v.Kind != strictjson.KindString {
				in.refuse(v.Pointer, ClassInvalidValue, "mount %s must be a string, not %s", mem.Name, v.Kind)
				ok = false
				continue
			}
			if strings.ContainsAny(v.Str, ",\r\n") {
				in.refuse(v.Pointer, ClassInvalidValue, "mount %s %s must not contain a comma, CR or LF", mem.Name, strconv.Quote(v.Str))
				ok = false
				continue
			}
			if mem.Name == "source" {
				m.Source = v.Str
			} else if v.Str == "" {
				in.refuse(v.Pointer, ClassInvalidValue, "mount target must not be empty")
				ok = false
			} else {
				m.Target = v.Str
			}
		case "consistency":
			// a macOS performance hint: dropped
		default:
			if dockerMountOptions[strings.ToLower(mem.Name)] {
				in.refuse(v.Pointer, ClassChangesWhatRuns, "mount option %q is refused: it changes what runs and the v1 manifest cannot carry it", mem.Name)
			} else {
				in.refuse(v.Pointer, ClassInvalidValue, "unknown mount member %q (a mount object has type, source and target)", mem.Name)
			}
			ok = false
		}
	}
	if !hasType {
		in.refuse(strictjson.Pointer(e.Pointer, "type"), ClassMissing, "a mount object needs a type (bind or volume)")
		ok = false
	}
	if !hasTarget {
		in.refuse(strictjson.Pointer(e.Pointer, "target"), ClassMissing, "a mount object needs a target")
		ok = false
	}
	return m, ok
}
