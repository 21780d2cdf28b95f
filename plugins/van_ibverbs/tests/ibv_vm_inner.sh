#!/bin/sh
# The van_ibverbs integration suite, run INSIDE the soft-RoCE virtual machine
# (ibv_vm.sh boots it; rxe0 must be up). Prints one "ibv: PASS name (N s)" or
# "ibv: FAIL name (N s)" line per test and exits non-zero when one failed.
#   ibv_vm_inner.sh [TEST...]   (default: all)
# Needs PSL_BUILDDIR and PSL_SRCDIR (ibv_vm.sh passes make check's).
set -u
b=${PSL_BUILDDIR:?}
s=${PSL_SRCDIR:?}
export PSL_BUILDDIR PSL_SRCDIR
export PS_VAN_PATH=${PS_VAN_PATH:-$b/plugins/van_ibverbs/.libs}
ulimit -l unlimited 2>/dev/null
# the nodes' address: IBV_HOST, else the first IPv4 address that is not loopback
host=${IBV_HOST:-$(ip -4 -o addr show 2>/dev/null | awk '$2 != "lo" {sub("/.*", "", $4); print $4; exit}')}
host=${host:-127.0.0.1}
dir=$(mktemp -d "${TMPDIR:-/tmp}/ibv-vm.XXXXXX")
trap 'rm -rf "$dir"' EXIT
failed=0 passed=0
# each line with the seconds since the one before (the emulated VM is slow:
# where the suite's time goes)
t_prev=$(date +%s)
took() { t_now=$(date +%s); took=$((t_now - t_prev)); t_prev=$t_now; }
pass() { took; echo "ibv: PASS $1 ($took s)"; passed=$((passed + 1)); }
fail() { took; echo "ibv: FAIL $1${2:+: $2} ($took s)"; failed=$((failed + 1)); }

# a kvtest job over ibverbs with extra environment; its log in $dir/$name.log
kvjob() { # name scenario S W [env...]
	name=$1 scen=$2 S=$3 W=$4
	shift 4
	keep=
	case $scen in kill | hang) keep=--keep-going ;; esac
	env "$@" KVTEST_DIR="$dir" KVTEST_SCENARIO="$scen" timeout 300 "$b/tools/pslite-run" \
		-s "$S" -w "$W" --van ibverbs --host "$host" --timeout 280 $keep -- \
		"$b/tests/integration/kvtest" >"$dir/$name.log" 2>&1
	kvrc=$?
	return $kvrc
}
all_ok() { # log S W: every node said OK
	i=0
	grep -q "kvtest scheduler 0: OK" "$1" || return 1
	while [ $i -lt "$2" ]; do grep -q "kvtest server $i: OK" "$1" || return 1; i=$((i + 1)); done
	i=0
	while [ $i -lt "$3" ]; do grep -q "kvtest worker $i: OK" "$1" || return 1; i=$((i + 1)); done
	! grep -q "\] ERROR:\|FAILED" "$1"
}
show() { # the lines that fail a job wherever they are, then the log's end
	echo "----- $1: errors -----"
	grep -n "\] ERROR:\|FAILED\|pslite-run:" "$1" | head -n 20
	echo "----- $1: last lines -----"
	tail -n 60 "$1"
}

t_info() {
	"$b/tools/pslite-info" >"$dir/info.log" 2>&1
	if grep -q "ibverbs *ok" "$dir/info.log" && grep -q "rxe0 port 1 Ethernet/RoCE active gid 0" \
		"$dir/info.log" && grep -q "memlock" "$dir/info.log"; then
		pass info
	else
		fail info "pslite-info does not list rxe0, its GIDs and the memlock limit"
		show "$dir/info.log"
	fi
}

t_data() { # 0 B to 16 MiB, every size pushed and pulled with checks
	if kvjob data data 2 2 && all_ok "$dir/data.log" 2 2; then pass data; else
		fail data; show "$dir/data.log"; fail quiet_end "the job failed"; return; fi
	# a job that ends well says nothing of peers closing their connections
	# (they do at the end); the core reports a peer lost while it matters
	if grep -q "van_ibverbs\] WARN:" "$dir/data.log"; then
		fail quiet_end "WARN lines from van_ibverbs in a job that ended well"
		grep "van_ibverbs\] WARN:" "$dir/data.log" | head -n 5
	else pass quiet_end; fi
}

t_progress() { # pslite-vantest's progress case: answers on the thread that calls progress()
	timeout 300 "$b/tools/pslite-vantest" --timeout 120 --verbose \
		"$b/plugins/van_ibverbs/.libs/van_ibverbs.so" progress >"$dir/progress.log" 2>&1
	rc=$?
	grep "answers delivered on the driving thread" "$dir/progress.log"
	if [ $rc -eq 0 ] && grep -q "PASS progress" "$dir/progress.log" &&
		grep -q "[1-9][0-9]* of [0-9]* answers delivered on the driving thread" "$dir/progress.log"; then
		pass progress; else fail progress "rc $rc"; show "$dir/progress.log"; fi
}

