#!/bin/sh
# BytePS's start/stop barrier sequence with the pslite-server binary: a
# scheduler and 2 servers running pslite-server, 3 workers running
# pslite-check, over van VAN (docs/pslite-server.md, "Start and stop").
#   server_sequence.sh VAN MODE [TIMEOUT]
# MODE:
#   sync, async  every node passes BytePS's sequence: the start-up barrier
#                (INSTANCE_BARRIER, all), Barrier(all) (BARRIER, group 7),
#                then the final barrier (INSTANCE_BARRIER, all). Checks, from
#                each node's message trace and the scheduler's releases, that
#                every node sent exactly these, in this order, that every
#                worker verified its sums and every process exited 0 in time.
#   mismatch     the workers skip Barrier(all) (one start barrier, as a
#                worker on C++ ps-lite's StartPS(do_barrier=true) alone): the
#                job cannot end; checks that the sums were still exact and that
#                the scheduler said, more than once, which nodes each waiting
#                barrier misses (PS_BARRIER_WARN_S=1), before the time limit
#                ends the job.
# Needs PSL_BUILDDIR and PSL_SRCDIR (set by make check).
[ -n "${PSL_BUILDDIR:-}" ] || { [ -f tests/testenv.sh ] && . ./tests/testenv.sh; } || { echo "$0: run it from the build directory (where tests/testenv.sh is) or by make check TESTS=$0" >&2; exit 99; }
set -u
van=$1 mode=$2 limit=${3:-120}
b=${PSL_BUILDDIR:?run through make check, or set PSL_BUILDDIR}
log=$(mktemp "${TMPDIR:-/tmp}/pslite-server-seq.XXXXXX")
trap 'rm -f "$log"' EXIT
S=2 W=3

args="--dtypes float32,int64 --tensors 2 --size 60000 --rounds 5"
export BYTEPS_PARTITION_BYTES=50000 PS_VERBOSE=2
unset BYTEPS_ENABLE_ASYNC BYTEPS_SERVER_ENGINE_BLOCKING BYTEPS_SERVER_ENABLE_SCHEDULE \
	BYTEPS_SERVER_ENGINE_THREAD PS_BARRIER_WARN_S
case $mode in
sync) ;;
async) export BYTEPS_ENABLE_ASYNC=1 ;;
mismatch) args="$args --one-start-barrier"; limit=${3:-15}; export PS_BARRIER_WARN_S=1 ;;
*) echo "server_sequence.sh: unknown mode '$mode'" >&2; exit 2 ;;
esac

export PSL_SERVER_BIN="$b/tools/pslite-server"
# shellcheck disable=SC2086,SC2016
"$b/tools/pslite-run" -s $S -w $W --van "$van" --timeout "$limit" -- \
	/bin/sh -c 'if [ "$DMLC_ROLE" = worker ]; then exec "$0" "$@"; else exec "$PSL_SERVER_BIN"; fi' \
	"$b/tools/pslite-check" $args >"$log" 2>&1
rc=$?

fail=0
need() { # need WHAT PATTERN: the log has a line matching PATTERN
	if ! grep -q -- "$2" "$log"; then
		echo "server_sequence.sh: $van/$mode: $1 (no line matching '$2')" >&2
		fail=1
	fi
}
# the barrier requests node NAME sent to the scheduler, in order, one line
sent() {
	grep -- "^\[$1\] .*TRACE: to node 1: [A-Z_]*BARRIER .* request" "$log" |
		sed 's/.*to node 1: \([A-Z_]*\) .*/\1/' | tr '\n' ' '
}
check_seq() { # check_seq NAME EXPECTED
	got=$(sent "$1")
	if [ "$got" != "$2" ]; then
		echo "server_sequence.sh: $van/$mode: $1 sent the barriers '$got', expected '$2'" >&2
		fail=1
	fi
}

m=${mode%mismatch}
i=0; while [ $i -lt $W ]; do
	need "worker $i did not verify its sums" "pslite-check worker $i: PASS: ${m:-sync}, 5 rounds"
	i=$((i + 1))
