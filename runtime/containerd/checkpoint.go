package containerd

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/containerd/containerd/api/types"
	runcoptions "github.com/containerd/containerd/api/types/runc/options"
	"github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/core/images"
	"github.com/containerd/containerd/v2/core/leases"
	"github.com/containerd/containerd/v2/pkg/cio"
	"github.com/containerd/errdefs"
	"github.com/containerd/typeurl/v2"
	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"golang.org/x/sys/unix"

	apitasks "github.com/containerd/containerd/api/services/tasks/v1"

	"github.com/sandbox-resume/sandbox-resume/host"
	"github.com/sandbox-resume/sandbox-resume/snapshot"
)

var criuVersionRE = regexp.MustCompile(`(?m)^Version: ([0-9][0-9A-Za-z.+~-]*)`)

// MemoryFacts implements host.Info for snapshot.MemoryFormatCRIU: the CRIU
// binary (`criu` on this process's PATH: the harness, the demo and the
// walkthrough start the daemon with the same PATH, bin/ first, so it is the
// criu the runc shim runs), its `--version` and
// the sha256 of its bytes, the kernel release (uname -r) and the CPU of
// /proc/cpuinfo's first processor. runsc/1 wraps errdefs.ErrNotImplemented
// (the gVisor issue).
func (r *Runtime) MemoryFacts(ctx context.Context, format string) (snapshot.MemoryRuntime, snapshot.MemoryHost, error) {
	if format != snapshot.MemoryFormatCRIU {
		return snapshot.MemoryRuntime{}, snapshot.MemoryHost{}, fmt.Errorf("memory format %q: this build restores only %q on containerd: %w", format, snapshot.MemoryFormatCRIU, errdefs.ErrNotImplemented)
	}
	rt, err := criuFacts(ctx)
	if err != nil {
		return snapshot.MemoryRuntime{}, snapshot.MemoryHost{}, err
	}
	mh, err := machineFacts()
	if err != nil {
		return snapshot.MemoryRuntime{}, snapshot.MemoryHost{}, err
	}
	return rt, mh, nil
}

// criuFacts finds the CRIU binary and reads its version and digest.
func criuFacts(ctx context.Context) (snapshot.MemoryRuntime, error) {
	bin, err := exec.LookPath("criu")
	if err != nil {
		return snapshot.MemoryRuntime{}, fmt.Errorf("criu: not on PATH (make deps builds it into bin/): %v: %w", err, errdefs.ErrNotFound)
	}
	out, err := exec.CommandContext(ctx, bin, "--version").CombinedOutput()
	if err != nil {
		return snapshot.MemoryRuntime{}, fmt.Errorf("%s --version: %v: %s", bin, err, bytes.TrimSpace(out))
	}
	m := criuVersionRE.FindSubmatch(out)
	if m == nil {
		return snapshot.MemoryRuntime{}, fmt.Errorf("%s --version printed no \"Version: \" line: %q: %w", bin, out, errdefs.ErrInvalidArgument)
	}
	f, err := os.Open(bin)
	if err != nil {
		return snapshot.MemoryRuntime{}, fmt.Errorf("criu binary: %w", err)
	}
	defer f.Close()
	d, err := digest.SHA256.FromReader(f)
	if err != nil {
		return snapshot.MemoryRuntime{}, fmt.Errorf("criu binary %s: digest: %w", bin, err)
	}
	return snapshot.MemoryRuntime{Tool: snapshot.MemoryToolCRIU, Version: string(m[1]), BinaryDigest: d}, nil
}

// machineFacts is the kernel release and the CPU of /proc/cpuinfo's first
// processor (vendor_id, cpu family, model, flags sorted and deduplicated).
func machineFacts() (snapshot.MemoryHost, error) {
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		return snapshot.MemoryHost{}, fmt.Errorf("uname: %w", err)
	}
	mh := snapshot.MemoryHost{Kernel: unix.ByteSliceToString(u.Release[:])}
	cpu, err := readCPUInfo("/proc/cpuinfo")
	if err != nil {
		return snapshot.MemoryHost{}, err
	}
	mh.CPU = cpu
	return mh, nil
}

