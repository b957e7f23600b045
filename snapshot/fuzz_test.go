package snapshot

import (
	"bytes"
	"path/filepath"
	"testing"

	"github.com/sandbox-resume/sandbox-resume/envmanifest"
)

// FuzzDecodeRef feeds inner ref documents to the schema decoder (check 3),
// seeded with every SnapshotRef vector: it never panics, and a ref it
// accepts re-encodes (Canonical) to exactly the JCS bytes it was decoded
// from, so decode → encode → decode is stable for /1, /2 and /3 alike; and
// OpenRef's path, given the core's bytes out of the JCS of the whole ref,
// decides the same and decodes the same ref.
func FuzzDecodeRef(f *testing.F) {
	seeds, _ := filepath.Glob(filepath.Join("testdata", "*.ref.jcs"))
	for _, dir := range refVectorDirs {
		more, _ := filepath.Glob(filepath.Join("testdata", dir, "*.ref.jcs"))
		seeds = append(seeds, more...)
	}
	for _, p := range seeds {
		f.Add(readTestdata(f, p[len("testdata/"):]))
	}
	f.Fuzz(func(t *testing.T, inner []byte) {
		doc, err := envmanifest.ParseSigned(append(append([]byte(`{"ref":`), inner...), []byte(`,"signatures":[]}`)...), "ref")
		if err != nil {
			return
		}
		r, err := decodeRef(doc.Inner)
		// OpenRef's path (the core's JCS taken out of the JCS of the
		// whole ref) decides exactly as the core canonicalized on its own.
		coreCanonical, cerr := doc.CanonicalMember("core")
		if cerr != nil {
			t.Fatalf("canonical core: %v", cerr)
		}
		r2, err2 := decodeRefCanonical(doc.Inner, coreCanonical)
		if (err == nil) != (err2 == nil) || (err != nil && err.Error() != err2.Error()) {
			t.Fatalf("decodeRef: %v\ndecodeRefCanonical: %v", err, err2)
		}
		if err != nil {
			return
		}
		if !bytes.Equal(r.coreCanonical, r2.coreCanonical) {
			t.Fatalf("core canonical bytes differ:\n%s\n%s", r.coreCanonical, r2.coreCanonical)
		}
		if c2, err := r2.Canonical(); err != nil || !bytes.Equal(c2, doc.Canonical) {
			t.Fatalf("decodeRefCanonical's ref re-encodes differently (%v):\n got %s\nwant %s", err, c2, doc.Canonical)
		}
		got, err := r.Canonical()
		if err != nil {
			t.Fatalf("an accepted ref does not encode: %v", err)
		}
		if !bytes.Equal(got, doc.Canonical) {
			t.Fatalf("re-encoded differently:\n got %s\nwant %s", got, doc.Canonical)
		}
		// An accepted /3 ref keeps check 3's rules across its members.
		if r.IsV3() {
			if rs := lineageRefusals(r, ""); len(rs) > 0 || !ValidRunUID(r.RunUID) ||
				(len(r.Ancestors) > 0 && r.Ancestors[len(r.Ancestors)-1] != r.Parent) {
				t.Fatalf("accepted a /3 ref that breaks its rules (%v): run UID %q, ancestors %v, parent %s", rs, r.RunUID, r.Ancestors, r.Parent)
			}
		}
	})
}
