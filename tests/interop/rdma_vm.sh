#!/bin/sh
# Mixed jobs of C++ ps-lite and pslite nodes over RDMA verbs
# (DMLC_ENABLE_RDMA=ibverbs), run inside the soft-RoCE VM (tests/vm/run.sh).
#   tests/interop/rdma_vm.sh [-b /path/to/test_benchmark] [-y /path/to/byteps_worker] [CASE...]
# The C++ binary is ps-lite's tests/test_benchmark built with DMLC_USE_RDMA
# outside this project (docs/interop.md, "Over RDMA"); -b or
# PSLITE_INTEROP_CXX_RDMA_BENCH gives it. Without it, or without the VM, it
# says so in one line and exits 77. Not part of `make check`.
# -y (or PSLITE_INTEROP_CXX_RDMA_BYTEPS_WORKER) gives tests/interop/
# byteps_worker.cc built against that C++ ps-lite (with -lrdmacm -libverbs).
# A case is three letters, the implementation of scheduler, server and
# worker: c = C++ test_benchmark, p = pslite-bench, S = pslite-server (server
# only, or the scheduler: pslite-server in that role), y = byteps_worker
# (worker only), k = pslite's kvtest (worker only: requests of many keys,
# which C++'s RDMA van cannot carry). Default: ccc ppp cpp pcc cpc pcp ccp
# cck, and with -y SSy.
# (pslite-server and byteps_worker pass BytePS's barriers, which neither
# test_benchmark nor pslite-bench does: pSc and cSc move their data but cannot
# end, pSy and cSy do not start.)
# van_ibverbs speaks C++'s RDMA protocol to C++ nodes (docs/van-ibverbs.md),
# so every mix is expected to pass. One row per case:
#   PASS     the worker did its work and every node exited 0, except C++
#            nodes that hung after it in their RDMA van's shutdown (killed by
#            timeout: C++-only jobs do that too). pslite-bench checks the data
#            it gets (a worker every pulled byte, a server every pushed one,
#            accepting C++'s all-ones test data) and exits 1 on a wrong byte;
#            its data lines follow the row
#   REFUSED  (k only, the expected result) the worker's requests to the C++
#            server failed at once (not hung) after the line saying C++
#            carries one key per message (kvtest goes on with its other steps
#            and may then wait for the C++ nodes until killed)
#   FAIL     anything else (the logs' last lines follow)
# Sizes are small (4 KiB, 4 keys): soft-RoCE under TCG is slow. Mode 0 (push
# 3 rounds, then pull 3) except with pslite-server, which serves BytePS's
# rounds (a push then a pull of each key): mode 1, 4 rounds. RDMA_VM_SIZE and
# RDMA_VM_MODE set the bytes per key and the mode of test_benchmark and
# pslite-bench, RDMA_VM_ROUNDS the rounds of modes 1 to 3 (4); mode 1 prints
# goodput: C++'s "Application goodput" every 2 rounds, pslite's "pslite-bench
# summary".
set -u
here=$(cd "$(dirname "$0")" && pwd)
if [ "${1:-}" = --inner ]; then
	shift
	cxx=$1 bpsw=$2 b=$3 out=$4
	shift 4
	ulimit -l unlimited 2>/dev/null
	host=$(ip -4 -o addr show | awk '$2 != "lo" {sub("/.*", "", $4); print $4; exit}')
	port=9400
	bad=0
	# C++ registers one memory region per receive buffer (2048 per
	# connection by default): rxe's device-wide limit runs out when a C++
	# node has more than about six connections
	rxd=${BYTEPS_RDMA_RX_DEPTH:-256}
	for c in "$@"; do
		port=$((port + 1))
		d=$out/$c
		mkdir -p "$d"
		sc=$(echo "$c" | cut -c1) sv=$(echo "$c" | cut -c2) wk=$(echo "$c" | cut -c3)
		mode=${RDMA_VM_MODE:-0} size=${RDMA_VM_SIZE:-4096}
		[ "$sv" = S ] && mode=1
		node() { # role impl
			case $2 in
			c) bin=$cxx args="$size 3 $mode" ;;
			y) bin=$bpsw args= ;;
			k) bin=$b/tests/integration/kvtest args= ;;
			S) bin=$b/tools/pslite-server args= ;;
			*) bin=$b/tools/pslite-bench args="$size 3 $mode" ;;
			esac
			env DMLC_ROLE=$1 DMLC_PS_ROOT_URI=$host DMLC_PS_ROOT_PORT=$port \
				DMLC_NODE_HOST=$host DMLC_NUM_SERVER=1 DMLC_NUM_WORKER=1 \
				DMLC_ENABLE_RDMA=ibverbs DMLC_GROUP_SIZE=1 PSLITE_BENCH_ACCEPT_ONES=1 \
				BYTEPS_RDMA_RX_DEPTH=$rxd \
				LOG_DURATION=2 TOTAL_DURATION=${RDMA_VM_ROUNDS:-4} NUM_KEY_PER_SERVER=4 \
				BPS_TEST_TENSORS=2 BPS_TEST_BYTES=20000 BPS_TEST_ROUNDS=3 \
				BYTEPS_PARTITION_BYTES=4096 \
				PS_VAN_PATH=$b/plugins/van_ibverbs/.libs PS_CONNECT_TIMEOUT=20 \
				timeout -k 3 40 $bin $args >"$d/$1.log" 2>&1
			echo $? >"$d/$1.rc"
		}
		node scheduler "$sc" &
		sleep 1
		node server "$sv" &
		node worker "$wk" &
		wait
		# the worker did its work: pslite's exited 0, C++'s said so
		# (byteps_worker: every pulled value checked)
		done=0
		if [ "$wk" = c ]; then grep -q "Thread 0 is done" "$d/worker.log" && done=1
		elif [ "$wk" = y ]; then grep -q "^byteps_worker [0-9]*: PASS" "$d/worker.log" && done=1
		else [ "$(cat "$d/worker.rc")" = 0 ] && done=1; fi
		ok=$done
		for r in scheduler server worker; do
			rc=$(cat "$d/$r.rc")
			[ "$rc" = 0 ] && continue
			impl=$sc
			[ $r = server ] && impl=$sv
			[ $r = worker ] && impl=$wk
			case $impl in c | y) [ "$rc" = 124 ] && [ $done = 1 ] && continue ;; esac
			ok=0
		done
		if [ "$wk" = k ]; then
			line=$(grep -h "C++ ps-lite's RDMA van carries one key per message" "$d/worker.log" | head -n 1)
			if [ -n "$line" ] && grep -q "FAILED.*copy push v1: wait: protocol error" "$d/worker.log"; then
				echo "$c REFUSED (as expected): $(echo "$line" | cut -c1-200)"
			else
				echo "$c FAIL (expected the worker's requests to fail with the one-key line; exit $(cat "$d/worker.rc"))"
				tail -n 5 "$d/worker.log"
				bad=1
			fi
		elif [ $ok = 1 ]; then
			echo "$c PASS"
			grep -h "pslite-bench.*held\|pslite-bench summary\|Application goodput\|total_time\|^byteps_worker.*PASS" \
				"$d"/*.log | sed 's/^/    /'
		else
			echo "$c FAIL (exit statuses: $(cat "$d"/scheduler.rc "$d"/server.rc "$d"/worker.rc | tr '\n' ' '))"
			tail -n 5 "$d"/*.log
			bad=1
		fi
	done
	exit $bad
fi
cxx=${PSLITE_INTEROP_CXX_RDMA_BENCH:-}
bpsw=${PSLITE_INTEROP_CXX_RDMA_BYTEPS_WORKER:-}
while :; do
	case ${1:-} in
	-b) cxx=$2; shift 2 ;;
	-y) bpsw=$2; shift 2 ;;
	*) break ;;
	esac
done
if [ -z "$cxx" ] || [ ! -x "$cxx" ]; then
	echo "rdma_vm.sh: SKIP: no C++ ps-lite test_benchmark built with DMLC_USE_RDMA (give -b PATH or PSLITE_INTEROP_CXX_RDMA_BENCH)"
	exit 77
fi
[ -n "${PSL_BUILDDIR:-}" ] || { [ -f tests/testenv.sh ] && . ./tests/testenv.sh; } ||
	{ echo "rdma_vm.sh: run it from the build directory (where tests/testenv.sh is)" >&2; exit 99; }
out=$(mktemp -d "${TMPDIR:-/tmp}/rdma-interop.XXXXXX")
echo "rdma_vm.sh: logs in $out"
cases=${*:-"ccc ppp cpp pcc cpc pcp ccp cck${bpsw:+ SSy}"}
# one VM at a time on this machine (the lock the VM suite takes)
lock=
command -v flock >/dev/null 2>&1 && lock="flock -w 3600 ${TMPDIR:-/tmp}/pslite-vm-tests.lock"
$lock "$PSL_SRCDIR/tests/vm/run.sh" --rw "$out" --timeout 900 -- \
	sh "$here/rdma_vm.sh" --inner "$cxx" "${bpsw:-none}" "$PSL_BUILDDIR" "$out" $cases
