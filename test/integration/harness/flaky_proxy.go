package harness

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"path"
	"strings"
	"sync"
	"testing"
)

// FlakyProxy is a reverse proxy on 127.0.0.1 in front of a plain-HTTP
// Registry that fails the way real networks and registries do, so that a
// migration through it exercises the retries of docs/design.md "Moving
// runs":
//
//   - the first Fails requests of each object (a blob or manifest digest,
//     or a manifest tag) per method answer 503 (the body of a PUT is read
//     first), so HEAD and GET retry at the transport and a PUT, which
//     containerd gives up on after two 503s in a row, is redone whole;
//   - the first forwarded GET and the first forwarded PUT of a blob larger
//     than ResetOver bytes have their connection reset (TCP RST) half way
//     through the body.
//
// Upload-session requests (POST, PATCH, which carry no digest) and the
// /v2/ ping pass through. Events records what it did.
type FlakyProxy struct {
	Host      string // "127.0.0.1:<port>"
	Fails     int
	ResetOver int64
	// Only, when set, limits the failures and resets to the objects it
	// accepts (a digest or tag); the others pass through.
	Only func(object string) bool

	upstream *url.URL
	proxy    *httputil.ReverseProxy

	mu       sync.Mutex
	seen     map[string]int
	resetGET bool
	resetPUT bool
	events   []string
}

// StartFlakyProxy starts a FlakyProxy in front of reg (plain HTTP) with
// Fails 2 and ResetOver 64 KiB, and closes it when the test ends.
func StartFlakyProxy(t testing.TB, reg *Registry) *FlakyProxy {
	t.Helper()
	return StartFlakyProxyWith(t, reg, nil)
}

// StartFlakyProxyWith is StartFlakyProxy with configure applied to the
// proxy (Fails, ResetOver, Only) before it serves: its fields are read by
// the server's goroutines without a lock, so they are never written once
// it runs.
func StartFlakyProxyWith(t testing.TB, reg *Registry, configure func(*FlakyProxy)) *FlakyProxy {
	t.Helper()
	up, err := url.Parse(reg.URL())
	if err != nil {
		t.Fatal(err)
	}
	p := &FlakyProxy{Fails: 2, ResetOver: 64 << 10, upstream: up, seen: map[string]int{}}
	p.proxy = &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(up)
			// Keep the client's Host: the registry builds upload Locations
			// from it, so the upload's PUT comes through the proxy too.
			pr.Out.Host = pr.In.Host
		},
		Transport: &http.Transport{Proxy: nil},
	}
	if configure != nil {
		configure(p)
	}
	srv := httptest.NewServer(http.HandlerFunc(p.serve))
	t.Cleanup(srv.Close)
	p.Host = strings.TrimPrefix(srv.URL, "http://")
	return p
}

// Events is what the proxy did, in order: "503 METHOD OBJECT" and
// "reset METHOD OBJECT".
func (p *FlakyProxy) Events() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.events...)
}

// Forget makes the proxy fail the next Fails requests of every object
// again, as if it had seen none (the events stay).
func (p *FlakyProxy) Forget() {
	p.mu.Lock()
	defer p.mu.Unlock()
	clear(p.seen)
}

// Count is how many events start with prefix ("503 PUT", "reset GET").
func (p *FlakyProxy) Count(prefix string) int {
	n := 0
	for _, e := range p.Events() {
		if strings.HasPrefix(e, prefix) {
			n++
		}
	}
	return n
}

// object is the digest or tag a request is about, and whether it is a
// blob: /v2/<repo>/blobs/<digest>, /v2/<repo>/manifests/<ref>, or an upload
// PUT's ?digest=. "" for anything else.
func object(r *http.Request) (string, bool) {
	p := r.URL.Path
	switch dir, base := path.Split(p); {
	case strings.HasSuffix(dir, "/blobs/") && strings.HasPrefix(base, "sha256:"):
		return base, true
	case strings.HasSuffix(dir, "/manifests/"):
		return base, false
	case r.Method == http.MethodPut && strings.Contains(p, "/blobs/uploads/"):
		return r.URL.Query().Get("digest"), true
	}
	return "", false
}

func (p *FlakyProxy) serve(w http.ResponseWriter, r *http.Request) {
	obj, blob := object(r)
	if obj == "" || (p.Only != nil && !p.Only(obj)) {
		p.proxy.ServeHTTP(w, r)
		return
	}
	key := r.Method + " " + obj
	p.mu.Lock()
	p.seen[key]++
	n := p.seen[key]
	fail := n <= p.Fails
	resetGET := !fail && blob && r.Method == http.MethodGet && !p.resetGET
	resetPUT := !fail && blob && r.Method == http.MethodPut && !p.resetPUT && r.ContentLength > p.ResetOver
	if resetPUT {
		p.resetPUT = true
		p.events = append(p.events, "reset "+key)
	}
	if fail {
		p.events = append(p.events, "503 "+key)
	}
	p.mu.Unlock()

	switch {
	case fail:
		_, _ = io.Copy(io.Discard, r.Body)
		http.Error(w, `{"errors":[{"code":"UNAVAILABLE","message":"flaky proxy"}]}`, http.StatusServiceUnavailable)
	case resetPUT:
		_, _ = io.CopyN(io.Discard, r.Body, r.ContentLength/2)
		reset(w)
	case resetGET:
		p.serveResetGET(w, r, key)
	default:
		p.proxy.ServeHTTP(w, r)
	}
}

// serveResetGET fetches the blob from upstream and, when it is larger
// than ResetOver, sends its headers and half of it, then resets the
// connection; a smaller blob is sent whole (and the reset saved for a
// larger one).
func (p *FlakyProxy) serveResetGET(w http.ResponseWriter, r *http.Request, key string) {
	out, err := http.NewRequestWithContext(r.Context(), r.Method, p.upstream.String()+r.URL.RequestURI(), nil)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	out.Header = r.Header.Clone()
	resp, err := (&http.Client{Transport: &http.Transport{Proxy: nil}}).Do(out)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	big := resp.StatusCode == http.StatusOK && resp.ContentLength > p.ResetOver
	if big {
		p.mu.Lock()
		big = !p.resetGET
		p.resetGET = true
		if big {
			p.events = append(p.events, "reset "+key)
		}
		p.mu.Unlock()
	}
	for k, v := range resp.Header {
		w.Header()[k] = v
	}
	w.WriteHeader(resp.StatusCode)
	if !big {
		_, _ = io.Copy(w, resp.Body)
		return
	}
	_, _ = io.CopyN(w, resp.Body, resp.ContentLength/2)
	w.(http.Flusher).Flush()
	reset(w)
}

// reset hijacks the connection behind w and closes it with a TCP RST
// (SO_LINGER 0).
func reset(w http.ResponseWriter) {
	conn, buf, err := w.(http.Hijacker).Hijack()
	if err != nil {
		panic(fmt.Sprintf("flaky proxy: hijack: %v", err))
	}
	_ = buf.Flush()
	if tc, ok := conn.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	_ = conn.Close()
}
