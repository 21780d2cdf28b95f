#!/bin/sh
# A lost node comes back (docs/recovery.md):  recovery.sh VAN CASE
# A 1+2+2 job of recovnode (every value pulled is checked) with PS_RECOVERY=1
# and heartbeats; every node has DMLC_RANK. RECOV_HOST: the nodes' address
# (default 127.0.0.1; ibv_vm_inner.sh gives the RDMA device's).
#   server  server 1 is killed (SIGKILL) at worker 0's round 60 and started
#           again: the workers' later rounds complete with correct data, the
#           new server says it is a recovery, every node exits 0
#   worker  the same for worker 1 (restarted with 100 rounds)
#   twice   server 1 killed and started again twice
#   group   as server, every process a whole instance group of 2
#           (DMLC_GROUP_SIZE=2, psl_start_group): server 1's process, both
#           its instances, is killed and started again; each of a worker
#           process's two instances checks every value
#   groupworker  as group, for worker 1's process (restarted with 100 rounds)
#   secret  as server, with PS_JOB_SECRET: a stranger with another secret
#           that registers first as server 1 does not take its place (it
#           fails its start), the real one does
#   resend  as worker, with PS_RESEND=1: the new worker numbers its messages
#           from 0 again, and they are not taken for the old one's resends
#   inflight  as server, with PS_RESEND=1, push-pull rounds and no retries:
#           server 1 is stopped (SIGSTOP) for 1 s with the workers' requests
#           in flight to it, then killed; they are sent again to its
#           replacement and complete with correct data (0 retried; a
#           pull whose push half went to the lost server, stopped between
#           the two, gets ENOENT from the empty replacement and is tried
#           once more: "refilled")
#   barrier worker 1 is killed while the others wait in the final barrier
#           (worker 0 ran 61 rounds only) and started again: the barrier
#           waits for it, and every node exits 0 with the job whole
#   barriernever  as barrier, but worker 1 never comes back, PS_RECOVERY_WAIT=3:
#           the scheduler releases the final barrier without it within the
#           bound, with one WARN line naming it; every other node ends, with
#           exit code 3 (the job is not whole)
#   joint   two joint processes (DMLC_ROLE=joint: a server and a worker
#           each, logs w0 and w1), no plain server or worker: joint 1 is
#           killed, both its nodes, and started again (100 rounds): both
#           take their places, joint 0's worker checks every value
#   host    server 1 and worker 1 (a lost host's) are killed together and
#           started again together (worker 1 with 100 rounds)
#   never   server 1 is killed and never comes back, PS_RECOVERY_WAIT=3: the
#           workers fail within the bound (exit 3) with one ERROR line
#           saying that no node took its place
[ -n "${PSL_BUILDDIR:-}" ] || { [ -f tests/testenv.sh ] && . ./tests/testenv.sh; } || { echo "$0: run it from the build directory (where tests/testenv.sh is) or by make check TESTS=$0" >&2; exit 99; }
set -u
van=$1
case=$2
b=${PSL_BUILDDIR:?run through make check, or set PSL_BUILDDIR}
node=$b/tests/integration/recovnode
dir=$(mktemp -d "${TMPDIR:-/tmp}/pslite-recovery.XXXXXX")
pids=
fail=0
ulimit -c 0 2>/dev/null
bad() { echo "recovery.sh $van $case: $*" >&2; fail=1; }
cleanup() {
	for p in $pids; do kill -9 "$p" 2>/dev/null; done
	rm -rf "$dir"
}
trap cleanup EXIT
port=$("$b/tests/integration/startnode" --free-port) || { echo "no free port" >&2; exit 99; }
host=${RECOV_HOST:-127.0.0.1}
export DMLC_PS_ROOT_URI=$host DMLC_PS_ROOT_PORT=$port DMLC_NODE_HOST=$host \
	DMLC_NUM_SERVER=2 DMLC_NUM_WORKER=2 DMLC_ENABLE_RDMA=$van UCX_TLS=tcp FI_PROVIDER=tcp \
	PS_RECOVERY=1 PS_HEARTBEAT_INTERVAL=1 PS_HEARTBEAT_TIMEOUT=4 PS_RECOVERY_WAIT=20 \
	PS_START_TIMEOUT=60 PS_REQUEST_TIMEOUT=30
