package main

import (
	"bufio"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/sandbox-resume/sandbox-resume/internal/inputfile"
	"github.com/sandbox-resume/sandbox-resume/resume"
)

// resumeOptions are the flags of `resume` (docs/design.md "Resume
// decision").
type resumeOptions struct {
	ref, config, trust, lockfile, container, spec             string
	check, start, takeOver, trustRecordedSpec, copy, noMemory bool
	duplicateProcess                                          bool
	force                                                     bool
}

// newResumeCmd is `resume --ref ref.json --config PATH --trust PUB|DIR
// [--check] [--container ID] [--start] [--spec FILE] [--take-over] [--copy]
// [--lockfile F]`
// (docs/design.md "Resume decision"): it runs the checks against the daemon
// at --address in --namespace (host identity overridden by --host-id) and
// the run ledger (--ledger), and prints the verdict; the exit code is the
// verdict's. With --check it only decides (resume.Decide: the ledger is
// read, never written); without, resume.Resume claims the run in the ledger
// and materializes it as a new container (--container, --start).
func newResumeCmd(a *app) *cobra.Command {
	var o resumeOptions
	cmd := &cobra.Command{
		Use:   "resume --ref REF --config PATH --trust PUB|DIR [--check] [--container ID] [--start] [--spec FILE] [--take-over] [--copy] [--trust-recorded-spec] [--no-memory] [--duplicate-process] [--lockfile F]",
		Short: "Decide whether a suspended run may resume into the offered environment, and resume it",
		Long: `Runs the resume checks (ref-parse, signature, ref-schema, ref-integrity,
offered-ingest, manifest, host, image, snapshot, spec, claim) and prints each
result, the drift between the recorded and the offered manifest core, the
spec drift, and the verdict. The exit code is the verdict's: 0 accepted,
2 bad input or a refused devcontainer.metadata image label (image-metadata),
3 manifest mismatch or spec drift, 4 unpinned cross-host, 5 image,
6 untrusted, tampered or forked, 7 snapshot, 8 claim conflict, 9 superseded;
1 when the daemon or the ledger fails.
--spec offers the OCI runtime spec the incarnation should run with: it must
decode (else 2) and must not widen the recorded spec (capabilities, user,
seccomp, namespaces, devices, mounts but a bind mount's source, ... else 3
with the differences in specDrift; bind mount sources that differ are listed
as allowed). Without --spec the recorded spec is used.
The claim check asks the run ledger (--ledger): a newer generation or a
discarded run is 9, this generation recorded with another ref is 6, a
generation this ledger never recorded (no handoff to this host) is 9 unless
--copy accepts it as a copy (the verdict then says copy: true), a run held
(live, or being resumed), a claim lease of the previous release, or an existing
container id is 8. --check decides and writes nothing. Without --check the
ledger's Claim transition runs, the ref file's bytes are stored under the run
lease, every layer is verified (digest, size, diffID; a mismatch is 7), the
base layers and the generation's layers are applied, the container --container
(default <run>-g<generation+1>) is created from the recorded spec (or the
--spec one) with root.path and linux.cgroupsPath set for it, process.terminal
false and the recorded namespace paths removed (both listed in notApplied),
under the recorded runtime and its options, with the labels run, manifest,
generation, ref and fence, and the run goes live with it; a failure before
the container exists releases the claim, and a claim lost meanwhile deletes
the container (8). --take-over takes a live run from a lost holder (an
operator's decision: the verdict names the fenced-out holder in takenOver);
the holder's container on this host is deleted only when its labels name the
run and the fence it held (any other container under that id is left alone,
8), and a holder whose task runs on this host needs --force as well.
A recorded spec and runtime this ledger did not record from a suspend on this
host are judged first: OCI hooks, every capability, a host namespace, a
writable bind of /, a runtime given as a path, or runtime options beyond
runc's SystemdCgroup, NoPivotRoot, NoNewKeyring, IoUid and IoGid (BinaryName,
Root, CriuImagePath, CriuWorkPath, ShimCgroup, a runsc ConfigPath) are 3
(spec-drift, "recorded spec from host X carries ..."), unless
--trust-recorded-spec.
--start starts the task detached — the recorded process, args, cwd, env and
user — and reports its pid. A ref of the previous release (/1) records no
spec: its container is made from the image config plus the containerEnv
entries, and its mounts, remoteUser and containerEnv values holding ${…} are
listed in notApplied.`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) > 0 {
				return usageErrorf("resume: unexpected argument %q (the ref and config are given with --ref and --config)", args[0])
			}
			return nil
		},
		RunE: a.command(func(s *session, _ []string) (*result, error) {
			if o.container != "" && !resume.ValidContainerID(o.container) {
				return nil, usageErrorf("resume: --container %q is not a containerd identifier ([A-Za-z0-9]+([._-][A-Za-z0-9]+)*, at most 76 characters)", o.container)
			}
			req, err := resume.LoadRequest(o.ref, o.config, o.lockfile, o.trust)
			if err != nil {
				return nil, err
			}
			if o.force && !o.takeOver {
				return nil, usageErrorf("resume: --force goes with --take-over (deleting a live holder that runs on this host)")
			}
			req.TakeOver, req.TrustRecordedSpec, req.Force = o.takeOver, o.trustRecordedSpec, o.force
			req.Copy, req.NoMemory, req.DuplicateProcess = o.copy, o.noMemory, o.duplicateProcess
			if o.spec != "" {
				if req.Spec, err = inputfile.Read(o.spec, inputfile.MaxJSON); err != nil {
					return nil, &resume.InputError{Path: o.spec, Err: err}
				}
				req.SpecSource = o.spec
			}
			rt, err := s.runtime()
			if err != nil {
				return nil, err
			}
			l, err := s.ledger()
			if err != nil {
				return nil, err
			}
			var v *resume.Verdict
			if o.check {
				v = resume.Decide(s.ctx, rt, l, req)
			} else {
				v = resume.Resume(s.ctx, rt, l, rt, req, resume.ResumeOptions{Container: o.container, Start: o.start})
			}
			out := &result{JSON: v, Text: func(w, _ io.Writer) error { writeVerdictText(w, v); return nil }}
			if !v.Accepted {
				out.Class = v.Class
			}
			return out, nil
		}),
	}
	f := cmd.Flags()
	f.StringVar(&o.ref, "ref", "", "SnapshotRef file written by suspend (required)")
	f.StringVar(&o.config, "config", "", "the offered devcontainer.json (required)")
	f.StringVar(&o.trust, "trust", "", "trusted PKIX PEM public key, or a directory of *.pub / *.pem keys (required)")
	f.StringVar(&o.lockfile, "lockfile", "", "lockfile to use instead of discovering one beside --config")
	f.BoolVar(&o.check, "check", false, "decide only: run the checks, write nothing (no claim, no container)")
	f.BoolVar(&o.takeOver, "take-over", false, "take a live run from its holder (a lost host or container), fencing it out: an operator's decision")
	f.BoolVar(&o.noMemory, "no-memory", false, "resume a generation with memory from its filesystem and restart its process instead of restoring it (check 12 says so)")
	f.BoolVar(&o.duplicateProcess, "duplicate-process", false, "with --copy or --take-over: restore a generation's memory although its process may then run twice (without it, or --no-memory, that is 64)")
	f.BoolVar(&o.force, "force", false, "with --take-over: also when the live holder's task runs on this host and namespace (its container is deleted)")
	f.BoolVar(&o.trustRecordedSpec, "trust-recorded-spec", false, "run a recorded spec and runtime options that another host recorded (hooks, privileged settings, shim paths) without judging them: an operator's decision")
	f.BoolVar(&o.copy, "copy", false, "accept a generation this ledger never recorded (a copy the source can still resume: a backup or a fork made on purpose); the verdict says copy: true")
	f.StringVar(&o.container, "container", "", "id of the container to create (default <run>-g<generation+1>); not used by --check")
	f.StringVar(&o.spec, "spec", "", "the OCI runtime spec (config.json) to run the incarnation with, checked against the recorded one")
	f.BoolVar(&o.start, "start", false, "start the resumed container's task; needs a resume without --check")
	for _, name := range []string{"ref", "config", "trust"} {
		_ = cmd.MarkFlagRequired(name)
	}
	// --start and --container are about the container a resume creates;
	// --check creates none.
	cmd.MarkFlagsMutuallyExclusive("check", "start")
	cmd.MarkFlagsMutuallyExclusive("check", "container")
	addDaemonFlags(cmd, a)
	addHostIDFlag(cmd, a)
	addLedgerFlags(cmd, a)
	return cmd
}

