// Package containerd is the adapter of sandbox-resume to containerd
// (docs/design.md "Layout"), and the only package that talks to a daemon:
// connecting, host identity, image resolution through the content store,
// diff and apply, leases, labels and content. *Runtime implements
// host.Host, the one container-host seam the deciding packages compose
// their roles from, and Registry implements host.Registry over containerd's resolver and a Transport:
// the registry transport beyond the resolver (credentials from the Docker
// config and its helpers, a CA file on top of the system pool, per-blob
// retries, tag listing). It holds no
// policy: what to check, refuse, send or accept is decided by the
// packages that compose the roles (suspend, resume, migrate), and it writes no user files.
//
// Errors carry a github.com/containerd/errdefs class (test them with
// errdefs.IsNotFound and friends) and name the socket, reference or digest
// they concern.
package containerd

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/pkg/identifiers"
	"github.com/containerd/errdefs"
	"github.com/containerd/errdefs/pkg/errgrpc"
	"github.com/containerd/platforms"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"google.golang.org/grpc/status"
)

// DefaultTimeout bounds Connect's dial and Version probe when WithTimeout is
// not given.
const DefaultTimeout = 5 * time.Second

// Runtime is a connection to one containerd daemon in one namespace. It is
// safe for concurrent use. Close releases it.
type Runtime struct {
	client         *client.Client
	address        string
	namespace      string
	hostIDOverride string
	platform       ocispec.Platform
	matcher        platforms.MatchComparer
	cache          blobCache
	differ         Differ

	contentRootOnce sync.Once
	contentRoot     string // the daemon's content store directory when visible here (localcontent.go)
}

type options struct {
	timeout        time.Duration
	hostIDOverride string
	platform       *ocispec.Platform
	differ         Differ
}

// Option configures Connect.
type Option func(*options)

// WithTimeout bounds the dial and the Version probe of Connect (default
// DefaultTimeout). It does not bound later calls: their ctx does.
func WithTimeout(d time.Duration) Option { return func(o *options) { o.timeout = d } }

// WithHostIDOverride makes Host report id with IDSource "override"
// (snapshot.IDSourceOverride) instead of the daemon's introspection UUID
// (docs/design.md "Resume decision", host identity: --host-id or
// SANDBOX_RESUME_HOST_ID). An empty id keeps the UUID.
func WithHostIDOverride(id string) Option { return func(o *options) { o.hostIDOverride = id } }

// WithPlatform sets the host platform used to choose manifests
// (platforms.OnlyStrict) and reported by Host. The default is
// platforms.DefaultSpec() of this process, normalized.
func WithPlatform(p ocispec.Platform) Option { return func(o *options) { o.platform = &p } }

// Connect connects to the containerd daemon at address (a unix socket path,
// optionally prefixed "unix://"; a relative path is made absolute) and uses
// namespace for every call. Because the v2 client dials lazily, Connect probes
// the daemon with Version under the timeout (WithTimeout) before returning.
//
// Errors: errdefs.ErrInvalidArgument for an invalid namespace or an empty
// address; errdefs.ErrUnavailable when the socket does not exist, is not a
// socket, or does not answer as containerd in time. The message names the
// socket.
func Connect(ctx context.Context, address, namespace string, opts ...Option) (*Runtime, error) {
	o := options{timeout: DefaultTimeout}
	for _, opt := range opts {
		opt(&o)
	}
	if err := identifiers.Validate(namespace); err != nil {
		return nil, fmt.Errorf("containerd namespace %q: %w", namespace, err)
	}
	sock := strings.TrimPrefix(address, "unix://")
	if sock == "" {
		return nil, fmt.Errorf("containerd address is empty: %w", errdefs.ErrInvalidArgument)
	}
	if !filepath.IsAbs(sock) {
		abs, err := filepath.Abs(sock)
		if err != nil {
			return nil, fmt.Errorf("containerd socket %s: %w: %w", sock, errdefs.ErrInvalidArgument, err)
		}
		sock = abs
	}
	fi, err := os.Stat(sock)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return nil, fmt.Errorf("containerd socket %s does not exist (is the daemon running?): %w", sock, errdefs.ErrUnavailable)
	case err != nil:
		return nil, fmt.Errorf("containerd socket %s: %w: %w", sock, errdefs.ErrUnavailable, err)
	case fi.Mode()&os.ModeSocket == 0:
		return nil, fmt.Errorf("containerd socket %s is not a socket: %w", sock, errdefs.ErrUnavailable)
	}

	c, err := client.New(sock, client.WithDefaultNamespace(namespace), client.WithTimeout(o.timeout))
	if err != nil {
		return nil, fmt.Errorf("containerd socket %s: %w: %w", sock, errdefs.ErrUnavailable, err)
	}
	pctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	if _, err := c.Version(pctx); err != nil {
		c.Close()
		return nil, fmt.Errorf("containerd socket %s: no containerd Version answer within %s (not containerd, or not serving): %w: %w",
			sock, o.timeout, errdefs.ErrUnavailable, native(err))
	}

	p := platforms.DefaultSpec()
	if o.platform != nil {
		p = *o.platform
	}
	p = platforms.Normalize(p)
	p.OSVersion, p.OSFeatures = "", nil
	return &Runtime{
		client:         c,
		address:        sock,
		namespace:      namespace,
		hostIDOverride: o.hostIDOverride,
		platform:       p,
		matcher:        platforms.OnlyStrict(p),
		differ:         o.differ,
	}, nil
}

// Close closes the connection to the daemon.
func (r *Runtime) Close() error { return r.client.Close() }

// Client returns the underlying containerd client (default namespace set to
// Namespace()), for code in this package's callers' tests that need
// services this package does not wrap yet.
func (r *Runtime) Client() *client.Client { return r.client }

// Address returns the absolute socket path Connect dialled.
func (r *Runtime) Address() string { return r.address }

// Namespace returns the containerd namespace every call uses.
func (r *Runtime) Namespace() string { return r.namespace }

// Platform returns the host platform as "os/arch[/variant]".
func (r *Runtime) Platform() string { return platforms.Format(r.platform) }

// PlatformMatches reports whether platform ("os/arch[/variant]", parsed and
// normalized by platforms.Parse) matches the host platform under
// platforms.OnlyStrict. An unparsable platform does not match.
func (r *Runtime) PlatformMatches(platform string) bool {
	p, err := platforms.Parse(platform)
	if err != nil {
		return false
	}
	return r.matcher.Match(p)
}

// native converts an error that may still be a gRPC status into the errdefs
// class it carries.
func native(err error) error {
	if _, ok := status.FromError(err); !ok || err == nil {
		return err // already native (or nil): ToNative would class it as unknown
	}
	return errgrpc.ToNative(err)
}
