package containerd

import (
	"context"
	"encoding/base64"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/containerd/errdefs"
)

func b64(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }

// writeHelper puts a docker-credential-<name> shell script on PATH that
// answers "get" for helper.example with bob/s3cret and "not found" for
// anything else.
func writeHelper(t *testing.T, name string) {
	t.Helper()
	dir := t.TempDir()
	script := `#!/bin/sh
[ "$1" = get ] || exit 1
read -r server
case "$server" in
helper.example) printf '{"ServerURL":"%s","Username":"bob","Secret":"s3cret"}' "$server" ;;
*) echo "credentials not found in native keychain"; exit 1 ;;
esac
`
	if err := os.WriteFile(filepath.Join(dir, "docker-credential-"+name), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", dir+string(os.PathListSeparator)+os.Getenv("PATH"))
}

func writeConfig(t *testing.T, dir, body string) string {
	t.Helper()
	p := filepath.Join(dir, "config.json")
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestCredentialLookup(t *testing.T) {
	writeHelper(t, "srtest")
	dir := t.TempDir()
	writeConfig(t, dir, `{
		"auths": {
			"127.0.0.1:5000": {"auth": "`+b64("alice:pw1")+`"},
			"https://legacy.example:5443/v1/": {"auth": "`+b64("carol:pw2")+`"},
			"https://index.docker.io/v1/": {"auth": "`+b64("dave:pw3")+`"},
			"token.example": {"identitytoken": "idtok"}
		},
		"credHelpers": {"helper.example": "srtest", "broken.example": "absent-helper"}
	}`)
	t.Setenv("DOCKER_CONFIG", dir)
	t.Setenv("HOME", t.TempDir()) // the default must come from DOCKER_CONFIG
	reg, err := NewTransport(RegistryOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if reg.ConfigPath() != filepath.Join(dir, "config.json") {
		t.Errorf("config path %s", reg.ConfigPath())
	}
	ctx := context.Background()
	creds := reg.containerdCreds(ctx)
	for _, tc := range []struct{ host, user, secret string }{
		{"127.0.0.1:5000", "alice", "pw1"},
		{"legacy.example:5443", "carol", "pw2"}, // a legacy key with scheme and path
		{"registry-1.docker.io", "dave", "pw3"}, // Docker Hub's key
		{"helper.example", "bob", "s3cret"},     // credHelpers
		{"token.example", "", "idtok"},          // identity token: refresh token for containerd
		{"127.0.0.1:5001", "", ""},              // no entry: anonymous
	} {
		u, s, err := creds(tc.host)
		if err != nil || u != tc.user || s != tc.secret {
			t.Errorf("%s: %q %q %v; want %q %q", tc.host, u, s, err, tc.user, tc.secret)
		}
	}
	if _, _, err := creds("broken.example"); err == nil || !strings.Contains(err.Error(), "broken.example") || !strings.Contains(err.Error(), dir) {
		t.Errorf("a missing helper: %v, want an error naming the host and the config", err)
	}
}

func TestCredentialsConfigFile(t *testing.T) {
	t.Setenv("DOCKER_CONFIG", t.TempDir()) // empty: must not be read
	writeHelper(t, "srtest")
	dir := t.TempDir()
	p := writeConfig(t, dir, `{"credsStore": "srtest"}`)
	reg, err := NewTransport(RegistryOptions{ConfigFile: p})
	if err != nil {
		t.Fatal(err)
	}
	if u, s, err := reg.containerdCreds(context.Background())("helper.example"); err != nil || u != "bob" || s != "s3cret" {
		t.Errorf("credsStore: %q %q %v", u, s, err)
	}
	if u, s, err := reg.containerdCreds(context.Background())("other.example"); err != nil || u != "" || s != "" {
		t.Errorf("credsStore without an entry: %q %q %v, want anonymous", u, s, err)
	}

	t.Run("absent default is no credentials", func(t *testing.T) {
		t.Setenv("DOCKER_CONFIG", filepath.Join(t.TempDir(), "none"))
		if _, err := NewTransport(RegistryOptions{}); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("missing --registry-config", func(t *testing.T) {
		_, err := NewTransport(RegistryOptions{ConfigFile: filepath.Join(dir, "nope.json")})
		if !errors.Is(err, fs.ErrNotExist) || !errors.Is(err, errdefs.ErrInvalidArgument) || !strings.Contains(err.Error(), "nope.json") {
			t.Errorf("err %v", err)
		}
	})
	t.Run("malformed", func(t *testing.T) {
		bad := writeConfig(t, t.TempDir(), `{"auths": [1]}`)
		_, err := NewTransport(RegistryOptions{ConfigFile: bad})
		if !errors.Is(err, errdefs.ErrInvalidArgument) || !strings.Contains(err.Error(), bad) {
			t.Errorf("err %v", err)
		}
	})
	t.Run("CA file", func(t *testing.T) {
		_, err := NewTransport(RegistryOptions{CACertFile: p}) // JSON, no PEM
		if !errors.Is(err, errdefs.ErrInvalidArgument) || !strings.Contains(err.Error(), "no PEM certificate") {
			t.Errorf("err %v", err)
		}
		_, err = NewTransport(RegistryOptions{CACertFile: filepath.Join(dir, "ca.pem")})
		if !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("err %v", err)
		}
	})
}
