#!/usr/bin/env bash
# examples/demo.sh — the main job end to end, as root on a Debian 12 machine:
# suspend a container's run, resume it into a new container that sees the
# files it wrote, then show two refusals with their verdicts.
#
#   sudo examples/demo.sh [--address SOCK] [--verbose]     (or: sudo make demo)
#
# Without --address (and without $CONTAINERD_ADDRESS) it installs what is
# missing (`make deps`: runc, busybox-static, containerd binaries into bin/)
# and starts its own containerd in a temporary directory, the integration
# harness's way (config `version = 3`, CRI/NRI/opt disabled, its own socket).
# The busybox image is built locally from Debian's busybox-static (no
# network). Everything it made is removed at the end, also on failure.
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
	-h|--help) sed -n '2,13p' "$0"; exit 0 ;;
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
resumed=$run-g2

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
		sr discard --run "$run" >/dev/null 2>&1
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
	quiet make --no-print-directory deps
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

say "import the bundled busybox image (built from /bin/busybox of busybox-static; no network)"
quiet go run ./examples/importbusybox --address "$address" --namespace "$ns" --sleep busybox:1
note "docker.io/library/busybox:1 → $(ctr_ images list | awk '$1=="docker.io/library/busybox:1"{print $3}')"

say "run a container that writes /data.txt and deletes /etc/sandbox-resume-marker"
quiet ctr_ run --detach --null-io --snapshotter overlayfs --env GREETING=hello docker.io/library/busybox:1 "$src" \
	sh -c 'echo "hello from before the suspend" > /data.txt && rm -f /etc/sandbox-resume-marker && exec sleep 86400'
for _ in $(seq 100); do
	ctr_ tasks exec --exec-id probe "$src" test -f /data.txt </dev/null >/dev/null 2>&1 && break
	sleep 0.1
done
note "container $src: $(ctr_ tasks exec --exec-id show "$src" cat /data.txt </dev/null 2>>"$log")"

say "suspend it (run $run): diff of its snapshot, signed SnapshotRef"
cat >"$tmp/devcontainer.json" <<'EOF'
{
  // the run's declaration: image, environment
  "image": "busybox:1",
  "containerEnv": {"GREETING": "hello"}
}
EOF
quiet sr keygen --out "$tmp/demo"
quiet sr suspend --container "$src" --config "$tmp/devcontainer.json" --key "$tmp/demo.key" --run "$run" --out "$tmp/ref.json"
note "ref: $tmp/ref.json"
sed -n 's/^ *"\(manifest\|digest\|diffID\)": \("[^"]*"\).*/    \1: \2/p' "$tmp/ref.json" | head -n 3

say "resume it: eleven checks, claim, verify the layers, apply, create $resumed from the recorded spec and start it"
sr resume --ref "$tmp/ref.json" --config "$tmp/devcontainer.json" --trust "$tmp/demo.pub" --start | sed 's/^/    /'

say "a process inside the resumed container prints the file"
note "\$ ctr task exec $resumed cat /data.txt"
ctr_ tasks exec --exec-id show "$resumed" cat /data.txt </dev/null 2>>"$log" | sed 's/^/    /'
note "\$ ctr task exec $resumed sh -c 'echo \$GREETING; ls /etc/sandbox-resume-marker'"
ctr_ tasks exec --exec-id show2 "$resumed" sh -c 'echo "GREETING=$GREETING"; ls /etc/sandbox-resume-marker 2>&1 || true' </dev/null 2>>"$log" | sed 's/^/    /'

say "refusal 1: the offered devcontainer.json changed containerEnv"
sed 's/"GREETING": "hello"/"GREETING": "bonjour"/' "$tmp/devcontainer.json" >"$tmp/changed.json"
code=0
sr resume --check --ref "$tmp/ref.json" --config "$tmp/changed.json" --trust "$tmp/demo.pub" >"$tmp/out" || code=$?
sed 's/^/    /' "$tmp/out"
note "exit $code (3: manifest mismatch)"
[ "$code" -eq 3 ]

say "refusal 2: the image name busybox:1 now points at other content"
quiet go run ./examples/importbusybox --address "$address" --namespace "$ns" --sleep --marker moved busybox:1
code=0
sr resume --check --ref "$tmp/ref.json" --config "$tmp/devcontainer.json" --trust "$tmp/demo.pub" >"$tmp/out" || code=$?
sed 's/^/    /' "$tmp/out"
note "exit $code (5: image drifted)"
[ "$code" -eq 5 ]

say "done: suspend → resume → refusals"
: "$own_daemon"
