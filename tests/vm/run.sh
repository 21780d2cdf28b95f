#!/bin/bash
# Runs a shell command inside pslite's RDMA test VM: a qemu guest (TCG) with
# the soft-RoCE device rxe0 on eth0, whose root is the host's / (read-only,
# under a tmpfs overlay), so that what is built on the host runs unchanged.
#
# usage: tests/vm/run.sh [options] -- COMMAND...
#   The words of COMMAND are joined by spaces and run by bash -c in the guest,
#   as root, in the host's current directory, with the host's environment,
#   `ulimit -l unlimited`, under `timeout`. Its output is streamed to stdout;
#   run.sh exits with its exit status.
#   --timeout SEC  the command's time limit (default 600); qemu itself is
#                  killed SEC+240 s after it starts, whatever happens
#   --rw DIR       share DIR read-write at the same path (repeatable); default:
#                  the current directory. Everything else is read-only, and
#                  writes outside the shares (e.g. /tmp) are lost at the end
#   --mem MIB      guest memory (default 2048)    --smp N  guest CPUs (default 2)
#   --console FILE keep the guest kernel's console log in FILE
#   -v, --verbose  print boot times (to stderr)
# Exit status: the command's; 124 when it timed out; 77 (and one line saying
# why) when the VM cannot run: no qemu, no assets (run tests/vm/prepare.sh
# as root first), the VM did not boot or rxe0 could not be set up; 99 when
# the VM died while the command ran.
# Assets come from $PSL_VM_DIR (default /var/cache/pslite-vm).
# Example, from any worktree:
#   tests/vm/run.sh --timeout 300 -- 'make check TESTS=tests/vm/foo.sh'
#   tests/vm/run.sh -- ibv_devinfo -d rxe0
set -uo pipefail

dir=${PSL_VM_DIR:-/var/cache/pslite-vm}
limit=600
mem=2048
smp=2
console=
verbose=0
rws=()
while [ $# -gt 0 ]; do
	case $1 in
	--timeout) limit=$2; shift 2 ;;
	--rw) rws+=("$(readlink -f "$2")"); shift 2 ;;
	--mem) mem=$2; shift 2 ;;
	--smp) smp=$2; shift 2 ;;
	--console) console=$2; shift 2 ;;
	-v | --verbose) verbose=1; shift ;;
	-h | --help) sed -n '2,28p' "$0"; exit 0 ;;
	--) shift; break ;;
	*) break ;;
	esac
done
[ $# -gt 0 ] || { echo "run.sh: no command (usage: run.sh [options] -- COMMAND...)" >&2; exit 2; }
case $limit in '' | *[!0-9]*) echo "run.sh: bad --timeout $limit" >&2; exit 2 ;; esac
[ ${#rws[@]} -gt 0 ] || rws=("$(pwd -P)")
cmd="$*"

skip() {
	echo "run.sh: SKIP: $*"
	exit 77
}
qemu=$(command -v qemu-system-x86_64) || skip "no qemu-system-x86_64 (Debian package qemu-system-x86)"
for f in vmlinuz initrd.img version; do
	[ -s "$dir/$f" ] || skip "no VM assets in $dir (run tests/vm/prepare.sh as root)"
done
here=$(dirname "$(readlink -f "$0")")
scripts=$(cat "$here/guest-init.sh" "$here/guest-run.sh" 2>/dev/null | md5sum | cut -c1-12)
case $(cat "$dir/version") in
*" guest=$scripts") ;;
*) echo "run.sh: warning: the VM assets in $dir were built from other guest scripts (rerun tests/vm/prepare.sh)" >&2 ;;
esac

ctl=$(mktemp -d "${TMPDIR:-/tmp}/pslvm.XXXXXX") || skip "cannot create a temporary folder"
qpid=
cleanup() {
	[ -n "$qpid" ] && kill -9 "$qpid" 2>/dev/null
	[ -n "$console" ] && [ -f "$ctl/console.log" ] && cp "$ctl/console.log" "$console"
	rm -rf "$ctl"
}
trap cleanup EXIT
trap 'exit 130' INT TERM HUP