// writeVerdictText prints the verdict for people: one line per check, the
// ingestion refusals, the drift, then the outcome. It is written in one
// write at the end, not one per line or cell (65 syscalls and as many
// wake-ups of the reader for a ten-check verdict).
func writeVerdictText(w io.Writer, v *resume.Verdict) {
	bw := bufio.NewWriterSize(w, 4096)
	defer bw.Flush()
	w = bw
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, c := range v.Checks {
		fmt.Fprintf(tw, "%s\t%s\t%s\n", c.Result, c.Name, c.Detail)
	}
	if m := v.Materialize; m != nil {
		fmt.Fprintf(tw, "%s\t%s\t%s\n", m.Result, m.Name, m.Detail)
	}
	tw.Flush()
	if len(v.Refusals) > 0 {
		fmt.Fprintf(w, "\nrefusals (%d):\n", len(v.Refusals))
		for _, r := range v.Refusals {
			fmt.Fprintf(w, "  %s\n", r)
		}
	}
	if len(v.Drift) > 0 {
		fmt.Fprintf(w, "\ndrift (%d):\n", len(v.Drift))
		for _, d := range v.Drift {
			writeDrift(w, d.Pointer, d.OfferedPointer, d.Recorded, d.Offered)
			fmt.Fprintln(w)
		}
	}
	if len(v.SpecDrift) > 0 {
		fmt.Fprintf(w, "\nspec drift (%d):\n", len(v.SpecDrift))
		for _, d := range v.SpecDrift {
			writeDrift(w, d.Pointer, d.OfferedPointer, d.Recorded, d.Offered)
			if d.Allowed {
				fmt.Fprint(w, " (allowed)")
			}
			fmt.Fprintln(w)
		}
	}
	if v.Run != "" {
		fmt.Fprintf(w, "\nrun: %s generation %d", v.Run, v.Generation)
		if v.Fence != 0 {
			fmt.Fprintf(w, " fence %d", v.Fence)
		}
		fmt.Fprintln(w)
	}
	if t := v.TakenOver; t != nil {
		fmt.Fprintf(w, "taken over (an operator's decision): container %s in namespace %s on host %s, fence %d\n", t.Container, t.Namespace, t.Host, t.Fence)
	}
	if v.Copy {
		fmt.Fprintln(w, "copy: this ledger never recorded the generation; the host it came from can still resume it")
	}
	if v.Container != "" {
		fmt.Fprintf(w, "container: %s\n", v.Container)
	}
	if v.Pid != 0 {
		fmt.Fprintf(w, "pid: %d\n", v.Pid)
	}
	if len(v.NotApplied) > 0 {
		fmt.Fprintf(w, "not applied: %s\n", strings.Join(v.NotApplied, ", "))
	}
	if v.Accepted {
		if v.Materialize != nil {
			fmt.Fprintf(w, "\nresumed: run materialized as container %s (exit 0)\n", v.Container)
			return
		}
		fmt.Fprintln(w, "\naccepted: the run may resume (exit 0)")
		return
	}
	fmt.Fprintf(w, "\nrefused: %s (exit %d)\n", v.Class, v.ExitCode)
}

// writeDrift writes one drift line of the verdict text, without its
// newline: "  POINTER [(offered at P)]: recorded R, offered O", where an
// absent side (nil) is "absent".
func writeDrift(w io.Writer, pointer, offeredPointer string, recorded, offered []byte) {
	fmt.Fprintf(w, "  %s", pointer)
	if offeredPointer != "" {
		fmt.Fprintf(w, " (offered at %s)", offeredPointer)
	}
	rec, off := "absent", "absent"
	if recorded != nil {
		rec = string(recorded)
	}
	if offered != nil {
		off = string(offered)
	}
	fmt.Fprintf(w, ": recorded %s, offered %s", rec, off)
}