t_caller() { # PS_CALLER_PROGRESS=1: waiting threads poll the queues themselves (1 + 1: ~40 s)
	if kvjob caller data 1 1 PS_CALLER_PROGRESS=1 && all_ok "$dir/caller.log" 1 1; then
		pass caller_progress; else fail caller_progress; show "$dir/caller.log"; fi
}

t_loopback() { # job.sh as every van's tests use it: nodes on 127.0.0.1
	if timeout 300 "$s/tests/integration/job.sh" ibverbs data 2 2 280 >"$dir/lo.log" 2>&1; then
		pass data_loopback; else fail data_loopback; show "$dir/lo.log"; fi
}

t_busy() {
	if kvjob busy data 1 2 PS_BUSY_POLL=1 && all_ok "$dir/busy.log" 1 2; then pass busy_poll; else
		fail busy_poll; show "$dir/busy.log"; fi
}

t_qps() { # several queue pairs per peer: every one carries records
	kvrc=0
	if kvjob qps data 2 1 DMLC_SPLIT_QP_LAG=3 PS_VERBOSE=1 && all_ok "$dir/qps.log" 2 1; then
		# "records sent per queue pair: qp0 N, qp1 N, qp2 N" for links to servers
		lines=$(grep "records sent per queue pair: qp0 [1-9][0-9]*, qp1 [1-9][0-9]*, qp2 [1-9]" \
			"$dir/qps.log" | wc -l)
		if [ "$lines" -ge 2 ]; then pass qps_per_peer; else
			fail qps_per_peer "not every queue pair carried traffic"
			grep "records sent per queue pair" "$dir/qps.log"
		fi
	else
		fail qps_per_peer "pslite-run exit $kvrc"; show "$dir/qps.log"
	fi
}

t_small_depth() { # tiny queues: credits must hold everything back, no RNR
	if kvjob depth data 1 2 BYTEPS_RDMA_RX_DEPTH=4 BYTEPS_RDMA_START_DEPTH=2 &&
		all_ok "$dir/depth.log" 1 2; then pass small_depth; else
		fail small_depth; show "$dir/depth.log"; fi
}

t_nocache() {
	if kvjob nocache data 1 1 PS_IBV_MR_CACHE=0 && all_ok "$dir/nocache.log" 1 1; then
		pass mr_cache_off; else fail mr_cache_off; show "$dir/nocache.log"; fi
}

t_kill() { # server 1 SIGKILLed mid-job: requests fail, it is declared lost, nothing hangs
	kvjob kill kill 2 2
	rc=$?
	if [ $rc -eq 137 ] && grep -q "lost server 1" "$dir/kill.log" &&
		grep -q "kvtest worker 0: OK" "$dir/kill.log" && grep -q "kvtest worker 1: OK" "$dir/kill.log" &&
		! grep -q "FAILED" "$dir/kill.log"; then
		pass killed_server
	else
		fail killed_server "rc $rc"; show "$dir/kill.log"
	fi
}

t_hang() { # server 1 stops (SIGSTOP): heartbeats find it, nothing in the van hangs
	kvjob hang hang 2 2 PS_HEARTBEAT_INTERVAL=1 PS_HEARTBEAT_TIMEOUT=10
	rc=$?
	if [ $rc -eq 137 ] && grep -q "lost server 1" "$dir/hang.log" &&
		grep -q "kvtest worker 0: OK" "$dir/hang.log" && ! grep -q "FAILED" "$dir/hang.log"; then
		pass hung_server
	else
		fail hung_server "rc $rc"; show "$dir/hang.log"
	fi
}

t_resend() { # job.sh's resend scenario (3% of messages dropped, resent), as for every van
	if timeout 300 "$s/tests/integration/job.sh" ibverbs resend 2 2 280 >"$dir/resend.log" 2>&1; then
		pass resend; else fail resend; show "$dir/resend.log"; fi
}

t_server() { # pslite-server (BytePS summation) with pslite-check workers
	# server_job.sh runs on 127.0.0.1: the van reaches peers given as 127.x
	# through the RDMA device's own address
	if timeout 300 "$s/tests/integration/server_job.sh" ibverbs sync 280 >"$dir/server.log" 2>&1; then
		pass server_sync; else fail server_sync; show "$dir/server.log"; fi
}

