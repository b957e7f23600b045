#!/usr/bin/env bash
# examples/demo.sh — the life of a durable run, as root on a Debian 12
# machine, with a plain busybox image (its own command is /bin/sh): a
# container writes a file and is suspended (generation 1); resume brings it
# back as a new container running the recorded process, which does more
# work and is suspended again (generation 2: only what changed since the
# resume); resume brings that back. Then `inspect` shows the chain, `runs`
# the ledger, and resuming generation 1 again is refused as superseded (9).
#
#   sudo examples/demo.sh [--address SOCK] [--verbose]     (or: sudo make demo)
#
# Without --address (and without $CONTAINERD_ADDRESS) it installs what is
# missing (`make deps`: runc, busybox-static, containerd binaries into bin/)
# and starts its own containerd in a temporary directory, the integration
# harness's way (config `version = 3`, CRI/NRI/opt disabled, its own socket).
# The busybox image is built locally from Debian's busybox-static (no
# network). The run ledger is a file in the temporary directory
# ($SANDBOX_RESUME_LEDGER), so every run of the demo starts afresh.
# Everything it made is removed at the end, also on failure.
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$repo"
address=${CONTAINERD_ADDRESS:-}
verbose=0
while [ $# -gt 0 ]; do
	case $1 in
	--address) address=$2; shift 2 ;;
	--address=*) address=${1#*=}; shift ;;
	--verbose|-v) verbose=1; shift ;;
	-h|--help) sed -n '2,18p' "$0"; exit 0 ;;
	*) echo "demo.sh: unknown argument $1 (see --help)" >&2; exit 64 ;;
	esac
done
if [ "$(id -u)" -ne 0 ]; then
	echo "demo.sh: run as root (containerd and runc need it): sudo make demo" >&2
	exit 64
fi
export PATH="$repo/bin:/usr/local/go/bin:$PATH"

tmp=$(mktemp -d /tmp/sr-demo-XXXXXX)
ns="sr-demo-$(basename "$tmp" | cut -d- -f3 | tr 'A-Z' 'a-z')"
log="$tmp/demo.log"
daemon_pid=""
own_daemon=0
src=demo-src
run=demo-1
export SANDBOX_RESUME_LEDGER=$tmp/ledger.db

say() { printf '\n\033[1m==> %s\033[0m\n' "$*"; }
note() { printf '    %s\n' "$*"; }
# quiet CMD…: run CMD with its output in the log (shown with --verbose).
quiet() {
	if [ "$verbose" = 1 ]; then "$@" 2>&1 | tee -a "$log"; return "${PIPESTATUS[0]}"; fi
	"$@" >>"$log" 2>&1
}
ctr_() { ctr --address "$address" --namespace "$ns" "$@"; }
sr() { sandbox-resume --address "$address" --namespace "$ns" "$@"; }

