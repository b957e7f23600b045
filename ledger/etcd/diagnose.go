package etcd

import (
	"crypto/tls"
	"errors"
	"net"
	"os"
	"strings"
	"sync"
	"syscall"
	"time"
)

// diagnoseBudget is the part of Config.Timeout kept for diagnose when a call
// gets no answer: a tenth, at least 100 ms, at most 1 s.
func diagnoseBudget(timeout time.Duration) time.Duration {
	return min(max(timeout/10, 100*time.Millisecond), time.Second, timeout/2)
}

// http2Preface is what a gRPC client sends first.
const http2Preface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"

// diagnose says, for each endpoint, what a fresh connection finds within
// budget: refused or unreachable, a TLS handshake or client certificate
// refused, a TLS server reached without TLS, or reachable (then the cluster
// had no quorum, or was too slow). gRPC retries until the deadline and
// reports only the deadline; this names the cause.
func (l *Ledger) diagnose(budget time.Duration) string {
	deadline := time.Now().Add(budget)
	out := make([]string, len(l.cfg.Endpoints))
	var wg sync.WaitGroup
	for i, ep := range l.cfg.Endpoints {
		wg.Go(func() { out[i] = ep + " " + probe(ep, l.tls, deadline) })
	}
	wg.Wait()
	return strings.Join(out, "; ")
}

func probe(ep string, tc *tls.Config, deadline time.Time) string {
	d := net.Dialer{Deadline: deadline}
	conn, err := d.Dial("tcp", ep)
	if err != nil {
		switch {
		case errors.Is(err, syscall.ECONNREFUSED):
			return "refused the connection"
		case errors.Is(err, os.ErrDeadlineExceeded):
			return "did not answer the connection"
		}
		return "unreachable: " + unwrapOp(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(deadline)
	if tc == nil {
		// A TLS server answers a plain client with an alert record (0x15)
		// or closes the connection; a plain gRPC server waits or answers
		// with HTTP/2 frames.
		if _, err := conn.Write([]byte(http2Preface)); err != nil {
			return "reachable, then: " + unwrapOp(err)
		}
		b := make([]byte, 1)
		n, err := conn.Read(b)
		switch {
		case n == 1 && b[0] == 0x15, n == 1 && b[0] == 'H':
			return "serves TLS: this client speaks plain text (name the cluster's CA and a client certificate)"
		case err != nil && !errors.Is(err, os.ErrDeadlineExceeded):
			return "reachable, then closed the connection (as a TLS server does to a plain-text client): " + unwrapOp(err)
		}
		return "reachable"
	}
	host, _, _ := net.SplitHostPort(ep)
	c := tc.Clone()
	if c.ServerName == "" {
		c.ServerName = host
	}
	c.NextProtos = []string{"h2"}
	tconn := tls.Client(conn, c)
	if err := tconn.Handshake(); err != nil {
		if errors.Is(err, os.ErrDeadlineExceeded) {
			return "did not answer the TLS handshake"
		}
		return "TLS handshake failed: " + unwrapOp(err)
	}
	// With TLS 1.3 the server judges the client certificate after the
	// handshake: a refusal arrives as an alert on the first read.
	_, _ = tconn.Write([]byte(http2Preface))
	_ = conn.SetReadDeadline(time.Now().Add(min(time.Until(deadline), 200*time.Millisecond)))
	if _, err := tconn.Read(make([]byte, 1)); err != nil && !errors.Is(err, os.ErrDeadlineExceeded) {
		return "refused this TLS client: " + unwrapOp(err)
	}
	return "reachable, TLS accepted"
}

// unwrapOp drops net.OpError's "dial tcp A->B:" preamble.
func unwrapOp(err error) string {
	var op *net.OpError
	if errors.As(err, &op) && op.Err != nil {
		return op.Err.Error()
	}
	return err.Error()
}
