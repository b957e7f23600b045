package containerd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"strconv"
	"strings"
	"syscall"
	"time"

	remoteerrors "github.com/containerd/containerd/v2/core/remotes/errors"
	"oras.land/oras-go/v2/registry/remote/errcode"
)

// Defaults of RetryPolicy's zero fields (docs/design.md "Moving runs":
// retries are bounded in attempts and in total time).
const (
	// DefaultMaxAttempts is the most attempts of one blob or request, the
	// first included.
	DefaultMaxAttempts = 5
	// DefaultMaxElapsed bounds the time from the first attempt to the end
	// of the last wait.
	DefaultMaxElapsed = 2 * time.Minute
	// DefaultBackoff is the wait before the first retry (before jitter).
	DefaultBackoff = 250 * time.Millisecond
	// DefaultMaxBackoff caps the doubling waits.
	DefaultMaxBackoff = 10 * time.Second
)

// RetryPolicy bounds the retries of one blob transfer (RetryBlob) and of
// one replayable registry request (the transport of Registry): transient
// failures only — a connection reset or other network error, 408, 429 and
// 5xx other than 501 and 505. Zero fields take the defaults above.
type RetryPolicy struct {
	// MaxAttempts is the most attempts, the first included (default 5; 1
	// disables retries).
	MaxAttempts int
	// MaxElapsed bounds the time from the first attempt: no wait is begun
	// that would end past it (default 2 minutes).
	MaxElapsed time.Duration
	// Backoff is the wait before the first retry; each later wait doubles,
	// up to MaxBackoff (defaults 250 ms and 10 s). A wait is drawn from
	// [w/2, w) (jitter), and is at least what a Retry-After header asked.
	Backoff, MaxBackoff time.Duration
	// Logger receives one debug record per retry; nil discards them.
	Logger *slog.Logger
}

func (p RetryPolicy) withDefaults() RetryPolicy {
	if p.MaxAttempts <= 0 {
		p.MaxAttempts = DefaultMaxAttempts
	}
	if p.MaxElapsed <= 0 {
		p.MaxElapsed = DefaultMaxElapsed
	}
	if p.Backoff <= 0 {
		p.Backoff = DefaultBackoff
	}
	if p.MaxBackoff <= 0 {
		p.MaxBackoff = DefaultMaxBackoff
	}
	if p.MaxBackoff < p.Backoff {
		p.MaxBackoff = p.Backoff
	}
	if p.Logger == nil {
		p.Logger = slog.New(slog.DiscardHandler)
	}
	return p
}

// wait is the pause before attempt+1 (attempt ≥ 1 failed): the doubled
// backoff with jitter, raised to retryAfter when the server asked for more.
func (p RetryPolicy) wait(attempt int, retryAfter time.Duration) time.Duration {
	w := p.Backoff
	for i := 1; i < attempt && w < p.MaxBackoff; i++ {
		w *= 2
	}
	w = min(w, p.MaxBackoff)
	w = w/2 + rand.N(w/2+1)
	return max(w, retryAfter)
}

// next decides whether attempt+1 may start: within MaxAttempts, and its
// wait ends within MaxElapsed of start. It returns the wait.
func (p RetryPolicy) next(start time.Time, attempt int, retryAfter time.Duration) (time.Duration, bool) {
	if attempt >= p.MaxAttempts {
		return 0, false
	}
	w := p.wait(attempt, retryAfter)
	if time.Since(start)+w > p.MaxElapsed {
		return 0, false
	}
	return w, true
}

// RetryBlob runs fn, the whole transfer of one descriptor (a push or a
// fetch, which a retrying transport cannot replay: its body streams), and
// redoes it whole while it fails transiently, within p (docs/design.md
// "Moving runs", per-blob retries). fn must make its requests with the
// context it is given: Registry's transport sends those once (it still
// honours Retry-After), since the attempt as a whole is what is retried —
// so p bounds the blob's attempts and time, not a product of two policies.
// Each retry is logged at debug level with the error, which should name
// the blob. It returns nil, fn's first error that is not transient, or its
// last error, annotated with the number of attempts when there was more
// than one; ctx ending stops the waits and returns ctx.Err().
func RetryBlob(ctx context.Context, p RetryPolicy, fn func(ctx context.Context) error) error {
	p = p.withDefaults()
	start := time.Now()
	inner := context.WithValue(ctx, blobAttemptKey{}, true)
	for attempt := 1; ; attempt++ {
		err := fn(inner)
		if err == nil {
			return nil
		}
		transient, after := retryableError(err)
		if !transient || ctx.Err() != nil {
			return annotateAttempts(err, attempt, start)
		}
		w, ok := p.next(start, attempt, after)
		if !ok {
			return annotateAttempts(err, attempt, start)
		}
		p.Logger.DebugContext(ctx, "retrying blob transfer", "attempt", attempt+1, "maxAttempts", p.MaxAttempts, "wait", w, "error", err)
		if err := sleep(ctx, w); err != nil {
			return err
		}
	}
}

// blobAttemptKey marks the context of one RetryBlob attempt.
type blobAttemptKey struct{}

