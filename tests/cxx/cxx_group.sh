#!/bin/sh
# ps-lite's instance groups in one process through the C++ API
# (tests/cxx/group_test: StartPS with DMLC_GROUP_SIZE > 1, GetWorker(i),
# GetServer(i), KVWorker(app, customer, i), KVServer(app, false, i)), over
# one van:
#   cxx_group.sh VAN
# 1. G=2: one server process (2 instances), two worker processes (2
#    instances each);
# 2. G=3: two server processes, one worker process (3 instances).
# Every worker instance pushes and pulls its own keys, every value checked;
# each server instance checks it hears only from the worker instance of its
# index; every instance says OK, every process exits 0.
# Skips (77) where configure found no C++14 compiler. Needs PSL_BUILDDIR.
[ -n "${PSL_BUILDDIR:-}" ] || { [ -f tests/testenv.sh ] && . ./tests/testenv.sh; } || { echo "$0: run it from the build directory (where tests/testenv.sh is) or by make check TESTS=$0" >&2; exit 99; }
set -u
van=$1
b=${PSL_BUILDDIR:?run through make check, or set PSL_BUILDDIR}
t="$b/tests/cxx/group_test"
[ -x "$t" ] || { echo "cxx_group.sh: no C++ test programs (configure found no C++14 compiler): skipped"; exit 77; }
dir=$(mktemp -d "${TMPDIR:-/tmp}/pslite-cxxgroup.XXXXXX")
pids=
cleanup() {
	for p in $pids; do kill -9 "$p" 2>/dev/null; done
	rm -rf "$dir"
}
trap cleanup EXIT
trap 'exit 1' INT TERM
fail=0
say() { echo "cxx_group.sh ($van): $*" >&2; fail=1; }
unset DMLC_RANK DMLC_NODE_RANK STEPMESH_GPU DMLC_PORT DMLC_RANK_OFFSET

# job G S W: a scheduler, S server and W worker processes of group_test
job() {
	DMLC_PS_ROOT_PORT=$("$b/tests/integration/startnode" --free-port) || exit 99
	export DMLC_PS_ROOT_URI=127.0.0.1 DMLC_PS_ROOT_PORT DMLC_NODE_HOST=127.0.0.1 \
		DMLC_ENABLE_RDMA=$van DMLC_GROUP_SIZE=$1 DMLC_NUM_SERVER=$2 DMLC_NUM_WORKER=$3 \
		PS_START_TIMEOUT=60
	rm -f "$dir"/*.log
	pids=
	DMLC_ROLE=scheduler timeout -k 5 90 "$t" >"$dir/scheduler.log" 2>&1 &
	pids="$pids $!"
	r=0
	while [ $r -lt "$2" ]; do
		DMLC_ROLE=server DMLC_RANK=$r timeout -k 5 90 "$t" >"$dir/server$r.log" 2>&1 &
		pids="$pids $!"
		r=$((r + 1))
	done
	r=0
	while [ $r -lt "$3" ]; do
		DMLC_ROLE=worker DMLC_RANK=$r timeout -k 5 90 "$t" >"$dir/worker$r.log" 2>&1 &
		pids="$pids $!"
		r=$((r + 1))
	done
	rc=0
	for p in $pids; do wait "$p" || rc=$?; done
	pids=
	what="G=$1, $2 server and $3 worker processes"
	[ $rc -eq 0 ] || say "$what: a process exited $rc"
	n=$(cat "$dir"/server*.log | grep -c "^cxx group server [0-9]*\.[0-9]*: OK")
	[ "$n" -eq $(($1 * $2)) ] || say "$what: $n server instances said OK, expected $(($1 * $2))"
	n=$(cat "$dir"/worker*.log | grep -c "^cxx group worker [0-9]*\.[0-9]*: OK")
	[ "$n" -eq $(($1 * $3)) ] || say "$what: $n worker instances said OK, expected $(($1 * $3))"
	if grep -q "ERROR\|FAILED\|AddressSanitizer\|runtime error:\|LeakSanitizer" "$dir"/*.log; then
		say "$what: a process reported a failure:"
		grep "ERROR\|FAILED\|AddressSanitizer\|runtime error:\|LeakSanitizer" "$dir"/*.log | head -n 5 >&2
	fi
	if [ $fail -ne 0 ]; then
		for f in "$dir"/*.log; do
			echo "----- $(basename "$f")" >&2
			tail -n 15 "$f" >&2
		done
	fi
}
job 2 1 2
job 3 2 1
[ $fail -eq 0 ] && echo "cxx_group.sh ($van): OK"
exit $fail
