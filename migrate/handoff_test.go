package migrate_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/sandbox-resume/sandbox-resume/envelope"
	"github.com/sandbox-resume/sandbox-resume/errdef"
	"github.com/sandbox-resume/sandbox-resume/host/memhost"
	"github.com/sandbox-resume/sandbox-resume/ledger"
	lfake "github.com/sandbox-resume/sandbox-resume/ledger/fake"
	"github.com/sandbox-resume/sandbox-resume/migrate"
	"github.com/sandbox-resume/sandbox-resume/snapshot"
)

// handoffRun is a /3 run suspended at generation 1 on host-a, recorded in
// host-a's ledger, and the key that signs its handoff statements.
type handoffRun struct {
	*run
	la   *lfake.Ledger
	key  ed25519.PrivateKey
	both *envelope.KeyRing // the ref's signer and the statement's
}

func newHandoffRun(t *testing.T) *handoffRun {
	t.Helper()
	spec := []byte(`{"ociVersion":"1.2.0"}`)
	r := newRun(t, func(r *snapshot.Ref) {
		r.Schema, r.RunUID, r.Generation, r.Parent, r.Fence, r.Ancestors = snapshot.RefSchemaV3, "ruid:0123456789abcdef0123456789abcdef", 1, "", 0, nil
		r.Spec = &snapshot.Descriptor{MediaType: snapshot.MediaTypeSpec, Digest: digest.FromBytes(spec), Size: int64(len(spec))}
		r.Runtime = &snapshot.Runtime{Name: "io.containerd.runc.v2"}
	})
	r.store.Put(spec)
	la := lfake.New()
	if _, err := la.Suspended(context.Background(), ledger.SuspendRequest{Run: r.ref.Run, Generation: 1, Ref: digest.FromBytes(r.file),
		Container: ledger.Container{Host: "host-a", Namespace: "ns", ID: "c1"}, Created: time.Now(), RunUID: r.ref.RunUID}); err != nil {
		t.Fatal(err)
	}
	pub, key, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	refPub, _ := r.trust.Lookup(r.trust.KeyIDs()[0])
	return &handoffRun{run: r, la: la, key: key, both: envelope.NewKeyRing(refPub, pub)}
}

func (h *handoffRun) export(t *testing.T, to string) ([]byte, error) {
	t.Helper()
	var buf bytes.Buffer
	_, err := migrate.Export(context.Background(), h.store, h.file, &buf, true,
		migrate.WithHandoff(&migrate.Handoff{Ledger: h.la, Host: "host-a", To: to, Key: h.key}))
	return buf.Bytes(), err
}

// TestHandoffExportImport: export --handoff records HandedOff and puts the
// statement last (the same bytes when retried); an import on the named
// host runs Received (retried: no change); on a third host it is 9 and
// stores nothing; the handed-off generation is 9 on the source.
func TestHandoffExportImport(t *testing.T) {
	ctx := context.Background()
	h := newHandoffRun(t)
	a1, err := h.export(t, "host-b")
	if err != nil {
		t.Fatal(err)
	}
	rec, _ := h.la.Get(ctx, h.ref.Run)
	if rec.State != ledger.StateHandedOff || rec.HandedOff == nil || rec.HandedOff.To != "host-b" {
		t.Fatalf("record after export --handoff = %s", rec)
	}
	a2, err := h.export(t, "host-b")
	if err != nil {
		t.Fatalf("retried export: %v", err)
	}
	if !bytes.Equal(a1, a2) {
		t.Error("a retried export wrote other bytes")
	}
	if _, err := h.export(t, "host-c"); !errors.Is(errdef.Class(err), errdef.ErrClaimConflict) {
		t.Errorf("second handoff to another host: %v, want claim-conflict", err)
	}
	if _, err := h.export(t, "host-a"); !errors.Is(err, errdef.ErrSuperseded) && !errors.Is(err, errdef.ErrClaimConflict) && !errors.Is(err, errdef.ErrBadInput) {
		t.Errorf("handoff to this host: %v", err)
	}
	// The source refuses the handed-off generation.
	_, err = h.la.Claim(ctx, ledger.ClaimRequest{Run: h.ref.Run, Generation: 1, Ref: digest.FromBytes(h.file), RunUID: h.ref.RunUID,
		Holder: ledger.Holder{Container: ledger.Container{Host: "host-a", Namespace: "ns", ID: "c2"}, PID: 1, Start: "s", Boot: "b"}})
	if ledger.CodeOf(err) != ledger.ReasonHandedOff {
		t.Errorf("claim on the source after the handoff: %v, want reason handed-off", err)
	}

	// The statement is the last layer, verifiable and about this ref.
	arch, err := migrate.ScanArchive(bytes.NewReader(a1))
	if err != nil {
		t.Fatal(err)
	}
	art, err := migrate.CheckArchive(arch, h.both)
	if err != nil {
		t.Fatal(err)
	}
	last := art.Layers[len(art.Layers)-1]
	if art.Statement == nil || last.MediaType != migrate.MediaTypeHandoff || art.Statement.To != "host-b" || art.Statement.From != "host-a" ||
		art.Statement.Created != rec.HandedOff.At.UTC().Format(time.RFC3339Nano) || art.Statement.Ref != digest.FromBytes(h.file) {
		t.Fatalf("statement %+v, last layer %+v", art.Statement, last)
	}

	// An untrusted statement: 6 (the ref alone is trusted).
	if _, err := migrate.CheckArchive(arch, h.trust); !errors.Is(err, envelope.ErrSignature) {
		t.Errorf("statement signed by an untrusted key: %v, want a signature error", err)
	}

	// A third host: 9, nothing stored.
	sc, lc := memhost.New(snapshot.Host{}), lfake.New()
	_, err = migrate.Import(ctx, sc, bytes.NewReader(a1), h.both, migrate.WithReceiver(&migrate.Receiver{Ledger: lc, Host: "host-c"}))
	if !errors.Is(errdef.Class(err), errdef.ErrSuperseded) || ledger.CodeOf(err) != ledger.ReasonHandedOff {
		t.Errorf("import on a third host: %v, want superseded (handed-off)", err)
	}
	if sc.Len() != 0 || len(sc.Leases()) != 0 {
		t.Errorf("import on a third host stored %d blobs, leases %v", sc.Len(), sc.Leases())
	}
	if _, err := lc.Get(ctx, h.ref.Run); !errors.Is(err, ledger.ErrNotFound) {
		t.Errorf("third host's ledger: %v", err)
	}
	// Without a receiver: refused, nothing stored.
	if _, err := migrate.Import(ctx, sc, bytes.NewReader(a1), h.both); err == nil || sc.Len() != 0 {
		t.Errorf("import of a statement without a ledger: %v (%d blobs)", err, sc.Len())
	}

	// The named host: Received, then the run lease.
	sb, lb := memhost.New(snapshot.Host{}), lfake.New()
	recv := migrate.WithReceiver(&migrate.Receiver{Ledger: lb, Host: "host-b"})
	res, err := migrate.Import(ctx, sb, bytes.NewReader(a1), h.both, recv)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := lb.Get(ctx, h.ref.Run)
	if res.Received == nil || got.State != ledger.StateSuspended || got.Received == nil || got.Received.From != "host-a" || got.Fence < rec.Fence {
		t.Fatalf("import on the named host: %+v, record %s", res.Received, got)
	}
	if !sb.Holds(snapshot.RunLease(h.ref.Run), last.Digest) {
		t.Error("the run lease does not hold the statement")
	}
	if _, err := migrate.Import(ctx, sb, bytes.NewReader(a1), h.both, recv); err != nil {
		t.Errorf("retried import: %v", err)
	}
}

