package main

import (
	"github.com/containerd/log"
	"github.com/spf13/pflag"

	"github.com/sandbox-resume/sandbox-resume/migrate"
	"github.com/sandbox-resume/sandbox-resume/runtime/containerd"
)

// registryFlags are the flags push and pull share to reach a registry
// (docs/design.md "Moving runs"): --plain-http, --registry-config,
// --registry-cacert.
type registryFlags struct {
	plainHTTP bool
	config    string
	caCert    string
}

func (f *registryFlags) add(fs *pflag.FlagSet) {
	fs.BoolVar(&f.plainHTTP, "plain-http", false, "use http, not https (loopback registries only)")
	fs.StringVar(&f.config, "registry-config", "", "credentials file in the Docker config.json format (auths, credsStore, credHelpers); default $DOCKER_CONFIG/config.json, else ~/.docker/config.json")
	fs.StringVar(&f.caCert, "registry-cacert", "", "PEM file of CA certificates trusted for the registry, in addition to the system pool")
}

// open opens the credential store and CA file the flags name — a file
// that is missing or does not decode is bad input (exit 2), found before
// containerd is dialled — then connects to containerd (s.runtime) and
// returns the registry transport over it. Retries are logged on the
// command's stderr under --debug.
func (f *registryFlags) open(s *session) (Runtime, migrate.Registry, error) {
	// containerd's resolver logs each failed request at info level on
	// stderr (logrus); the error returned says it once. --debug keeps them.
	if !s.app.flags.debug {
		_ = log.SetLevel("warn")
	}
	tr, err := containerd.NewTransport(containerd.RegistryOptions{
		ConfigFile: f.config,
		CACertFile: f.caCert,
		PlainHTTP:  f.plainHTTP,
		Logger:     s.logger(),
	})
	if err != nil {
		return nil, nil, badInput(err)
	}
	rt, err := s.runtime()
	if err != nil {
		return nil, nil, err
	}
	return rt, rt.Registry(tr), nil
}