t_bad() { # bad settings: one line naming each, the node does not start
	ok=1
	for kv in BYTEPS_RDMA_RX_DEPTH=abc BYTEPS_RDMA_START_DEPTH=0 DMLC_SPLIT_QP_LAG=99 \
		STEPMESH_SPLIT_QP_LAG=-2 \
		DMLC_NUM_PORTS=-1; do
		name=${kv%%=*}
		env "$kv" timeout 120 "$b/tools/pslite-run" -s 1 -w 1 --van ibverbs --host "$host" --timeout 100 -- \
			"$b/tests/integration/kvtest" >"$dir/bad.log" 2>&1
		rc=$?
		if [ $rc -eq 0 ] || [ $rc -eq 124 ] || ! grep -q "$kv: expected" "$dir/bad.log"; then
			echo "bad setting $kv: rc $rc"; show "$dir/bad.log"; ok=0
		fi
	done
	# no RDMA device reachable at the scheduler's address: the node says so and stops
	[ $ok -eq 1 ] && pass bad_settings || fail bad_settings
}

t_unreachable() { # the scheduler's address has no listener: fails within PS_CONNECT_TIMEOUT
	DMLC_ROLE=worker DMLC_PS_ROOT_URI=$host DMLC_NODE_HOST=$host DMLC_PS_ROOT_PORT=1 DMLC_NUM_SERVER=1 \
		DMLC_NUM_WORKER=1 DMLC_ENABLE_RDMA=ibverbs PS_CONNECT_TIMEOUT=2 \
		timeout 60 "$b/tests/integration/kvtest" >"$dir/unr.log" 2>&1
	rc=$?
	if [ $rc -ne 0 ] && [ $rc -ne 124 ] && grep -q "PS_CONNECT_TIMEOUT" "$dir/unr.log"; then
		pass unreachable; else fail unreachable "rc $rc"; show "$dir/unr.log"; fi
}

t_memlock() { # a non-root node under a small locked-memory limit: says how much it needs
	command -v setpriv >/dev/null || { echo "ibv: SKIP memlock (no setpriv)"; return; }
	(ulimit -l 64 && DMLC_ROLE=scheduler DMLC_PS_ROOT_URI=$host DMLC_NODE_HOST=$host \
		DMLC_PS_ROOT_PORT=9 DMLC_NUM_SERVER=1 DMLC_NUM_WORKER=1 DMLC_ENABLE_RDMA=ibverbs \
		timeout 60 setpriv --reuid=65534 --regid=65534 --clear-groups \
		"$b/tests/integration/kvtest") >"$dir/memlock.log" 2>&1
	rc=$?
	if [ $rc -ne 0 ] && [ $rc -ne 124 ] && grep -q "locked-memory limit is 64 KiB" "$dir/memlock.log" &&
		grep -q "ulimit -l" "$dir/memlock.log" && grep -q "LimitMEMLOCK" "$dir/memlock.log"; then
		pass memlock; else fail memlock "rc $rc"; show "$dir/memlock.log"; fi
}

t_af() { # the AF benchmark's short form, as for every van (failure checks included)
	if timeout 600 "$s/tests/integration/af_run.sh" ibverbs >"$dir/af.log" 2>&1; then
		pass af; else fail af; show "$dir/af.log"; fi
}

t_secret() { # PS_JOB_SECRET: the same on every node works; a server with another is refused at once
	if kvjob secret data 1 1 PS_JOB_SECRET=correct-horse-17 && all_ok "$dir/secret.log" 1 1; then
		pass secret_same; else fail secret_same; show "$dir/secret.log"; fi
	env PS_JOB_SECRET=correct-horse-17 PS_START_TIMEOUT=60 KVTEST_SCENARIO=data timeout 200 \
		"$b/tools/pslite-run" -s 1 -w 1 --van ibverbs --host "$host" --timeout 150 -- \
		sh -c 'if [ "$DMLC_ROLE" = server ]; then export PS_JOB_SECRET=battery-staple-2; fi
			exec "$1"' sh "$b/tests/integration/kvtest" >"$dir/secret2.log" 2>&1
	rc=$?
	if [ $rc -ne 0 ] && [ $rc -ne 124 ] &&
		grep "^\[server 0\]" "$dir/secret2.log" | grep -q "refused this node's RDMA connection.*PS_JOB_SECRET" &&
		grep "^\[scheduler\]" "$dir/secret2.log" | grep -q "refused an RDMA connection.*PS_JOB_SECRET"; then
		pass secret_other; else fail secret_other "rc $rc"; show "$dir/secret2.log"; fi
}

