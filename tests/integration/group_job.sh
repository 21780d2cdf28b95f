#!/bin/sh
# Instance groups (DMLC_GROUP_SIZE > 1, StepMesh's launch: one process per
# instance, DMLC_NODE_RANK and STEPMESH_GPU) over one van:
#   group_job.sh VAN
# 1. kvtest's data scenario with groups of 2 (2 server groups, 1 worker
#    group: 4 + 2 instances; with STEPMESH_BIND_CPU_CORE=1, each instance's
#    van receive thread bound to the CPU of its GPU's slot) and of 4 (1 + 1
#    groups: 4 + 4 instances), every
#    instance its own process: every node says OK, and every server instance
#    got requests (worker instance i talks to instance i of each server
#    group, so each server instance of a group gets the same number);
# 2. bad settings: no DMLC_NODE_RANK, an instance beyond the group, a
#    DMLC_RANK beyond the instances: one line naming what to set, exit 3.
# Needs PSL_BUILDDIR (set by make check).
[ -n "${PSL_BUILDDIR:-}" ] || { [ -f tests/testenv.sh ] && . ./tests/testenv.sh; } || { echo "$0: run it from the build directory (where tests/testenv.sh is) or by make check TESTS=$0" >&2; exit 99; }
set -u
van=$1
b=${PSL_BUILDDIR:?run through make check, or set PSL_BUILDDIR}
dir=$(mktemp -d "${TMPDIR:-/tmp}/pslite-groups.XXXXXX")
pids=
cleanup() {
	for p in $pids; do kill -9 "$p" 2>/dev/null; done
	rm -rf "$dir"
}
trap cleanup EXIT
trap 'exit 1' INT TERM
fail=0
say() { echo "group_job.sh ($van): $*" >&2; fail=1; }

common() { # the job's environment
	port=$("$b/tests/integration/startnode" --free-port) || { echo "no free port" >&2; exit 99; }
	DMLC_PS_ROOT_URI=127.0.0.1 DMLC_PS_ROOT_PORT=$port DMLC_NODE_HOST=127.0.0.1
	DMLC_ENABLE_RDMA=$van KVTEST_DIR=$dir
	export DMLC_PS_ROOT_URI DMLC_PS_ROOT_PORT DMLC_NODE_HOST DMLC_ENABLE_RDMA KVTEST_DIR
}

# job G S W: kvtest over S server groups and W worker groups of G instances
job() {
	G=$1 S=$2 W=$3
	common
	rm -f "$dir"/*.log
	pids=
	DMLC_GROUP_SIZE=$G DMLC_NUM_SERVER=$S DMLC_NUM_WORKER=$W DMLC_ROLE=scheduler \
		timeout -k 5 180 "$b/tests/integration/kvtest" >"$dir/scheduler.log" 2>&1 &
	pids="$pids $!"
	for role in server worker; do
		n=$S
		[ $role = worker ] && n=$W
		r=0
		while [ $r -lt "$n" ]; do
			i=0
			while [ $i -lt "$G" ]; do
				env $bind DMLC_GROUP_SIZE=$G DMLC_NUM_SERVER=$S DMLC_NUM_WORKER=$W \
					DMLC_ROLE=$role DMLC_NODE_RANK=$r STEPMESH_GPU=$i \
					timeout -k 5 180 "$b/tests/integration/kvtest" \
					>"$dir/$role.$r.$i.log" 2>&1 &
				pids="$pids $!"
				i=$((i + 1))
			done
			r=$((r + 1))
		done
	done
	rc=0
	for p in $pids; do wait "$p" || rc=$?; done
	pids=
	[ $rc -eq 0 ] || say "groups of $G: a node exited $rc"
	for f in "$dir"/*.log; do
		name=$(basename "$f" .log)
		case $name in
		scheduler) grep -q "kvtest scheduler 0: OK" "$f" || say "groups of $G: $name did not say OK" ;;
		*)
			r=$(echo "$name" | cut -d. -f2)
			role=$(echo "$name" | cut -d. -f1)
			grep -q "kvtest $role $r: OK" "$f" || say "groups of $G: $name did not say OK"
			;;
		esac
		if grep -q "ERROR\|FAILED\|AddressSanitizer\|runtime error:\|LeakSanitizer" "$f"; then
			say "groups of $G: $name reported a failure:"
			grep "ERROR\|FAILED\|AddressSanitizer\|runtime error:\|LeakSanitizer" "$f" | head -n 5 >&2
		fi
	done
	# each instance of a server group served the same number of requests
	r=0
	while [ $r -lt "$S" ]; do
		counts=$(sed -n 's/^kvtest server [0-9]*: OK (\([0-9]*\) requests)$/\1/p' \
			"$dir"/server.$r.*.log | sort -u)
		case $counts in
		'' | 0 | *[!0-9]*) say "groups of $G: server group $r's instances served: '$(echo $counts)'" ;;
		esac
		r=$((r + 1))
	done
	if [ $fail -ne 0 ]; then
		for f in "$dir"/*.log; do
			echo "----- $(basename "$f")" >&2
			tail -n 15 "$f" >&2
		done
	fi
}

# bad NAME EXPECT [VAR=VALUE...]: a worker of a group job with these settings
# fails to start with one line that contains EXPECT
bad() {
	name=$1 expect=$2
	shift 2
	common
	env DMLC_GROUP_SIZE=2 DMLC_NUM_SERVER=1 DMLC_NUM_WORKER=1 DMLC_ROLE=worker "$@" \
		timeout -k 5 30 "$b/tests/integration/startnode" >"$dir/bad.log" 2>&1
	rc=$?
	[ $rc -eq 3 ] || say "$name: startnode exited $rc, expected 3"
	grep -q "ERROR:.*$expect" "$dir/bad.log" || {
		say "$name: no ERROR line with '$expect':"
		cat "$dir/bad.log" >&2
	}
}

# groups of 2 with StepMesh's core binding: one core per GPU from core 0,
# so instance i's van receive thread goes to CPU i (the machine has 2)
bind="STEPMESH_BIND_CPU_CORE=1 STEPMESH_CPU_START_OFFSET=0 STEPMESH_CPU_CORES_PER_GPU=1"
job 2 2 1
if [ "$(nproc)" -ge 2 ]; then
	for f in "$dir"/server.*.log "$dir"/worker.*.log; do
		i=$(basename "$f" .log)
		i=${i##*.}
		grep -q "receive thread is bound to CPU $i (STEPMESH_BIND_CPU_CORE=1)" "$f" ||
			say "groups of 2: $(basename "$f") did not bind its receive thread to CPU $i"
	done
fi
bind=
job 4 1 1
bad "no node rank" "set DMLC_NODE_RANK"
bad "instance beyond the group" "not below the 2 worker instances" DMLC_NODE_RANK=0 STEPMESH_GPU=2
bad "DMLC_RANK beyond the instances" "DMLC_RANK=2 with DMLC_GROUP_SIZE=2" DMLC_RANK=2
exit $fail
