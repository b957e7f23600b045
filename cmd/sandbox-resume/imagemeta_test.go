package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/opencontainers/go-digest"

	"github.com/sandbox-resume/sandbox-resume/envmanifest"
	"github.com/sandbox-resume/sandbox-resume/envmanifest/adopt"
	"github.com/sandbox-resume/sandbox-resume/internal/exitcode"
)

// TestImageMetadataErrorJSON: a suspend refused for its image's label
// prints {"error": {"class": "image-metadata", "message", "refusals"}}
// with the label's pointers, and exits 2.
func TestImageMetadataErrorJSON(t *testing.T) {
	rs := envmanifest.CheckImageMetadata(`[{"postCreateCommand":"npm ci"}]`)
	err := fmt.Errorf("suspend: %w", &envmanifest.ImageMetadataError{Image: "docker.io/library/x:1", Config: digest.FromString("c"), Refusals: rs})
	class := classify(err)
	if class != exitcode.ClassImageMetadata || class.Code() != 2 {
		t.Fatalf("class %s exit %d", class, class.Code())
	}
	var buf bytes.Buffer
	writeJSONError(&buf, string(class), err)
	var out struct {
		Error jsonError `json:"error"`
	}
	if err := json.Unmarshal(buf.Bytes(), &out); err != nil {
		t.Fatal(err)
	}
	if out.Error.Class != "image-metadata" || len(out.Error.Refusals) != 1 ||
		out.Error.Refusals[0].Pointer != "/config/Labels/devcontainer.metadata/0/postCreateCommand" ||
		out.Error.Refusals[0].Class != envmanifest.ClassExecutesOrWidens {
		t.Errorf("error JSON %s", buf.Bytes())
	}
}

// TestLintClass: lint's class is "refused" while the document does not
// ingest, "image-metadata" when only the image's label is refused; both
// exit 2.
func TestLintClass(t *testing.T) {
	label := []adopt.LintRefusal{{Refusal: envmanifest.Refusal{Pointer: envmanifest.ImageMetadataPointer + "/0/privileged", Class: envmanifest.ClassExecutesOrWidens}}}
	doc := []adopt.LintRefusal{{Refusal: envmanifest.Refusal{Pointer: "/runArgs", Class: envmanifest.ClassExecutesOrWidens}}}
	for _, tc := range []struct {
		name string
		res  *adopt.LintResult
		want exitcode.Class
	}{
		{"label only", &adopt.LintResult{Source: "d.json", Manifest: &envmanifest.Manifest{}, ImageRefusals: label}, exitcode.ClassImageMetadata},
		{"document", &adopt.LintResult{Source: "d.json", Refusals: doc}, exitcode.ClassRefused},
		{"document and label", &adopt.LintResult{Source: "d.json", Refusals: doc, ImageRefusals: label}, exitcode.ClassRefused},
	} {
		if got := lintClass(tc.res); got != tc.want || got.Code() != 2 {
			t.Errorf("%s: lintClass = %s (exit %d), want %s", tc.name, got, got.Code(), tc.want)
		}
		if out := lintReport(tc.res); out.Error == nil || out.Error.Class != string(tc.want) {
			t.Errorf("%s: report error %+v, want class %s", tc.name, out.Error, tc.want)
		}
	}
}
