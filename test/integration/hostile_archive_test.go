package integration

import (
	"archive/tar"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/containerd/containerd/v2/pkg/namespaces"
	"github.com/opencontainers/go-digest"

	"github.com/sandbox-resume/sandbox-resume/test/integration/harness"
)

// paxSparse returns a GNU PAX sparse (1.0) tar entry named name whose
// expanded content is size zero bytes, with no end-of-archive blocks:
// an 'x' header with GNU.sparse.* records, then the sparse map (one hole).
func paxSparse(t *testing.T, name string, size int64) []byte {
	t.Helper()
	rec := func(k, v string) string {
		body := " " + k + "=" + v + "\n"
		n := len(body) + 1
		for len(strconv.Itoa(n))+len(body) != n {
			n = len(strconv.Itoa(n)) + len(body)
		}
		return strconv.Itoa(n) + body
	}
	pax := rec("GNU.sparse.major", "1") + rec("GNU.sparse.minor", "0") + rec("GNU.sparse.name", name) + rec("GNU.sparse.realsize", strconv.FormatInt(size, 10))
	smap := []byte(fmt.Sprintf("1\n%d\n0\n", size))
	smap = append(smap, make([]byte, 512-len(smap))...)
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range []struct {
		name string
		data []byte
	}{{"PaxHeaders/x", []byte(pax)}, {"GNUSparseFile.0/x", smap}} {
		if err := tw.WriteHeader(&tar.Header{Name: e.name, Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(len(e.data)), Format: tar.FormatUSTAR}); err != nil {
			t.Fatal(err)
		}
		tw.Write(e.data)
	}
	tw.Flush()
	b := buf.Bytes()
	b[156] = 'x'
	copy(b[148:156], "        ")
	sum := 0
	for _, c := range b[:512] {
		sum += int(c)
	}
	copy(b[148:156], fmt.Sprintf("%06o\x00 ", sum))
	return b
}

// TestImportHostileArchivesHardening: docs/design.md "Hardening",
// "Archives", through the CLI on a real daemon: an exported archive with a
// 2 KB PAX-sparse entry appended (measured before: import wrote 256 MiB
// into the content store, exit 0) or with an unreferenced blob appended is
// refused (2), and the namespace's content store and leases stay empty.
func TestImportHostileArchivesHardening(t *testing.T) {
	a := harness.Start(t, "hha")
	b := harness.Start(t, "hhb")
	bb := harness.ImportBusybox(t, a, "busybox:1")
	s := suspendReal(t, a, pinnedConfig(bb), nil)
	dir := t.TempDir()
	good := filepath.Join(dir, "good.tar")
	mustCLI(t, a, "", nil, "export", "--ref", s.refPath, "--out", good, "--with-base")
	trustDir := filepath.Join(dir, "trust")
	os.Mkdir(trustDir, 0o755)
	pub, _ := os.ReadFile(s.pub)
	os.WriteFile(filepath.Join(trustDir, "signer.pub"), pub, 0o644)
	mustCLI(t, b, b.NewNamespace(), nil, "import", good, "--trust", trustDir)

	// The archive without its end blocks, rewritten by archive/tar.
	plain := filepath.Join(dir, "plain.tar")
	writeEntries(t, plain, readEntries(t, good))
	body, err := os.ReadFile(plain)
	if err != nil {
		t.Fatal(err)
	}
	body = body[:len(body)-1024]
	const size = 256 << 20
	zeros := digest.SHA256.Digester()
	chunk := make([]byte, 1<<20)
	for i := 0; i < size/len(chunk); i++ {
		zeros.Hash().Write(chunk)
	}
	stowaway := []byte(strings.Repeat("unreferenced ", 100))
	var extra bytes.Buffer
	tw := tar.NewWriter(&extra)
	tw.WriteHeader(&tar.Header{Name: "blobs/sha256/" + digest.FromBytes(stowaway).Encoded(), Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(len(stowaway))})
	tw.Write(stowaway)
	tw.Flush()

	for name, tail := range map[string][]byte{
		"pax sparse":        paxSparse(t, "blobs/sha256/"+zeros.Digest().Encoded(), size),
		"unreferenced blob": extra.Bytes(),
	} {
		t.Run(name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "hostile.tar")
			if err := os.WriteFile(p, append(append(append([]byte(nil), body...), tail...), make([]byte, 1024)...), 0o644); err != nil {
				t.Fatal(err)
			}
			ns := b.NewNamespace()
			code, stdout, stderr := srcli(t, b, ns, "import", p, "--trust", trustDir)
			if code != 2 {
				t.Fatalf("import: exit %d, want 2\nstdout: %s\nstderr: %s", code, stdout, stderr)
			}
			var je struct {
				Error struct{ Class, Message string } `json:"error"`
			}
			if err := json.Unmarshal(stdout, &je); err != nil || je.Error.Class != "bad-input" {
				t.Errorf("stdout is not a bad-input JSON error (%v): %s", err, stdout)
			}
			t.Logf("refused: %s", je.Error.Message)
			if n := countBlobs(t, b, ns); n != 0 {
				t.Errorf("%d blobs in the content store of %s after the refusal", n, ns)
			}
			ls, err := b.Client.LeasesService().List(namespaces.WithNamespace(ctx(t), ns))
			if err != nil || len(ls) != 0 {
				t.Errorf("leases left after the refusal: %v (%v)", ls, err)
			}
		})
	}
}