// readCPUInfo reads the first processor's block of a /proc/cpuinfo file.
func readCPUInfo(path string) (snapshot.CPU, error) {
	f, err := os.Open(path)
	if err != nil {
		return snapshot.CPU{}, fmt.Errorf("cpu facts: %w", err)
	}
	defer f.Close()
	var cpu snapshot.CPU
	sc := bufio.NewScanner(io.LimitReader(f, 1<<20))
	sc.Buffer(make([]byte, 64<<10), 64<<10)
	seen := false
	for sc.Scan() {
		line := sc.Text()
		if strings.TrimSpace(line) == "" {
			if seen {
				break
			}
			continue
		}
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		switch k {
		case "processor":
			seen = true
		case "vendor_id":
			cpu.Vendor = v
		case "cpu family":
			cpu.Family, err = strconv.ParseUint(v, 10, 64)
		case "model":
			cpu.Model, err = strconv.ParseUint(v, 10, 64)
		case "flags":
			cpu.Flags = strings.Fields(v)
		}
		if err != nil {
			return snapshot.CPU{}, fmt.Errorf("%s: %q: %w", path, line, err)
		}
	}
	if err := sc.Err(); err != nil {
		return snapshot.CPU{}, fmt.Errorf("%s: %w", path, err)
	}
	slices.Sort(cpu.Flags)
	cpu.Flags = slices.Compact(cpu.Flags)
	if cpu.Vendor == "" {
		return snapshot.CPU{}, fmt.Errorf("%s: no vendor_id: %w", path, errdefs.ErrNotImplemented)
	}
	return cpu, nil
}

// CheckpointTask implements host.Tasks for runc through containerd's task
// service (Tasks.Checkpoint with runc's CheckpointOptions, Exit false: CRIU
// --leave-running), with the lease in the context so that the daemon
// writes the CRIU image tar under it; the image's second blob (the
// container spec, which the ref records apart) is released from the lease.
// The task must be paused; a standard stream of its init process that is a
// regular file or a terminal is refused first (host.ErrCannotCheckpoint:
// CRIU cannot look up a host file's mount). After the checkpoint the task
// is paused again if it is not.
func (r *Runtime) CheckpointTask(ctx context.Context, id, lease string) (snapshot.Memory, error) {
	task, st, err := r.task(ctx, id)
	if err != nil {
		return snapshot.Memory{}, err
	}
	if st != client.Paused {
		return snapshot.Memory{}, fmt.Errorf("container %q: checkpoint: task is %s, not paused: %w", id, st, errdefs.ErrFailedPrecondition)
	}
	if err := dumpableStdio(task.Pid()); err != nil {
		return snapshot.Memory{}, fmt.Errorf("container %q: %w", id, err)
	}
	if err := noEstablishedTCP(task.Pid()); err != nil {
		return snapshot.Memory{}, fmt.Errorf("container %q: %w", id, err)
	}
	rt, mh, err := r.MemoryFacts(ctx, snapshot.MemoryFormatCRIU)
	if err != nil {
		return snapshot.Memory{}, fmt.Errorf("container %q: checkpoint: %w", id, err)
	}
	opts, err := typeurl.MarshalAnyToProto(&runcoptions.CheckpointOptions{Exit: false})
	if err != nil {
		return snapshot.Memory{}, fmt.Errorf("container %q: checkpoint options: %w", id, err)
	}
	lctx := leases.WithLease(ctx, lease)
	resp, err := r.client.TaskService().Checkpoint(lctx, &apitasks.CheckpointTaskRequest{ContainerID: id, Options: opts})
	// The freezer state after the checkpoint (docs/design.md "Memory"):
	// the task stays frozen through the diff and the record.
	if now, serr := task.Status(context.WithoutCancel(ctx)); serr == nil && now.Status != client.Paused {
		if perr := task.Pause(context.WithoutCancel(ctx)); perr != nil {
			err = errors.Join(err, fmt.Errorf("container %q: pause again after the checkpoint: %w", id, native(perr)))
		}
	}
	if err != nil {
		return snapshot.Memory{}, fmt.Errorf("container %q: checkpoint task: %w", id, native(err))
	}
	mem := snapshot.Memory{Format: snapshot.MemoryFormatCRIU, Runtime: rt, Host: mh}
	for _, d := range resp.Descriptors {
		dg, err := digest.Parse(d.Digest)
		if err != nil {
			return snapshot.Memory{}, fmt.Errorf("container %q: checkpoint descriptor %q: %w", id, d.Digest, errdefs.ErrInvalidArgument)
		}
		if d.MediaType != images.MediaTypeContainerd1Checkpoint {
			if err := r.ReleaseBlob(ctx, lease, dg); err != nil {
				return snapshot.Memory{}, err
			}
			continue
		}
		size, err := r.BlobSize(ctx, dg)
		if err != nil {
			return snapshot.Memory{}, fmt.Errorf("container %q: checkpoint blob: %w", id, err)
		}
		if size != d.Size {
			return snapshot.Memory{}, fmt.Errorf("container %q: checkpoint blob %s is %d bytes stored, %d reported: %w", id, dg, size, d.Size, snapshot.ErrBlobCorrupt)
		}
		if err := r.addContent(ctx, lease, dg); err != nil {
			return snapshot.Memory{}, err
		}
		mem.Blobs = append(mem.Blobs, snapshot.Descriptor{MediaType: snapshot.MediaTypeMemoryCRIU, Digest: dg, Size: size})
	}
	if len(mem.Blobs) != 1 {
		return snapshot.Memory{}, fmt.Errorf("container %q: checkpoint returned %d CRIU image blobs, want 1: %w", id, len(mem.Blobs), errdefs.ErrUnknown)
	}
	return mem, nil
}

