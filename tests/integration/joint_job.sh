#!/bin/sh
# DMLC_ROLE=joint (a server and a worker in one process, two nodes with
# their own vans, ids and ranks, as C++ ps-lite's joint role) over one van:
#   joint_job.sh VAN
# 1. kvtest's data scenario (every size, many keys, barriers, the simple
#    app) with pslite-run --joint 2: two joint processes, no plain node;
#    every node says OK and both servers got requests; in each process a
#    request its server holds is answered from its worker's callback (a
#    call on the other node's objects on the worker's receive thread);
# 2. the same with a plain server, a plain worker and one joint process,
#    with BYTEPS_ENABLE_IPC=1: the joint process's two nodes each send by
#    shared memory to the local peers (its own other node included);
# 2b. pslite-bench in two joint processes: push-pull with data checks;
# 3. a joint process started by hand with DMLC_PORT: its server listens on
#    DMLC_PORT, its worker on the next port; 1 + 1 job, data checked;
# 4. bad input: DMLC_PORT=65535 (no next port) is one line naming
#    DMLC_PORT, psl_start fails (startnode exits 3), nothing left running; pslite-run --joint with
#    --hostfile or instance groups is refused with one line.
# Needs PSL_BUILDDIR (set by make check).
[ -n "${PSL_BUILDDIR:-}" ] || { [ -f tests/testenv.sh ] && . ./tests/testenv.sh; } || { echo "$0: run it from the build directory (where tests/testenv.sh is) or by make check TESTS=$0" >&2; exit 99; }
set -u
van=$1
b=${PSL_BUILDDIR:?run through make check, or set PSL_BUILDDIR}
dir=$(mktemp -d "${TMPDIR:-/tmp}/pslite-joint.XXXXXX")
pid=
cleanup() {
	[ -n "$pid" ] && kill -9 "$pid" 2>/dev/null
	rm -rf "$dir"
}
trap cleanup EXIT
trap 'exit 1' INT TERM
fail=0
say() { echo "joint_job.sh ($van): $*" >&2; fail=1; }
export KVTEST_DIR=$dir
unset DMLC_GROUP_SIZE DMLC_RANK DMLC_PORT

# need LOG WHAT COUNT PATTERN: LOG has COUNT lines matching PATTERN
need() {
	n=$(grep -c -- "$4" "$1")
	[ "$n" -eq "$3" ] || say "$2: $n lines matching '$4', expected $3"
}
clean() { # clean LOG WHAT: no failure, no sanitizer report
	if grep -q "FAILED\|ERROR\|AddressSanitizer\|runtime error:\|LeakSanitizer" "$1"; then
		grep -m 10 "FAILED\|ERROR\|AddressSanitizer\|runtime error:\|LeakSanitizer" "$1" >&2
		say "$2: a node reported a failure"
	fi
}
show() { # show LOG WHAT: the job's output when something failed
	[ $fail -eq 0 ] && return
	echo "----- $2 -----" >&2
	grep -v "WARN: request rejected" "$1" | tail -n 60 >&2
}

# 1. two joint processes
log=$dir/joint2.log
timeout -k 5 200 "$b/tools/pslite-run" -j 2 --van "$van" --timeout 180 -- \
	"$b/tests/integration/kvtest" >"$log" 2>&1 || say "pslite-run --joint 2 exited $?"
need "$log" "--joint 2" 2 "^\[joint [01]\] kvtest server [01]: OK ([1-9][0-9]* requests)"
need "$log" "--joint 2" 2 "^\[joint [01]\] kvtest worker [01]: OK"
need "$log" "--joint 2" 1 "kvtest scheduler 0: OK"
need "$log" "--joint 2: a worker callback answering its server's request" 2 "^\[joint [01]\] kvtest worker [01]: cross-node callbacks OK"
need "$log" "--joint 2: each process runs two nodes" 2 "^\[joint [01]\] .* worker\] INFO: worker listening on"
clean "$log" "--joint 2"
show "$log" "pslite-run --joint 2"

# 2. a plain server, a plain worker and a joint process
log=$dir/mixed.log
BYTEPS_ENABLE_IPC=1 PS_VERBOSE=1 timeout -k 5 200 "$b/tools/pslite-run" -s 1 -w 1 -j 1 \
	--van "$van" --timeout 180 -- "$b/tests/integration/kvtest" >"$log" 2>&1 ||
	say "pslite-run -s 1 -w 1 -j 1 exited $?"
