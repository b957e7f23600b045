package adopt

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/containerd/errdefs"
	"github.com/opencontainers/go-digest"

	"github.com/sandbox-resume/sandbox-resume/envmanifest"
	"github.com/sandbox-resume/sandbox-resume/errdef"
)

// goImageDigest is what TestPinGolden's resolver answers for the go
// example's image (testdata/lint/go/pinned.jsonc carries it).
const goImageDigest = digest.Digest("sha256:76a0bb7042d9d66225ab7b948c2539ddf4be67f213576df1b67e4824242ad89a")

// resolverOf answers every name with dg and records the names asked.
func resolverOf(dg digest.Digest, asked *[]string) ImageResolver {
	return func(_ context.Context, ref string) (digest.Digest, error) {
		*asked = append(*asked, ref)
		return dg, nil
	}
}

// TestPinGolden pins testdata/lint/go/fixed.golden.jsonc (the go example
// after lint --fix, with comments, blank lines and tabs) with its lockfile
// and compares the whole result with the hand-written
// testdata/lint/go/pinned.jsonc; the manifest is then pinned, and the
// features' part of the core is the one the lockfile already gave.
func TestPinGolden(t *testing.T) {
	dir := filepath.Join("testdata", "lint", "go")
	data, err := os.ReadFile(filepath.Join(dir, "fixed.golden.jsonc"))
	if err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadFile(filepath.Join(dir, "pinned.jsonc"))
	if err != nil {
		t.Fatal(err)
	}
	opts := envmanifest.Options{Path: filepath.Join(dir, "devcontainer.json")}
	before, err := envmanifest.Ingest(data, opts)
	if err != nil {
		t.Fatal(err)
	}
	var asked []string
	res, err := Pin(context.Background(), data, PinOptions{Options: opts, Resolve: resolverOf(goImageDigest, &asked)})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(res.Document, want) {
		t.Errorf("pinned document differs from %s/pinned.jsonc:\n%s", dir, res.Document)
	}
	if len(asked) != 1 || asked[0] != "mcr.microsoft.com/devcontainers/go:1-1.22-bookworm" {
		t.Errorf("resolved %q", asked)
	}
	if !res.Changed || res.Written || len(res.Edits) != 4 || !res.Manifest.IsPinned() {
		t.Errorf("changed %v written %v edits %d pinned %v", res.Changed, res.Written, len(res.Edits), res.Manifest.IsPinned())
	}
	fb, _ := json.Marshal(before.Core.Features)
	fa, _ := json.Marshal(res.Manifest.Core.Features)
	if !bytes.Equal(fa, fb) {
		t.Errorf("the features' part of the core changed:\n%s\n%s", fb, fa)
	}
	if res.Manifest.Core.Image != before.Core.Image+"@"+goImageDigest.String() {
		t.Errorf("image %s", res.Manifest.Core.Image)
	}
	// The pinned file ingests the same without the lockfile: it is the
	// declaration now, not the lockfile, that pins the features.
	alone, err := envmanifest.Ingest(res.Document, envmanifest.Options{})
	if err != nil || alone.Address != res.Manifest.Address {
		t.Errorf("without the lockfile: %v, address %v, want %s", err, alone, res.Manifest.Address)
	}
	// Pinning again changes nothing and asks for no resolution.
	asked = nil
	again, err := Pin(context.Background(), res.Document, PinOptions{Options: opts, Resolve: resolverOf(goImageDigest, &asked)})
	if err != nil || again.Changed || len(again.Edits) != 0 || len(asked) != 0 || !bytes.Equal(again.Document, res.Document) {
		t.Errorf("second pin: changed %v edits %v asked %v (%v)", again != nil && again.Changed, again, asked, err)
	}
}

