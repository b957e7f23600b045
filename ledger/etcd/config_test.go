package etcd

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sandbox-resume/sandbox-resume/ledger"
)

func TestParseURL(t *testing.T) {
	for _, tc := range []struct {
		in        string
		endpoints []string
		prefix    string
	}{
		{"etcd://127.0.0.1:2379", []string{"127.0.0.1:2379"}, DefaultPrefix},
		{"etcd://127.0.0.1:2379/", []string{"127.0.0.1:2379"}, DefaultPrefix},
		{"etcd://a:1,b:2,c:3", []string{"a:1", "b:2", "c:3"}, DefaultPrefix},
		{"etcd://a:1,b:2/fleet", []string{"a:1", "b:2"}, "/fleet"},
		{"etcd://[::1]:2379/t/a", []string{"[::1]:2379"}, "/t/a"},
		{"etcd://etcd-0.example:2379/sandbox-resume", []string{"etcd-0.example:2379"}, "/sandbox-resume"},
	} {
		cfg, err := ParseURL(tc.in)
		if err != nil {
			t.Errorf("ParseURL(%q): %v", tc.in, err)
			continue
		}
		if !slices.Equal(cfg.Endpoints, tc.endpoints) || cfg.Prefix != tc.prefix {
			t.Errorf("ParseURL(%q) = %v %q, want %v %q", tc.in, cfg.Endpoints, cfg.Prefix, tc.endpoints, tc.prefix)
		}
		if back, err := ParseURL(cfg.String()); err != nil || !slices.Equal(back.Endpoints, cfg.Endpoints) || back.Prefix != cfg.Prefix {
			t.Errorf("ParseURL(%q.String() = %q) = %v, %v", tc.in, cfg.String(), back, err)
		}
	}
	for _, in := range []string{
		"", "127.0.0.1:2379", "http://127.0.0.1:2379", "etcd://", "etcd:///p",
		"etcd://127.0.0.1", "etcd://127.0.0.1:0", "etcd://127.0.0.1:65536", "etcd://127.0.0.1:x",
		"etcd://a:1,,b:2", "etcd://a:1,", "etcd://:2379", "etcd://a:1/p/", "etcd://a:1//p",
		"etcd://a:1/p//q", "etcd://a:1/p/../q", "etcd://user@a:1", "etcd://a:1/p?x=1", "etcd://a:1/p#f",
		"etcd://::1:2379",
	} {
		_, err := ParseURL(in)
		if !errors.Is(err, ErrConfig) || !errors.Is(err, ledger.ErrInvalid) {
			t.Errorf("ParseURL(%q): want ErrConfig, got %v", in, err)
		} else if !strings.Contains(err.Error(), `"`+in+`"`) {
			t.Errorf("ParseURL(%q): error does not quote the URL: %v", in, err)
		}
	}
}

func TestConfigDefaults(t *testing.T) {
	cfg, err := Config{Endpoints: []string{"127.0.0.1:2379"}}.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Prefix != DefaultPrefix || cfg.Timeout != ledger.DefaultTimeout || cfg.ClaimTTL != DefaultClaimTTL || cfg.ttlSeconds() != 30 {
		t.Fatalf("defaults: %+v", cfg)
	}
	cfg.ClaimTTL = 1500 * time.Millisecond
	if cfg.ttlSeconds() != 2 {
		t.Fatalf("1.5 s rounds to %d s, want 2", cfg.ttlSeconds())
	}
	for name, bad := range map[string]Config{
		"no endpoint":        {},
		"scheme":             {Endpoints: []string{"http://127.0.0.1:2379"}},
		"prefix":             {Endpoints: []string{"a:1"}, Prefix: "p"},
		"negative timeout":   {Endpoints: []string{"a:1"}, Timeout: -time.Second},
		"negative TTL":       {Endpoints: []string{"a:1"}, ClaimTTL: -time.Second},
		"cert without a key": {Endpoints: []string{"a:1"}, TLS: TLS{Cert: "c.pem"}},
		"key without a cert": {Endpoints: []string{"a:1"}, TLS: TLS{Key: "k.pem"}},
	} {
		if _, err := Open(bad); !errors.Is(err, ErrConfig) {
			t.Errorf("%s: Open: want ErrConfig, got %v", name, err)
		}
	}
	if _, err := Open(Config{Endpoints: []string{"127.0.0.1:1"}, TLS: TLS{CACert: "/nonexistent/ca.pem"}}); err == nil || !strings.Contains(err.Error(), "/nonexistent/ca.pem") {
		t.Errorf("Open with a missing CA file: %v", err)
	}
}