for r in server worker; do
	grep -q "^\[joint 0\] .* $r [01]\] INFO: IPC: data to .* goes through shared memory" "$log" ||
		say "mixed: the joint process's $r sent nothing by IPC"
done
need "$log" "mixed" 2 "kvtest server [01]: OK ([1-9][0-9]* requests)"
need "$log" "mixed" 2 "kvtest worker [01]: OK"
need "$log" "mixed: the joint process" 2 "^\[joint 0\] kvtest \(server\|worker\) [01]: OK"
need "$log" "mixed: the joint process's callback" 1 "^\[joint 0\] kvtest worker [01]: cross-node callbacks OK"
clean "$log" "mixed"
show "$log" "pslite-run -s 1 -w 1 -j 1"

# 2b. pslite-bench
log=$dir/bench.log
NUM_KEY_PER_SERVER=8 timeout -k 5 120 "$b/tools/pslite-run" -j 2 --van "$van" --timeout 100 -- \
	"$b/tools/pslite-bench" 4096 1 1 --seconds 1 >"$log" 2>&1 ||
	say "pslite-bench in 2 joint processes: pslite-run exited $?"
need "$log" "pslite-bench" 2 "^\[joint [01]\] pslite-bench summary: push_pull .* [1-9][0-9]* requests, 0 errors, data checked"
clean "$log" "pslite-bench"
show "$log" "pslite-bench in 2 joint processes"

# 3. by hand, with DMLC_PORT
port=$("$b/tests/integration/startnode" --free-port) || { echo "no free port" >&2; exit 99; }
jport=$("$b/tests/integration/startnode" --free-port) || { echo "no free port" >&2; exit 99; }
log=$dir/port.log
export DMLC_PS_ROOT_URI=127.0.0.1 DMLC_PS_ROOT_PORT=$port DMLC_NODE_HOST=127.0.0.1 \
	DMLC_ENABLE_RDMA=$van DMLC_NUM_SERVER=1 DMLC_NUM_WORKER=1
DMLC_ROLE=scheduler timeout -k 5 120 "$b/tests/integration/kvtest" >"$dir/sched.log" 2>&1 &
pid=$!
DMLC_ROLE=joint DMLC_PORT=$jport timeout -k 5 120 "$b/tests/integration/kvtest" >"$log" 2>&1 ||
	say "the joint process with DMLC_PORT=$jport exited $?"
wait "$pid" || say "its scheduler exited $?"
pid=
need "$log" "DMLC_PORT" 1 "server\] INFO: server listening on 127.0.0.1:$jport,"
need "$log" "DMLC_PORT + 1" 1 "worker\] INFO: worker listening on 127.0.0.1:$((jport + 1)),"
need "$log" "DMLC_PORT" 1 "kvtest server 0: OK ([1-9][0-9]* requests)"
need "$log" "DMLC_PORT" 1 "kvtest worker 0: OK"
clean "$log" "DMLC_PORT"
show "$log" "a joint process with DMLC_PORT=$jport"

# 4. bad input
out=$(DMLC_ROLE=joint DMLC_PORT=65535 timeout -k 5 30 "$b/tests/integration/startnode" 2>&1)
rc=$?
[ $rc -eq 3 ] || say "DMLC_PORT=65535 with DMLC_ROLE=joint: exit $rc, expected 3 ($out)"
echo "$out" | grep -q "DMLC_PORT=65535" || say "DMLC_PORT=65535: no line naming it: $out"
unset DMLC_ROLE
for bad in "--hostfile /dev/null" ""; do
	if [ -n "$bad" ]; then
		# shellcheck disable=SC2086
		out=$("$b/tools/pslite-run" -j 1 $bad -- true 2>&1)
	else
		out=$(DMLC_GROUP_SIZE=2 "$b/tools/pslite-run" -j 1 -- true 2>&1)
	fi
	rc=$?
	[ $rc -eq 2 ] && echo "$out" | grep -q "joint" ||
		say "pslite-run --joint ${bad:-with DMLC_GROUP_SIZE=2}: exit $rc: $out"
done
[ $fail -eq 0 ] && echo "joint_job.sh ($van): OK"
exit $fail
