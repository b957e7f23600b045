package etcd

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/sandbox-resume/sandbox-resume/internal/inputfile"
	"github.com/sandbox-resume/sandbox-resume/ledger"
)

// Scheme starts every ledger URL this package parses: etcd://HOST:PORT...
const Scheme = "etcd://"

// DefaultPrefix is the key prefix when the URL names none: records live at
// /sandbox-resume/runs/<run>, claim keys at /sandbox-resume/claims/<run>.
const DefaultPrefix = "/sandbox-resume"

// DefaultClaimTTL is the TTL of a claim's lease (docs/design.md "The run
// ledger": 30 s): a resumer that stops keeping it alive is judged gone this
// long after its last keep-alive.
const DefaultClaimTTL = 30 * time.Second

// ErrConfig is wrapped by every error of ParseURL and of Open's validation
// of a Config; it also matches ledger.ErrInvalid.
var ErrConfig = fmt.Errorf("etcd ledger configuration: %w", ledger.ErrInvalid)

// TLS names the PEM files of a TLS connection to the cluster (the CLI's
// --ledger-cacert, --ledger-cert and --ledger-key). The zero value is a
// plain-text connection.
type TLS struct {
	// CACert is the CA bundle that verifies the members' certificates;
	// empty: the system's roots.
	CACert string
	// Cert and Key are the client certificate and its key, presented to a
	// cluster that requires client certificates; both or neither.
	Cert, Key string
}

// Enabled reports whether any TLS file is named.
func (t TLS) Enabled() bool { return t.CACert != "" || t.Cert != "" || t.Key != "" }

// Config configures a ledger on an etcd cluster (docs/design.md "The run
// ledger"). Only Endpoints is required.
type Config struct {
	// Endpoints are the members' client addresses, HOST:PORT (an IPv6
	// host in brackets). A scheme is not allowed: TLS says whether the
	// connection is TLS.
	Endpoints []string
	// Prefix is the key prefix keeping this ledger's keys apart from other
	// tenants of the cluster: "/" followed by non-empty segments, no
	// trailing "/". Empty means DefaultPrefix.
	Prefix string
	// TLS names the connection's certificate files; the zero value is
	// plain text.
	TLS TLS
	// Timeout bounds every call (a transition, its compare-and-swap
	// retries included, Get, List, a claim's Live and Release); an
	// unreachable or quorum-less cluster fails the call within it. Zero
	// means ledger.DefaultTimeout (10 s).
	Timeout time.Duration
	// ClaimTTL is the TTL of a claim's lease, rounded up to whole seconds
	// (etcd leases count seconds; a cluster with the default election
	// timeout raises a TTL under 2 s to 2 s). Zero means DefaultClaimTTL
	// (30 s); tests set a few seconds (the hidden --ledger-claim-ttl).
	ClaimTTL time.Duration
}

// ParseURL parses a ledger URL, etcd://HOST:PORT[,HOST:PORT…][/PREFIX], into
// a Config with Endpoints and Prefix set (DefaultPrefix when the URL has no
// path, or only "/"). Errors wrap ErrConfig and quote the URL.
func ParseURL(s string) (Config, error) {
	bad := func(format string, args ...any) (Config, error) {
		return Config{}, fmt.Errorf("%w: %q: %s", ErrConfig, s, fmt.Sprintf(format, args...))
	}
	rest, ok := strings.CutPrefix(s, Scheme)
	if !ok {
		return bad("not an %sHOST:PORT[,HOST:PORT…][/PREFIX] URL", Scheme)
	}
	hosts, prefix := rest, ""
	if i := strings.IndexByte(rest, '/'); i >= 0 {
		hosts, prefix = rest[:i], rest[i:]
	}
	if strings.ContainsAny(rest, "?#@") {
		return bad("a query, fragment or user name is not allowed")
	}
	if hosts == "" {
		return bad("no endpoint")
	}
	cfg := Config{}
	for _, ep := range strings.Split(hosts, ",") {
		if err := checkEndpoint(ep); err != nil {
			return bad("%v", err)
		}
		cfg.Endpoints = append(cfg.Endpoints, ep)
	}
	if prefix == "/" {
		prefix = ""
	}
	if prefix != "" {
		if err := checkPrefix(prefix); err != nil {
			return bad("%v", err)
		}
	}
	cfg.Prefix = prefix
	if cfg.Prefix == "" {
		cfg.Prefix = DefaultPrefix
	}
	return cfg, nil
}

