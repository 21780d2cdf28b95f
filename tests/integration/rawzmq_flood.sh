#!/bin/sh
# Bounded resources over zmq: an evil worker 1 (rawzmq, RAWZMQ_MODE=flood)
# floods server 0 and the scheduler with well-formed control messages they
# must reject, for 5 s, then sends a frame over PS_ZMQ_MAX_MSG_MB (set to 1
# here), beside a real worker 0. The job must end well, the log stay small
# (warnings are rate-limited), server 0's memory (VmRSS, sampled during the
# flood) stay bounded, and the big frame never be answered.
[ -n "${PSL_BUILDDIR:-}" ] || { [ -f tests/testenv.sh ] && . ./tests/testenv.sh; } || { echo "$0: run it from the build directory (where tests/testenv.sh is) or by make check TESTS=$0" >&2; exit 99; }
set -u
b=${PSL_BUILDDIR:?run through make check, or set PSL_BUILDDIR}
dir=$(mktemp -d "${TMPDIR:-/tmp}/pslite-flood.XXXXXX")
log=$dir/log
trap 'rm -rf "$dir"' EXIT
ulimit -c 0 2>/dev/null
fail=0
bad() { echo "rawzmq_flood.sh: $*" >&2; fail=1; }

(
	# samples server 0's VmRSS (kB) while the job runs
	i=0
	while [ $i -lt 1200 ]; do
		if [ -f "$dir/server.pid" ]; then
			awk '/^VmRSS:/ {print $2}' "/proc/$(cat "$dir/server.pid")/status" 2>/dev/null >>"$dir/rss"
		fi
		[ -f "$dir/done" ] && break
		sleep 0.1
		i=$((i + 1))
	done
) &
sampler=$!

# (under AddressSanitizer, freed memory is kept in a quarantine of 256 MB by
# default: a small one keeps RSS about the program's own memory)
ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}quarantine_size_mb=8"; export ASAN_OPTIONS
KVTEST_SCENARIO=soak KVTEST_ROUNDS=150 RAWZMQ_MODE=flood PS_ZMQ_MAX_MSG_MB=1 FLOOD_DIR=$dir \
timeout -k 10 200 "$b/tools/pslite-run" -s 1 -w 2 --van zmq --timeout 180 -- \
	sh -c 'if [ "$DMLC_ROLE" = server ]; then echo $$ >"$FLOOD_DIR/server.pid"; fi
		if [ "$DMLC_ROLE" = worker ] && [ "$DMLC_RANK" = 1 ]; then exec "$1"; else exec "$2"; fi' \
	sh "$b/tests/integration/rawzmq" "$b/tests/integration/kvtest" >"$log" 2>&1
rc=$?
touch "$dir/done"
wait $sampler

[ $rc -eq 0 ] || bad "pslite-run exited $rc, expected 0"
for who in "kvtest scheduler 0: OK" "kvtest server 0: OK" "kvtest worker 0: OK" "rawzmq worker 1: OK"; do
	grep -q "$who" "$log" || bad "no '$who'"
done
sent=$(sed -n 's/.*rawzmq flood: sent \([0-9]*\) .*/\1/p' "$log")
[ -n "$sent" ] && [ "$sent" -ge 2000 ] || bad "the flood sent only '${sent:-0}' messages"
bytes=$(wc -c <"$log")
lines=$(grep -c "ignored TERMINATE" "$log")
# 5 s of flood at most 10 lines a second per site (plus the seconds around)
[ "$lines" -le 200 ] || bad "$lines lines 'ignored TERMINATE': not rate-limited"
[ "$bytes" -le 1000000 ] || bad "the job's log is $bytes bytes after a flood of $sent messages"
grep -q "more like the next line suppressed" "$log" || bad "no count of suppressed warnings"
max=$(sort -n "$dir/rss" 2>/dev/null | tail -n 1)
[ -n "$max" ] || bad "no VmRSS sample of server 0"
# (an unbounded queue or log buffer grew to over 1 GB here)
[ -z "$max" ] || [ "$max" -le 200000 ] || bad "server 0's VmRSS reached $max kB during the flood"
grep -q "rawzmq flood: a frame of 2097152 bytes was not answered" "$log" ||
	bad "the frame over PS_ZMQ_MAX_MSG_MB was not checked"
echo "rawzmq_flood.sh: $sent messages in the flood, log $bytes bytes ($lines 'ignored TERMINATE' lines), server 0 VmRSS at most ${max:-?} kB"
if [ $fail -ne 0 ]; then
	echo "----- output of the job -----" >&2
	tail -n 100 "$log" >&2
fi
exit $fail
