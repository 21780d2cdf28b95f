#!/bin/sh
# Instance groups run whole in one process (psl_start_group, ps-lite's
# model: DMLC_GROUP_SIZE nodes of the role, each its own van, id, rank and
# threads), beside one instance per process (psl_start, StepMesh's model),
# over one van:
#   inst_job.sh VAN
# 1. G=2, one server group and one worker group, each one process of 2
#    instances (the server's with DMLC_PORT=p: its instances listen on p and
#    p+1): every worker instance pushes and pulls its own keys, values
#    checked, each server instance served only the worker instance of its
#    index, barriers pass, every instance says OK, all exit 0; the same
#    with G=4;
# 2. mixed: G=2, one server group in one process, worker group 0 in one
#    process, worker group 1 as two processes of one instance (DMLC_NODE_RANK,
#    STEPMESH_GPU);
# 3. joint: G=2, one process of DMLC_ROLE=joint with DMLC_PORT=p holds the
#    only server group and the only worker group (servers on p and p+1,
#    workers on p+2 and p+3), its workers' requests go to its own servers;
# 4. bad input: psl_start_group without DMLC_RANK where the role has two
#    groups (with one, its rank is 0 without asking), with a group rank beyond
#    DMLC_NUM_WORKER, with DMLC_GROUP_SIZE above PSL_MAX_GROUP (32): one
#    ERROR line naming the variable, exit 3.
# Needs PSL_BUILDDIR (set by make check).
[ -n "${PSL_BUILDDIR:-}" ] || { [ -f tests/testenv.sh ] && . ./tests/testenv.sh; } || { echo "$0: run it from the build directory (where tests/testenv.sh is) or by make check TESTS=$0" >&2; exit 99; }
set -u
van=$1
b=${PSL_BUILDDIR:?run through make check, or set PSL_BUILDDIR}
t="$b/tests/integration/insttest"
dir=$(mktemp -d "${TMPDIR:-/tmp}/pslite-inst.XXXXXX")
pids=
cleanup() {
	for p in $pids; do kill -9 "$p" 2>/dev/null; done
	rm -rf "$dir"
}
trap cleanup EXIT
trap 'exit 1' INT TERM
fail=0
say() { echo "inst_job.sh ($van): $*" >&2; fail=1; }
unset DMLC_RANK DMLC_NODE_RANK STEPMESH_GPU DMLC_PORT DMLC_RANK_OFFSET

free_port() { "$b/tests/integration/startnode" --free-port || { echo "no free port" >&2; exit 99; }; }

