#!/bin/bash
# pslite-run --k8s with the variables Kubernetes gives a pod
# (docs/launch.md's manifests), on this machine:
#   1. indexed: an Indexed Job of 5 pods (JOB_COMPLETION_INDEX, host name
#      JOB-INDEX, PSLITE_WORLD_SIZE, DMLC_PS_ROOT_URI the index-0 pod):
#      each index's role, then a kvtest data job of the 5 "pods";
#   2. statefulset: one StatefulSet per role (DMLC_ROLE and the counts in the
#      pod template, the ordinal in the host name psl-server-1): each pod's
#      rank, then a data job;
#   3. bad: no index and no ordinal, an ordinal beyond the replicas, no
#      world size, no scheduler: one line each.
[ -n "${PSL_BUILDDIR:-}" ] || { [ -f tests/testenv.sh ] && . ./tests/testenv.sh; } || { echo "$0: run it from the build directory (where tests/testenv.sh is) or by make check TESTS=$0" >&2; exit 99; }
me=k8s.sh why=
. "$PSL_SRCDIR/tests/launch/common.sh"
port=$("$b/tests/integration/startnode" --free-port) || { echo "k8s.sh: no free port" >&2; exit 1; }
# a pod's environment: nothing of this shell's ps-lite variables
for v in $(env | sed -n 's/^\(DMLC_[A-Z_]*\|PS_[A-Z_]*\|BYTEPS_[A-Z_]*\|JOB_COMPLETION_INDEX\|PSLITE_[A-Z_]*\)=.*/\1/p'); do
	[ "$v" = PS_VAN_PATH ] || unset "$v"
done
# (what the manifests set: the scheduler's name, the port, the pod's IP)
export DMLC_PS_ROOT_URI=127.0.0.1 DMLC_PS_ROOT_PORT=$port DMLC_NODE_HOST=127.0.0.1 DMLC_ENABLE_RDMA=zmq

# dry POD-ENV...: what pslite-run --k8s sets, on one line
dry() {
	env "$@" "$run" --k8s --dry-run -- true 2>&1 | grep -E '^DMLC_(ROLE|RANK|NUM_SERVER|NUM_WORKER)=' | tr '\n' ' '
}
expect_dry() { # WANT POD-ENV...
	local want=$1 got
	shift
	got=$(dry "$@")
	[ "$got" = "$want" ] || bad "$*: got '$got', expected '$want'"
}
# pods NAME LOG POD-ENV-LIST...: one pslite-run --k8s -- kvtest per pod
# (each argument a pod's variables, blank separated), all at once
pods() {
	local name=$1 log=$2 pod pids= p rc=0
	shift 2
	for pod in "$@"; do
		# shellcheck disable=SC2086
		env $pod KVTEST_SCENARIO=data KVTEST_DIR="$dir" timeout -k 5 120 "$run" --k8s -- \
			"$b/tests/integration/kvtest" >>"$log" 2>&1 &
		pids="$pids $!"
	done
	bg="$bg $pids"
	for p in $pids; do wait "$p" || rc=$?; done
	[ $rc -eq 0 ] || bad "$name: a pod exited $rc"
	for w in "scheduler 0" "server 0" "server 1" "worker 0" "worker 1"; do
		grep -q "kvtest $w: OK" "$log" || bad "$name: no 'kvtest $w: OK'"
	done
	! grep -q "ERROR\|FAILED\|AddressSanitizer\|runtime error:\|LeakSanitizer" "$log" ||
		bad "$name: an error in a job that ended well"
	[ $fail -eq 0 ] || tail -n 40 "$log" >&2
}

# ---------------------------------------------------------- 1. indexed --
# pods of an Indexed Job "psl" with completions 5: index 0 the scheduler,
# 1-2 servers, 3-4 workers
expect_dry "DMLC_ROLE=scheduler DMLC_NUM_SERVER=2 DMLC_NUM_WORKER=2 " JOB_COMPLETION_INDEX=0 HOSTNAME=psl-0 PSLITE_WORLD_SIZE=5
expect_dry "DMLC_ROLE=server DMLC_RANK=1 DMLC_NUM_SERVER=2 DMLC_NUM_WORKER=2 " JOB_COMPLETION_INDEX=2 HOSTNAME=psl-2 PSLITE_WORLD_SIZE=5
expect_dry "DMLC_ROLE=worker DMLC_RANK=0 DMLC_NUM_SERVER=2 DMLC_NUM_WORKER=2 " JOB_COMPLETION_INDEX=3 HOSTNAME=psl-3 PSLITE_WORLD_SIZE=5
# a Job without a subdomain: the host name is psl-3-x7k2q; the index decides
expect_dry "DMLC_ROLE=worker DMLC_RANK=1 DMLC_NUM_SERVER=2 DMLC_NUM_WORKER=2 " JOB_COMPLETION_INDEX=4 HOSTNAME=psl-4-x7k2q PSLITE_WORLD_SIZE=5
# -s from the pod's arguments: 1 server, 3 workers
got=$(env JOB_COMPLETION_INDEX=2 PSLITE_WORLD_SIZE=5 "$run" --k8s -s 1 --dry-run -- true | tr '\n' ' ')
case $got in *"DMLC_ROLE=worker DMLC_RANK=0 "*"DMLC_NUM_SERVER=1 DMLC_NUM_WORKER=3"*) ;; *) bad "-s 1: $got" ;; esac
t0=$(date +%s)
pods indexed "$dir/indexed.log" "JOB_COMPLETION_INDEX=0 HOSTNAME=psl-0 PSLITE_WORLD_SIZE=5" \
	"JOB_COMPLETION_INDEX=1 HOSTNAME=psl-1 PSLITE_WORLD_SIZE=5" "JOB_COMPLETION_INDEX=2 HOSTNAME=psl-2 PSLITE_WORLD_SIZE=5" \
	"JOB_COMPLETION_INDEX=3 HOSTNAME=psl-3 PSLITE_WORLD_SIZE=5" "JOB_COMPLETION_INDEX=4 HOSTNAME=psl-4 PSLITE_WORLD_SIZE=5"