t_cxx() { # C++ ps-lite's RDMA protocol, against ibv_cxx_peer standing in for a C++ node
	# a pslite worker whose scheduler is C++: it finds out from the accept,
	# connects again with C++'s record and registers in C++'s rendezvous:
	# the peer gets the ADD_NODE meta of a worker by WRITE_WITH_IMM (702 bytes:
	# one node entry and the body "pslite-counts 1 1 1|pslite-heartbeat 2",
	# docs/wire.md 6.1)
	"$b/plugins/van_ibverbs/tests/ibv_cxx_peer" listen "$host" 9311 30 >"$dir/cxx-peer.log" 2>&1 &
	peer=$!
	sleep 1
	DMLC_ROLE=worker DMLC_PS_ROOT_URI=$host DMLC_NODE_HOST=$host DMLC_PS_ROOT_PORT=9311 \
		DMLC_NUM_SERVER=1 DMLC_NUM_WORKER=1 DMLC_ENABLE_RDMA=ibverbs PS_CONNECT_TIMEOUT=60 \
		timeout 20 "$b/tests/integration/kvtest" >"$dir/cxx-sched.log" 2>&1
	rc=$?
	kill "$peer" 2>/dev/null
	wait "$peer" 2>/dev/null
	if [ $rc -eq 124 ] && grep -q "runs C++ ps-lite's RDMA van: speaking its protocol" \
		"$dir/cxx-sched.log" && grep -q "accepted a record that is not C++'s" "$dir/cxx-peer.log" &&
		grep -q "accepted node 32767" "$dir/cxx-peer.log" &&
		grep -q "start: meta 702 bytes, 0 segments" "$dir/cxx-peer.log" &&
		grep -q "message: 702 bytes, cmd 2, node_size 1, role 1, id 32767, host $host" \
			"$dir/cxx-peer.log"; then
		pass cxx_scheduler; else fail cxx_scheduler "rc $rc"; show "$dir/cxx-peer.log"; show "$dir/cxx-sched.log"; fi
	# a C++ node connecting to a pslite scheduler: accepted, its START
	# answered with a REPLY carrying its cookie, its message delivered
	# (a BOOTSTRAP from a node without an id: the core drops it with a
	# warning that names the command it read from the meta); three tries, as
	# a connector retries: under emulation the scheduler's rdma_create_qp
	# now and then fails once and it refuses that connection
	DMLC_ROLE=scheduler DMLC_PS_ROOT_URI=$host DMLC_NODE_HOST=$host DMLC_PS_ROOT_PORT=9312 \
		DMLC_NUM_SERVER=1 DMLC_NUM_WORKER=1 DMLC_ENABLE_RDMA=ibverbs \
		timeout 60 "$b/tests/integration/kvtest" >"$dir/cxx-node.log" 2>&1 &
	sched=$!
	sleep 2
	timeout 40 "$b/plugins/van_ibverbs/tests/ibv_cxx_peer" connect "$host" 9312 3 \
		>"$dir/cxx-peer2.log" 2>&1
	sleep 1
	kill "$sched" 2>/dev/null
	wait "$sched" 2>/dev/null
	if grep -q "reply: cookie ours" "$dir/cxx-peer2.log" && grep -q "^wrote" "$dir/cxx-peer2.log" &&
		grep -q "dropped a message (BOOTSTRAP) from an unregistered peer" "$dir/cxx-node.log"; then
		pass cxx_node; else fail cxx_node; show "$dir/cxx-peer2.log"; show "$dir/cxx-node.log"; fi
}

t_recov() { # recovery.sh CASE on the device's address: a lost node comes back under its id
	RECOV_HOST=$host timeout 150 "$s/tests/integration/recovery.sh" ibverbs "$1" \
		>"$dir/recov-$1.log" 2>&1
	rc=$?
	grep "back .* ms after the kill\|ended .* ms after the kill" "$dir/recov-$1.log"
	if [ $rc -eq 0 ]; then pass "recovery_$1"; else fail "recovery_$1" "rc $rc"; show "$dir/recov-$1.log"; fi
}

tests=${*:-"info data progress caller loopback qps small_depth busy nocache kill hang resend server bad unreachable memlock secret af cxx recov_server recov_worker"}
for t in $tests; do
	case $t in
	info) t_info ;; data) t_data ;; progress) t_progress ;; caller) t_caller ;;
	loopback) t_loopback ;; qps) t_qps ;; small_depth) t_small_depth ;;
	busy) t_busy ;; nocache) t_nocache ;; kill) t_kill ;; hang) t_hang ;; resend) t_resend ;;
	server) t_server ;; bad) t_bad ;; unreachable) t_unreachable ;; memlock) t_memlock ;;
	secret) t_secret ;; af) t_af ;; cxx) t_cxx ;;
	recov_server) t_recov server ;; recov_worker) t_recov worker ;; recov_twice) t_recov twice ;;
	*) fail "$t" "no such test" ;;
	esac
done
echo "ibv: $passed passed, $failed failed"
[ $failed -eq 0 ]