// String renders the configuration as the URL ParseURL reads:
// etcd://HOST:PORT,…/PREFIX (TLS files are not part of it).
func (c Config) String() string {
	prefix := c.Prefix
	if prefix == "" {
		prefix = DefaultPrefix
	}
	return Scheme + strings.Join(c.Endpoints, ",") + prefix
}

func checkEndpoint(ep string) error {
	if ep == "" {
		return errors.New("an empty endpoint")
	}
	if strings.Contains(ep, "://") {
		return fmt.Errorf("endpoint %q: no scheme, HOST:PORT", ep)
	}
	host, port, err := net.SplitHostPort(ep)
	if err != nil {
		return fmt.Errorf("endpoint %q: %v", ep, err)
	}
	if host == "" {
		return fmt.Errorf("endpoint %q: no host", ep)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return fmt.Errorf("endpoint %q: port %q is not 1-65535", ep, port)
	}
	return nil
}

func checkPrefix(p string) error {
	if !strings.HasPrefix(p, "/") || strings.HasSuffix(p, "/") {
		return fmt.Errorf("prefix %q: starts with / and does not end with /", p)
	}
	for _, seg := range strings.Split(p[1:], "/") {
		if seg == "" || seg == "." || seg == ".." {
			return fmt.Errorf("prefix %q: empty, . or .. segment", p)
		}
	}
	for _, r := range p {
		if r < 0x20 || r == 0x7f {
			return fmt.Errorf("prefix %q: control character", p)
		}
	}
	return nil
}

// withDefaults validates c and fills its defaults.
func (c Config) withDefaults() (Config, error) {
	if len(c.Endpoints) == 0 {
		return c, fmt.Errorf("%w: no endpoint", ErrConfig)
	}
	for _, ep := range c.Endpoints {
		if err := checkEndpoint(ep); err != nil {
			return c, fmt.Errorf("%w: %v", ErrConfig, err)
		}
	}
	if c.Prefix == "" {
		c.Prefix = DefaultPrefix
	}
	if err := checkPrefix(c.Prefix); err != nil {
		return c, fmt.Errorf("%w: %v", ErrConfig, err)
	}
	if c.Timeout < 0 || c.ClaimTTL < 0 {
		return c, fmt.Errorf("%w: negative timeout %s or claim TTL %s", ErrConfig, c.Timeout, c.ClaimTTL)
	}
	if c.Timeout == 0 {
		c.Timeout = ledger.DefaultTimeout
	}
	if c.ClaimTTL == 0 {
		c.ClaimTTL = DefaultClaimTTL
	}
	if (c.TLS.Cert == "") != (c.TLS.Key == "") {
		return c, fmt.Errorf("%w: a client certificate needs its key and a key its certificate (cert %q, key %q)", ErrConfig, c.TLS.Cert, c.TLS.Key)
	}
	return c, nil
}

// ttlSeconds is the claim TTL in whole seconds, rounded up.
func (c Config) ttlSeconds() int64 {
	return int64((c.ClaimTTL + time.Second - 1) / time.Second)
}

// tlsConfig loads the TLS files; nil for plain text.
func (c Config) tlsConfig() (*tls.Config, error) {
	if !c.TLS.Enabled() {
		return nil, nil
	}
	tc := &tls.Config{MinVersion: tls.VersionTLS12}
	if c.TLS.CACert != "" {
		pem, err := inputfile.Read(c.TLS.CACert, inputfile.MaxCertBundle)
		if err != nil {
			return nil, fmt.Errorf("etcd ledger CA certificate: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("%w: CA certificate %s holds no PEM certificate", ErrConfig, c.TLS.CACert)
		}
		tc.RootCAs = pool
	}
	if c.TLS.Cert != "" {
		kp, err := tls.LoadX509KeyPair(c.TLS.Cert, c.TLS.Key)
		if err != nil {
			return nil, fmt.Errorf("etcd ledger client certificate %s and key %s: %w", c.TLS.Cert, c.TLS.Key, err)
		}
		tc.Certificates = []tls.Certificate{kp}
	}
	return tc, nil
}
