#!/bin/sh
# BYTEPS_ENABLE_IPC=1 over one van: every node on this machine, so that the
# data of pushes, pulls and batches goes through shared memory and only the
# descriptors through the van.
#   ipc_job.sh VAN
#  1. pslite-bench push-pull, 2 servers x 2 workers, 256 KiB keys: data
#     checked, and the logs show each worker using a ring to each server and
#     each server one to each worker;
#  2. kvtest's data scenario (0 B to 16 MiB, the small ones below
#     PS_IPC_MIN_BYTES go through the van) with a 4 MiB ring, so that the
#     large ones do not fit and take the van too;
#  3. the AF benchmark's short form with its failure checks (a batch over the
#     server's limit, an unknown batch answered, ...);
# and no shared-memory file of these jobs is left in /dev/shm.
[ -n "${PSL_BUILDDIR:-}" ] || { [ -f tests/testenv.sh ] && . ./tests/testenv.sh; } || { echo "$0: run it from the build directory (where tests/testenv.sh is) or by make check TESTS=$0" >&2; exit 99; }
set -u
van=$1
b=${PSL_BUILDDIR:?run through make check, or set PSL_BUILDDIR}
dir=$(mktemp -d "${TMPDIR:-/tmp}/pslite-ipc.XXXXXX")
trap '[ -n "${IPC_KEEP:-}" ] || rm -rf "$dir"' EXIT
ulimit -c 0 2>/dev/null
fail=0
bad() { echo "ipc_job.sh $van: $*" >&2; fail=1; }
[ -d /dev/shm ] && [ -w /dev/shm ] || { echo "ipc_job.sh: SKIP: /dev/shm is not writable here"; exit 77; }
ls /dev/shm | grep '^pslite-ipc' | sort >"$dir/before"
export BYTEPS_ENABLE_IPC=1

log=$dir/bench
PS_VERBOSE=1 PS_IPC_BUF_MB=32 timeout -k 10 150 "$b/tools/pslite-run" -s 2 -w 2 --van "$van" --timeout 120 -- \
	"$b/tools/pslite-bench" 262144 1 1 --seconds 3 >"$log" 2>&1
rc=$?
[ $rc -eq 0 ] || bad "bench: pslite-run exited $rc"
n=$(grep -c "pslite-bench summary: push_pull .* 0 errors, data checked" "$log")
[ "$n" -eq 2 ] || bad "bench: $n of 2 workers checked their data without errors"
for w in 0 1; do
	n=$(grep "^\[worker $w\]" "$log" | grep -c "IPC: data to .* goes through shared memory (ring ")
	[ "$n" -eq 2 ] || bad "bench: worker $w opened $n rings to the 2 servers, expected 2"
	n=$(grep "^\[server $w\]" "$log" | grep -c "IPC: data to .* goes through shared memory (ring ")
	[ "$n" -eq 2 ] || bad "bench: server $w opened $n rings to the 2 workers, expected 2"
done
# every node says at INFO that IPC is on (ps-lite prints whether it is)
n=$(grep -c "INFO: BYTEPS_ENABLE_IPC=1: data of [0-9]* bytes or more to a node on this machine" "$log")
[ "$n" -ge 4 ] || bad "bench: $n of the 4 servers and workers said at INFO that IPC is on"
[ $fail -eq 0 ] || { echo "----- bench -----" >&2; grep -v "DEBUG" "$log" | tail -n 30 >&2; }

f0=$fail
log=$dir/kv
PS_IPC_BUF_MB=4 KVTEST_SCENARIO=data timeout -k 10 200 "$b/tools/pslite-run" -s 2 -w 2 --van "$van" \
	--timeout 180 -- "$b/tests/integration/kvtest" >"$log" 2>&1
rc=$?
[ $rc -eq 0 ] || bad "kvtest: pslite-run exited $rc"
for who in "scheduler 0" "server 0" "server 1" "worker 0" "worker 1"; do
	grep -q "kvtest $who: OK" "$log" || bad "kvtest: no 'kvtest $who: OK'"
done
[ $fail -eq $f0 ] || { echo "----- kvtest -----" >&2; tail -n 30 "$log" >&2; }

f0=$fail
PS_IPC_BUF_MB=16 "$PSL_SRCDIR/tests/integration/af_run.sh" "$van" >"$dir/af" 2>&1 || {
	bad "af_run.sh failed"; tail -n 30 "$dir/af" >&2; }

# every process of these jobs has ended: nothing of theirs may be left
ls /dev/shm | grep '^pslite-ipc' | sort >"$dir/after"
for f in $(comm -13 "$dir/before" "$dir/after"); do
	case $f in
	pslite-ipcnode-*) pid=$(cut -d' ' -f1 "/dev/shm/$f" 2>/dev/null) ;;
	*) pid=$(echo "$f" | cut -d- -f3) ;;
	esac
	[ -n "$pid" ] && kill -0 "$pid" 2>/dev/null && continue # a job running beside this one
	[ -e "/dev/shm/$f" ] && bad "left in /dev/shm: $f"
done
[ $fail -eq 0 ] && echo "ipc_job.sh $van: bench, kvtest and AF through shared memory, nothing left"
exit $fail
