#!/bin/sh
# bench/threads.sh: where a job's time goes, per thread: CPU time and time
# spent runnable but waiting for a CPU (the kernel's schedstat), and the
# number of times each thread was switched in, for every thread of the
# server and the worker of one pslite-run job.
#
#   bench/threads.sh [--interval S] -- COMMAND...
#
# COMMAND is a pslite-run command line (its environment as usual); the
# script samples /proc/PID/task/TID/schedstat of each node process every
# S seconds (0.1) and prints, per role and thread name, the last sample:
# CPU s, runnable-waiting s, switches in. The job's own output follows.
set -eu
IV=0.1
while [ $# -gt 0 ]; do
	case $1 in
	--interval) IV=$2; shift 2 ;;
	--) shift; break ;;
	*) echo "usage: bench/threads.sh [--interval S] -- COMMAND..." >&2; exit 2 ;;
	esac
done
work=$(mktemp -d "${TMPDIR:-/tmp}/pslite-threads.XXXXXX")
"$@" >"$work/out" 2>&1 &
job=$!
trap 'kill $job 2>/dev/null || true; rm -rf "$work"' EXIT
: >"$work/s"
while kill -0 $job 2>/dev/null; do
	for p in $(pgrep -P "$job" 2>/dev/null; for c in $(pgrep -P "$job" 2>/dev/null); do pgrep -P "$c" 2>/dev/null; done); do
		role=$(tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | sed -n 's/^DMLC_ROLE=//p')
		[ "$role" = server ] || [ "$role" = worker ] || continue
		for t in /proc/"$p"/task/*; do
			s=$(cat "$t/schedstat" 2>/dev/null) || continue
			c=$(tr ' ' '_' <"$t/comm" 2>/dev/null) || continue
			echo "$role $p ${t##*/} $c $s"
		done
	done >>"$work/s"
	sleep "$IV"
done
wait $job || true
# the last sample of each thread
awk '{last[$1 " " $3 " " $4] = $5 " " $6 " " $7; role[$1 " " $3 " " $4] = $1}
END {
	for (k in last) {
		split(k, a, " "); split(last[k], v, " ")
		printf "%-7s %-16s cpu %7.3f s  runnable-waiting %7.3f s  switches-in %8d\n", a[1], a[3], v[1] / 1e9, v[2] / 1e9, v[3]
	}
}' "$work/s" | sort
grep '"tool":' "$work/out"
