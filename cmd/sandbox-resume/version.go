package main

import (
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
)

// version is the release this binary is, set when it is built with
// -ldflags "-X main.version=v1.2.3". Empty: the main module's version from
// the build information (a VCS-stamped pseudo-version, or "(devel)" with
// the commit).
var version string

// containerdModule is the containerd client module whose version
// --version reports.
const containerdModule = "github.com/containerd/containerd/v2"

// versionInfo is what --version prints (docs/design.md "CLI contract"):
// the release, the Go toolchain that built the binary and the version of
// the containerd client module linked in; under --output json the object
// {"version", "go", "containerd"}.
type versionInfo struct {
	Version    string `json:"version"`
	Go         string `json:"go"`
	Containerd string `json:"containerd"`
}

// buildVersion reads versionInfo from version and the build information.
// What the build information does not record is "unknown".
func buildVersion() versionInfo {
	v := versionInfo{Version: version, Go: runtime.Version(), Containerd: "unknown"}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		if v.Version == "" {
			v.Version = "unknown"
		}
		return v
	}
	if bi.GoVersion != "" {
		v.Go = bi.GoVersion
	}
	if v.Version == "" {
		v.Version = mainVersion(bi)
	}
	for _, d := range bi.Deps {
		if d.Path != containerdModule {
			continue
		}
		v.Containerd = d.Version
		if d.Replace != nil {
			v.Containerd = d.Replace.Version + " (replaced by " + d.Replace.Path + ")"
		}
	}
	return v
}

// mainVersion is the main module's version; for "(devel)" (a build
// without a version stamp) it adds the commit, and "dirty" when the tree
// was modified.
func mainVersion(bi *debug.BuildInfo) string {
	v := bi.Main.Version
	if v == "" {
		v = "(devel)"
	}
	if v != "(devel)" {
		return v
	}
	settings := map[string]string{}
	for _, s := range bi.Settings {
		settings[s.Key] = s.Value
	}
	if rev := settings["vcs.revision"]; rev != "" {
		v += " " + rev
		if settings["vcs.modified"] == "true" {
			v += " dirty"
		}
	}
	return v
}

// writeText prints the three lines of --version.
func (v versionInfo) writeText(w io.Writer) error {
	_, err := fmt.Fprintf(w, "sandbox-resume %s\ngo            %s\ncontainerd    %s (client module)\n", v.Version, v.Go, v.Containerd)
	return err
}
