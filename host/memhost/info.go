package memhost

import (
	"context"
	"strings"

	"github.com/containerd/platforms"

	"github.com/sandbox-resume/sandbox-resume/internal/procfs"
	"github.com/sandbox-resume/sandbox-resume/snapshot"
)

// Host implements host.Info: the facts given to New or SetHost.
func (h *Machine) Host(ctx context.Context) (snapshot.Host, error) {
	if err := h.enter(ctx, OpHost); err != nil {
		return snapshot.Host{}, err
	}
	defer h.mu.Unlock()
	return h.host, nil
}

// SetHost replaces the host facts (the platform stays as New set it).
func (h *Machine) SetHost(s snapshot.Host) {
	h.mu.Lock()
	defer h.mu.Unlock()
	s.Platform = h.host.Platform
	h.host = s
}

// Namespace implements host.Info: DefaultNamespace unless SetNamespace
// changed it.
func (h *Machine) Namespace() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.namespace
}

// SetNamespace sets the namespace Namespace and every container report.
func (h *Machine) SetNamespace(ns string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.namespace = ns
}

// PlatformMatches implements host.Info under platforms.OnlyStrict; an
// unparsable platform does not match.
func (h *Machine) PlatformMatches(platform string) bool {
	p, err := platforms.Parse(platform)
	return err == nil && h.matcher != nil && h.matcher.Match(p)
}

// HostNamespace implements host.Info with the rule SetHostNamespace set;
// by default true exactly for the paths under /proc/1/ns/ (the in-memory
// host's pid 1).
func (h *Machine) HostNamespace(nsType, path string) bool {
	h.mu.Lock()
	rule := h.hostNS
	h.mu.Unlock()
	if rule != nil {
		return rule(nsType, path)
	}
	return strings.HasPrefix(path, "/proc/1/ns/")
}

// SetHostNamespace replaces the rule HostNamespace applies; nil restores
// the default.
func (h *Machine) SetHostNamespace(rule func(nsType, path string) bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.hostNS = rule
}

// ResumerAlive implements host.Info with the rule SetResumerAlive set, by
// default procfs.ProcessAlive (the real /proc rule).
func (h *Machine) ResumerAlive(pid int, start, boot string) bool {
	h.mu.Lock()
	alive := h.alive
	h.mu.Unlock()
	if alive != nil {
		return alive(pid, start, boot)
	}
	return procfs.ProcessAlive(pid, start, boot)
}

// SetResumerAlive replaces the rule ResumerAlive applies; nil restores the
// default.
func (h *Machine) SetResumerAlive(alive func(pid int, start, boot string) bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.alive = alive
}
