package main

import (
	"log/slog"

	"github.com/containerd/log"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

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

// transport opens the credential store and CA file the flags name; a file
// that is missing or does not decode is bad input (exit 2). Retries are
// logged on the command's stderr under --debug.
func (f *registryFlags) transport(cmd *cobra.Command, g *globalOptions) (*containerd.Transport, error) {
	// containerd's resolver logs each failed request at info level on
	// stderr (logrus); the error returned says it once. --debug keeps them.
	if !g.debug {
		_ = log.SetLevel("warn")
	}
	tr, err := containerd.NewTransport(containerd.RegistryOptions{
		ConfigFile: f.config,
		CACertFile: f.caCert,
		PlainHTTP:  f.plainHTTP,
		Logger:     g.logger(cmd),
	})
	if err != nil {
		return nil, badInput(err)
	}
	return tr, nil
}

// logger is the slog.Logger libraries log through: debug records on the
// command's stderr under --debug, else nil (the libraries discard).
func (g *globalOptions) logger(cmd *cobra.Command) *slog.Logger {
	if !g.debug {
		return nil
	}
	return slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), &slog.HandlerOptions{Level: slog.LevelDebug}))
}
