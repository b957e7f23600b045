package envmanifest

import (
	"fmt"
	"path/filepath"
	"strings"

	"github.com/opencontainers/go-digest"

	"github.com/sandbox-resume/sandbox-resume/internal/inputfile"
	"github.com/sandbox-resume/sandbox-resume/internal/strictjson"
)

// Lockfile names (devcontainers/cli getLockfilePath): the dotted name sits
// beside a config whose base name starts with ".".
const (
	LockfileName       = "devcontainer-lock.json"
	HiddenLockfileName = ".devcontainer-lock.json"
)

// LockfilePathFor returns where the reference CLI looks for the lockfile of
// the config at configPath: .devcontainer-lock.json beside a config whose
// base name starts with ".", else devcontainer-lock.json.
func LockfilePathFor(configPath string) string {
	name := LockfileName
	if strings.HasPrefix(filepath.Base(configPath), ".") {
		name = HiddenLockfileName
	}
	return filepath.Join(filepath.Dir(configPath), name)
}

// lockfile is a parsed devcontainer-lock.json; features is its "features"
// object (nil when the file is empty or has none).
type lockfile struct {
	path     string
	features *strictjson.Node
}

// lockfile finds, reads and parses the lockfile (docs/design.md "Normalization":
// lockfile). It returns nil when none applies. Whole-file problems are
// "lockfile" refusals at pointer ""; a read error other than absence is
// returned.
func (in *ingester) lockfile() (*lockfile, error) {
	p := in.opts.Lockfile
	explicit := p != ""
	if !explicit {
		if in.opts.Path == "" {
			if in.opts.RequireLockfile {
				in.refuse("", ClassLockfile, "a lockfile was used at suspension but none is given (stdin: discovery is off; name the lockfile explicitly)")
			}
			return nil, nil
		}
		p = LockfilePathFor(in.opts.Path)
	}
	data, err := inputfile.Read(p, inputfile.MaxJSON)
	if err != nil {
		if errNotExist(err) {
			switch {
			case explicit:
				in.refuse("", ClassLockfile, "lockfile %s does not exist", p)
			case in.opts.RequireLockfile:
				in.refuse("", ClassLockfile, "a lockfile was used at suspension but %s does not exist", p)
			}
			return nil, nil
		}
		return nil, fmt.Errorf("read lockfile %s: %w", p, err)
	}
	in.m.Lockfile = digest.FromBytes(data).String()
	in.m.LockfilePath = p
	lock := &lockfile{path: p}
	if len(strings.TrimSpace(string(data))) == 0 {
		return lock, nil // an empty lockfile has no entries
	}
	root, refusals := decode(data, false)
	if len(refusals) > 0 {
		in.refuse("", ClassLockfile, "lockfile %s does not parse: %s", p, refusals[0])
		return nil, nil
	}
	f := root.Get("features")
	if f != nil && f.Kind != strictjson.KindObject {
		in.refuse("", ClassLockfile, "lockfile %s: features must be an object, not %s", p, f.Kind)
		return nil, nil
	}
	lock.features = f
	return lock, nil
}
