package schemas

import (
	"fmt"
	"strings"
	"unicode"

	"github.com/sandbox-resume/sandbox-resume/envmanifest"
)

// identityInputs gives the input shape of each identity property as
// devcontainer.json writes it (docs/design.md "Normalization",
// "Ingestion"). Every identity row of the class table must have one:
// the generator fails otherwise, so a new identity property is a decision,
// not a silent `true`.
var identityInputs = map[string]func() map[string]any{
	"image": func() map[string]any {
		return map[string]any{
			"type":        "string",
			"pattern":     imagePattern(),
			"description": "image reference (distribution/reference grammar; a sha256 digest is 64 lowercase hex); ${…} variables make it invalid",
		}
	},
	"features": func() map[string]any {
		return map[string]any{
			"type": "object",
			"additionalProperties": map[string]any{
				"description": "options object, or a non-empty string or true (shorthand for {\"version\": value}); false and \"\" are refused",
				"anyOf": []any{
					map[string]any{"type": "object"},
					map[string]any{"type": "string", "minLength": 1},
					map[string]any{"const": true},
				},
			},
			"description": "feature id → options; the id grammar (OCI reference, https tarball, ./ path, legacy bare id) is checked by the ingester only",
		}
	},
	"containerEnv": func() map[string]any {
		return map[string]any{
			"type": "object",
			"propertyNames": map[string]any{
				"pattern": "^[^=]+$",
				"not":     map[string]any{"$ref": "#/$defs/reserved_any_case"},
			},
			"additionalProperties": map[string]any{"type": "string"},
			"description":          "string → string; names are non-empty, hold no '=' and are not reserved (default policy, any letter case)",
		}
	},
	"mounts": func() map[string]any {
		return map[string]any{
			"type": "array",
			"items": map[string]any{"anyOf": []any{
				map[string]any{"$ref": "#/$defs/mount_string"},
				map[string]any{"$ref": "#/$defs/mount_object"},
			}},
		}
	},
	"remoteUser": func() map[string]any {
		return map[string]any{"type": "string"}
	},
}

// classDefName names the $defs entry listing the properties of one class.
func classDefName(c envmanifest.PropertyClass) string {
	return "properties_" + strings.ReplaceAll(string(c), "-", "_")
}

// anyCasePattern matches exactly one of names in any ASCII letter case
// (ECMAScript patterns have no inline case-insensitive flag).
func anyCasePattern(names []string) string {
	alts := make([]string, 0, len(names))
	for _, n := range names {
		var b strings.Builder
		for _, r := range n {
			if unicode.IsLetter(r) && r < unicode.MaxASCII {
				fmt.Fprintf(&b, "[%c%c]", unicode.ToUpper(r), unicode.ToLower(r))
			} else {
				b.WriteRune(r)
			}
		}
		alts = append(alts, b.String())
	}
	return "^(?:" + strings.Join(alts, "|") + ")$"
}