func annotateAttempts(err error, attempts int, start time.Time) error {
	if attempts == 1 {
		return err
	}
	return fmt.Errorf("%w (gave up after %d attempts in %s)", err, attempts, time.Since(start).Round(time.Millisecond))
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// retryableError reports whether err is transient: a network error
// (connection reset, refused, broken pipe, timeout, unexpected EOF) or a
// registry status that is (retryableStatus). The duration is always 0:
// containerd's status errors carry no headers; the transport honours
// Retry-After before handing such a response back.
func retryableError(err error) (bool, time.Duration) {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false, 0
	}
	var us remoteerrors.ErrUnexpectedStatus
	if errors.As(err, &us) {
		return retryableStatus(us.StatusCode), 0
	}
	var er *errcode.ErrorResponse
	if errors.As(err, &er) {
		return retryableStatus(er.StatusCode), 0
	}
	return retryableNetError(err), 0
}

// retryableNetError reports whether err is a network failure worth a
// retry: a reset, refused or aborted connection, a broken pipe, an
// unexpected EOF, a closed connection, a timeout. A context that ended is
// not.
func retryableNetError(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	switch {
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.ECONNREFUSED),
		errors.Is(err, syscall.ECONNABORTED), errors.Is(err, syscall.EPIPE),
		errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF),
		// a reset seen while writing a request body surfaces as a write to
		// the connection the transport has just closed
		errors.Is(err, net.ErrClosed):
		return true
	}
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// retryableStatus: 408, 429 and 5xx except 501 (not implemented) and 505
// (HTTP version not supported), which no retry can change.
func retryableStatus(code int) bool {
	switch code {
	case http.StatusRequestTimeout, http.StatusTooManyRequests:
		return true
	case http.StatusNotImplemented, http.StatusHTTPVersionNotSupported:
		return false
	}
	return code >= 500 && code <= 599
}

// parseRetryAfter reads a Retry-After header value (RFC 9110 §10.2.3):
// delay-seconds, or an HTTP-date (a past date is 0). ok is false for an
// empty or malformed value.
func parseRetryAfter(v string, now time.Time) (time.Duration, bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, false
	}
	if n, err := strconv.ParseInt(v, 10, 64); err == nil {
		if n < 0 {
			return 0, false
		}
		if n > int64(24*time.Hour/time.Second) {
			n = int64(24 * time.Hour / time.Second)
		}
		return time.Duration(n) * time.Second, true
	}
	t, err := http.ParseTime(v)
	if err != nil {
		return 0, false
	}
	return max(t.Sub(now), 0), true
}

// retryTransport retries requests that can be sent again as they are —
// those without a body (GET and HEAD of manifests and tag lists, the token
// requests) — on network errors and retryableStatus responses, within
// policy (docs/design.md "Moving runs": manifest, HEAD and tag requests may
// retry at the transport). A request with a body is sent once: containerd
// streams uploads through a pipe whose GetBody opens a new pipe to the
// same writer, so replaying it here would reset the stream under the
// writer. A request made within a RetryBlob attempt is sent once too: the
// attempt is redone whole. A 429 or 503 with
// Retry-After that is handed back (a request sent once, or the last
// attempt) is handed back no sooner than Retry-After says, within
// MaxElapsed, so that a retry at any level honours it.
type retryTransport struct {
	base   http.RoundTripper
	policy RetryPolicy // withDefaults applied
}

// RoundTrip implements http.RoundTripper.
func (t *retryTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	start := time.Now()
	if (req.Body != nil && req.Body != http.NoBody) || req.Context().Value(blobAttemptKey{}) != nil {
		resp, err := t.base.RoundTrip(req)
		if err == nil {
			t.holdForRetryAfter(req, resp, start)
		}
		return resp, err
	}
	for attempt := 1; ; attempt++ {
		resp, err := t.base.RoundTrip(req)
		var transient bool
		var after time.Duration
		var why string
		if err != nil {
			transient, why = retryableNetError(err), err.Error()
		} else if retryableStatus(resp.StatusCode) {
			transient, why = true, resp.Status
			after, _ = parseRetryAfter(resp.Header.Get("Retry-After"), time.Now())
		}
		if !transient || req.Context().Err() != nil {
			return resp, err
		}
		w, ok := t.policy.next(start, attempt, after)
		if !ok {
			if err == nil {
				t.holdForRetryAfter(req, resp, start)
			}
			return resp, err
		}
		if resp != nil {
			_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
			resp.Body.Close()
		}
		t.policy.Logger.DebugContext(req.Context(), "retrying registry request",
			"method", req.Method, "url", redactURL(req), "attempt", attempt+1, "maxAttempts", t.policy.MaxAttempts, "wait", w, "reason", why)
		if err := sleep(req.Context(), w); err != nil {
			return nil, err
		}
	}
}

// holdForRetryAfter delays handing back a 429 or 503 that carries
// Retry-After until that time, when it is within MaxElapsed of start.
func (t *retryTransport) holdForRetryAfter(req *http.Request, resp *http.Response, start time.Time) {
	if resp.StatusCode != http.StatusTooManyRequests && resp.StatusCode != http.StatusServiceUnavailable {
		return
	}
	after, ok := parseRetryAfter(resp.Header.Get("Retry-After"), time.Now())
	if !ok || after == 0 || time.Since(start)+after > t.policy.MaxElapsed {
		return
	}
	t.policy.Logger.DebugContext(req.Context(), "registry asked to wait (Retry-After)",
		"method", req.Method, "url", redactURL(req), "status", resp.Status, "wait", after)
	_ = sleep(req.Context(), after)
}

// redactURL is the request's URL without its query (upload URLs carry
// session state) or user information.
func redactURL(req *http.Request) string {
	u := *req.URL
	u.RawQuery, u.User, u.Fragment = "", nil, ""
	return u.String()
}