echo "k8s.sh: indexed: 5 pods of an Indexed Job ($(($(date +%s) - t0)) s)"

# ------------------------------------------------------ 2. statefulset --
S="DMLC_NUM_SERVER=2 DMLC_NUM_WORKER=2"
# shellcheck disable=SC2086
expect_dry "DMLC_ROLE=server DMLC_RANK=1 DMLC_NUM_SERVER=2 DMLC_NUM_WORKER=2 " HOSTNAME=psl-server-1 DMLC_ROLE=server $S
# shellcheck disable=SC2086
expect_dry "DMLC_ROLE=worker DMLC_RANK=0 DMLC_NUM_SERVER=2 DMLC_NUM_WORKER=2 " HOSTNAME=psl-worker-0 DMLC_ROLE=worker $S
# shellcheck disable=SC2086
expect_dry "DMLC_ROLE=scheduler DMLC_NUM_SERVER=2 DMLC_NUM_WORKER=2 " HOSTNAME=psl-scheduler-0 DMLC_ROLE=scheduler $S
t0=$(date +%s)
port=$("$b/tests/integration/startnode" --free-port)
export DMLC_PS_ROOT_PORT=$port
pods statefulset "$dir/sts.log" "HOSTNAME=psl-scheduler-0 DMLC_ROLE=scheduler $S" \
	"HOSTNAME=psl-server-0 DMLC_ROLE=server $S" "HOSTNAME=psl-server-1 DMLC_ROLE=server $S" \
	"HOSTNAME=psl-worker-0 DMLC_ROLE=worker $S" "HOSTNAME=psl-worker-1 DMLC_ROLE=worker $S"
echo "k8s.sh: statefulset: 5 pods of three StatefulSets ($(($(date +%s) - t0)) s)"

# ---------------------------------------------------- 3. instance groups --
# DMLC_GROUP_SIZE=2: every pod is one instance; DMLC_NUM_* are groups,
# DMLC_RANK the instance's rank (an Indexed Job of 5: 2 server and 2 worker
# instances, one group each; StatefulSets: replicas = groups x 2)
expect_dry "DMLC_ROLE=server DMLC_RANK=1 DMLC_NUM_SERVER=1 DMLC_NUM_WORKER=1 " DMLC_GROUP_SIZE=2 JOB_COMPLETION_INDEX=2 HOSTNAME=psl-2 PSLITE_WORLD_SIZE=5
# shellcheck disable=SC2086
expect_dry "DMLC_ROLE=worker DMLC_RANK=3 DMLC_NUM_SERVER=2 DMLC_NUM_WORKER=2 " DMLC_GROUP_SIZE=2 HOSTNAME=psl-worker-3 DMLC_ROLE=worker $S
echo "k8s.sh: groups: the Indexed Job's and the StatefulSets' variables"

# ------------------------------------------------------- the manifests --
# docs/k8s/*.yaml set what the pods above had
m=$PSL_SRCDIR/docs/k8s
c=$(sed -n 's/^ *completions: *\([0-9]*\).*/\1/p' "$m/indexed-job.yaml")
w=$(grep -A1 "name: PSLITE_WORLD_SIZE" "$m/indexed-job.yaml" | sed -n 's/.*value: *"\([0-9]*\)".*/\1/p')
[ -n "$c" ] && [ "$c" = "$w" ] || bad "indexed-job.yaml: completions $c, PSLITE_WORLD_SIZE $w"
grep -q "completionMode: Indexed" "$m/indexed-job.yaml" || bad "indexed-job.yaml: not an Indexed Job"
for f in indexed-job statefulsets; do
	grep -q '"pslite-run", "--k8s"' "$m/$f.yaml" || bad "$f.yaml: no pslite-run --k8s"
	grep -q "DMLC_PS_ROOT_URI" "$m/$f.yaml" || bad "$f.yaml: no DMLC_PS_ROOT_URI"
done
for r in scheduler server worker; do
	grep -A1 "name: DMLC_ROLE" "$m/statefulsets.yaml" | grep -q "value: $r" || bad "statefulsets.yaml: no $r"
done

# -------------------------------------------------------------- 3. bad --
bad_pod() { # WANT POD-ENV...: exit 2, one line holding WANT
	local want=$1
	shift
	expect_line "$want" env "$@" "$run" --k8s -- /bin/true
	echo "k8s.sh: bad: $line"
}
bad_pod "neither JOB_COMPLETION_INDEX .* nor a StatefulSet ordinal in the host name 'mybox'" HOSTNAME=mybox PSLITE_WORLD_SIZE=5
# shellcheck disable=SC2086
bad_pod "server ordinal 2 is outside the 2 server instances" HOSTNAME=psl-server-2 DMLC_ROLE=server $S
bad_pod "worker ordinal 4 is outside the 4 worker instances" HOSTNAME=psl-worker-4 DMLC_ROLE=worker \
	DMLC_GROUP_SIZE=2 $S
bad_pod "pass --world TASKS" JOB_COMPLETION_INDEX=1
bad_pod "task 5 is outside the job's 5 tasks" JOB_COMPLETION_INDEX=5 PSLITE_WORLD_SIZE=5
bad_pod "pass --scheduler HOST" -u DMLC_PS_ROOT_URI JOB_COMPLETION_INDEX=1 PSLITE_WORLD_SIZE=5
exit $fail