// TestHandoffStatementOfAnotherRef: a statement signed for another ref in
// an artifact is refused (2), before anything is stored.
func TestHandoffStatementOfAnotherRef(t *testing.T) {
	h := newHandoffRun(t)
	a, err := h.export(t, "host-b")
	if err != nil {
		t.Fatal(err)
	}
	arch, err := migrate.ScanArchive(bytes.NewReader(a))
	if err != nil {
		t.Fatal(err)
	}
	art, err := migrate.CheckArchive(arch, h.both)
	if err != nil {
		t.Fatal(err)
	}
	st := *art.Statement
	st.Ref = digest.FromString("another ref")
	b, err := migrate.SignStatement(st, h.key)
	if err != nil {
		t.Fatal(err)
	}
	// Rebuild the artifact manifest with the other statement.
	var m ocispec.Manifest
	if err := json.Unmarshal(art.Body, &m); err != nil {
		t.Fatal(err)
	}
	m.Layers[len(m.Layers)-1] = ocispec.Descriptor{MediaType: migrate.MediaTypeHandoff, Digest: digest.FromBytes(b), Size: int64(len(b))}
	body, _ := json.Marshal(m)
	src := &mapSource{blobs: map[digest.Digest][]byte{digest.FromBytes(b): b, digest.FromBytes(art.RefFile): art.RefFile}}
	src.sizes = append(src.sizes, m.Layers[:len(m.Layers)-1]...)
	_, err = migrate.CheckArtifactManifest(src, ocispec.Descriptor{Digest: digest.FromBytes(body), Size: int64(len(body))}, body, h.both)
	if !errors.Is(err, migrate.ErrStatementRefused) || !errors.Is(err, migrate.ErrArtifactRefused) {
		t.Errorf("statement of another ref: %v, want ErrStatementRefused", err)
	}
}

// mapSource is a migrate.BlobSource over a few small blobs and the sizes
// of others.
type mapSource struct {
	blobs map[digest.Digest][]byte
	sizes []ocispec.Descriptor
}

func (m *mapSource) Blob(d digest.Digest) ([]byte, bool) { b, ok := m.blobs[d]; return b, ok }
func (m *mapSource) Size(d digest.Digest) (int64, bool) {
	if b, ok := m.blobs[d]; ok {
		return int64(len(b)), true
	}
	for _, s := range m.sizes {
		if s.Digest == d {
			return s.Size, true
		}
	}
	return 0, false
}

// TestHandoffNeedsTheContent: a run whose diff is not in the store is not
// handed off (7, the record stays suspended).
func TestHandoffNeedsTheContent(t *testing.T) {
	h := newHandoffRun(t)
	h.store.DeleteBlob(h.ref.Layers[0].Digest)
	if _, err := h.export(t, "host-b"); !errors.Is(err, errdef.ErrSnapshotMissing) {
		t.Fatalf("export --handoff without the diff: %v", err)
	}
	if rec, _ := h.la.Get(context.Background(), h.ref.Run); rec.State != ledger.StateSuspended {
		t.Errorf("record after a refused handoff: %s", rec)
	}
}
