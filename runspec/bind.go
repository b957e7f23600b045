package runspec

import (
	"fmt"
	"path"
	"strings"
)

// guardedBindRoots are the host trees an offered bind mount's source may
// never be re-pointed into (docs/design.md "Hardening", offered specs):
// kernel and device interfaces, runtime state and sockets, the boot files.
// "/" itself is refused too.
var guardedBindRoots = []string{"/proc", "/sys", "/dev", "/run", "/var/run", "/boot"}

// bindSourceRefusal says why an offered bind mount source that differs from
// the recorded one may not be used, or "" when it may: it must be an
// absolute path, lexically (after path.Clean) outside guardedBindRoots and
// not "/", and, when Options.BindSource is set, pass that host check (not
// a socket or device, no symlink on the way).
func (c *specComparer) bindSourceRefusal(src string) string {
	if !strings.HasPrefix(src, "/") {
		return "not an absolute path"
	}
	clean := path.Clean(src)
	if clean == "/" {
		return "the host's root"
	}
	for _, root := range guardedBindRoots {
		if clean == root || strings.HasPrefix(clean, root+"/") {
			return "under " + root
		}
	}
	if c.opts.BindSource != nil {
		if err := c.opts.BindSource(clean); err != nil {
			return err.Error()
		}
	}
	return ""
}

// errBindSource is the shape of CheckBindSource's refusals.
func errBindSource(p, why string) error {
	return fmt.Errorf("bind source %s: %s", p, why)
}
