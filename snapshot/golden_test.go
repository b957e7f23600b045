package snapshot

import (
	"bytes"
	"encoding/base64"
	"errors"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sandbox-resume/sandbox-resume/envelope"
	"github.com/sandbox-resume/sandbox-resume/envmanifest"
	"github.com/sandbox-resume/sandbox-resume/internal/testenv"
)

var update = flag.Bool("update", false, "rewrite testdata/*.ref.json from the hand-written canonical bytes")

// goldenVectors are the SnapshotRef golden vectors in testdata/: NAME.ref.jcs
// (the ref's canonical bytes, written by hand), NAME.core.jcs (its core's
// canonical bytes, written by hand) and NAME.ref.json (the signed file,
// signed with testdata/ref-test.key; regenerated with -update). "pinned"
// and "minimal" are sandbox.snapshot-ref/1; the ref2/ ones are /2
// (testdata/ref2/README.md), the ref3/ ones /3 (testdata/ref3/README.md).
var goldenVectors = []string{"pinned", "minimal", "ref2/g1", "ref2/g2", "ref3/g1", "ref3/g2"}

func testKey(t testing.TB) *envelope.KeyRing {
	t.Helper()
	pub, err := envelope.LoadPublicKey(filepath.Join("testdata", "ref-test.pub"))
	if err != nil {
		t.Fatal(err)
	}
	return envelope.NewKeyRing(pub)
}

func needTool(t *testing.T, name string) string {
	t.Helper()
	return testenv.LookPath(t, name, "make deps installs it")
}

func TestGoldenRefs(t *testing.T) {
	priv, err := envelope.LoadPrivateKey(filepath.Join("testdata", "ref-test.key"))
	if err != nil {
		t.Fatal(err)
	}
	trust := testKey(t)
	for _, name := range goldenVectors {
		t.Run(name, func(t *testing.T) {
			canonical := readTestdata(t, name+".ref.jcs")
			coreBytes := readTestdata(t, name+".core.jcs")
			// The hand-written bytes are a ref: it decodes, and re-encoding
			// the Go value gives the same bytes back.
			doc, err := envmanifest.ParseSigned(append(append([]byte(`{"ref":`), canonical...), []byte(`,"signatures":[]}`)...), "ref")
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(doc.Canonical, canonical) {
				t.Fatalf("hand-written bytes are not in JCS form:\n got %s\nwant %s", doc.Canonical, canonical)
			}
			r, err := decodeRef(doc.Inner)
			if err != nil {
				t.Fatal(err)
			}
			if err := checkIntegrity(r, doc.Inner); err != nil {
				t.Fatal(err)
			}
			got, err := r.Canonical()
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, canonical) {
				t.Fatalf("Ref.Canonical differs from the hand-written bytes:\n got %s\nwant %s", got, canonical)
			}
			gotCore, err := r.Core.Canonical()
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(gotCore, coreBytes) || !bytes.Contains(canonical, append([]byte(`"core":`), coreBytes...)) {
				t.Fatalf("core bytes differ:\n got %s\nwant %s", gotCore, coreBytes)
			}
			file, err := SignRef(r, priv)
			if err != nil {
				t.Fatal(err)
			}
			path := filepath.Join("testdata", name+".ref.json")
			if *update {
				if err := os.WriteFile(path, file, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			if want := readTestdata(t, name+".ref.json"); !bytes.Equal(file, want) {
				t.Fatalf("SignRef differs from %s (run with -update after checking why):\n got %s\nwant %s", path, file, want)
			}
			opened, err := OpenRef(file, trust)
			if err != nil {
				t.Fatal(err)
			}
			if opened.Manifest != r.Manifest || opened.Run != r.Run {
				t.Fatalf("OpenRef = %+v", opened)
			}
		})
	}
}

// TestGoldenRefsExternalTools checks the golden vectors with tools that
// share no code with this package: b3sum over the hand-written core bytes
// gives the recorded manifest address, and openssl verifies the signature
// in the signed file over the hand-written ref bytes.
func TestGoldenRefsExternalTools(t *testing.T) {
	b3sum := needTool(t, "b3sum")
	openssl := needTool(t, "openssl")
	for _, name := range goldenVectors {
		t.Run(name, func(t *testing.T) {
			out, err := exec.Command(b3sum, "--no-names", filepath.Join("testdata", name+".core.jcs")).Output()
			if err != nil {
				t.Fatal(err)
			}
			address := "blake3:" + strings.TrimSpace(string(out))
			canonical := readTestdata(t, name+".ref.jcs")
			if !bytes.Contains(canonical, []byte(`"manifest":"`+address+`"`)) {
				t.Fatalf("b3sum address %s is not the recorded manifest in %s.ref.jcs", address, name)
			}
			doc, err := parseRefFile(readTestdata(t, name+".ref.json"))
			if err != nil {
				t.Fatal(err)
			}
			if len(doc.Signatures) != 1 {
				t.Fatalf("%d signatures, want 1", len(doc.Signatures))
			}
			sig, err := base64.StdEncoding.Strict().DecodeString(doc.Signatures[0].Sig)
			if err != nil {
				t.Fatal(err)
			}
			dir := t.TempDir()
			sigPath := filepath.Join(dir, "sig")
			if err := os.WriteFile(sigPath, sig, 0o644); err != nil {
				t.Fatal(err)
			}
			verify := func(data string) error {
				return exec.Command(openssl, "pkeyutl", "-verify", "-pubin", "-inkey", filepath.Join("testdata", "ref-test.pub"),
					"-rawin", "-in", data, "-sigfile", sigPath).Run()
			}
			if err := verify(filepath.Join("testdata", name+".ref.jcs")); err != nil {
				t.Fatalf("openssl does not verify the signature over %s.ref.jcs: %v", name, err)
			}
			// The check can fail: a one-byte change does not verify.
			flipped := bytes.Replace(canonical, []byte(`"run":"`), []byte(`"run":"x`), 1)
			fp := filepath.Join(dir, "flipped")
			if err := os.WriteFile(fp, flipped, 0o644); err != nil {
				t.Fatal(err)
			}
			var ee *exec.ExitError
			if err := verify(fp); !errors.As(err, &ee) {
				t.Fatalf("openssl verified a changed document (err %v)", err)
			}
		})
	}
}

func readTestdata(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}
