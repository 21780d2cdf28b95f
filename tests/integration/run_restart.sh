#!/bin/sh
# pslite-run --restart (docs/recovery.md): a 1+2+2 job of recovnode over van
# zmq in which server 1 is killed (SIGKILL) about 1.5 s into its first run;
# pslite-run starts it again, it takes its own place (recovery 1), the
# workers' later rounds complete with every value checked, and the job
# exits 0. Without --restart the same job fails. The same with
# BYTEPS_ENABLE_IPC=1 (every message through shared memory): the workers'
# IPC to the new server 1 resumes, none of their messages is lost to it;
# and with the new server 1 started with IPC off (a place taken on another
# machine): its workers send to it through the van.
[ -n "${PSL_BUILDDIR:-}" ] || { [ -f tests/testenv.sh ] && . ./tests/testenv.sh; } || { echo "$0: run it from the build directory (where tests/testenv.sh is) or by make check TESTS=$0" >&2; exit 99; }
set -u
b=${PSL_BUILDDIR:?run through make check, or set PSL_BUILDDIR}
dir=$(mktemp -d "${TMPDIR:-/tmp}/pslite-runrestart.XXXXXX")
trap 'rm -rf "$dir"' EXIT
fail=0
bad() { echo "run_restart.sh: $*" >&2; fail=1; }
unset DMLC_PORT DMLC_RANK
export RECOV_DIR=$dir RECOV_ROUNDS=400 PS_HEARTBEAT_INTERVAL=1 PS_HEARTBEAT_TIMEOUT=4 \
	PS_RECOVERY_WAIT=20
# server 1's first run dies of SIGKILL 1.5 s in; every other run is plain
# (with BYTEPS_ENABLE_IPC=$NEW_IPC when that is set)
node_cmd='if [ "$DMLC_ROLE" = server ] && [ "$DMLC_RANK" = 1 ]; then
		if mkdir "$RECOV_DIR/killed$RUN" 2>/dev/null; then
			"$@" & p=$!; sleep 1.5; kill -9 $p; wait $p; exit $?
		fi
		[ -z "${NEW_IPC:-}" ] || export BYTEPS_ENABLE_IPC=$NEW_IPC
	fi
	exec "$@"'
run() {
	RUN=$1 timeout -k 5 90 "$b/tools/pslite-run" -s 2 -w 2 --van zmq $2 -- \
		sh -c "$node_cmd" sh "$b/tests/integration/recovnode" >"$dir/log$1" 2>&1
}
run 1 "--restart 1"
code=$?
[ $code -eq 0 ] || bad "pslite-run --restart 1 exited $code, expected 0"
grep -q "^pslite-run: server 1 started again (1 of --restart 1)" "$dir/log1" ||
	bad "pslite-run did not say it started server 1 again"
grep -q "^\[server 1\] recovnode server 1: ready (recovery 1)" "$dir/log1" ||
	bad "the new server 1 did not take its own place"
for w in 0 1; do
	grep -q "^\[worker $w\] recovnode worker $w: OK (" "$dir/log1" || bad "worker $w did not finish with OK"
done
run 2 ""
code=$?
[ $code -ne 0 ] || bad "without --restart the job exited 0"
# IPC: the new server 1 with IPC on (3), and off (4)
for n in 3 4; do
	BYTEPS_ENABLE_IPC=1 PS_IPC_MIN_BYTES=1 NEW_IPC=$((4 - n)) run $n "--restart 1"
	code=$?
	[ $code -eq 0 ] || bad "IPC, new server IPC $((4 - n)): pslite-run --restart 1 exited $code"
	for w in 0 1; do
		grep -q "^\[worker $w\] recovnode worker $w: OK (" "$dir/log$n" ||
			bad "IPC, new server IPC $((4 - n)): worker $w did not finish with OK"
	done
	! grep "cannot be read" "$dir/log$n" ||
		bad "IPC, new server IPC $((4 - n)): an IPC message was lost to the new server 1"
	ipc=$(grep -c "IPC: data to server 1 .* goes through shared memory" "$dir/log$n")
	[ "$ipc" -eq $((n == 3 ? 4 : 2)) ] ||
		bad "IPC, new server IPC $((4 - n)): $ipc workers' rings to server 1, expected $((n == 3 ? 4 : 2))"
done
if [ $fail -ne 0 ]; then
	for n in 1 3 4; do
		echo "----- run $n -----" >&2
		grep -v "round [0-9]*$" "$dir/log$n" | tail -n 40 >&2
	done
fi
grep -h "started again\|recovery 1" "$dir/log1"
exit $fail