// dumpableStdio refuses a task whose init process has a standard stream
// CRIU cannot dump: a regular file (its mount is not the container's) or a
// terminal. /dev/null, pipes and sockets dump.
func dumpableStdio(pid uint32) error {
	for fd, name := range []string{"stdin", "stdout", "stderr"} {
		p := filepath.Join("/proc", strconv.FormatUint(uint64(pid), 10), "fd", strconv.Itoa(fd))
		target, err := os.Readlink(p)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return fmt.Errorf("checkpoint: %s of pid %d: %w", name, pid, err)
		}
		fi, err := os.Stat(p)
		if err != nil {
			continue // a pipe or socket whose peer went: nothing CRIU must look up
		}
		switch m := fi.Mode(); {
		case m.IsRegular():
			return fmt.Errorf("checkpoint: %s of pid %d is the host file %s, which CRIU cannot dump (give the task /dev/null or a pipe: cio.NullIO, FIFOs): %w", name, pid, target, host.ErrCannotCheckpoint)
		case m&fs.ModeCharDevice != 0 && target != "/dev/null":
			return fmt.Errorf("checkpoint: %s of pid %d is the device %s (a terminal), which is not checkpointed: %w", name, pid, target, host.ErrCannotCheckpoint)
		}
	}
	return nil
}