done
case $mode in
sync|async)
	[ $rc -eq 0 ] || { echo "server_sequence.sh: $van/$mode: pslite-run exited $rc (limit $limit s)" >&2; fail=1; }
	seq="INSTANCE_BARRIER BARRIER INSTANCE_BARRIER "
	# pslite-check's own check in async mode: a barrier of the workers only
	# before the last pull (servers and scheduler do not pass it)
	wseq=$seq
	[ "$mode" = async ] && wseq="INSTANCE_BARRIER BARRIER BARRIER INSTANCE_BARRIER "
	i=0; while [ $i -lt $S ]; do check_seq "server $i" "$seq"; i=$((i + 1)); done
	i=0; while [ $i -lt $W ]; do check_seq "worker $i" "$wseq"; i=$((i + 1)); done
	# the scheduler passes them too: it releases a barrier only when it has
	# arrived itself (every group below holds it, but group 4)
	got=$(grep "^\[scheduler\] .*barrier (.*) released" "$log" |
		sed 's/.*barrier (\(.*\)) released \([0-9]*\).*/\1:\2/' | tr '\n' ' ')
	exp="INSTANCE_BARRIER, group 7:6 BARRIER, group 7:6 INSTANCE_BARRIER, group 7:6 "
	[ "$mode" = async ] &&
		exp="INSTANCE_BARRIER, group 7:6 BARRIER, group 7:6 BARRIER, group 4:3 INSTANCE_BARRIER, group 7:6 "
	if [ "$got" != "$exp" ]; then
		echo "server_sequence.sh: $van/$mode: the scheduler released '$got', expected '$exp'" >&2
		fail=1
	fi
	i=0; while [ $i -lt $S ]; do
		need "server $i did not finish cleanly" "\[server $i\].*pslite-server: [1-9][0-9]* keys, .* 0 errors"
		i=$((i + 1))
	done
	if grep -q "has waited" "$log"; then
		echo "server_sequence.sh: $van/$mode: the scheduler warned about a barrier" >&2
		fail=1
	fi
	;;
mismatch)
	[ $rc -ne 0 ] || { echo "server_sequence.sh: $van/$mode: the job ended, but its nodes passed different barriers" >&2; fail=1; }
	w="WARN: barrier (BARRIER, group 7: workers+servers+scheduler) has waited [0-9]* s: 3 of 6 node(s) arrived, 3 did not: worker 0 (id 9, [^)]*), worker 1 (id 11, [^)]*), worker 2 (id 13, [^)]*) (PS_BARRIER_WARN_S=1)"
	f="WARN: barrier (INSTANCE_BARRIER, group 7: workers+servers+scheduler) has waited [0-9]* s: 3 of 6 node(s) arrived, 3 did not: server 0 (id 8, [^)]*), server 1 (id 10, [^)]*), the scheduler"
	need "the scheduler did not name the workers missing from Barrier(all)" "^\[scheduler\] .*$w"
	need "the scheduler did not name the nodes missing from the final barrier" "^\[scheduler\] .*$f"
	for p in "$w" "$f"; do
		n=$(grep -c -- "^\[scheduler\] .*$p" "$log")
		[ "$n" -ge 2 ] || { echo "server_sequence.sh: $van/$mode: said $n time(s), expected again every second: $p" >&2; fail=1; }
	done
	;;
esac
# (mismatch: what nodes say once pslite-run ends the job at its time limit,
# a node that lost the scheduler first, say, is no failure; sanitizer
# reports count wherever they are)
if sed '/pslite-run: the job ran past --timeout/,$d' "$log" | grep -q "FAIL\|ERROR:" ||
	grep -q "AddressSanitizer\|runtime error:\|LeakSanitizer" "$log"; then
	echo "server_sequence.sh: $van/$mode: a node reported a failure or a sanitizer error:" >&2
	grep -m 20 "FAIL\|AddressSanitizer\|runtime error:\|LeakSanitizer\|ERROR:" "$log" >&2
	fail=1
fi
if [ $fail -ne 0 ]; then
	echo "----- output of the job ($van/$mode, without message traces) -----" >&2
	grep -v "TRACE:" "$log" | tail -n 150 >&2
fi
exit $fail
