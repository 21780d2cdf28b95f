#!/bin/sh
# A node started with one van and a scheduler with another must fail fast,
# with a message that names both vans (not a hang until a timeout):
#   1. ucx worker -> zmq scheduler: the worker's van reads ZeroMQ's signature
#   2. zmq worker -> ucx scheduler: the zmq van reads the ucx greeting, and
#      the ucx scheduler names the ZeroMQ node that reached it.
#   3, 4. ucx against fabric, both ways, when van_fabric was built.
#   5. two ucx nodes whose UCX_TLS cannot meet (tcp against shared memory):
#      the error names UCX_TLS, not DMLC_ENABLE_RDMA.
# Needs PSL_BUILDDIR (set by make check) and both vans built.
set -u
b=${PSL_BUILDDIR:?run through make check, or set PSL_BUILDDIR}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/pslite-mismatch.XXXXXX")
spid=
cleanup() {
	[ -n "$spid" ] && kill "$spid" 2>/dev/null && wait "$spid" 2>/dev/null
	rm -rf "$tmp"
}
trap cleanup EXIT
fail=0

common() {
	export DMLC_PS_ROOT_URI=127.0.0.1 DMLC_NODE_HOST=127.0.0.1 DMLC_NUM_SERVER=1 \
		DMLC_NUM_WORKER=1 PS_CONNECT_TIMEOUT=30 PS_START_TIMEOUT=30
	unset DMLC_PORT PS_VERBOSE
}

# start_scheduler VAN: starts a kvtest scheduler on a free port, sets $port
start_scheduler() {
	base=$((20000 + ($$ * 7) % 30000))
	for try in 0 1 2 3 4 5 6 7 8 9; do
		port=$((base + try * 101))
		(common; DMLC_ROLE=scheduler DMLC_ENABLE_RDMA=$1 DMLC_PS_ROOT_PORT=$port \
			exec timeout 40 "$b/tests/integration/kvtest") >"$tmp/sched.log" 2>&1 &
		spid=$!
		i=0
		while [ $i -lt 100 ]; do
			grep -q "scheduler listening on" "$tmp/sched.log" && return 0
			kill -0 "$spid" 2>/dev/null || break
			sleep 0.1
			i=$((i + 1))
		done
		kill "$spid" 2>/dev/null
		wait "$spid" 2>/dev/null
		spid=
	done
	echo "ucx_mismatch.sh: cannot start a $1 scheduler:" >&2
	cat "$tmp/sched.log" >&2
	return 1
}

stop_scheduler() {
	kill "$spid" 2>/dev/null
	wait "$spid" 2>/dev/null
	spid=
}

# check_case SCHED_VAN NODE_VAN
check_case() {
	start_scheduler "$1" || { fail=1; return; }
	t0=$(date +%s)
	(common; DMLC_ROLE=worker DMLC_ENABLE_RDMA=$2 DMLC_PS_ROOT_PORT=$port \
		exec timeout 25 "$b/tests/integration/kvtest") >"$tmp/node.log" 2>&1
	rc=$?
	dt=$(($(date +%s) - t0))
	sleep 0.3 # the scheduler's side of the story
	stop_scheduler
	ok=1
	[ $rc -ne 0 ] && [ $rc -ne 124 ] || { echo "ucx_mismatch.sh: $2 node -> $1 scheduler: node exited $rc, expected a failure" >&2; ok=0; }
	[ $dt -le 10 ] || { echo "ucx_mismatch.sh: $2 node -> $1 scheduler: took $dt s, expected a fast failure" >&2; ok=0; }
	# the node's error names both vans, whatever the core's wording
	grep "ERROR" "$tmp/node.log" >"$tmp/node.err"
	grep -q "van $1\|van '$1'" "$tmp/node.err" ||
		{ echo "ucx_mismatch.sh: $2 node -> $1 scheduler: no error naming van $1" >&2; ok=0; }
	grep -q "van $2\|van '$2'" "$tmp/node.err" ||
		{ echo "ucx_mismatch.sh: $2 node -> $1 scheduler: no error naming van $2" >&2; ok=0; }
	if [ "$1" = ucx ]; then # the ucx scheduler also says who reached it
		case $2 in
		zmq) pat="speaking ZeroMQ (van zmq.*runs van ucx" ;;
		*) pat="speaking van $2.*runs van ucx" ;;
		esac
		grep -q "$pat" "$tmp/sched.log" ||
			{ echo "ucx_mismatch.sh: $2 node -> ucx scheduler: the scheduler did not name both vans" >&2; ok=0; }
	fi
	if [ $ok -ne 1 ]; then
		fail=1
		echo "----- node ($2) -----" >&2
		cat "$tmp/node.log" >&2
		echo "----- scheduler ($1) -----" >&2
		cat "$tmp/sched.log" >&2
	fi
}

check_case zmq ucx
check_case ucx zmq
if [ -e "$b/plugins/van_fabric/.libs/van_fabric.so" ]; then
	FI_PROVIDER=${FI_PROVIDER:-tcp}
	export FI_PROVIDER
	check_case fabric ucx
	check_case ucx fabric
fi

# 5. UCX_TLS=tcp scheduler, shared-memory-only worker
: >"$tmp/sp"
(export UCX_TLS=tcp; start_scheduler ucx && echo "$spid $port" >"$tmp/sp") || fail=1
read -r spid port <"$tmp/sp" || spid=
if [ -n "$spid" ]; then
	t0=$(date +%s)
	(common; DMLC_ROLE=worker DMLC_ENABLE_RDMA=ucx DMLC_PS_ROOT_PORT=$port \
		UCX_TLS=posix,sysv,cma,self exec timeout 25 "$b/tests/integration/kvtest") \
		>"$tmp/node.log" 2>&1
	rc=$?
	dt=$(($(date +%s) - t0))
	stop_scheduler
	ok=1
	[ $rc -ne 0 ] && [ $rc -ne 124 ] || { echo "ucx_mismatch.sh: UCX_TLS: node exited $rc, expected a failure" >&2; ok=0; }
	[ $dt -le 10 ] || { echo "ucx_mismatch.sh: UCX_TLS: took $dt s, expected a fast failure" >&2; ok=0; }
	grep "ERROR" "$tmp/node.log" | grep -q "same UCX_TLS" ||
		{ echo "ucx_mismatch.sh: UCX_TLS: no error naming UCX_TLS" >&2; ok=0; }
	! grep "ERROR" "$tmp/node.log" | grep -q "DMLC_ENABLE_RDMA" ||
		{ echo "ucx_mismatch.sh: UCX_TLS: the error blames DMLC_ENABLE_RDMA" >&2; ok=0; }
	if [ $ok -ne 1 ]; then
		fail=1
		cat "$tmp/node.log" >&2
	fi
fi
exit $fail
