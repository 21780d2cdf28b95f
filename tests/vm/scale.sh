#!/bin/sh
# Jobs of 1 + N + N nodes (N = PSL_VM_SCALE_N, default 16: 33 nodes) in the
# RDMA test VM over every van that runs on verbs there: ibverbs, ucx
# (rc_verbs) and fabric (verbs;ofi_rxm). Each is a pslite-bench push-pull of
# 4 KiB values with every pull checked: it fails unless every worker reports
# "0 errors, data checked" and every node reports its start-up time and
# memory, which it prints (the largest start-up time and the mean peak RSS
# per role). One boot with 6 GiB (33 nodes need ~2.5 GiB).
# PSL_VM_SCALE_VANS: the vans to run (default: ibverbs ucx fabric).
[ -n "${PSL_BUILDDIR:-}" ] || { [ -f tests/testenv.sh ] && . ./tests/testenv.sh; } || { echo "$0: run it from the build directory (where tests/testenv.sh is) or by make check TESTS=$0" >&2; exit 99; }
. "$PSL_SRCDIR/tests/vm/lib.sh"
vm_mem=6144
vm_main 900 "$@"

n=${PSL_VM_SCALE_N:-16}
b=$vm_build
ulimit -l unlimited 2>/dev/null
host=$(ip -4 -o addr show 2>/dev/null | awk '$2 != "lo" {sub("/.*", "", $4); print $4; exit}')
export PS_VAN_PATH=$b/plugins/van_ibverbs/.libs:$b/plugins/van_ucx/.libs:$b/plugins/van_fabric/.libs
# one key per server and per round: the point is the node count
export NUM_KEY_PER_SERVER=1
export UCX_TLS=rc_verbs,ud_verbs,self UCX_IB_GID_INDEX=0
# verbs;ofi_rxm sizes its queues for FI_UNIVERSE_SIZE peers (its default
# fails on rxe: fabric_verbs.sh); a scheduler has 2N of them
export FI_PROVIDER=verbs FI_UNIVERSE_SIZE=${FI_UNIVERSE_SIZE:-$((2 * n + 8))}
# 33 nodes on 2 emulated CPUs: while they all connect, the scheduler's
# heartbeat answers were seen 20-46 s late (a loaded host), which the
# default PS_HEARTBEAT_TIMEOUT (20 s) takes for a frozen scheduler
export PS_HEARTBEAT_TIMEOUT=${PS_HEARTBEAT_TIMEOUT:-120}
# likewise the scheduler's van ucx once did not greet a worker's connection
# within the default PS_UCX_HANDSHAKE_TIMEOUT (10 s), and that worker's
# start failed (a CI run of 2026-11-27; its van thread was not sampled)
export PS_UCX_HANDSHAKE_TIMEOUT=${PS_UCX_HANDSHAKE_TIMEOUT:-60}

# the per-role summary of the nodes' --json lines of log $1
roles() {
	grep -o '"role":"[a-z]*","rank":[0-9-]*,"cpu_s":[0-9.]*,"wall_s":[0-9.]*,"start_s":[0-9.]*,"rss_kb":[0-9]*,"max_rss_kb":[0-9]*' "$1" |
		awk -F'[:,]' '{r = $2; gsub("\"", "", r); if ($10 > s[r]) s[r] = $10; m[r] += $14; c[r]++}
		END {for (r in c) printf "  %-9s x%-2d start-up %5.1f s (slowest), peak RSS %6.0f KiB (mean)\n", r, c[r], s[r], m[r] / c[r]}'
}

job() { # van
	[ -f "$b/plugins/van_$1/.libs/van_$1.so" ] || { echo "$1: not built, not run"; return 0; }
	vm_step "$1: 1 + $n + $n nodes"
	log=$vm_tmp/$1.log
	t0=$(date +%s)
	timeout 400 "$b/tools/pslite-run" -s "$n" -w "$n" --van "$1" --host "$host" --timeout 380 -- \
		"$b/tools/pslite-bench" 4096 1 1 --seconds 2 --json >"$log" 2>&1
	rc=$?
	echo "$1: exit $rc after $(($(date +%s) - t0)) s"
	roles "$log"
	ok=$(grep -c 'pslite-bench summary: .* 0 errors, data checked' "$log")
	nodes=$(grep -c '"tool":"pslite-bench-node"' "$log")
	if [ $rc -ne 0 ] || [ "$ok" -ne "$n" ] || [ "$nodes" -ne $((2 * n + 1)) ]; then
		vm_bad "$1: exit $rc, $ok of $n workers checked their data, $nodes of $((2 * n + 1)) nodes reported"
		grep -n 'ERROR\|pslite-run:' "$log" | head -n 20
		# a node that crashed: what it said before (libfabric prints a
		# backtrace of its own on SIGSEGV)
		grep -n -B 12 -A 14 'terminated with signal\|Backtrace\|Segmentation\|Sanitizer' "$log" |
			head -n 60
		tail -n 30 "$log"
	fi
}

for van in ${PSL_VM_SCALE_VANS:-ibverbs ucx fabric}; do
	job "$van"
done
vm_step "done"
exit $vm_fail
