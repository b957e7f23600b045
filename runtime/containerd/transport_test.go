package containerd

import (
	"context"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/containerd/errdefs"
	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
)

// fakeRegistry is a loopback TLS server speaking enough of the
// distribution API for the transport: basic auth (alice/pw), one manifest
// under tag "t", and a tags list paged with Link headers.
type fakeRegistry struct {
	srv      *httptest.Server
	host     string
	caFile   string
	manifest []byte
	tags     []string
}

func newFakeRegistry(t *testing.T, tags []string) *fakeRegistry {
	t.Helper()
	f := &fakeRegistry{manifest: []byte(`{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","config":{"mediaType":"application/vnd.oci.empty.v1+json","digest":"sha256:44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a","size":2},"layers":[]}`), tags: tags}
	f.srv = httptest.NewTLSServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.srv.Close)
	f.host = strings.TrimPrefix(f.srv.URL, "https://")
	f.caFile = filepath.Join(t.TempDir(), "ca.pem")
	pemBytes := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: f.srv.Certificate().Raw})
	if err := os.WriteFile(f.caFile, pemBytes, 0o644); err != nil {
		t.Fatal(err)
	}
	return f
}

func (f *fakeRegistry) serve(w http.ResponseWriter, r *http.Request) {
	if u, p, ok := r.BasicAuth(); !ok || u != "alice" || p != "pw" {
		w.Header().Set("WWW-Authenticate", `Basic realm="fake"`)
		http.Error(w, `{"errors":[{"code":"UNAUTHORIZED","message":"authentication required"}]}`, http.StatusUnauthorized)
		return
	}
	switch r.URL.Path {
	case "/v2/":
	case "/v2/runs/demo/manifests/t":
		w.Header().Set("Content-Type", ocispec.MediaTypeImageManifest)
		w.Header().Set("Docker-Content-Digest", digest.FromBytes(f.manifest).String())
		w.Header().Set("Content-Length", strconv.Itoa(len(f.manifest)))
		if r.Method == http.MethodGet {
			w.Write(f.manifest)
		}
	case "/v2/runs/demo/tags/list":
		n, _ := strconv.Atoi(r.URL.Query().Get("n"))
		if n == 0 {
			n = len(f.tags)
		}
		i := 0
		if last := r.URL.Query().Get("last"); last != "" {
			i = slices.Index(f.tags, last) + 1
		}
		page := f.tags[i:min(i+n, len(f.tags))]
		if i+n < len(f.tags) {
			w.Header().Set("Link", fmt.Sprintf(`</v2/runs/demo/tags/list?n=%d&last=%s>; rel="next"`, n, page[len(page)-1]))
		}
		json.NewEncoder(w).Encode(map[string]any{"name": "runs/demo", "tags": page})
	default:
		http.NotFound(w, r)
	}
}

// configFor writes a Docker config with user:pw for host.
func configFor(t *testing.T, host, user, pw string) string {
	return writeConfig(t, t.TempDir(), `{"auths": {"`+host+`": {"auth": "`+b64(user+":"+pw)+`"}}}`)
}

func TestRegistryResolveTLSAndAuth(t *testing.T) {
	f := newFakeRegistry(t, nil)
	ctx := context.Background()
	ref := f.host + "/runs/demo:t"
	t.Setenv("DOCKER_CONFIG", t.TempDir())

	t.Run("credentials and CA", func(t *testing.T) {
		reg, err := NewTransport(RegistryOptions{ConfigFile: configFor(t, f.host, "alice", "pw"), CACertFile: f.caFile})
		if err != nil {
			t.Fatal(err)
		}
		_, desc, err := reg.Resolver(ctx).Resolve(ctx, ref)
		if err != nil {
			t.Fatal(err)
		}
		if desc.Digest != digest.FromBytes(f.manifest) {
			t.Errorf("resolved %s", desc.Digest)
		}
	})
	t.Run("without the CA", func(t *testing.T) {
		reg, err := NewTransport(RegistryOptions{ConfigFile: configFor(t, f.host, "alice", "pw")})
		if err != nil {
			t.Fatal(err)
		}
		_, _, err = reg.Resolver(ctx).Resolve(ctx, ref)
		err = reg.registryError(f.host, err)
		if err == nil || !strings.Contains(err.Error(), "registry "+f.host+": its certificate chains to a CA the system pool does not trust") {
			t.Errorf("err %v, want a certificate error naming %s", err, f.host)
		}
	})
	for name, cfg := range map[string]string{
		"wrong password": configFor(t, f.host, "alice", "nope"),
		"no credentials": writeConfig(t, t.TempDir(), `{}`),
	} {
		t.Run(name, func(t *testing.T) {
			reg, err := NewTransport(RegistryOptions{ConfigFile: cfg, CACertFile: f.caFile})
			if err != nil {
				t.Fatal(err)
			}
			_, _, err = reg.Resolver(ctx).Resolve(ctx, ref)
			err = reg.registryError(f.host, err)
			if !errors.Is(err, errdefs.ErrUnauthenticated) || !strings.Contains(err.Error(), "registry "+f.host+": unauthorized") {
				t.Errorf("err %v, want unauthorized naming %s", err, f.host)
			}
			_, err = reg.Tags(ctx, f.host+"/runs/demo")
			if !errors.Is(err, errdefs.ErrUnauthenticated) || !strings.Contains(err.Error(), f.host) {
				t.Errorf("tags: err %v, want unauthorized naming %s", err, f.host)
			}
		})
	}
}

func TestRegistryTagsPaginated(t *testing.T) {
	want := []string{"a.g1", "a.g2", "b.g1", "a.g10", "a.g3", "latest", "a.g9"}
	f := newFakeRegistry(t, want)
	ctx := context.Background()
	for _, page := range []int{0, 1, 2, 3, 100} {
		reg, err := NewTransport(RegistryOptions{ConfigFile: configFor(t, f.host, "alice", "pw"), CACertFile: f.caFile, TagPageSize: page})
		if err != nil {
			t.Fatal(err)
		}
		got, err := reg.Tags(ctx, f.host+"/runs/demo")
		if err != nil || !slices.Equal(got, want) {
			t.Errorf("page size %d: %v %v", page, got, err)
		}
		if got, err := reg.Tags(ctx, f.host+"/runs/none"); err != nil || len(got) != 0 {
			t.Errorf("tags of a repository the registry lacks: %v %v, want none", got, err)
		}
	}
}
