#!/bin/sh
# Mixed jobs of C++ ps-lite and pslite nodes over RDMA verbs
# (DMLC_ENABLE_RDMA=ibverbs), run inside the soft-RoCE VM (tests/vm/run.sh).
#   tests/interop/rdma_vm.sh [-b /path/to/test_benchmark] [CASE...]
# The C++ binary is ps-lite's tests/test_benchmark built with DMLC_USE_RDMA
# outside this project (docs/interop.md, "Over RDMA"); -b or
# PSLITE_INTEROP_CXX_RDMA_BENCH gives it. Without it, or without the VM, it
# says so in one line and exits 77. Not part of `make check`.
# A case is three letters, the implementation of scheduler, server and
# worker: c = C++ test_benchmark, p = pslite-bench, S = pslite-server (server
# only). Default: ccc ppp cpp pcc cpc pcp ccp pSc cSc.
# One row per case:
#   PASS     the worker did its work and every node exited 0, except C++
#            nodes that hung after it in their RDMA van's shutdown (killed by
#            timeout: C++-only jobs do that too)
#   REFUSED  a pslite node met a C++ RDMA node and stopped, or refused it, with
#            the one line that names DMLC_ENABLE_RDMA=0 (the expected result of
#            any mix: pslite's van_ibverbs does not speak C++'s RDMA protocol)
#   FAIL     anything else (the logs' last lines follow)
# Sizes are small (4 KiB, 3 rounds, 4 keys): soft-RoCE under TCG is slow.
set -u
here=$(cd "$(dirname "$0")" && pwd)
if [ "${1:-}" = --inner ]; then
	shift
	cxx=$1 b=$2 out=$3
	shift 3
	ulimit -l unlimited 2>/dev/null
	host=$(ip -4 -o addr show | awk '$2 != "lo" {sub("/.*", "", $4); print $4; exit}')
	port=9400
	bad=0
	for c in "$@"; do
		port=$((port + 1))
		d=$out/$c
		mkdir -p "$d"
		node() { # role impl
			case $2 in
			c) bin=$cxx args="4096 3 0" ;;
			S) bin=$b/tools/pslite-server args= ;;
			*) bin=$b/tools/pslite-bench args="4096 3 0" ;;
			esac
			env DMLC_ROLE=$1 DMLC_PS_ROOT_URI=$host DMLC_PS_ROOT_PORT=$port \
				DMLC_NODE_HOST=$host DMLC_NUM_SERVER=1 DMLC_NUM_WORKER=1 \
				DMLC_ENABLE_RDMA=ibverbs DMLC_GROUP_SIZE=1 PSLITE_BENCH_ACCEPT_ONES=1 \
				LOG_DURATION=2 TOTAL_DURATION=4 NUM_KEY_PER_SERVER=4 \
				PS_VAN_PATH=$b/plugins/van_ibverbs/.libs PS_CONNECT_TIMEOUT=20 \
				timeout -k 3 40 $bin $args >"$d/$1.log" 2>&1
			echo $? >"$d/$1.rc"
		}
		sc=$(echo "$c" | cut -c1) sv=$(echo "$c" | cut -c2) wk=$(echo "$c" | cut -c3)
		node scheduler "$sc" &
		sleep 1
		node server "$sv" &
		node worker "$wk" &
		wait
		# the worker did its work: pslite's exited 0, C++'s said so
		done=0
		if [ "$wk" = c ]; then grep -q "Thread 0 is done" "$d/worker.log" && done=1
		else [ "$(cat "$d/worker.rc")" = 0 ] && done=1; fi
		ok=$done
		for r in scheduler server worker; do
			rc=$(cat "$d/$r.rc")
			[ "$rc" = 0 ] && continue
			impl=$sc
			[ $r = server ] && impl=$sv
			[ $r = worker ] && impl=$wk
			[ "$impl" = c ] && [ "$rc" = 124 ] && [ $done = 1 ] && continue
			ok=0
		done
		if [ $ok = 1 ]; then
			echo "$c PASS"
		elif grep -l "it runs C++ ps-lite's RDMA van.*DMLC_ENABLE_RDMA=0" "$d"/*.log >/dev/null; then
			echo "$c REFUSED: $(grep -h "it runs C++ ps-lite's RDMA van" "$d"/*.log | head -n 1 | cut -c1-160)..."
		else
			echo "$c FAIL (exit statuses: $(cat "$d"/scheduler.rc "$d"/server.rc "$d"/worker.rc | tr '\n' ' '))"
			tail -n 5 "$d"/*.log
			bad=1
		fi
	done
	exit $bad
fi
cxx=${PSLITE_INTEROP_CXX_RDMA_BENCH:-}
if [ "${1:-}" = -b ]; then cxx=$2; shift 2; fi
if [ -z "$cxx" ] || [ ! -x "$cxx" ]; then
	echo "rdma_vm.sh: SKIP: no C++ ps-lite test_benchmark built with DMLC_USE_RDMA (give -b PATH or PSLITE_INTEROP_CXX_RDMA_BENCH)"
	exit 77
fi
[ -n "${PSL_BUILDDIR:-}" ] || { [ -f tests/testenv.sh ] && . ./tests/testenv.sh; } ||
	{ echo "rdma_vm.sh: run it from the build directory (where tests/testenv.sh is)" >&2; exit 99; }
out=$(mktemp -d "${TMPDIR:-/tmp}/rdma-interop.XXXXXX")
echo "rdma_vm.sh: logs in $out"
cases=${*:-"ccc ppp cpp pcc cpc pcp ccp pSc cSc"}
"$PSL_SRCDIR/tests/vm/run.sh" --rw "$out" --timeout 900 -- \
	sh "$here/rdma_vm.sh" --inner "$cxx" "$PSL_BUILDDIR" "$out" $cases