cleanup() {
	local code=$?
	set +e
	if [ $code -ne 0 ]; then
		echo >&2
		echo "demo.sh: failed (exit $code); last lines of $log:" >&2
		tail -n 25 "$log" >&2
	fi
	if [ -n "$address" ] && [ -S "$address" ]; then
		for c in $(ctr_ containers list --quiet 2>/dev/null); do
			ctr_ tasks kill --signal SIGKILL "$c" >/dev/null 2>&1
			for _ in 1 2 3 4 5 6 7 8 9 10; do
				ctr_ tasks delete "$c" >/dev/null 2>&1 && break
				sleep 0.2
			done
			ctr_ containers delete "$c" >/dev/null 2>&1
		done
		sr discard --run "$run" --force >/dev/null 2>&1
		for i in $(ctr_ images list --quiet 2>/dev/null); do ctr_ images delete --sync "$i" >/dev/null 2>&1; done
		ctr namespaces remove "$ns" >/dev/null 2>&1
	fi
	if [ -n "$daemon_pid" ]; then
		kill "$daemon_pid" 2>/dev/null
		for _ in $(seq 50); do kill -0 "$daemon_pid" 2>/dev/null || break; sleep 0.1; done
		kill -9 "$daemon_pid" 2>/dev/null
		wait "$daemon_pid" 2>/dev/null
	fi
	# Unmount what is left under the temporary directory, deepest first.
	awk -v p="$tmp" 'index($2, p) == 1 {print $2}' /proc/self/mounts | sort -r | while read -r m; do umount -l "$m"; done
	rm -rf "/run/containerd/runc/$ns" 2>/dev/null
	# The namespace's cgroups (v2: one tree; v1: one per controller), emptied
	# bottom-up with rmdir only, so a cgroup still holding a process stays.
	for cg in /sys/fs/cgroup/"$ns" /sys/fs/cgroup/*/"$ns"; do
		[ -d "$cg" ] && find "$cg" -depth -type d -exec rmdir {} \; 2>/dev/null
	done
	rm -rf "$tmp"
	[ $code -eq 0 ] && printf '\n==> cleaned up (temporary directory, daemon, containers)\n'
	exit $code
}
trap cleanup EXIT
trap 'exit 130' INT TERM

say "build"
quiet make --no-print-directory build
if [ -z "$address" ]; then
	note "no --address or \$CONTAINERD_ADDRESS: installing what is missing (make deps) and starting containerd in $tmp"
	# Shown even without --verbose: a cold make deps builds for minutes and
	# says so one line per step.
	make --no-print-directory deps 2>&1 | tee -a "$log"
	address=$tmp/c.sock
	cat >"$tmp/config.toml" <<EOF
version = 3
root = "$tmp/root"
state = "$tmp/state"
disabled_plugins = [
  "io.containerd.grpc.v1.cri",
  "io.containerd.cri.v1.images",
  "io.containerd.cri.v1.runtime",
  "io.containerd.podsandbox.controller.v1.podsandbox",
  "io.containerd.nri.v1.nri",
  "io.containerd.internal.v1.opt",
]

[grpc]
  address = "$address"

[ttrpc]
  address = "$address.ttrpc"
EOF
	containerd --config "$tmp/config.toml" >"$tmp/containerd.log" 2>&1 &
	daemon_pid=$!
	own_daemon=1
	for _ in $(seq 100); do
		ctr --address "$address" version >/dev/null 2>&1 && break
		kill -0 "$daemon_pid" 2>/dev/null || { cat "$tmp/containerd.log" >>"$log"; echo "containerd exited" >>"$log"; exit 1; }
		sleep 0.1
	done
	ctr --address "$address" version >>"$log" 2>&1
	note "containerd $(containerd --version | awk '{print $3}') running (pid $daemon_pid), socket $address"
else
	note "using the containerd at $address"
fi
note "namespace $ns"

say "import a plain busybox image (built from /bin/busybox of busybox-static; no network)"
quiet go run ./examples/importbusybox --address "$address" --namespace "$ns" busybox:1
note "docker.io/library/busybox:1 → $(ctr_ images list 2>>"$log" | awk '$1=="docker.io/library/busybox:1"{print $3}') (its own command: /bin/sh)"

# wait_file ID PATH: until PATH exists in container ID's running task.
wait_file() {
	for _ in $(seq 100); do
		ctr_ tasks exec --exec-id "probe$RANDOM" "$1" test -f "$2" </dev/null >/dev/null 2>&1 && return 0
		sleep 0.1
	done
	echo "demo.sh: $2 never appeared in $1" >>"$log"
	return 1
}
# inside ID CMD…: run CMD in container ID's task, its output indented.
inside() {
	local id=$1; shift
	ctr_ tasks exec --exec-id "show$RANDOM" "$id" "$@" </dev/null 2>>"$log" | sed 's/^/    /'
}

say "run a container: it writes /data.txt (when absent), deletes /etc/sandbox-resume-marker, then sleeps"
# The process is what every incarnation runs again (memory does not carry
# over, the recorded process does): it must not undo what came back.
quiet ctr_ run --detach --null-io --snapshotter overlayfs --env GREETING=hello docker.io/library/busybox:1 "$src" \
	sh -c '[ -e /data.txt ] || echo "generation 1: written before the first suspend" > /data.txt; rm -f /etc/sandbox-resume-marker; exec sleep 86400'
wait_file "$src" /data.txt
note "\$ cat /data.txt   (in $src)"
inside "$src" cat /data.txt

say "suspend it: generation 1 of run $run (a diff of its snapshot, its runtime spec, a signed SnapshotRef, the ledger)"
cat >"$tmp/devcontainer.json" <<'EOF2'
{
  // the run's declaration: image, environment (the container was run with it)
  "image": "busybox:1",
  "containerEnv": {"GREETING": "hello"}
}
EOF2
quiet sr keygen --out "$tmp/demo"
sr suspend --container "$src" --config "$tmp/devcontainer.json" --key "$tmp/demo.key" --run "$run" --out "$tmp/$run.g1.ref.json" | sed 's/^/    /'

say "resume generation 1: the checks, the claim, a new container $run-g2 running the recorded process"
sr resume --ref "$tmp/$run.g1.ref.json" --config "$tmp/devcontainer.json" --trust "$tmp/demo.pub" --container "$run-g2" --start | sed 's/^/    /'
wait_file "$run-g2" /data.txt
note "\$ head -1 /proc/1/status; echo \$GREETING; cat /data.txt; ls /etc/sandbox-resume-marker   (in $run-g2)"
inside "$run-g2" sh -c 'head -1 /proc/1/status; echo "GREETING=$GREETING"; cat /data.txt; ls /etc/sandbox-resume-marker 2>&1 || true'

say "work in the resumed container: append to /data.txt, write /notes.txt"
inside "$run-g2" sh -c 'echo "generation 2: written after the resume" >> /data.txt && echo "a note" > /notes.txt && echo done'

say "suspend it again: generation 2, whose new layer holds only what changed since the resume"
sr suspend --container "$run-g2" --config "$tmp/devcontainer.json" --key "$tmp/demo.key" --out "$tmp/$run.g2.ref.json" | sed 's/^/    /'
note "the incarnation is deleted (its content lives in the layers): $(ctr_ containers list --quiet 2>>"$log" | grep -cx "$run-g2" || true) container named $run-g2"

say "resume generation 2 into $run-g3"
sr resume --ref "$tmp/$run.g2.ref.json" --config "$tmp/devcontainer.json" --trust "$tmp/demo.pub" --container "$run-g3" --start | sed 's/^/    /'
wait_file "$run-g3" /notes.txt
note "\$ cat /data.txt /notes.txt   (in $run-g3)"
inside "$run-g3" cat /data.txt /notes.txt

if sr inspect --help >/dev/null 2>&1; then
	say "inspect the chain: generation 2 names generation 1 as its parent"
	for g in 2 1; do
		note "\$ sandbox-resume inspect $run.g$g.ref.json"
		sr inspect --trust "$tmp/demo.pub" "$tmp/$run.g$g.ref.json" | sed 's/^/    /'
	done
fi

say "the run ledger: generation 2 is live, held by $run-g3"
sr runs | sed 's/^/    /'

say "refusal: resuming generation 1 again — generation 2 supersedes it"
code=0
sr resume --check --ref "$tmp/$run.g1.ref.json" --config "$tmp/devcontainer.json" --trust "$tmp/demo.pub" >"$tmp/out" || code=$?
sed 's/^/    /' "$tmp/out"
note "exit $code (9: superseded)"
[ "$code" -eq 9 ]

say "done: suspend → resume → work → suspend → resume, the chain, the ledger, a superseded refusal"
: "$own_daemon"
