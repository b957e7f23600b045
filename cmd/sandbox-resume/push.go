package main

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/sandbox-resume/sandbox-resume/migrate"
)

// newPushCmd is `push [--plain-http] [--registry-config F]
// [--registry-cacert F] --ref ref.json REG/REPO[:TAG]` (docs/design.md
// "Moving runs"): migrate.Push sends the base by digest to the
// same repository, then the artifact under the tag, or under
// <run>.g<generation> when none is given.
func newPushCmd(a *app) *cobra.Command {
	var ref string
	var rf registryFlags
	var ho handoffFlags
	cmd := &cobra.Command{
		Use:   "push [--plain-http] [--registry-config F] [--registry-cacert F] --ref ref.json REG/REPO[:TAG]",
		Short: "Push a suspended run (and its base image, by digest) to an OCI registry",
		Long: `Pushes the base image's platform manifest (and its index when complete here)
by digest to REG/REPO, then the run's migration artifact as REG/REPO:TAG, or,
without a tag, as REG/REPO:<run>.g<generation>. Each push uses a new resolver.
Credentials come from --registry-config, else $DOCKER_CONFIG/config.json, else
~/.docker/config.json (auths, credsStore, credHelpers); TLS trusts the system
pool plus --registry-cacert. A blob whose push fails transiently (connection
reset, 429, 5xx) is pushed again whole, within bounded attempts and time
(--debug logs each retry). --plain-http is accepted only for a loopback
registry (127.0.0.1, ::1, localhost).
--handoff HOST_ID --key K hands the run over to that host, as export does:
HandedOff first, then the signed handoff statement as the artifact's last layer.
Progress is drawn on stderr when stderr is a terminal, never otherwise.`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) != 1 {
				return usageErrorf("push: exactly one REG/REPO[:TAG] argument is required, got %d", len(args))
			}
			return nil
		},
		RunE: a.command(func(s *session, args []string) (*result, error) {
			target, err := remoteArg("push", args[0], false, rf.plainHTTP)
			if err != nil {
				return nil, err
			}
			refFile, err := readInput(ref)
			if err != nil {
				return nil, err
			}
			rt, reg, err := rf.open(s)
			if err != nil {
				return nil, err
			}
			popts, done := moveProgress(s.cmd)
			hopts, err := ho.options(s, rt)
			if err != nil {
				done()
				return nil, err
			}
			res, err := migrate.Push(s.ctx, rt, reg, refFile, target, append(popts, hopts...)...)
			done()
			if err != nil {
				return nil, fmt.Errorf("push %s: %w", ref, err)
			}
			warnUnpinned(s.stderr(), "push", ref, refFile)
			return &result{JSON: res, Text: func(w, _ io.Writer) error {
				_, err := fmt.Fprintf(w, "pushed run %s to %s: artifact %s; base by digest: %v\n", res.Run, res.Target, res.Artifact.Digest, res.Base)
				printHandedOff(w, res.Run, res.Handoff)
				return err
			}}, nil
		}),
	}
	f := cmd.Flags()
	f.StringVar(&ref, "ref", "", "SnapshotRef file written by suspend (required)")
	rf.add(f)
	_ = cmd.MarkFlagRequired("ref")
	ho.add(cmd, a)
	addDaemonFlags(cmd, a)
	return cmd
}

// remoteArg parses a registry reference argument; a bad one, or
// --plain-http for a registry that is not loopback, is a usage error.
func remoteArg(cmdName, s string, allowDigest, plainHTTP bool) (*migrate.RemoteRef, error) {
	target, err := migrate.ParseRemoteRef(s, allowDigest)
	if err != nil {
		return nil, usageErrorf("%s: %v", cmdName, err)
	}
	if plainHTTP && !target.Loopback {
		return nil, usageErrorf("%s: --plain-http is accepted only for a loopback registry, not %s", cmdName, s)
	}
	return target, nil
}
