package containerd

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	remoteerrors "github.com/containerd/containerd/v2/core/remotes/errors"
	"github.com/containerd/errdefs"
)

// fastPolicy retries quickly and logs into buf.
func fastPolicy(buf *bytes.Buffer, attempts int) RetryPolicy {
	return RetryPolicy{
		MaxAttempts: attempts, MaxElapsed: 5 * time.Second,
		Backoff: time.Millisecond, MaxBackoff: 4 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(buf, &slog.HandlerOptions{Level: slog.LevelDebug})),
	}
}

func httpStatusErr(code int) error {
	return fmt.Errorf("push blob sha256:abc: %w", remoteerrors.ErrUnexpectedStatus{Status: fmt.Sprintf("%d %s", code, http.StatusText(code)), StatusCode: code})
}

func TestRetryBlob(t *testing.T) {
	reset := &net.OpError{Op: "read", Net: "tcp", Err: syscall.ECONNRESET}
	for _, tc := range []struct {
		name      string
		errs      []error // returned by successive calls; nil after the end
		attempts  int
		wantCalls int
		wantErr   bool
	}{
		{"ok first", nil, 5, 1, false},
		{"503 then ok", []error{httpStatusErr(503), httpStatusErr(503)}, 5, 3, false},
		{"429 then ok", []error{httpStatusErr(429)}, 5, 2, false},
		{"reset then ok", []error{fmt.Errorf("fetch layer: %w", reset)}, 5, 2, false},
		{"unexpected EOF then ok", []error{fmt.Errorf("copy: %w", io.ErrUnexpectedEOF)}, 5, 2, false},
		{"closed connection then ok", []error{fmt.Errorf("put: readfrom tcp: %w", &net.OpError{Op: "write", Net: "tcp", Err: net.ErrClosed})}, 5, 2, false},
		{"canceled is not retried", []error{fmt.Errorf("fetch: %w", context.Canceled)}, 5, 1, true},
		{"401 is not retried", []error{httpStatusErr(401)}, 5, 1, true},
		{"404 is not retried", []error{httpStatusErr(404)}, 5, 1, true},
		{"501 is not retried", []error{httpStatusErr(501)}, 5, 1, true},
		{"digest mismatch is not retried", []error{errdefs.ErrFailedPrecondition}, 5, 1, true},
		{"attempts bound", []error{httpStatusErr(500), httpStatusErr(502), httpStatusErr(503), httpStatusErr(504)}, 3, 3, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			calls := 0
			err := RetryBlob(context.Background(), fastPolicy(&buf, tc.attempts), func(context.Context) error {
				calls++
				if calls <= len(tc.errs) {
					return tc.errs[calls-1]
				}
				return nil
			})
			if calls != tc.wantCalls {
				t.Errorf("calls: %d, want %d", calls, tc.wantCalls)
			}
			if (err != nil) != tc.wantErr {
				t.Fatalf("err: %v, want error %v", err, tc.wantErr)
			}
			if err != nil && !errors.Is(err, tc.errs[calls-1]) && !strings.Contains(err.Error(), tc.errs[calls-1].Error()) {
				t.Errorf("err %v does not carry the last error %v", err, tc.errs[calls-1])
			}
			if got := strings.Count(buf.String(), "retrying blob transfer"); got != calls-1 {
				t.Errorf("%d retry log records for %d calls:\n%s", got, calls, buf.String())
			}
			if calls > 1 && !strings.Contains(buf.String(), "level=DEBUG") {
				t.Errorf("retries not logged at debug level:\n%s", buf.String())
			}
			if tc.wantErr && calls > 1 && !strings.Contains(err.Error(), fmt.Sprintf("gave up after %d attempts", calls)) {
				t.Errorf("error does not say how many attempts: %v", err)
			}
		})
	}
}

func TestRetryBlobElapsedAndContext(t *testing.T) {
	t.Run("elapsed bound", func(t *testing.T) {
		p := RetryPolicy{MaxAttempts: 100, MaxElapsed: 60 * time.Millisecond, Backoff: 20 * time.Millisecond, MaxBackoff: 20 * time.Millisecond}
		start := time.Now()
		calls := 0
		err := RetryBlob(context.Background(), p, func(context.Context) error { calls++; return httpStatusErr(503) })
		if err == nil || calls >= 100 {
			t.Fatalf("calls %d, err %v: want the time bound to stop it", calls, err)
		}
		if d := time.Since(start); d > 200*time.Millisecond {
			t.Errorf("took %s with MaxElapsed 60ms", d)
		}
	})
	t.Run("context ends the wait", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		p := RetryPolicy{MaxAttempts: 5, MaxElapsed: time.Minute, Backoff: 10 * time.Second, MaxBackoff: 10 * time.Second}
		go func() { time.Sleep(20 * time.Millisecond); cancel() }()
		start := time.Now()
		err := RetryBlob(ctx, p, func(context.Context) error { return httpStatusErr(503) })
		if !errors.Is(err, context.Canceled) || time.Since(start) > 2*time.Second {
			t.Errorf("err %v after %s, want context.Canceled at once", err, time.Since(start))
		}
	})
}