unset DMLC_PORT
case $case in never | barriernever) export PS_RECOVERY_WAIT=3 ;; esac
[ "$case" = resend ] && export PS_RESEND=1
case $case in group*) export DMLC_GROUP_SIZE=2 RECOV_GROUP=1 ;; esac
[ "$case" = inflight ] && export PS_RESEND=1 RECOV_PUSHPULL=1 RECOV_NO_RETRY=1
[ "$case" = secret ] && export PS_JOB_SECRET=recovery-test-secret-0123456789
# start ROLE RANK LOG [ROUNDS]: a node in the background; its pid in $last
start() {
	DMLC_ROLE=$1 DMLC_RANK=$2 RECOV_ROUNDS=${4:-300} "$node" >"$dir/$3" 2>&1 &
	last=$!
	pids="$pids $last"
}
# wait_for FILE PATTERN SECONDS
wait_for() {
	i=0
	until grep -q "$2" "$dir/$1" 2>/dev/null; do
		sleep 0.1
		i=$((i + 1))
		[ $i -lt $(($3 * 10)) ] || return 1
	done
}
# (no timeout(1) around the nodes: a SIGKILL must reach the node itself;
# every wait below is bounded, and the cleanup kills what is left)
DMLC_ROLE=scheduler "$node" >"$dir/sched" 2>&1 &
sched=$!
pids="$sched"
w0rounds=400
case $case in barrier | barriernever) w0rounds=61 ;; esac
if [ "$case" = joint ]; then
	start joint 0 w0 $w0rounds
	w0=$last
	start joint 1 w1
	w1=$last
	s1=$w1
else
	start server 0 s0
	start server 1 s1
	s1=$last
	start worker 0 w0 $w0rounds
	w0=$last
	start worker 1 w1
	w1=$last
fi
wait_for w0 "round 60$" 40 || bad "worker 0 did not reach round 60"
victim=$s1
case $case in worker | resend | barrier | barriernever | groupworker | joint) victim=$w1 ;; esac
[ "$case" = host ] && victim="$s1 $w1"
if [ "$case" = barrier ] || [ "$case" = barriernever ]; then
	wait_for w0 "OK (" 20 || bad "worker 0 did not finish its rounds"
	sleep 0.3 # (in its final barrier)
fi
killed=$victim
if [ "$case" = inflight ]; then
	kill -STOP "$victim"
	sleep 1
fi
t0=$(date +%s%N)
kill -9 $victim
wait $victim 2>/dev/null
case $case in
server | twice | secret | inflight | group)
	if [ "$case" = secret ]; then
		PS_JOB_SECRET=a-stranger-s-secret-9876543210 PS_START_TIMEOUT=4 DMLC_ROLE=server \
			DMLC_RANK=1 "$node" >"$dir/stranger" 2>&1 &
		stranger=$!
		sleep 0.5
	fi
	start server 1 s1b
	wait_for s1b "ready (recovery 1)" 30 || bad "the new server 1 did not start as a recovery"
	t1=$(date +%s%N)
	echo "recovery.sh $van $case: server 1 back $((($t1 - $t0) / 1000000)) ms after the kill"
	if [ "$case" = twice ]; then
		wait_for w0 "round 200$" 40 || bad "worker 0 did not reach round 200"
		kill -9 "$last"
		wait "$last" 2>/dev/null
		killed="$killed $last"
		start server 1 s1c
		wait_for s1c "ready (recovery 1)" 30 || bad "the third server 1 did not start as a recovery"
	fi
	;;
worker | resend | barrier | groupworker | joint | host)
	role=worker
	[ "$case" = joint ] && role=joint
	[ "$case" = host ] && start server 1 s1b
	start $role 1 w1b 100
	w1=$last
	wait_for w1b "ready (recovery 1)" 30 || bad "the new $role 1 did not start as a recovery"
	[ "$case" != host ] || wait_for s1b "ready (recovery 1)" 30 ||
		bad "the new server 1 did not start as a recovery"
	t1=$(date +%s%N)
	echo "recovery.sh $van $case: $role 1 back $((($t1 - $t0) / 1000000)) ms after the kill"
	;;
esac
if [ "$case" = secret ]; then
	wait "$stranger"
	code=$?
	[ $code -ne 0 ] || bad "the stranger's start succeeded"
	grep -q "ready" "$dir/stranger" && bad "the stranger took a place in the job"
