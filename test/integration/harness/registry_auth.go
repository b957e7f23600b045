package harness

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sandbox-resume/sandbox-resume/internal/testenv"
)

// HtpasswdBinary makes the bcrypt htpasswd file of an authenticated
// registry (Debian's apache2-utils, installed by `make deps`).
const HtpasswdBinary = "/usr/bin/htpasswd"

// RegistryConfig is what StartRegistryWith adds to the open plain-HTTP
// registry of StartRegistry.
type RegistryConfig struct {
	// Users are htpasswd users (name → password): the registry then asks
	// for basic auth on every request. Empty: open.
	Users map[string]string
	// TLS serves https with a certificate for 127.0.0.1 and localhost,
	// signed by a CA made for this registry (Registry.CAFile).
	TLS bool
}

// configure writes what cfg needs into r.Dir (htpasswd file, CA, key and
// certificate) and returns the YAML to append under the registry config's
// top level (its "http:" section is the last one written).
func (cfg RegistryConfig) configure(t testing.TB, r *Registry) string {
	t.Helper()
	var yml string
	if cfg.TLS {
		r.CAFile, r.CertDir = writeTLS(t, r.Dir)
		yml += fmt.Sprintf("  tls:\n    certificate: %s\n    key: %s\n", filepath.Join(r.Dir, "cert.pem"), filepath.Join(r.Dir, "key.pem"))
	}
	if len(cfg.Users) > 0 {
		if _, err := os.Stat(HtpasswdBinary); err != nil {
			testenv.Missing(t, "harness: %s (apt-get install apache2-utils, or `make deps`): %v", HtpasswdBinary, err)
		}
		path := filepath.Join(r.Dir, "htpasswd")
		names := make([]string, 0, len(cfg.Users))
		for name := range cfg.Users {
			names = append(names, name)
		}
		slices.Sort(names)
		var lines []string
		for _, name := range names {
			// -B bcrypt (the only hash distribution accepts), -b password on
			// the command line, -n print instead of writing a file.
			out, err := exec.Command(HtpasswdBinary, "-Bbn", name, cfg.Users[name]).Output()
			if err != nil {
				t.Fatalf("harness: htpasswd -Bbn %s: %v", name, err)
			}
			lines = append(lines, strings.TrimSpace(string(out)))
		}
		if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		yml += fmt.Sprintf("auth:\n  htpasswd:\n    realm: sandbox-resume-test\n    path: %s\n", path)
	}
	return yml
}

// writeTLS makes a CA and a certificate for 127.0.0.1, ::1 and localhost
// signed by it, writes ca.pem, cert.pem and key.pem into dir and the CA as
// certs/ca.crt, and returns the CA's path and the certs directory.
func writeTLS(t testing.TB, dir string) (string, string) {
	t.Helper()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "sandbox-resume test CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		t.Fatal(err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	leaf := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "127.0.0.1"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback}, DNSNames: []string{"localhost"},
	}
	der, err := x509.CreateCertificate(rand.Reader, leaf, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	caPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER})
	certDir := filepath.Join(dir, "certs")
	if err := os.MkdirAll(certDir, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, data := range map[string][]byte{
		filepath.Join(dir, "ca.pem"):     caPEM,
		filepath.Join(certDir, "ca.crt"): caPEM,
		filepath.Join(dir, "cert.pem"):   pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		filepath.Join(dir, "key.pem"):    pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}),
	} {
		if err := os.WriteFile(name, data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return filepath.Join(dir, "ca.pem"), certDir
}

// URL is the registry's base URL: https://HOST with TLS, else http://HOST.
func (r *Registry) URL() string {
	if r.CAFile != "" {
		return "https://" + r.Host
	}
	return "http://" + r.Host
}

// Client is an HTTP client for the registry: no proxy, trusting its CA
// (when TLS), with the given timeout (0: none).
func (r *Registry) Client(timeout time.Duration) *http.Client {
	tr := &http.Transport{Proxy: nil}
	if r.CAFile != "" {
		pool := x509.NewCertPool()
		if b, err := os.ReadFile(r.CAFile); err == nil {
			pool.AppendCertsFromPEM(b)
		}
		tr.TLSClientConfig = &tls.Config{RootCAs: pool}
	}
	return &http.Client{Timeout: timeout, Transport: tr}
}

// Tags lists repo's tags with basic auth user:password (empty user: none);
// a repository that does not exist has none.
func (r *Registry) Tags(t testing.TB, repo, user, password string) []string {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, r.URL()+"/v2/"+repo+"/tags/list", nil)
	if err != nil {
		t.Fatal(err)
	}
	if user != "" {
		req.SetBasicAuth(user, password)
	}
	resp, err := r.Client(10 * time.Second).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusNotFound {
		return nil
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("harness: tags of %s: %s", repo, resp.Status)
	}
	var tl struct {
		Tags []string `json:"tags"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&tl); err != nil {
		t.Fatal(err)
	}
	return tl.Tags
}

// DockerConfig writes a Docker config.json into a new directory of the
// test and returns the directory (for $DOCKER_CONFIG) and the file (for
// --registry-config). auths maps a registry host to "user:password";
// helpers maps a host to a credential helper suffix (credHelpers).
func DockerConfig(t testing.TB, auths, helpers map[string]string) (dir, file string) {
	t.Helper()
	cfg := map[string]any{}
	if len(auths) > 0 {
		a := map[string]any{}
		for host, up := range auths {
			a[host] = map[string]string{"auth": base64.StdEncoding.EncodeToString([]byte(up))}
		}
		cfg["auths"] = a
	}
	if len(helpers) > 0 {
		cfg["credHelpers"] = helpers
	}
	b, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	dir = t.TempDir()
	file = filepath.Join(dir, "config.json")
	if err := os.WriteFile(file, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return dir, file
}
