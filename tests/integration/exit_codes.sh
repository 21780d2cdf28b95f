#!/bin/sh
# Exit codes when the job loses a node, over one van:
#   exit_codes.sh VAN
# pslite-bench on 1 scheduler, 1 server, 1 worker; 2 s after the worker
# started its loop the victim is killed (SIGKILL): first the worker, then
# the scheduler. Every other node
# must exit non-zero (pslite-bench: 3 when all else went well) with one line
# saying the job lost a node and which, and pslite-run non-zero; none may
# crash on its way out (die of a signal, or print a crash report: libfabric's
# psm provider catches SIGSEGV, prints "... terminated with signal 11 ...
# Backtrace:" and exits 1, so the exit status alone does not tell).
[ -n "${PSL_BUILDDIR:-}" ] || { [ -f tests/testenv.sh ] && . ./tests/testenv.sh; } || { echo "$0: run it from the build directory (where tests/testenv.sh is) or by make check TESTS=$0" >&2; exit 99; }
set -u
van=$1
b=${PSL_BUILDDIR:?run through make check, or set PSL_BUILDDIR}
dir=$(mktemp -d "${TMPDIR:-/tmp}/pslite-exit.XXXXXX")
trap 'rm -rf "$dir"' EXIT
ulimit -c 0 2>/dev/null
fail=0
bad() { echo "exit_codes.sh $van: $*" >&2; fail=1; }
crash='terminated with signal|Segmentation|Caught signal|AddressSanitizer|LeakSanitizer|runtime error:|Aborted|core dumped'

for victim in worker scheduler; do
	log=$dir/$victim
	# the victim is killed 2 s after the worker started its loop (every
	# node is up then), however long the start takes on a loaded machine
	VICTIM=$victim EXIT_DIR=$dir timeout -k 10 120 "$b/tools/pslite-run" -s 1 -w 1 --van "$van" \
		--timeout 100 --keep-going -- sh -c '
		d=$EXIT_DIR; r=$DMLC_ROLE
		if [ "$r" = "$VICTIM" ]; then
			"$@" >"$d/$r.out" 2>&1 & p=$!
			i=0
			until cat "$d"/*.out 2>/dev/null | grep -q "pslite-bench: push_pull" || [ $i -ge 600 ]; do
				sleep 0.1; i=$((i + 1))
			done
			sleep 2; kill -9 $p; wait $p; cat "$d/$r.out"; echo "EXIT killed"; exit 137
		fi
		( "$@"; echo $? >"$d/$r.rc" ) 2>&1 | tee "$d/$r.out"
		rc=$(cat "$d/$r.rc"); echo "EXIT $rc"; exit $rc' \
		sh "$b/tools/pslite-bench" 4096 1 1 --seconds 30 >"$log" 2>&1
	rc=$?
	[ $rc -ne 0 ] || bad "$victim killed: pslite-run exited 0"
	[ $rc -ne 124 ] || bad "$victim killed: the job hung"
	grep -q "\[$victim[ 0]*\] EXIT killed" "$log" || bad "$victim killed: the $victim was not killed"
	for who in scheduler "server 0" "worker 0"; do
		[ "${who%% *}" = "$victim" ] && continue
		code=$(sed -n "s/^\[$who\] EXIT \([0-9]*\)$/\1/p" "$log")
		if [ -z "$code" ]; then
			bad "$victim killed: $who did not end"
		elif [ "$code" -eq 0 ]; then
			bad "$victim killed: $who exited 0"
		elif [ "$code" -gt 128 ]; then
			bad "$victim killed: $who died of signal $((code - 128))"
		fi
		grep "^\[$who\]" "$log" | grep -qE "$crash" &&
			bad "$victim killed: $who crashed: $(grep "^\[$who\]" "$log" | grep -E "$crash" | head -n 1)"
		grep "^\[$who\]" "$log" | grep -q "pslite-bench (.*): exits with [0-9]*: the job lost a node (.*): lost " ||
			bad "$victim killed: $who did not say that the job lost a node"
		echo "exit_codes.sh $van: $victim killed: $who exited ${code:-?}"
	done
	[ $fail -eq 0 ] || { echo "----- $victim killed -----" >&2; tail -n 40 "$log" >&2; }
	rm -f "$dir"/*.out "$dir"/*.rc
done
exit $fail
