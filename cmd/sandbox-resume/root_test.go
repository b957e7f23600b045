package main

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/sandbox-resume/sandbox-resume/internal/exitcode"
)

// TestJSONUsageErrors: under --output json every usage error, wherever
// cobra detects it, prints exactly one {"error": {"class": "usage", …}}
// object on stdout and exits 64 (docs/design.md "Resume decision": every command
// under --output json prints exactly one object; "CLI contract": 64).
func TestJSONUsageErrors(t *testing.T) {
	for _, args := range [][]string{
		{"--output", "json", "nosuch"},
		{"--output=json", "nosuch", "--ref", "x"},
		{"--output", "json"},
		{"resume", "--bogus", "--output", "json"},
		{"discard", "--bogus", "--output=json"},
		{"--output", "json", "discard"},                                    // a required flag
		{"--output", "json", "resume", "--check", "--start", "--ref", "r"}, // exclusive flags, and required ones
		{"--output", "json", "export", "--ref", "r", "extra"},              // an argument
	} {
		code, out, stderr := resumeRun(t, args...)
		var obj struct {
			Error *struct {
				Class   string `json:"class"`
				Message string `json:"message"`
			} `json:"error"`
		}
		dec := json.NewDecoder(strings.NewReader(out))
		err := dec.Decode(&obj)
		if err == nil && dec.More() {
			err = errors.New("more than one JSON value on stdout")
		}
		if code != exitcode.Usage || err != nil || obj.Error == nil || obj.Error.Class != "usage" || obj.Error.Message == "" {
			t.Errorf("%q: exit %d, stdout %q (%v), stderr %q; want 64 and one usage error object", args, code, out, err, stderr)
		}
	}
}

// TestUnknownCommandText: an unknown command is a usage error (64) in text
// mode too, naming the command on stderr.
func TestUnknownCommandText(t *testing.T) {
	code, out, stderr := resumeRun(t, "nosuch")
	if code != exitcode.Usage || out != "" || !strings.Contains(stderr, `"nosuch"`) {
		t.Errorf("exit %d, stdout %q, stderr %q; want 64 naming \"nosuch\"", code, out, stderr)
	}
}
