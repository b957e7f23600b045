package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/sandbox-resume/sandbox-resume/resume"
	"github.com/sandbox-resume/sandbox-resume/runspec"
)

// TestVerdictTextDrift: the verdict text lists manifest drift and spec
// drift one line each, an absent side as "absent", the offered pointer when
// it differs, and an allowed spec difference marked as such.
func TestVerdictTextDrift(t *testing.T) {
	v := &resume.Verdict{
		Drift: []resume.DriftEntry{
			{Pointer: "/containerEnv/LANG", Recorded: json.RawMessage(`"C.UTF-8"`), Offered: json.RawMessage(`"C"`)},
			{Pointer: "/features/x", Recorded: json.RawMessage(`{}`)},
		},
		SpecDrift: []runspec.SpecDrift{
			{Pointer: "/process/capabilities/bounding/1", OfferedPointer: "/process/capabilities/bounding/2", Offered: json.RawMessage(`"CAP_SYS_ADMIN"`)},
			{Pointer: "/mounts/3", Recorded: json.RawMessage(`{"destination":"/w"}`), Offered: json.RawMessage(`{"destination":"/w","source":"/b"}`), Allowed: true},
		},
	}
	var b strings.Builder
	writeVerdictText(&b, v)
	for _, want := range []string{
		"\ndrift (2):\n" +
			`  /containerEnv/LANG: recorded "C.UTF-8", offered "C"` + "\n" +
			"  /features/x: recorded {}, offered absent\n",
		"\nspec drift (2):\n" +
			`  /process/capabilities/bounding/1 (offered at /process/capabilities/bounding/2): recorded absent, offered "CAP_SYS_ADMIN"` + "\n" +
			`  /mounts/3: recorded {"destination":"/w"}, offered {"destination":"/w","source":"/b"} (allowed)` + "\n",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("verdict text lacks\n%s\ngot:\n%s", want, b.String())
		}
	}
}