common() { # the job's environment: G S W
	DMLC_PS_ROOT_URI=127.0.0.1 DMLC_PS_ROOT_PORT=$(free_port) DMLC_NODE_HOST=127.0.0.1
	DMLC_ENABLE_RDMA=$van DMLC_GROUP_SIZE=$1 DMLC_NUM_SERVER=$2 DMLC_NUM_WORKER=$3
	PS_START_TIMEOUT=60
	export DMLC_PS_ROOT_URI DMLC_PS_ROOT_PORT DMLC_NODE_HOST DMLC_ENABLE_RDMA DMLC_GROUP_SIZE \
		DMLC_NUM_SERVER DMLC_NUM_WORKER PS_START_TIMEOUT
	rm -f "$dir"/*.log
	pids=
}

# node NAME VAR=VALUE...: one insttest process in the background
node() {
	name=$1
	shift
	env "$@" timeout -k 5 90 "$t" >"$dir/$name.log" 2>&1 &
	pids="$pids $!"
}

# finish CASE: every process exited 0, said OK for each of its instances
# (LOG:COUNT pairs in $expect), and reported no failure
finish() {
	rc=0
	for p in $pids; do wait "$p" || rc=$?; done
	pids=
	[ $rc -eq 0 ] || say "$1: a process exited $rc"
	for e in $expect; do
		f=$dir/${e%%:*}.log
		n=$(grep -c "^insttest .*: OK" "$f")
		[ "$n" -eq "${e##*:}" ] || say "$1: ${e%%:*} said OK $n times, expected ${e##*:}"
		if grep -q "ERROR\|FAILED\|AddressSanitizer\|runtime error:\|LeakSanitizer" "$f"; then
			say "$1: ${e%%:*} reported a failure:"
			grep "ERROR\|FAILED\|AddressSanitizer\|runtime error:\|LeakSanitizer" "$f" | head -n 5 >&2
		fi
	done
	if [ $fail -ne 0 ]; then
		for f in "$dir"/*.log; do
			echo "----- $(basename "$f")" >&2
			tail -n 15 "$f" >&2
		done
	fi
}

# 1. one process per group, each of 2 instances
common 2 1 1
sp=$(free_port)
node scheduler DMLC_ROLE=scheduler
node server DMLC_ROLE=server DMLC_RANK=0 DMLC_PORT=$sp
node worker DMLC_ROLE=worker DMLC_RANK=0
expect="scheduler:1 server:2 worker:2"
finish "one process per group"
for i in 0 1; do
	grep -q "server listening on 127.0.0.1:$((sp + i))," "$dir/server.log" ||
		say "server instance $i did not listen on DMLC_PORT + $i ($((sp + i)))"
	grep -q "insttest server 0.$i: OK" "$dir/server.log" || say "no OK from server 0.$i"
	grep -q "insttest worker 0.$i: OK" "$dir/worker.log" || say "no OK from worker 0.$i"
done

# 1b. groups of 4: 4 server and 4 worker instances in two processes
common 4 1 1
node scheduler DMLC_ROLE=scheduler
node server DMLC_ROLE=server DMLC_RANK=0
node worker DMLC_ROLE=worker DMLC_RANK=0
expect="scheduler:1 server:4 worker:4"
finish "groups of 4"

# 2. mixed: worker group 1 as two processes of one instance each
common 2 1 2
node scheduler DMLC_ROLE=scheduler
node server DMLC_ROLE=server DMLC_RANK=0
node worker0 DMLC_ROLE=worker DMLC_RANK=0
node worker1.0 DMLC_ROLE=worker INSTTEST_MODE=single DMLC_NODE_RANK=1 STEPMESH_GPU=0
node worker1.1 DMLC_ROLE=worker INSTTEST_MODE=single DMLC_NODE_RANK=1 STEPMESH_GPU=1
expect="scheduler:1 server:2 worker0:2 worker1.0:1 worker1.1:1"
finish "mixed"
grep -q "insttest worker 1.1: OK" "$dir/worker1.1.log" || say "mixed: no OK from worker 1.1"

# 3. joint: 2 servers and 2 workers in one process
common 2 1 1
sp=$(free_port)
node scheduler DMLC_ROLE=scheduler
node joint DMLC_ROLE=joint DMLC_RANK=0 DMLC_PORT=$sp
expect="scheduler:1 joint:4"
finish "joint"
for i in 0 1; do
	grep -q "server listening on 127.0.0.1:$((sp + i))," "$dir/joint.log" ||
		say "joint: server instance $i did not listen on DMLC_PORT + $i"
	grep -q "worker listening on 127.0.0.1:$((sp + 2 + i))," "$dir/joint.log" ||
		say "joint: worker instance $i did not listen on DMLC_PORT + 2 + $i"
done

# 4. bad input: one ERROR line naming what to set, exit 3
bad() {
	name=$1 expect=$2
	shift 2
	common 2 1 1
	env DMLC_ROLE=worker "$@" timeout -k 5 30 "$t" >"$dir/bad.log" 2>&1
	rc=$?
	[ $rc -eq 3 ] || say "$name: insttest exited $rc, expected 3"
	n=$(grep -c "ERROR:.*$expect" "$dir/bad.log")
	[ "$n" -eq 1 ] || {
		say "$name: $n ERROR lines with '$expect', expected 1:"
		cat "$dir/bad.log" >&2
	}
}
bad "no group rank" "set DMLC_RANK (this process's worker group rank, 0 to 1)" DMLC_NUM_WORKER=2
bad "group rank beyond the workers" "DMLC_RANK=1 with psl_start_group and DMLC_GROUP_SIZE=2" DMLC_RANK=1
bad "group too large" "DMLC_GROUP_SIZE=33: one process runs at most 32" DMLC_RANK=0 DMLC_GROUP_SIZE=33
exit $fail