// TestApplyPinKeepsBytes checks that pin changes exactly the edited strings
// whatever the layout: comments between name, colon and value, CR LF, a BOM,
// tabs, escapes in other strings, a trailing comma and a final line comment
// without a newline.
func TestApplyPinKeepsBytes(t *testing.T) {
	dg := digest.Digest("sha256:" + strings.Repeat("1", 64))
	in := "\ufeff{\r\n\t/* the base */ \"image\" /* a */ : /* b */ \"debian\" /* c */,\r\n" +
		"\t\"features\": {\r\n\t\t// node\r\n\t\t\"ghcr.io/devcontainers/features/node:1\"  :  {\"version\": \"20\"},\r\n" +
		"\t\t\"node\": \"lts\", // a legacy id\r\n\t},\r\n\t\"name\": \"caf\\u00e9 \\\"x\\\"\",\r\n}\r\n// end"
	dir := t.TempDir()
	lock := fmt.Sprintf(`{"features": {
		"ghcr.io/devcontainers/features/node:1": {"resolved": "ghcr.io/devcontainers/features/node@sha256:%[1]s", "integrity": "sha256:%[1]s"},
		"node": {"resolved": "ghcr.io/devcontainers/features/node@sha256:%[1]s", "integrity": "sha256:%[1]s"}}}`, strings.Repeat("2", 64))
	if err := os.WriteFile(filepath.Join(dir, envmanifest.LockfileName), []byte(lock), 0o644); err != nil {
		t.Fatal(err)
	}
	// Two keys naming one feature are refused; keep one of each document.
	for _, keep := range []string{"ghcr.io/devcontainers/features/node:1", "node"} {
		doc := in
		if keep == "node" {
			doc = strings.Replace(doc, "\t\t// node\r\n\t\t\"ghcr.io/devcontainers/features/node:1\"  :  {\"version\": \"20\"},\r\n", "", 1)
		} else {
			doc = strings.Replace(doc, "\t\t\"node\": \"lts\", // a legacy id\r\n", "", 1)
		}
		var asked []string
		path := filepath.Join(dir, "devcontainer.json")
		if err := os.WriteFile(path, []byte(doc), 0o600); err != nil {
			t.Fatal(err)
		}
		res, err := PinFile(context.Background(), path, PinOptions{Write: true, Resolve: resolverOf(dg, &asked)})
		if err != nil {
			t.Fatalf("%s: %v", keep, err)
		}
		want := strings.Replace(doc, `"debian"`, `"debian:latest@`+dg.String()+`"`, 1)
		want = strings.Replace(want, strconv.Quote(keep), `"ghcr.io/devcontainers/features/node@sha256:`+strings.Repeat("2", 64)+`"`, 1)
		got, _ := os.ReadFile(path)
		if string(got) != want || string(res.Document) != want {
			t.Errorf("%s: written\n%q\nwant\n%q", keep, got, want)
		}
		if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o600 {
			t.Errorf("%s: mode %v, want 0600 kept", keep, fi.Mode().Perm())
		}
		if !res.Written || !res.Manifest.IsPinned() || res.Manifest.Core.Image != "docker.io/library/debian:latest@"+dg.String() {
			t.Errorf("%s: written %v pinned %v image %s", keep, res.Written, res.Manifest.IsPinned(), res.Manifest.Core.Image)
		}
	}
}

