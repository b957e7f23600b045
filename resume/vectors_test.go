package resume_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sandbox-resume/sandbox-resume/envelope"
	"github.com/sandbox-resume/sandbox-resume/resume"
	"github.com/sandbox-resume/sandbox-resume/snapshot"
)

// refVectorsDirs hold the hand-written SnapshotRef vectors and their
// expectations tables (snapshot/testdata/ref2/README.md for /1 and /2,
// snapshot/testdata/ref3/README.md for /3).
var refVectorsDirs = []string{"../snapshot/testdata/ref2", "../snapshot/testdata/ref3"}

// TestRefVectorsDecide runs every vector of the tables through the resume
// decision, signed with a trusted key: a refused one fails check
// ref-schema with the table's class and exit code (and every later check
// is skipped); an accepted one passes checks 1–3 (the later checks judge
// facts the vectors do not have).
func TestRefVectorsDecide(t *testing.T) {
	for _, dir := range refVectorsDirs {
		t.Run(filepath.Base(dir), func(t *testing.T) { testRefVectorsDecide(t, dir) })
	}
}

func testRefVectorsDecide(t *testing.T, refVectorsDir string) {
	var table struct {
		Vectors []struct {
			File     string `json:"file"`
			Name     string `json:"name"`
			Accepted bool   `json:"accepted"`
			Check    string `json:"check"`
			Class    string `json:"class"`
			ExitCode int    `json:"exitCode"`
		} `json:"vectors"`
	}
	b, err := os.ReadFile(filepath.Join(refVectorsDir, "vectors.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &table); err != nil {
		t.Fatal(err)
	}
	fx := newFixture(t, baseConfig)
	priv, err := envelope.LoadPrivateKey(filepath.Join(refVectorsDir, "..", "ref-test.key"))
	if err != nil {
		t.Fatal(err)
	}
	pub, err := envelope.LoadPublicKey(filepath.Join(refVectorsDir, "..", "ref-test.pub"))
	if err != nil {
		t.Fatal(err)
	}
	for _, vec := range table.Vectors {
		t.Run(vec.Name, func(t *testing.T) {
			canonical, err := os.ReadFile(filepath.Join(refVectorsDir, vec.File))
			if err != nil {
				t.Fatal(err)
			}
			file, err := envelope.Sign(envelope.MemberRef, canonical, priv)
			if err != nil {
				t.Fatal(err)
			}
			req := fx.request(file)
			req.Trust = envelope.NewKeyRing(pub)
			v := resume.Decide(context.Background(), fx.facts, fx.ledger, req)
			if vec.Accepted {
				for _, c := range v.Checks[:3] {
					if c.Result != resume.ResultPass {
						t.Fatalf("check %s: %s (%s)", c.Name, c.Result, c.Detail)
					}
				}
				return
			}
			wantVerdict(t, v, vec.ExitCode, resume.Class(vec.Class), vec.Check)
		})
	}
}

// TestResumeV1Ref: a sandbox.snapshot-ref/1 ref (no spec, its rootfsDiff
// as the one layer) is still decided and materialized as generation 1.
func TestResumeV1Ref(t *testing.T) {
	fx, m := materializable(t, baseConfig)
	fx.ref.Schema, fx.ref.Spec, fx.ref.Runtime, fx.ref.RunUID = snapshot.RefSchemaV1, nil, nil, ""
	if !bytes.Contains(fx.signed(), []byte(`"rootfsDiff"`)) {
		t.Fatalf("the fixture did not write a /1 ref:\n%s", fx.signed())
	}
	v := resumeWith(fx, m, resume.ResumeOptions{})
	wantVerdict(t, v, 0, "", "")
	c, ok := m.Incarnation(v.Container)
	if !ok || len(c.Spec.Layers) != 1 || c.Spec.Layers[0] != fx.ref.Layers[0] {
		t.Fatalf("container %q: %+v", v.Container, c)
	}
	if d := v.Checks[8].Detail; !strings.Contains(d, "/ref/rootfsDiff") || strings.Contains(d, "/ref/spec") {
		t.Errorf("snapshot check detail %q", d)
	}
}