# The command file: environment, limits, directory, command.
{
	echo 'ulimit -l unlimited'
	while IFS= read -r -d '' kv; do
		name=${kv%%=*}
		case $name in
		'' | *[!A-Za-z0-9_]* | [0-9]* | _ | SHLVL | PWD | OLDPWD | BASH_* | SHELLOPTS | BASHOPTS) continue ;;
		esac
		printf 'export %s=%q\n' "$name" "${kv#*=}"
	done < <(env -0)
	printf 'cd %q || exit 1\n' "$(pwd -P)"
	printf 'timeout -k 10 %s bash -c %q\n' "$limit" "$cmd"
} >"$ctl/cmd.sh"

shares=()
: >"$ctl/shares"
i=0
for d in "${rws[@]}"; do
	[ -d "$d" ] || { echo "run.sh: --rw $d is not a directory" >&2; exit 2; }
	shares+=(-virtfs "local,path=$d,mount_tag=pslrw$i,security_model=none,multidevs=remap")
	echo "pslrw$i $d" >>"$ctl/shares"
	i=$((i + 1))
done

t0=$(date +%s.%N)
timeout -k 5 $((limit + 240)) "$qemu" -nodefaults -no-user-config -no-reboot \
	-accel tcg,thread=multi -cpu max -smp "$smp" -m "$mem" -display none \
	-kernel "$dir/vmlinuz" -initrd "$dir/initrd.img" \
	-append "console=ttyS0 panic=-1 quiet loglevel=3" \
	-serial "file:$ctl/console.log" \
	-chardev file,id=out,path=/dev/stdout,append=on -serial chardev:out \
	-virtfs local,path=/,mount_tag=hostroot,security_model=none,readonly=on,multidevs=remap \
	-virtfs "local,path=$ctl,mount_tag=pslctl,security_model=none" \
	"${shares[@]}" \
	-netdev user,id=n0,restrict=on -device virtio-net-pci,netdev=n0 \
	</dev/null 2>"$ctl/qemu.err" &
qpid=$!
wait $qpid
qrc=$?
qpid=
t1=$(date +%s.%N)

if [ "$verbose" = 1 ]; then
	awk -v a="$t0" -v b="$t1" 'BEGIN { printf "run.sh: qemu ran %.1f s", b - a }' >&2
	[ -f "$ctl/up" ] && echo -n ", guest uptime: $(cat "$ctl/up")" >&2
	echo >&2
fi
if [ -f "$ctl/rc" ]; then
	rc=$(cat "$ctl/rc")
	if [ "$rc" = 77 ] && [ -f "$ctl/why" ]; then
		skip "$(cat "$ctl/why")"
	fi
	exit "$rc"
fi
state=$(cat "$ctl/state" 2>/dev/null)
why=$(grep -a -m1 'PSLVM-FAIL' "$ctl/console.log" 2>/dev/null | sed 's/.*PSLVM-FAIL: //')
if [ -z "$state" ]; then
	[ -n "$why" ] || why=$(tail -n 2 "$ctl/qemu.err" 2>/dev/null | tr '\n' ' ')
	[ -n "$why" ] || why="no sign of life (console: $(tail -n 1 "$ctl/console.log" 2>/dev/null | tr -d '\r'))"
	[ "$qrc" = 124 ] || [ "$qrc" = 137 ] && why="it did not boot within $((limit + 240)) s"
	skip "the VM did not boot: $why"
fi
if [ "$qrc" = 124 ] || [ "$qrc" = 137 ]; then
	echo "run.sh: the VM was killed after $((limit + 240)) s (state: $state)"
	exit 124
fi
echo "run.sh: the VM stopped without the command's status (state: $state, qemu exit $qrc); console:"
tail -n 15 "$ctl/console.log" | tr -d '\r'
exit 99
