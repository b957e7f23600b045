package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/containerd/errdefs"

	"github.com/sandbox-resume/sandbox-resume/internal/exitcode"
)

// TestClassifyRegistry pins the exit codes of registry failures
// (docs/design.md "CLI contract": bad credentials and other registry
// errors are 1).
func TestClassifyRegistry(t *testing.T) {
	for name, err := range map[string]error{
		"unauthorized":  fmt.Errorf("registry r.example: %w (credentials from c): %w", errdefs.ErrUnauthenticated, fmt.Errorf("401")),
		"access denied": fmt.Errorf("registry r.example: %w: 403", errdefs.ErrPermissionDenied),
		"no tag of run": fmt.Errorf("repository r.example/runs has no tag a.g<n> of run a: %w", errdefs.ErrNotFound),
	} {
		if c := classify(err); c != exitcode.ClassInternal || c.Code() != 1 {
			t.Errorf("%s: %s (exit %d), want internal (1)", name, c, c.Code())
		}
	}
}

// TestRegistryFlagFiles: a --registry-config or --registry-cacert file that
// is missing or does not decode is bad input (2), named, before any daemon
// is dialled.
func TestRegistryFlagFiles(t *testing.T) {
	dir := t.TempDir()
	ref := filepath.Join(dir, "ref.json")
	os.WriteFile(ref, []byte("{}"), 0o644)
	bad := filepath.Join(dir, "bad.json")
	os.WriteFile(bad, []byte(`{"auths": [`), 0o644)
	noPEM := filepath.Join(dir, "ca.pem")
	os.WriteFile(noPEM, []byte("not a certificate"), 0o644)
	key := filepath.Join(dir, "k")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"push", "--registry-config", filepath.Join(dir, "absent.json"), "--ref", ref, "127.0.0.1:5000/runs:t"}, "absent.json"},
		{[]string{"push", "--registry-config", bad, "--ref", ref, "127.0.0.1:5000/runs:t"}, "bad.json"},
		{[]string{"pull", "--registry-cacert", noPEM, "--trust", key + ".pub", "--out", filepath.Join(dir, "o"), "127.0.0.1:5000/runs:t"}, "no PEM certificate"},
	} {
		if tc.args[0] == "pull" {
			var out bytes.Buffer
			if code := run(context.Background(), []string{"keygen", "--out", key, "--force"}, nil, &out, &out); code != 0 {
				t.Fatalf("keygen: %d %s", code, out.String())
			}
		}
		var stdout, stderr bytes.Buffer
		args := append([]string{"--address", filepath.Join(dir, "no.sock"), "--output", "json"}, tc.args...)
		code := run(context.Background(), args, nil, &stdout, &stderr)
		if code != 2 || !strings.Contains(stdout.String(), `"bad-input"`) || !strings.Contains(stdout.String(), tc.want) {
			t.Errorf("%v: exit %d %s, want 2 (bad-input) naming %q", tc.args, code, stdout.String(), tc.want)
		}
	}
}