// devcontainerSchema builds the schema of the accepted devcontainer.json
// subset from the property class table (docs/design.md "Ingestion"): identity
// members with their input shapes, cosmetic and networking members allowed
// whatever their value (the ingester does not interpret them) except
// hostRequirements.gpu, refused members `false`, and every other member
// refused by additionalProperties false, so a stock validator reports the
// same top-level pointers as the ingester. containerEnv refuses the names of
// the default reserved-environment policy in any letter case.
func devcontainerSchema(props []envmanifest.PropertyInfo, reserved []envmanifest.ReservedEnv) (map[string]any, error) {
	properties := map[string]any{}
	byClass := map[envmanifest.PropertyClass][]any{}
	for _, p := range props {
		if _, dup := properties[p.Name]; dup {
			return nil, fmt.Errorf("schemas: property %q is twice in the class table", p.Name)
		}
		switch p.Class {
		case envmanifest.PropIdentity:
			shape, ok := identityInputs[p.Name]
			if !ok {
				return nil, fmt.Errorf("schemas: identity property %q has no input shape in schemas.identityInputs", p.Name)
			}
			properties[p.Name] = with(shape(), map[string]any{"$comment": "identity: " + p.Note})
		case envmanifest.PropCosmetic, envmanifest.PropNetworking:
			s := map[string]any{"$comment": string(p.Class) + " (excluded from the address): " + p.Note}
			if p.Name == "hostRequirements" {
				// docs/design.md "Ingestion": hostRequirements.gpu is refused
				// whatever its value (it adds --gpus all).
				// if/then keeps other values accepted (the ingester looks
				// inside objects only) and satisfies ajv's strictTypes.
				s["if"] = map[string]any{"type": "object"}
				s["then"] = map[string]any{"type": "object", "properties": map[string]any{"gpu": false}}
			}
			properties[p.Name] = s
		case envmanifest.PropExecutesOrWidens, envmanifest.PropChangesWhatRuns:
			properties[p.Name] = false
		default:
			return nil, fmt.Errorf("schemas: property %q has class %q, which the generator does not know", p.Name, p.Class)
		}
		byClass[p.Class] = append(byClass[p.Class], p.Name)
	}
	for _, name := range []string{"image"} {
		if _, ok := properties[name]; !ok {
			return nil, fmt.Errorf("schemas: the class table has no %q", name)
		}
	}

	classNotes := map[envmanifest.PropertyClass]string{
		envmanifest.PropIdentity:         "identity: normalized into the manifest core",
		envmanifest.PropCosmetic:         "cosmetic: accepted, listed as excluded, never in the address",
		envmanifest.PropNetworking:       "networking: accepted, listed as excluded (the network surface is the capability grant's business)",
		envmanifest.PropExecutesOrWidens: "refused, class executes-or-widens: runs commands or widens the sandbox",
		envmanifest.PropChangesWhatRuns:  "refused, class changes-what-runs: changes what runs but is not identity in v1",
	}
	defs := map[string]any{}
	for c, names := range byClass {
		defs[classDefName(c)] = map[string]any{"description": classNotes[c], "enum": names}
	}

	var names []any
	var plain []string
	for _, r := range reserved {
		names = append(names, map[string]any{"const": r.Name, "description": r.Reason})
		plain = append(plain, r.Name)
	}
	defs["reserved"] = map[string]any{
		"description": "the default reserved-environment policy (upper case), refused in containerEnv in any letter case with class reserved-env; --policy FILE extends it, --policy none turns it off",
		"oneOf":       names,
	}
	if len(plain) == 0 {
		defs["reserved_any_case"] = false
	} else {
		defs["reserved_any_case"] = map[string]any{
			"description": "a reserved name in any letter case",
			"type":        "string",
			"pattern":     anyCasePattern(plain),
		}
	}
	defs["mount_string"] = map[string]any{
		"description": "docker --mount syntax (type defaults to volume); options other than source/target/type/consistency are refused by the ingester",
		"type":        "string",
		"pattern":     "^[^\\r\\n]*$",
	}
	noSep := map[string]any{"type": "string", "pattern": "^[^,\\r\\n]*$"}
	defs["mount_object"] = map[string]any{
		"description": "object form: type bind or volume and target required; consistency is dropped; any other key is refused",
		"type":        "object",
		"required":    []any{"target", "type"},
		"properties": map[string]any{
			"type":        map[string]any{"enum": []any{"bind", "volume"}},
			"target":      noSep,
			"source":      noSep,
			"consistency": map[string]any{"$comment": "a macOS performance hint, dropped"},
		},
		"additionalProperties": false,
	}

	body := map[string]any{
		"type":                 "object",
		"required":             []any{"image"},
		"properties":           properties,
		"additionalProperties": false,
	}
	return root(FileDevcontainer, "devcontainer.json accepted by sandbox-resume",
		"The devcontainer.json subset sandbox-resume ingests into a "+envmanifest.CoreSchema+" manifest (docs/design.md \"Ingestion\"), validated on the JSON after comments and trailing commas are removed. A member the ingester refuses at the top level is refused here at the same pointer: refused classes are `false`, unknown members fail additionalProperties. Duplicate keys, number limits, encoding, size and depth limits, feature identifiers, lockfiles, conflicts and path escapes are checked by the ingester only (README \"Schemas\").",
		body, defs), nil
}
