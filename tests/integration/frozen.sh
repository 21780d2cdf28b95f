#!/bin/sh
# A frozen server over one van, with heartbeats:
#   frozen.sh VAN
# pslite-bench on 1 scheduler, 1 server, 1 worker with PS_HEARTBEAT_INTERVAL=1
# PS_HEARTBEAT_TIMEOUT=6 (with FROZEN_HB=default: neither set, heartbeats as
# they are by default, and the job must end within the default timeout plus
# FROZEN_SLACK s); 2 s after the worker started its loop the server is
# frozen (SIGSTOP) and never resumed (FROZEN_NODE=scheduler: the scheduler
# instead; then the server and the worker must end, having lost it). The heartbeats declare it lost: the worker's requests must fail at
# once, with a line naming the setting (PS_HEARTBEAT_TIMEOUT),
# the barriers (the scheduler's final one included) end with an error,
# and the scheduler and the worker exit non-zero, all while the server stays
# frozen (it is killed at the end), and neither crashes on its way out (dies
# of a signal, or prints a crash report: libfabric's psm provider catches
# SIGSEGV, prints "... terminated with signal 11 ... Backtrace:" and exits 1).
[ -n "${PSL_BUILDDIR:-}" ] || { [ -f tests/testenv.sh ] && . ./tests/testenv.sh; } || { echo "$0: run it from the build directory (where tests/testenv.sh is) or by make check TESTS=$0" >&2; exit 99; }
set -u
van=$1
b=${PSL_BUILDDIR:?run through make check, or set PSL_BUILDDIR}
dir=$(mktemp -d "${TMPDIR:-/tmp}/pslite-frozen.XXXXXX")
log=$dir/log
ulimit -c 0 2>/dev/null
fail=0
bad() { echo "frozen.sh $van: $*" >&2; fail=1; }
crash='terminated with signal|Segmentation|Caught signal|AddressSanitizer|LeakSanitizer|runtime error:|Aborted|core dumped'
spid=
cleanup() {
	[ -n "$spid" ] && kill -9 "$spid" 2>/dev/null
	rm -rf "$dir"
}
trap cleanup EXIT

FROZEN_NODE=${FROZEN_NODE:-server}
export FROZEN_NODE
if [ "$FROZEN_NODE" = scheduler ]; then
	others='server 0,worker 0' lost='lost the scheduler'
else
	others='scheduler,worker 0' lost='lost server 0'
fi
if [ "${FROZEN_HB:-}" = default ]; then
	unset PS_HEARTBEAT_INTERVAL PS_HEARTBEAT_TIMEOUT
	limit=$((20 + ${FROZEN_SLACK:-12})) # the default PS_HEARTBEAT_TIMEOUT, README
else
	PS_HEARTBEAT_INTERVAL=1 PS_HEARTBEAT_TIMEOUT=6
	export PS_HEARTBEAT_INTERVAL PS_HEARTBEAT_TIMEOUT
	# ~8 s measured on every van; a van that holds a lost node's sends
	# holds the requests too (they complete only when it lets go)
	limit=40
fi
FROZEN_DIR=$dir \
timeout -k 10 150 "$b/tools/pslite-run" -s 1 -w 1 --van "$van" --timeout 140 --keep-going -- \
	sh -c 'if [ "$DMLC_ROLE" = "$FROZEN_NODE" ]; then echo $$ >"$FROZEN_DIR/frozen.pid"; exec "$@"; fi
		"$@"; rc=$?; echo "EXIT $rc"; exit $rc' \
	sh "$b/tools/pslite-bench" "${FROZEN_BYTES:-4096}" 1 1 --seconds 60 >"$log" 2>&1 &
run=$!
i=0
while [ ! -s "$dir/frozen.pid" ] && [ $i -lt 300 ]; do sleep 0.1; i=$((i + 1)); done
spid=$(cat "$dir/frozen.pid" 2>/dev/null)
[ -n "$spid" ] || bad "the $FROZEN_NODE did not start"
# frozen 2 s after the worker started its loop (every node is up then)
i=0
until grep -q "^\[worker 0\] pslite-bench: push_pull" "$log" || [ $i -ge 900 ]; do
	sleep 0.1
	i=$((i + 1))
done
sleep 2
[ -n "$spid" ] && kill -STOP "$spid"
start=$(date +%s)
# the scheduler and the worker must end while the server stays frozen
i=0
while [ $i -lt 900 ]; do
	grep -q "^\[${others%,*}\] EXIT" "$log" && grep -q "^\[worker 0\] EXIT" "$log" && break
	sleep 0.1
	i=$((i + 1))
done
took=$(($(date +%s) - start))
IFS=,
for who in $others; do
	unset IFS
	code=$(sed -n "s/^\[$who\] EXIT \([0-9]*\)$/\1/p" "$log")
	if [ -z "$code" ]; then
		bad "$who did not end within $took s of the $FROZEN_NODE's freeze"
	elif [ "$code" -eq 0 ]; then
		bad "$who exited 0"
	elif [ "$code" -gt 128 ]; then
		bad "$who died of signal $((code - 128))"
	fi
	grep "^\[$who\]" "$log" | grep -qE "$crash" &&
		bad "$who crashed: $(grep "^\[$who\]" "$log" | grep -E "$crash" | head -n 1)"
	echo "frozen.sh $van: $who exited ${code:-?} $took s after the freeze"
done
[ "$took" -le "$limit" ] || bad "the job took $took s to end after the freeze, expected at most $limit"
grep "^\[worker 0\]" "$log" | grep -q "$lost" || bad "the worker did not say '$lost'"
grep "^\[worker 0\]" "$log" | grep "$lost" | grep -q "PS_HEARTBEAT_TIMEOUT" ||
	bad "the worker's line '$lost' does not name PS_HEARTBEAT_TIMEOUT"
grep "^\[worker 0\]" "$log" | grep -m 1 "$lost" | sed "s/^/frozen.sh $van: /"
[ "$FROZEN_NODE" = scheduler ] || grep "^\[scheduler\]" "$log" | grep -q "lost server 0" ||
	bad "the scheduler did not report server 0 lost"
kill -9 "$spid" 2>/dev/null
spid=
wait $run
if [ $fail -ne 0 ]; then
	echo "----- output of the job -----" >&2
	grep -v "Application goodput" "$log" | tail -n 60 >&2
fi
exit $fail
