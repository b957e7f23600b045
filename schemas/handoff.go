package schemas

import (
	"reflect"

	"github.com/sandbox-resume/sandbox-resume/envelope"
	"github.com/sandbox-resume/sandbox-resume/migrate"
	"github.com/sandbox-resume/sandbox-resume/snapshot"
)

// FileHandoff is the schema of a handoff statement file
// {"handoff": …, "signatures": […]} (docs/design.md "Exactly once across
// hosts").
const FileHandoff = "handoff.schema.json"

// signedHandoff is the wire shape of a handoff statement file.
type signedHandoff struct {
	Handoff    migrate.Statement    `json:"handoff"`
	Signatures []envelope.Signature `json:"signatures"`
}

// handoffSchema is reflected from migrate.Statement.
func handoffSchema() map[string]any {
	r := coreReflector()
	r.fields["signedHandoff.signatures"] = signatures()
	r.descrip["Statement"] = "the handoff statement (" + migrate.SchemaHandoff + ", media type " + migrate.MediaTypeHandoff +
		"): generation generation of run run (runUID, ref = sha256 of the ref file bytes) handed from host from to host to with fence fence; created is the handing-off record's handedOff.at, so a retried export signs the same bytes"
	r.fields["Statement.schema"] = set(map[string]any{"const": migrate.SchemaHandoff})
	r.fields["Statement.run"] = set(map[string]any{"pattern": "^[a-z0-9]+(?:[._-][a-z0-9]+)*$", "maxLength": snapshot.MaxRunIDLen})
	r.fields["Statement.runUID"] = set(map[string]any{"pattern": "^ruid:[0-9a-f]{32}$"})
	r.fields["Statement.generation"] = set(map[string]any{"minimum": 1})
	r.fields["Statement.from"] = set(map[string]any{"minLength": 1, "description": "the host id that handed the run over"})
	r.fields["Statement.to"] = set(map[string]any{"minLength": 1, "description": "the host id the run is handed to: only it runs Received"})
	r.fields["Statement.created"] = set(map[string]any{"format": "date-time", "description": "RFC 3339 with nanoseconds, UTC: the record's handedOff.at"})
	body := r.structSchema(reflect.TypeFor[signedHandoff](), "signedHandoff")
	return root(FileHandoff, "sandbox-resume handoff statement",
		"A handoff statement file (docs/design.md \"Exactly once across hosts\"): the statement under \""+migrate.MemberHandoff+"\" and its signatures over the statement's JCS bytes as parsed; the migration artifact's last layer when the run was handed over.",
		body, r.defs)
}