func TestRetryPolicyWait(t *testing.T) {
	p := RetryPolicy{Backoff: 100 * time.Millisecond, MaxBackoff: 400 * time.Millisecond}.withDefaults()
	for attempt, want := range map[int]time.Duration{1: 100 * time.Millisecond, 2: 200 * time.Millisecond, 3: 400 * time.Millisecond, 9: 400 * time.Millisecond} {
		for range 20 {
			if w := p.wait(attempt, 0); w < want/2 || w > want {
				t.Errorf("wait(%d) = %s, want in [%s, %s]", attempt, w, want/2, want)
			}
		}
	}
	if w := p.wait(1, 3*time.Second); w != 3*time.Second {
		t.Errorf("wait with Retry-After 3s = %s", w)
	}
	d := RetryPolicy{}.withDefaults()
	if d.MaxAttempts != DefaultMaxAttempts || d.MaxElapsed != DefaultMaxElapsed || d.Backoff != DefaultBackoff || d.MaxBackoff != DefaultMaxBackoff || d.Logger == nil {
		t.Errorf("defaults: %+v", d)
	}
}

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2026, 9, 1, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		in   string
		want time.Duration
		ok   bool
	}{
		{"", 0, false},
		{"0", 0, true},
		{"3", 3 * time.Second, true},
		{" 120 ", 2 * time.Minute, true},
		{"-1", 0, false},
		{"1.5", 0, false},
		{"soon", 0, false},
		{"999999999", 24 * time.Hour, true},
		{"Tue, 01 Sep 2026 12:00:30 GMT", 30 * time.Second, true},
		{"Tue, 01 Sep 2026 11:00:00 GMT", 0, true}, // past
		{"Tuesday, 01-Sep-26 12:01:00 GMT", time.Minute, true},
	} {
		got, ok := parseRetryAfter(tc.in, now)
		if got != tc.want || ok != tc.ok {
			t.Errorf("parseRetryAfter(%q) = %s, %v; want %s, %v", tc.in, got, ok, tc.want, tc.ok)
		}
	}
}

// flakyServer answers the first fails requests of each path with code
// (and Retry-After when set), then 200 "ok". It counts requests by path.
func flakyServer(t *testing.T, fails int, code int, retryAfter string) (*httptest.Server, *atomic.Int32) {
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		if int(n.Add(1)) <= fails {
			if retryAfter != "" {
				w.Header().Set("Retry-After", retryAfter)
			}
			http.Error(w, "flaky", code)
			return
		}
		io.WriteString(w, "ok")
	}))
	t.Cleanup(srv.Close)
	return srv, &n
}

