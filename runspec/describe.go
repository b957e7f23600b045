package runspec

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	runcoptions "github.com/containerd/containerd/api/types/runc/options"
	runtimeoptions "github.com/containerd/containerd/api/types/runtimeoptions/v1"
	rspec "github.com/opencontainers/runtime-spec/specs-go"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/sandbox-resume/sandbox-resume/snapshot"
)

// Description is what an operator needs to see of a recorded runtime spec
// before resuming it (docs/design.md "Repin and fork", `inspect`): the
// process (args, cwd, user, environment names — values only when asked
// for), the mounts, the Linux namespaces and the capability sets, and the
// decoded spec itself (Spec, with process.env values removed unless
// asked for).
type Description struct {
	Process      *ProcessDescription      `json:"process,omitempty"`
	Hostname     string                   `json:"hostname,omitempty"`
	Root         *rspec.Root              `json:"root,omitempty"`
	Mounts       []rspec.Mount            `json:"mounts"`
	Namespaces   []rspec.LinuxNamespace   `json:"namespaces"`
	Capabilities *rspec.LinuxCapabilities `json:"capabilities,omitempty"`
	// Spec is the decoded spec (its members as runtime-spec v1 names
	// them); process.env entries are "NAME" alone unless values were
	// asked for.
	Spec *rspec.Spec `json:"spec"`
}

// ProcessDescription is a spec's process: args, cwd, the user (uid, gid,
// additional gids, username), the environment (Env names in spec order;
// EnvValues the "NAME=VALUE" entries, only when asked for), terminal and
// noNewPrivileges.
type ProcessDescription struct {
	Args            []string   `json:"args"`
	Cwd             string     `json:"cwd"`
	User            rspec.User `json:"user"`
	Env             []string   `json:"env"`
	EnvValues       []string   `json:"envValues,omitempty"`
	Terminal        bool       `json:"terminal,omitempty"`
	NoNewPrivileges bool       `json:"noNewPrivileges,omitempty"`
}

// Describe decodes the recorded runtime spec (JSON bytes as containerd
// holds them) into its Description. The spec must pass Validate as the
// recorded side (else that *Error); showEnv keeps the environment's
// values (without it only the names are kept, in Env and in Spec).
func Describe(spec []byte, showEnv bool) (*Description, error) {
	if err := Validate(SideRecorded, spec); err != nil {
		return nil, err
	}
	var s rspec.Spec
	if err := json.Unmarshal(spec, &s); err != nil {
		return nil, fmt.Errorf("recorded spec: %w", err)
	}
	d := &Description{Hostname: s.Hostname, Root: s.Root, Mounts: s.Mounts, Spec: &s}
	if p := s.Process; p != nil {
		pd := &ProcessDescription{Args: p.Args, Cwd: p.Cwd, User: p.User, Terminal: p.Terminal, NoNewPrivileges: p.NoNewPrivileges}
		pd.Env = make([]string, 0, len(p.Env))
		for _, e := range p.Env {
			name, _, _ := strings.Cut(e, "=")
			pd.Env = append(pd.Env, name)
		}
		if showEnv {
			pd.EnvValues = slices.Clone(p.Env)
		} else {
			redacted := *p
			redacted.Env = slices.Clone(pd.Env)
			s.Process = &redacted
		}
		if pd.Args == nil {
			pd.Args = []string{}
		}
		d.Process = pd
		d.Capabilities = p.Capabilities
	}
	if s.Linux != nil {
		d.Namespaces = s.Linux.Namespaces
	}
	if d.Mounts == nil {
		d.Mounts = []rspec.Mount{}
	}
	if d.Namespaces == nil {
		d.Namespaces = []rspec.LinuxNamespace{}
	}
	return d, nil
}

// RuntimeDescription is a recorded runtime for people: its name, and its
// options' type URL with the fields set (Options, protobuf JSON names) when
// this build knows the type (containerd.runc.v1.Options,
// runtimeoptions.v1.Options), else Undecoded with why.
type RuntimeDescription struct {
	Name      string         `json:"name"`
	TypeURL   string         `json:"typeUrl,omitempty"`
	Options   map[string]any `json:"options,omitempty"`
	Undecoded string         `json:"undecoded,omitempty"`
}

// DescribeRuntime decodes a recorded runtime's options (nil rt: nil).
func DescribeRuntime(rt *snapshot.Runtime) *RuntimeDescription {
	if rt == nil {
		return nil
	}
	out := &RuntimeDescription{Name: rt.Name}
	o := rt.Options
	if o == nil {
		return out
	}
	out.TypeURL = o.TypeURL
	var msg proto.Message
	switch o.TypeURL[strings.LastIndexByte(o.TypeURL, '/')+1:] {
	case RuncOptionsType:
		msg = &runcoptions.Options{}
	case RuntimeOptionsType:
		msg = &runtimeoptions.Options{}
	default:
		out.Undecoded = fmt.Sprintf("a type this build does not know, %d bytes", len(o.Value))
		return out
	}
	if err := proto.Unmarshal(o.Value, msg); err != nil {
		out.Undecoded = fmt.Sprintf("does not decode: %v", err)
		return out
	}
	b, err := protojson.Marshal(msg)
	if err == nil {
		err = json.Unmarshal(b, &out.Options)
	}
	if err != nil {
		out.Undecoded = fmt.Sprintf("does not render: %v", err)
		return out
	}
	if len(msg.ProtoReflect().GetUnknown()) > 0 {
		out.Undecoded = "carries fields this build does not know"
	}
	return out
}
