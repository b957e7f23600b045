package suspend

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/containerd/errdefs"
	"github.com/moby/sys/user"
	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/sandbox-resume/sandbox-resume/envmanifest"
	"github.com/sandbox-resume/sandbox-resume/snapshot"
)

// maxPasswd bounds how much of the container's /etc/passwd describesUser
// reads.
const maxPasswd = 4 << 20

// describesUser checks step 3's remoteUser at generation 1
// (docs/design.md "Hardening"): a declared remoteUser (one holding no
// "${", as with containerEnv) is the user the container's runtime spec
// runs its process as — a numeric remoteUser is compared with
// process.user.uid directly, a name is resolved to its uid through the
// /etc/passwd of the container's root file system. A mismatch, or a name
// that cannot be resolved (no /etc/passwd, no such user), is ErrMismatch
// naming both (fail closed).
func describesUser(ctx context.Context, c Host, ctr snapshot.Container, core *envmanifest.Core) error {
	want := core.RemoteUser
	if want == "" || strings.Contains(want, "${") {
		return nil
	}
	var spec specs.Spec
	if err := json.Unmarshal(ctr.Spec, &spec); err != nil {
		return fmt.Errorf("suspend: container %q: its runtime spec does not decode (%v), so remoteUser %q cannot be checked against it: %w", ctr.ID, err, want, ErrMismatch)
	}
	var uid uint32
	if spec.Process != nil {
		uid = spec.Process.User.UID
	}
	if n, err := strconv.ParseUint(want, 10, 32); err == nil {
		if uint32(n) != uid {
			return fmt.Errorf("suspend: container %q: the declaration's remoteUser is uid %d, but the runtime spec's process.user.uid is %d: %w", ctr.ID, n, uid, ErrMismatch)
		}
		return nil
	}
	passwd, err := c.ContainerFile(ctx, ctr, "/etc/passwd", maxPasswd)
	if errdefs.IsNotFound(err) {
		return fmt.Errorf("suspend: container %q: the declaration's remoteUser %q cannot be resolved: the container has no /etc/passwd (the runtime spec's process.user.uid is %d): %w", ctr.ID, want, uid, ErrMismatch)
	}
	if err != nil {
		return fmt.Errorf("suspend: container %q: read /etc/passwd to resolve remoteUser %q: %w", ctr.ID, want, err)
	}
	users, err := user.ParsePasswdFilter(bytes.NewReader(passwd), func(u user.User) bool { return u.Name == want })
	if err != nil {
		return fmt.Errorf("suspend: container %q: /etc/passwd: %v, so remoteUser %q cannot be resolved: %w", ctr.ID, err, want, ErrMismatch)
	}
	if len(users) == 0 {
		return fmt.Errorf("suspend: container %q: the declaration's remoteUser %q cannot be resolved: the container's /etc/passwd has no such user (the runtime spec's process.user.uid is %d): %w", ctr.ID, want, uid, ErrMismatch)
	}
	if got := users[0].Uid; got < 0 || uint32(got) != uid {
		return fmt.Errorf("suspend: container %q: the declaration's remoteUser %q is uid %d in the container's /etc/passwd, but the runtime spec's process.user.uid is %d: %w", ctr.ID, want, got, uid, ErrMismatch)
	}
	return nil
}