func TestRetryTransport(t *testing.T) {
	do := func(t *testing.T, tr http.RoundTripper, method, url string, body io.Reader) (*http.Response, error) {
		t.Helper()
		req, err := http.NewRequest(method, url, body)
		if err != nil {
			t.Fatal(err)
		}
		return tr.RoundTrip(req)
	}
	t.Run("GET and HEAD retry on 5xx", func(t *testing.T) {
		for _, method := range []string{http.MethodGet, http.MethodHead} {
			srv, n := flakyServer(t, 2, http.StatusServiceUnavailable, "")
			var buf bytes.Buffer
			tr := &retryTransport{base: http.DefaultTransport, policy: fastPolicy(&buf, 5).withDefaults()}
			resp, err := do(t, tr, method, srv.URL+"/v2/r/manifests/x?token=secret", nil)
			if err != nil || resp.StatusCode != 200 || n.Load() != 3 {
				t.Fatalf("%s: %v %v after %d requests", method, resp, err, n.Load())
			}
			resp.Body.Close()
			if c := strings.Count(buf.String(), "retrying registry request"); c != 2 {
				t.Errorf("%s: %d retry records:\n%s", method, c, buf.String())
			}
			if strings.Contains(buf.String(), "secret") {
				t.Errorf("the log shows the query: %s", buf.String())
			}
		}
	})
	t.Run("within a blob attempt a request is sent once", func(t *testing.T) {
		srv, n := flakyServer(t, 100, http.StatusServiceUnavailable, "")
		var buf bytes.Buffer
		p := fastPolicy(&buf, 3)
		tr := &retryTransport{base: http.DefaultTransport, policy: p.withDefaults()}
		calls := 0
		err := RetryBlob(context.Background(), p, func(ctx context.Context) error {
			calls++
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL, nil)
			if err != nil {
				t.Fatal(err)
			}
			resp, err := tr.RoundTrip(req)
			if err != nil {
				return err
			}
			resp.Body.Close()
			return httpStatusErr(resp.StatusCode)
		})
		if err == nil || calls != 3 || n.Load() != 3 {
			t.Errorf("%d attempts, %d requests (%v); want 3 and 3: the blob's policy alone bounds them", calls, n.Load(), err)
		}
		if strings.Contains(buf.String(), "retrying registry request") {
			t.Errorf("the transport retried inside a blob attempt:\n%s", buf.String())
		}
	})
	t.Run("attempts bound hands back the last response", func(t *testing.T) {
		srv, n := flakyServer(t, 100, http.StatusBadGateway, "")
		var buf bytes.Buffer
		tr := &retryTransport{base: http.DefaultTransport, policy: fastPolicy(&buf, 3).withDefaults()}
		resp, err := do(t, tr, http.MethodGet, srv.URL, nil)
		if err != nil || resp.StatusCode != http.StatusBadGateway || n.Load() != 3 {
			t.Fatalf("%v %v after %d requests, want 502 after 3", resp, err, n.Load())
		}
		resp.Body.Close()
	})
	t.Run("404 and 401 are not retried", func(t *testing.T) {
		for _, code := range []int{404, 401} {
			srv, n := flakyServer(t, 100, code, "")
			tr := &retryTransport{base: http.DefaultTransport, policy: fastPolicy(&bytes.Buffer{}, 5).withDefaults()}
			resp, err := do(t, tr, http.MethodGet, srv.URL, nil)
			if err != nil || resp.StatusCode != code || n.Load() != 1 {
				t.Fatalf("%d: %v %v after %d requests", code, resp, err, n.Load())
			}
			resp.Body.Close()
		}
	})
	t.Run("a request with a body is sent once", func(t *testing.T) {
		srv, n := flakyServer(t, 1, http.StatusServiceUnavailable, "")
		tr := &retryTransport{base: http.DefaultTransport, policy: fastPolicy(&bytes.Buffer{}, 5).withDefaults()}
		resp, err := do(t, tr, http.MethodPut, srv.URL, strings.NewReader("blob bytes"))
		if err != nil || resp.StatusCode != http.StatusServiceUnavailable || n.Load() != 1 {
			t.Fatalf("%v %v after %d requests, want one 503", resp, err, n.Load())
		}
		resp.Body.Close()
	})
	t.Run("429 honours Retry-After", func(t *testing.T) {
		srv, n := flakyServer(t, 1, http.StatusTooManyRequests, "1")
		var buf bytes.Buffer
		tr := &retryTransport{base: http.DefaultTransport, policy: fastPolicy(&buf, 5).withDefaults()}
		start := time.Now()
		resp, err := do(t, tr, http.MethodGet, srv.URL, nil)
		if err != nil || resp.StatusCode != 200 || n.Load() != 2 {
			t.Fatalf("%v %v after %d requests", resp, err, n.Load())
		}
		resp.Body.Close()
		if d := time.Since(start); d < time.Second {
			t.Errorf("retried after %s, Retry-After asked 1s", d)
		}
	})
	t.Run("a request sent once is handed back after Retry-After", func(t *testing.T) {
		srv, _ := flakyServer(t, 1, http.StatusTooManyRequests, "1")
		tr := &retryTransport{base: http.DefaultTransport, policy: fastPolicy(&bytes.Buffer{}, 5).withDefaults()}
		start := time.Now()
		resp, err := do(t, tr, http.MethodPut, srv.URL, strings.NewReader("x"))
		if err != nil || resp.StatusCode != http.StatusTooManyRequests {
			t.Fatalf("%v %v", resp, err)
		}
		resp.Body.Close()
		if d := time.Since(start); d < time.Second {
			t.Errorf("429 handed back after %s, Retry-After asked 1s", d)
		}
	})
	t.Run("Retry-After beyond the time bound is not waited for", func(t *testing.T) {
		srv, n := flakyServer(t, 100, http.StatusTooManyRequests, "3600")
		p := fastPolicy(&bytes.Buffer{}, 5)
		p.MaxElapsed = 100 * time.Millisecond
		tr := &retryTransport{base: http.DefaultTransport, policy: p.withDefaults()}
		start := time.Now()
		resp, err := do(t, tr, http.MethodGet, srv.URL, nil)
		if err != nil || resp.StatusCode != http.StatusTooManyRequests || n.Load() != 1 || time.Since(start) > time.Second {
			t.Fatalf("%v %v after %d requests in %s", resp, err, n.Load(), time.Since(start))
		}
		resp.Body.Close()
	})
	t.Run("connection reset is retried", func(t *testing.T) {
		var n atomic.Int32
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if n.Add(1) == 1 {
				resetConn(t, w)
				return
			}
			io.WriteString(w, "ok")
		}))
		t.Cleanup(srv.Close)
		var buf bytes.Buffer
		tr := &retryTransport{base: &http.Transport{}, policy: fastPolicy(&buf, 5).withDefaults()}
		resp, err := do(t, tr, http.MethodGet, srv.URL, nil)
		if err != nil || resp.StatusCode != 200 || n.Load() != 2 {
			t.Fatalf("%v %v after %d requests", resp, err, n.Load())
		}
		resp.Body.Close()
		if !strings.Contains(buf.String(), "retrying registry request") {
			t.Errorf("no retry record:\n%s", buf.String())
		}
	})
}

// resetConn hijacks the connection behind w and closes it with a TCP RST
// (SO_LINGER 0).
func resetConn(t *testing.T, w http.ResponseWriter) {
	conn, _, err := w.(http.Hijacker).Hijack()
	if err != nil {
		t.Error(err)
		return
	}
	if tc, ok := conn.(*net.TCPConn); ok {
		tc.SetLinger(0)
	}
	conn.Close()
}
