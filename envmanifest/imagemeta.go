package envmanifest

import (
	"fmt"
	"strings"

	"github.com/opencontainers/go-digest"

	"github.com/sandbox-resume/sandbox-resume/errdef"
	"github.com/sandbox-resume/sandbox-resume/internal/strictjson"
)

// ImageMetadataLabel is the image config label in which the Dev Containers
// tooling records devcontainer fragments: a JSON array of fragments, or
// (older images) one bare object (docs/design.md "Image metadata").
const ImageMetadataLabel = "devcontainer.metadata"

// ImageMetadataPointer is the JSON Pointer of that label in an OCI image
// config blob (image-spec config.md: config.Labels). Refusals of
// CheckImageMetadata point at it or below it.
const ImageMetadataPointer = "/config/Labels/devcontainer.metadata"

// ImageMetadataError is an image whose devcontainer.metadata label
// CheckImageMetadata refuses (docs/design.md "Image metadata"; class
// "image-metadata" in internal/exitcode). Image is the image's reference as
// the manifest core names it, Config the digest of the config blob the
// label was read from, and Refusals every refusal, sorted by pointer, each
// at ImageMetadataPointer or below it. It is not a *RefusedError: the
// devcontainer.json ingested; the image is what is refused.
type ImageMetadataError struct {
	Image    string
	Config   digest.Digest
	Refusals []Refusal
}

// Error names the image, its config and every refusal, one per line.
func (e *ImageMetadataError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "image %s (config %s): its %s label is refused (%d)", e.Image, e.Config, ImageMetadataLabel, len(e.Refusals))
	for _, r := range e.Refusals {
		b.WriteString("\n  ")
		b.WriteString(r.String())
	}
	return b.String()
}

// Unwrap returns the class errdef.ErrImageMetadata.
func (e *ImageMetadataError) Unwrap() error { return errdef.ErrImageMetadata }

// imageMetadataOnly classifies the members a label fragment may carry
// beyond devcontainer.json's top-level properties (the reference CLI's
// image metadata entries: a feature's id and entrypoint).
var imageMetadataOnly = map[string]PropertyInfo{
	"id":         {"id", PropIdentity, "the id of the feature that wrote the fragment"},
	"entrypoint": {"entrypoint", PropExecutesOrWidens, "a feature's entrypoint runs when the container starts"},
}

// CheckImageMetadata checks the value of an image's devcontainer.metadata
// label (docs/design.md "Image metadata"): the fragments the Dev Containers
// tooling would merge into the configuration it runs. It is called at
// suspend, by resume's check 8 and by lint; an image without the label is
// not checked. It returns nil when the label passes, else every refusal,
// sorted by pointer.
//
// label is the label's string value (already unescaped from the config
// JSON). It is read with the strict decoder, internal/strictjson (strict
// JSON, no comments; duplicate names, UTF-8, noncharacters, I-JSON
// numbers, 1 MiB; nesting inside the label is limited to MaxDepth−1 = 63
// levels). A label that does not decode is one refusal at
// ImageMetadataPointer with the decoder's class
// ("syntax", "duplicate-key", "encoding", "number", "limit"), its message
// naming the place in the label; a label that is JSON but neither an array
// nor an object is one "invalid-value" refusal there.
//
// Each fragment (each element of an array, or the bare object) must be an
// object ("invalid-value" at …/<i> otherwise), and each of its members is
// classified with the property class table (Properties), plus "id"
// (accepted) and "entrypoint" (refused, "executes-or-widens"): identity,
// cosmetic and networking members are accepted (identity members in the
// label are bytes of the image, pinned by its config digest, and never
// added to the core), "hostRequirements.gpu" is refused as in
// devcontainer.json, and every other member is refused with its class
// ("executes-or-widens", "changes-what-runs" or "unknown-property") at
// ImageMetadataPointer + "/<i>/<member>" for an array, "/<member>" for a
// bare object. A refused member is refused whatever its value. A
// fragment's containerEnv goes through the default reserved-environment
// policy (DefaultReservedEnv): a reserved name is "reserved-env" at
// …/containerEnv/<name>, as in the declaration (remoteEnv is refused
// whole, "changes-what-runs").
func CheckImageMetadata(label string) []Refusal {
	return CheckImageMetadataPolicy(label, normalizePolicy(nil))
}

// CheckImageLabels is the image-metadata check of an image config's
// labels (image-spec config.md: config.Labels): found reports whether
// they carry ImageMetadataLabel; no label passes (no refusals), else the
// label is checked with CheckImageMetadata. Suspend, resume (with
// CheckImageLabelsPolicy) and lint all check an image this way.
func CheckImageLabels(labels map[string]string) (refusals []Refusal, found bool) {
	label, ok := labels[ImageMetadataLabel]
	if !ok {
		return nil, false
	}
	return CheckImageMetadata(label), true
}

// CheckImageLabelsPolicy is CheckImageLabels with CheckImageMetadataPolicy
// and reserved as the reserved-environment policy.
func CheckImageLabelsPolicy(labels map[string]string, reserved []string) (refusals []Refusal, found bool) {
	label, ok := labels[ImageMetadataLabel]
	if !ok {
		return nil, false
	}
	return CheckImageMetadataPolicy(label, reserved), true
}

