package schemas

import (
	"crypto/ed25519"
	"crypto/rand"
	"strings"
	"testing"

	"github.com/opencontainers/go-digest"

	"github.com/sandbox-resume/sandbox-resume/migrate"
)

// TestHandoffSchema validates a statement file migrate.SignStatement wrote
// against handoff.schema.json, and refuses edited ones.
func TestHandoffSchema(t *testing.T) {
	_, key, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	st := migrate.Statement{Schema: migrate.SchemaHandoff, Run: "demo-1", RunUID: "ruid:0123456789abcdef0123456789abcdef", Generation: 2,
		Ref: digest.FromString("ref"), From: "host-a", To: "host-b", Fence: 3, Created: "2026-12-04T20:00:00.123456789Z"}
	sign := func(st migrate.Statement) []byte {
		b, err := migrate.SignStatement(st, key)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	bad := st
	bad.RunUID = "ruid:XYZ"
	zero := st
	zero.Generation = 0
	docs := []ajvDoc{
		{ID: "ok", Schema: FileHandoff, Data: sign(st)},
		{ID: "bad-uid", Schema: FileHandoff, Data: sign(bad)},
		{ID: "generation-0", Schema: FileHandoff, Data: sign(zero)},
		{ID: "extra", Schema: FileHandoff, Data: []byte(strings.Replace(string(sign(st)), `"from"`, `"extra": 1, "from"`, 1))},
	}
	res := inProcess(t)(docs)
	if !res["ok"].Valid {
		t.Errorf("a signed statement does not validate: %+v", res["ok"])
	}
	for _, id := range []string{"bad-uid", "generation-0", "extra"} {
		if res[id].Valid {
			t.Errorf("%s validates", id)
		}
	}
}
