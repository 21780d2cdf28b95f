#!/bin/sh
# bench/budget.sh: what one small request costs, counted per request: context
# switches, CPU time, malloc/calloc/realloc calls and system calls of the
# worker and of the server (perf stat with uprobes on libc), for one 4 KiB key in
# flight, ZPush then ZPull (pslite-bench mode 1), 1 scheduler + 1 server + 1
# worker on loopback; with --strace, the worker's system calls by name
# (--strace-server: the server's).
#
#   bench/budget.sh [--van NAME] [--requests N] [--strace | --strace-server]
#                   [--timeout S] [VAR=VALUE...]
#
# Each node is killed after S seconds (default 300), and the nodes still
# running when the script ends are killed.
# VAR=VALUE go to the three nodes (PS_BUSY_POLL=1, UCX_TLS=tcp, ...).
# Needs root (perf probe, tracepoints) and perf; the figures are counts, so
# a loaded machine changes them little (docs/performance.md).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
B=${PSL_BUILDDIR:-$(cd "$here/.." && pwd)}
van=zmq n=20000 strace=0 traced=worker limit=300
while [ $# -gt 0 ]; do
	case $1 in
	--van) van=$2; shift 2 ;;
	--requests) n=$2; shift 2 ;;
	--strace) strace=1; shift ;;
	--strace-server) strace=1 traced=server; shift ;;
	--timeout) limit=$2; shift 2 ;;
	*=*) break ;;
	*) echo "usage: bench/budget.sh [--van NAME] [--requests N] [--strace | --strace-server] [--timeout S] [VAR=VALUE...]" >&2; exit 2 ;;
	esac
done
command -v perf >/dev/null || { echo "bench/budget.sh: needs perf (apt-get install linux-perf)" >&2; exit 2; }
libc=$(ldd "$B/tools/.libs/pslite-bench" | sed -n 's/.*libc.so.6 => \([^ ]*\).*/\1/p')
for f in malloc calloc realloc; do perf probe -q -x "$libc" --add $f 2>/dev/null || true; done
perf probe -l 2>/dev/null | grep -q "probe_libc:malloc" ||
	{ echo "bench/budget.sh: cannot add a uprobe on $libc's malloc (root?)" >&2; exit 2; }
vp=
for d in "$B"/plugins/*/.libs; do [ -d "$d" ] && vp=${vp:+$vp:}$d; done
work=$(mktemp -d "${TMPDIR:-/tmp}/pslite-budget.XXXXXX")
pids=
trap 'for p in $pids; do pkill -TERM -P "$p" 2>/dev/null; kill "$p" 2>/dev/null; done; rm -rf "$work"' EXIT
iters=$((n / 2)) # each iteration is a push and a pull
port=$("$B/tests/integration/startnode" --free-port)
ev=context-switches,task-clock,probe_libc:malloc,probe_libc:calloc,probe_libc:realloc,raw_syscalls:sys_enter
run() { # ROLE: one node, counted unless the scheduler
	role=$1
	shift
	env "$@" LD_LIBRARY_PATH="$B/.libs" PS_VAN_PATH="$vp" DMLC_NODE_HOST=127.0.0.1 \
		DMLC_PS_ROOT_URI=127.0.0.1 DMLC_PS_ROOT_PORT="$port" DMLC_NUM_SERVER=1 \
		DMLC_NUM_WORKER=1 DMLC_ENABLE_RDMA="$van" NUM_KEY_PER_SERVER=1 \
		TOTAL_DURATION="$iters" LOG_DURATION="$iters" DMLC_ROLE="$role" \
		timeout -k 5 "$limit" $wrap "$B/tools/.libs/pslite-bench" 4096 10 1 --quiet \
		>"$work/$role.out" 2>&1
}
bg() { # ROLE: run ROLE in the background, killed at the end
	run "$@" &
	pids="$pids $!"
}
wrap= bg scheduler "$@"
if [ $strace -eq 1 ] && [ $traced = server ]; then
	wrap="strace -f -c -o $work/server.strace" bg server "$@"
	wrap= run worker "$@" || true
elif [ $strace -eq 1 ]; then
	wrap="perf stat -x, -e $ev -o $work/server.stat" bg server "$@"
	wrap="strace -f -c -o $work/worker.strace" run worker "$@" || true
else
	wrap="perf stat -x, -e $ev -o $work/server.stat" bg server "$@"
	wrap="perf stat -x, -e $ev -o $work/worker.stat" run worker "$@" || true
fi
wait || true
grep summary "$work/worker.out" || {
	cat "$work"/*.out >&2
	echo "bench/budget.sh: the worker printed no summary (it failed, or ran past --timeout $limit s)" >&2
	exit 1
}
if [ $strace -eq 1 ]; then
	awk -v n="$n" -v r="$traced" '$1 ~ /^[0-9.]+$/ && $NF != "total" && $4 / n >= 0.05 {
		printf "  %-6s %-14s %6.2f per request\n", r, $NF, $4 / n
	}' "$work/$traced.strace"
	exit 0
fi
for r in worker server; do
	awk -F, -v n="$n" -v r="$r" '$3 != "" && $1 ~ /^[0-9.]+$/ {
		v = $1 / n
		if ($3 == "task-clock") printf "  %-6s %-24s %8.1f us per request\n", r, "CPU", v * 1000
		else printf "  %-6s %-24s %8.2f per request\n", r, $3, v
	}' "$work/$r.stat"
done