// CheckImageMetadataPolicy is CheckImageMetadata with reserved as the
// reserved-environment policy for the fragments' containerEnv (the
// recorded policy at resume, the effective one at suspend and lint; names
// compared case-insensitively); [] checks no name.
func CheckImageMetadataPolicy(label string, reserved []string) []Refusal {
	root, refusal := decodeLabel(label)
	if refusal != nil {
		return []Refusal{*refusal}
	}
	var out []Refusal
	switch root.Kind {
	case strictjson.KindArray:
		for _, f := range root.Elems {
			out = checkFragment(out, f, reserved)
		}
	case strictjson.KindObject:
		out = checkFragment(out, root, reserved)
	default:
		return []Refusal{{Pointer: ImageMetadataPointer, Class: ClassInvalidValue,
			Message: fmt.Sprintf("the %s label must be an array of fragments or one object, not %s", ImageMetadataLabel, root.Kind)}}
	}
	SortRefusals(out)
	return out
}

// checkFragment classifies one fragment's members and appends refusals.
func checkFragment(out []Refusal, f *strictjson.Node, reserved []string) []Refusal {
	ptr := labelPointer(f.Pointer)
	if f.Kind != strictjson.KindObject {
		return append(out, Refusal{Pointer: ptr, Class: ClassInvalidValue,
			Message: fmt.Sprintf("a %s fragment must be an object, not %s", ImageMetadataLabel, f.Kind)})
	}
	for _, m := range f.Members {
		mptr := labelPointer(m.Value.Pointer)
		info, known := imageMetadataOnly[m.Name]
		if !known {
			info, known = classOf(m.Name)
		}
		if !known {
			out = append(out, Refusal{Pointer: mptr, Class: ClassUnknownProperty,
				Message: fmt.Sprintf("the image's %s label carries unknown property %q (names are case-sensitive); use an image without it", ImageMetadataLabel, m.Name)})
			continue
		}
		if m.Name == "containerEnv" && m.Value.Kind == strictjson.KindObject {
			for _, e := range m.Value.Members {
				for _, r := range reserved {
					if strings.EqualFold(r, e.Name) {
						out = append(out, Refusal{Pointer: labelPointer(e.Value.Pointer), Class: ClassReservedEnv,
							Message: fmt.Sprintf("the image's %s label sets %s, a reserved environment name (%s); use an image without it", ImageMetadataLabel, e.Name, r)})
						break
					}
				}
			}
		}
		switch info.Class {
		case PropExecutesOrWidens:
			out = append(out, Refusal{Pointer: mptr, Class: ClassExecutesOrWidens,
				Message: fmt.Sprintf("the image's %s label carries %s (%s), which the Dev Containers tooling would run or apply; use an image without it", ImageMetadataLabel, m.Name, info.Note)})
		case PropChangesWhatRuns:
			out = append(out, Refusal{Pointer: mptr, Class: ClassChangesWhatRuns,
				Message: fmt.Sprintf("the image's %s label carries %s (%s), which the v1 manifest cannot carry; use an image without it", ImageMetadataLabel, m.Name, info.Note)})
		case PropCosmetic, PropNetworking:
			if m.Name == "hostRequirements" && m.Value.Kind == strictjson.KindObject {
				for _, hm := range m.Value.Members {
					if hm.Name == "gpu" {
						out = append(out, Refusal{Pointer: labelPointer(hm.Value.Pointer), Class: ClassExecutesOrWidens,
							Message: fmt.Sprintf("the image's %s label carries hostRequirements.gpu, refused whatever its value: it adds --gpus all", ImageMetadataLabel)})
						break
					}
				}
			}
		}
	}
	return out
}

// labelWrapper is the member name decodeLabel wraps the label in: the
// strict decoder reads an object, and the label is usually an array.
const labelWrapper = "m"

// labelPointer maps a pointer of the wrapped label to the label's place in
// the image config.
func labelPointer(p string) string {
	return ImageMetadataPointer + p[len("/"+labelWrapper):]
}

// decodeLabel reads the label with the strict decoder, as the one member
// of an object ({"m":<label>}: the decoder reads objects, and the label is
// usually an array), and returns the label's root, or the one refusal of a
// label that does not decode, its message placed in the label's own lines
// and columns. It is the only use of the strict decoder for labels.
func decodeLabel(label string) (*strictjson.Node, *Refusal) {
	fail := func(class Class, msg string) (*strictjson.Node, *Refusal) {
		return nil, &Refusal{Pointer: ImageMetadataPointer, Class: class,
			Message: fmt.Sprintf("the %s label does not decode: %s", ImageMetadataLabel, msg)}
	}
	const prefix = `{"` + labelWrapper + `":`
	if limit := strictjson.MaxInputBytes - len(prefix) - 1; len(label) > limit {
		return fail(ClassLimit, fmt.Sprintf("it is %d bytes, more than the %d-byte limit", len(label), limit))
	}
	root, errs := strictjson.Decode([]byte(prefix+label+"}"), false)
	if root == nil {
		e := errs[0]
		msg := e.Message
		if e.Line > 0 {
			col := e.Column
			if e.Line == 1 {
				col = max(col-len(prefix), 1)
			}
			msg = fmt.Sprintf("%d:%d: %s", e.Line, col, e.Message)
		}
		return fail(kindClass(e.Kind), msg)
	}
	// Exactly one member named "m": the label text is exactly one JSON
	// value (text such as `[1], "n": [2]` would otherwise pass as two).
	if len(root.Members) != 1 || root.Members[0].Name != labelWrapper {
		return fail(ClassSyntax, "it is not one JSON value")
	}
	if len(errs) > 0 {
		e := errs[0]
		msg := labelPointer(e.Pointer)[len(ImageMetadataPointer):]
		if msg == "" {
			msg = `""`
		}
		msg += ": " + e.Message
		if n := len(errs) - 1; n > 0 {
			msg += fmt.Sprintf(" (and %d more)", n)
		}
		return fail(kindClass(e.Kind), msg)
	}
	return root.Members[0].Value, nil
}
