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
// from, so decode → encode → decode is stable for /1 and /2 alike.
func FuzzDecodeRef(f *testing.F) {
	seeds, _ := filepath.Glob(filepath.Join("testdata", "*.ref.jcs"))
	more, _ := filepath.Glob(filepath.Join("testdata", "ref2", "*.ref.jcs"))
	for _, p := range append(seeds, more...) {
		f.Add(readTestdata(f, p[len("testdata/"):]))
	}
	f.Fuzz(func(t *testing.T, inner []byte) {
		doc, err := envmanifest.ParseSigned(append(append([]byte(`{"ref":`), inner...), []byte(`,"signatures":[]}`)...), "ref")
		if err != nil {
			return
		}
		r, err := decodeRef(doc.Inner)
		if err != nil {
			return
		}
		got, err := r.Canonical()
		if err != nil {
			t.Fatalf("an accepted ref does not encode: %v", err)
		}
		if !bytes.Equal(got, doc.Canonical) {
			t.Fatalf("re-encoded differently:\n got %s\nwant %s", got, doc.Canonical)
		}
	})
}