fi
# every node ends; the exit codes
for p in $pids; do
	case " $killed " in *" $p "*) continue ;; esac
	i=0
	while kill -0 "$p" 2>/dev/null && [ $i -lt 600 ]; do
		sleep 0.1
		i=$((i + 1))
	done
	kill -0 "$p" 2>/dev/null && { bad "a node (pid $p) did not end within 60 s"; continue; }
	wait "$p"
	code=$?
	if [ "$case" = never ] && { [ "$p" = "$w0" ] || [ "$p" = "$w1" ]; }; then
		[ $code -eq 3 ] || bad "a worker exited $code, expected 3"
	elif [ "$case" = barriernever ]; then
		[ $code -eq 3 ] || bad "a node (pid $p) exited $code, expected 3 (the job is not whole)"
	elif [ "$case" != never ] && [ $code -ne 0 ]; then
		bad "a node (pid $p) exited $code"
	fi
done
t2=$(date +%s%N)
[ "$case" = never ] || echo "recovery.sh $van $case: the job ended $((($t2 - $t0) / 1000000)) ms after the kill"
case $case in
never)
	echo "recovery.sh $van never: the job ended $((($t2 - $t0) / 1000000)) ms after the kill"
	[ $((($t2 - $t0) / 1000000)) -lt 15000 ] || bad "the job took more than 15 s to end"
	for w in w0 w1; do
		n=$(grep -c "no node took the place of lost server 1 .*PS_RECOVERY_WAIT=3 s" "$dir/$w")
		[ "$n" -eq 1 ] || bad "$w said $n times that no node took server 1's place, expected 1"
		grep -q "gave up" "$dir/$w" || bad "$w did not give up"
	done
	;;
barriernever)
	# (the bound is 3 s after the loss; the nodes end at once after it)
	[ $((($t2 - $t0) / 1000000)) -lt 10000 ] || bad "the job took more than 10 s to end"
	said="WARN: barrier (.*, group 7) released without lost worker 1 (.*): no node"
	n=$(grep -c "$said took its place within 3 s (PS_RECOVERY)" "$dir/sched")
	[ "$n" -eq 1 ] ||
		bad "the scheduler said $n times that it released the final barrier without worker 1, expected 1"
	grep -h "released without" "$dir/sched" | sed 's/^.*WARN/WARN/'
	for n in w0 s0 s1 sched; do
		grep -q "the job is not whole" "$dir/$n" || bad "$n did not say that the job is not whole"
	done
	grep -q "OK (" "$dir/w0" || bad "w0 did not finish with OK"
	;;
*)
	for w in w0 w1; do
		case $case in worker | resend | barrier | groupworker | joint | host) [ $w = w1 ] && w=w1b ;; esac
		want=1
		case $case in group*) want=2 ;; esac # (one line per instance)
		[ "$(grep -c "OK (" "$dir/$w")" -eq $want ] || bad "$w did not finish with $want OK"
	done
	grep "recovnode worker" "$dir"/w0 | tail -n 1
	[ "$case" = barrier ] && grep -q "released without" "$dir/sched" &&
		bad "the scheduler released the final barrier without worker 1"
	if [ "$case" = inflight ]; then
		grep -h "sent .* request(s) in flight to the lost node again" "$dir"/w0 "$dir"/w1
		n=$(cat "$dir"/w0 "$dir"/w1 | grep -c "sent .* request(s) in flight to the lost node again")
		[ "$n" -ge 1 ] || bad "no worker sent its requests in flight to the new server 1"
		grep -q "OK (.*, 0 retried[,)]" "$dir"/w0 && grep -q "OK (.*, 0 retried[,)]" "$dir"/w1 ||
			bad "a worker retried a round"
	fi
	;;
esac
grep -l "FAILED\|AddressSanitizer\|runtime error" "$dir"/* >/dev/null 2>&1 &&
	bad "a node failed a check: $(grep -h "FAILED\|AddressSanitizer\|runtime error" "$dir"/* | head -n 3)"
if [ $fail -ne 0 ]; then
	for f in "$dir"/*; do
		echo "----- $(basename "$f") -----" >&2
		tail -n 25 "$f" >&2
	done
fi
exit $fail