// RestoreTask implements host.Tasks for a criu/1 image: the one blob is
// read back and its digest and size verified, then the task is created from
// it (NewTask with the checkpoint descriptor, containerd's restore path;
// stdio /dev/null, as StartTask's) and started.
func (r *Runtime) RestoreTask(ctx context.Context, id string, mem snapshot.Memory) (uint32, error) {
	if mem.Format != snapshot.MemoryFormatCRIU || len(mem.Blobs) != 1 {
		return 0, fmt.Errorf("container %s: restore a %q image of %d blobs: this build restores one %q blob: %w", id, mem.Format, len(mem.Blobs), snapshot.MemoryFormatCRIU, errdefs.ErrNotImplemented)
	}
	b := mem.Blobs[0]
	if err := r.verifyBlob(ctx, b); err != nil {
		return 0, fmt.Errorf("container %s: memory/blobs/0: %w", id, err)
	}
	cont, err := r.client.LoadContainer(ctx, id)
	if err != nil {
		return 0, fmt.Errorf("container %s: %w", id, native(err))
	}
	withImage := func(_ context.Context, _ *client.Client, info *client.TaskInfo) error {
		info.Checkpoint = &types.Descriptor{MediaType: images.MediaTypeContainerd1Checkpoint, Digest: b.Digest.String(), Size: b.Size}
		return nil
	}
	task, err := cont.NewTask(ctx, cio.NullIO, withImage)
	if err != nil {
		return 0, fmt.Errorf("container %s: restore task from %s: %w", id, b.Digest, native(err))
	}
	if err := task.Start(ctx); err != nil {
		_, _ = task.Delete(context.WithoutCancel(ctx), client.WithProcessKill)
		return 0, fmt.Errorf("container %s: start restored task: %w", id, native(err))
	}
	return task.Pid(), nil
}

// verifyBlob reads the stored blob d once and checks its size and digest.
func (r *Runtime) verifyBlob(ctx context.Context, d snapshot.Descriptor) error {
	ra, err := r.client.ContentStore().ReaderAt(ctx, ocispec.Descriptor{Digest: d.Digest, Size: d.Size})
	if err != nil {
		return fmt.Errorf("blob %s: %w", d.Digest, native(err))
	}
	defer ra.Close()
	if ra.Size() != d.Size {
		return fmt.Errorf("blob %s is %d bytes stored, the ref records %d: %w", d.Digest, ra.Size(), d.Size, snapshot.ErrBlobCorrupt)
	}
	v := d.Digest.Verifier()
	if _, err := io.Copy(v, io.NewSectionReader(ra, 0, d.Size)); err != nil {
		return fmt.Errorf("blob %s: read: %w", d.Digest, err)
	}
	if !v.Verified() {
		return fmt.Errorf("blob %s: its bytes have another digest: %w", d.Digest, snapshot.ErrBlobCorrupt)
	}
	return nil
}

// noEstablishedTCP refuses a task whose network namespace holds an
// established TCP connection (/proc/PID/net/tcp and tcp6, state 01): CRIU
// refuses to dump one by default, and established connections are never
// promised across a restore (docs/design.md "Memory"). The first one is
// named by its local and remote address (hexadecimal, as the kernel
// prints them).
func noEstablishedTCP(pid uint32) error {
	dir := filepath.Join("/proc", strconv.FormatUint(uint64(pid), 10), "net")
	if err := establishedTCP(filepath.Join(dir, "tcp"), filepath.Join(dir, "tcp6")); err != nil {
		return fmt.Errorf("checkpoint: pid %d's network namespace %w", pid, err)
	}
	return nil
}

// establishedTCP returns an error wrapping host.ErrCannotCheckpoint naming
// the first established connection (state 01) in the /proc/net/tcp-format
// files; an absent file is skipped.
func establishedTCP(files ...string) error {
	for _, p := range files {
		f, err := os.Open(p)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return fmt.Errorf("cannot be read: %w", err)
		}
		sc := bufio.NewScanner(io.LimitReader(f, 16<<20))
		for sc.Scan() {
			fields := strings.Fields(sc.Text())
			if len(fields) < 4 || fields[3] != "01" {
				continue
			}
			f.Close()
			return fmt.Errorf("holds an established TCP connection %s → %s (%s), which CRIU does not dump and a restore never promises; close it before suspend --memory: %w",
				fields[1], fields[2], p, host.ErrCannotCheckpoint)
		}
		err = sc.Err()
		f.Close()
		if err != nil {
			return fmt.Errorf("%s: %w", p, err)
		}
	}
	return nil
}