func TestPinRefusals(t *testing.T) {
	dg := digest.Digest("sha256:" + strings.Repeat("3", 64))
	var asked []string
	resolve := resolverOf(dg, &asked)
	for _, c := range []struct {
		name, doc string
		want      []string // pointer class
	}{
		{"a feature by tag without a lockfile", `{"image": "debian:12", "features": {"ghcr.io/devcontainers/features/node:1": {}, "ghcr.io/devcontainers/features/go@sha256:` + strings.Repeat("4", 64) + `": {}}}`,
			[]string{"/features/ghcr.io~1devcontainers~1features~1node:1 lockfile"}},
		{"tarball and local features", `{"image": "debian:12", "features": {"https://example.com/devcontainer-feature-x.tgz": {}, "./x": {}}}`,
			[]string{"/features/.~1x invalid-value", "/features/https:~1~1example.com~1devcontainer-feature-x.tgz invalid-value"}},
		{"an image with another digest algorithm", `{"image": "debian@sha512:` + strings.Repeat("5", 128) + `"}`,
			[]string{"/image invalid-value"}},
		{"a document that does not ingest", `{"image": "debian:12", "postCreateCommand": "x"}`,
			[]string{"/postCreateCommand executes-or-widens"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.Mkdir(filepath.Join(dir, "x"), 0o755); err != nil {
				t.Fatal(err)
			}
			_, err := Pin(context.Background(), []byte(c.doc), PinOptions{Options: envmanifest.Options{Path: filepath.Join(dir, "devcontainer.json")}, Resolve: resolve})
			var re *envmanifest.RefusedError
			if !errors.As(err, &re) {
				t.Fatalf("%v, want a *envmanifest.RefusedError", err)
			}
			var got []string
			for _, r := range re.Refusals {
				got = append(got, r.Pointer+" "+string(r.Class))
			}
			if strings.Join(got, "\n") != strings.Join(c.want, "\n") {
				t.Errorf("refusals %q, want %q", got, c.want)
			}
			if c.name == "a feature by tag without a lockfile" && !strings.Contains(re.Error(), "ghcr.io/devcontainers/features/node:1") {
				t.Errorf("the refusal does not name the feature: %v", re)
			}
		})
	}
}

func TestPinImage(t *testing.T) {
	ctx := context.Background()
	dg := digest.Digest("sha256:" + strings.Repeat("6", 64))
	pinned := `{"image": "debian:12@` + dg.String() + `"}`
	var asked []string
	res, err := Pin(ctx, []byte(pinned), PinOptions{Resolve: resolverOf(dg, &asked)})
	if err != nil || res.Changed || len(asked) != 0 || !res.Manifest.IsPinned() {
		t.Errorf("an image already by digest: changed %v, asked %v (%v)", res != nil && res.Changed, asked, err)
	}
	for _, img := range []string{"debian:12", "ghcr.io/acme/tools:2024.1", "localhost:5000/x"} {
		res, err := Pin(ctx, []byte(`{"image": "`+img+`"}`), PinOptions{Resolve: resolverOf(dg, &asked)})
		if err != nil {
			t.Fatal(err)
		}
		want := img + "@" + dg.String()
		if img == "localhost:5000/x" {
			want = img + ":latest@" + dg.String()
		}
		if len(res.Edits) != 1 || res.Edits[0].New != want || res.Edits[0].Pointer != "/image" {
			t.Errorf("%s: edits %+v, want %s", img, res.Edits, want)
		}
	}
	notFound := func(context.Context, string) (digest.Digest, error) {
		return "", fmt.Errorf("image: %w", errdefs.ErrNotFound)
	}
	if _, err := Pin(ctx, []byte(`{"image": "debian:12"}`), PinOptions{Resolve: notFound}); !errors.Is(err, errdef.ErrImageUnresolved) {
		t.Errorf("unresolved: %v, want errdef.ErrImageUnresolved", err)
	}
	down := func(context.Context, string) (digest.Digest, error) { return "", errdefs.ErrUnavailable }
	if _, err := Pin(ctx, []byte(`{"image": "debian:12"}`), PinOptions{Resolve: down}); err == nil || errors.Is(err, errdef.ErrImageUnresolved) {
		t.Errorf("daemon down: %v", err)
	}
	bad := func(context.Context, string) (digest.Digest, error) {
		return "sha512:" + digest.Digest(strings.Repeat("7", 128)), nil
	}
	if _, err := Pin(ctx, []byte(`{"image": "debian:12"}`), PinOptions{Resolve: bad}); err == nil {
		t.Error("a sha512 resolution was written")
	}
	if _, err := Pin(ctx, []byte(`{"image": "debian:12"}`), PinOptions{Write: true, Resolve: resolverOf(dg, &asked)}); err == nil {
		t.Error("--write of stdin wrote nowhere without an error")
	}
	if _, err := ApplyPin([]byte(`{"image": "a"}`), []PinEdit{{Pointer: "/image", Old: "b", New: "c"}}); !errors.Is(err, errPinEdit) {
		t.Errorf("a stale edit: %v", err)
	}
}
