#!/bin/sh
# Runs one BytePS job on loopback: a scheduler and 2 servers running
# pslite-server, 3 workers running pslite-check, over van VAN, and checks
# that every worker verified its sums (PASS) and the servers said what they
# should.
#   server_job.sh VAN MODE [TIMEOUT]
# MODE:
#   sync       every data type, tensors split into partitions
#   async      the same with BYTEPS_ENABLE_ASYNC=1
#   blocking   sync, summing on the receive path (BYTEPS_SERVER_ENGINE_BLOCKING=1)
#   schedule   sync, 2 engine threads with BytePS's scheduling
#   bad        sync; worker 0 also sends requests the server must refuse
#              (length, type, unknown type, request type, unknown key): it
#              gets errors, the server warns naming key and sender, and
#              every worker still passes
#   async-bad  the same in async mode
#   leftover   sync; worker 0 leaves with a pull that no round answers: the
#              server answers it at shutdown, before its van goes
#   timed      sync for 3 seconds (--seconds): every worker must stop after
#              the same round
# VAN is what DMLC_ENABLE_RDMA gets (zmq, ucx, fabric, ...): a van gets these
# tests with a wrapper VAN_server_MODE.sh that calls this. Needs PSL_BUILDDIR
# and PSL_SRCDIR (set by make check).
[ -n "${PSL_BUILDDIR:-}" ] || { [ -f tests/testenv.sh ] && . ./tests/testenv.sh; } || { echo "$0: run it from the build directory (where tests/testenv.sh is) or by make check TESTS=$0" >&2; exit 99; }
set -u
van=$1 mode=$2 limit=${3:-180}
b=${PSL_BUILDDIR:?run through make check, or set PSL_BUILDDIR}
log=$(mktemp "${TMPDIR:-/tmp}/pslite-server-job.XXXXXX")
trap 'rm -f "$log"' EXIT
S=2 W=3

dtypes=float32,float64,float16,bfloat16,int32,int64,int8,uint8
args="--dtypes $dtypes --tensors 2 --size 60000 --rounds 9"
# rounded up by the workers to 13 pages: several partitions per tensor, and a
# short last one
export BYTEPS_PARTITION_BYTES=50000
unset BYTEPS_ENABLE_ASYNC BYTEPS_SERVER_ENGINE_BLOCKING BYTEPS_SERVER_ENABLE_SCHEDULE \
	BYTEPS_SERVER_ENGINE_THREAD
expect_mode="sync mode"
case $mode in
sync) ;;
async) export BYTEPS_ENABLE_ASYNC=1; expect_mode="async mode" ;;
blocking) export BYTEPS_SERVER_ENGINE_BLOCKING=1 ;;
schedule) export BYTEPS_SERVER_ENABLE_SCHEDULE=1 BYTEPS_SERVER_ENGINE_THREAD=2 ;;
bad) args="$args --bad" ;;
async-bad) export BYTEPS_ENABLE_ASYNC=1; expect_mode="async mode"; args="$args --bad" ;;
leftover) args="$args --leave-pull" ;;
timed) args="--dtypes float32,bfloat16,int64 --tensors 2 --size 60000 --seconds 3" ;;
*) echo "server_job.sh: unknown mode '$mode'" >&2; exit 2 ;;
esac

# the scheduler and the servers run pslite-server, the workers pslite-check
export PSL_SERVER_BIN="$b/tools/pslite-server"
# shellcheck disable=SC2086,SC2016
"$b/tools/pslite-run" -s $S -w $W --van "$van" --timeout "$limit" -- \
	/bin/sh -c 'if [ "$DMLC_ROLE" = worker ]; then exec "$0" "$@"; else exec "$PSL_SERVER_BIN"; fi' \
	"$b/tools/pslite-check" $args >"$log" 2>&1
rc=$?

fail=0
need() { # need WHAT PATTERN: the log has a line matching PATTERN
	if ! grep -q -- "$2" "$log"; then
		echo "server_job.sh: $van/$mode: $1 (no line matching '$2')" >&2
		fail=1
	fi
}
[ $rc -eq 0 ] || { echo "server_job.sh: $van/$mode: pslite-run exited $rc" >&2; fail=1; }
i=0; while [ $i -lt $W ]; do
	if [ "$mode" = timed ]; then
		need "worker $i did not pass" "pslite-check worker $i: PASS: sync, [1-9][0-9]* rounds"
	else
		need "worker $i did not pass" "pslite-check worker $i: PASS: ${expect_mode% mode}, 9 rounds"
	fi
	i=$((i + 1))
done
i=0; while [ $i -lt $S ]; do
	need "server $i did not start in $expect_mode" "\[server $i\].*pslite-server: $expect_mode, $W worker(s)"
	case $mode in
	sync|schedule|blocking|timed) # every key's rounds: no error, some rounds
		need "server $i did not finish cleanly" "\[server $i\].*pslite-server: [1-9][0-9]* keys, .* [1-9][0-9]* rounds, 0 errors" ;;
	async) need "server $i did not finish cleanly" "\[server $i\].*pslite-server: [1-9][0-9]* keys, .* 0 rounds, 0 errors" ;;
	esac
	i=$((i + 1))
done
case $mode in
leftover)
	need "the pull left waiting was not answered at shutdown" "WARN: pslite-server: 1 request(s) still waited for other workers' pushes at shutdown" ;;
timed)
	n=$(grep -o "PASS: sync, [0-9]* rounds" "$log" | sort -u | wc -l)
	[ "$n" -eq 1 ] || { echo "server_job.sh: $van/$mode: the workers ran different numbers of rounds" >&2; fail=1; } ;;
blocking) need "the servers did not sum on the receive path" "summing on the receive path (blocking)" ;;
schedule) need "the servers did not schedule" "kernels .*, scheduling"
	need "the servers did not use 2 engine threads" "pslite-server: 2 engine thread(s)" ;;
*bad)
	need "no warning for the wrong length" "WARN: pslite-server: push from worker 0 (id 9,.*): key [0-9]* (tensor 0, partition 0): [0-9]* bytes of float32, but the key was initialised with [0-9]* bytes of float32"
	need "no warning for the wrong type" "WARN: pslite-server: push from worker 0 (id 9,.*): key [0-9]* (tensor 0, partition 0): [0-9]* bytes of int32, but the key was initialised with [0-9]* bytes of float32"
	need "no warning for the unknown type" "WARN: pslite-server: push from worker 0 (id 9,.*): key [0-9]* (tensor 0, partition 0): unknown data type 7"
	need "no warning for the request type" "WARN: pslite-server: push from worker 0 (id 9,.*): request type 2 (kCompressedPushPull"
	need "no warning for the unknown key" "WARN: pslite-server: pull from worker 0 (id 9,.*): key [0-9]* (tensor 65520, partition 0) was never pushed"
	for what in "the wrong length" "another data type of the same size" "an unknown data type" \
		"request type kCompressedPushPull"; do
		need "worker 0 got no error for $what" "pslite-check worker 0: a push of $what.*was refused"
	done
	need "worker 0 got no error for the unknown key" "pslite-check worker 0: a pull of a key never pushed.*was refused: No such file"
	need "worker 0 got no error for the unknown request type" "pslite-check worker 0: a push of an unknown request type (5).*was refused"
	need "no warning for the unknown request type" "WARN: pslite-server: push from worker 0 (id 9,.*): request type 5 (an unknown request type"
	# pulls with a bad cmd, each refused (a served one would take worker 0's
	# turn of the round: the job would hang, or its sums be wrong)
	for c in "0, data type 99 (cmd 5049)" "0, data type 11 (cmd 77)" "0, data type 9 (cmd 54)" \
		"2, data type [0-9]* (cmd" "1, data type [0-9]* (cmd" "5, data type [0-9]* (cmd"; do
		need "worker 0 got no error for a pull of request type $c" "pslite-check worker 0: a pull of request type $c.*was refused"
	done
	for c in "unknown data type 99 (cmd 5049)" "unknown data type 11 (cmd 77)" "unknown data type 9 (cmd 54)" \
		"a pull of int32, but the key holds float32" "request type 2 (kCompressedPushPull" \
		"request type 1 (kRowSparsePushPull" "request type 5 (an unknown request type"; do
		need "no warning for a pull: $c" "WARN: pslite-server: pull from worker 0 (id 9,.*): .*$c"
	done
	need "worker 0 got no error for a pull of another data type" "pslite-check worker 0: a pull of request type 0, data type 4 (cmd 14).*was refused"
	n=$(grep -c "WARN: pslite-server: p" "$log")
	[ "$n" -eq 13 ] || { echo "server_job.sh: $van/$mode: $n warnings from the servers, expected 13" >&2; fail=1; }
	;;
esac
if grep -q "FAIL\|AddressSanitizer\|runtime error:\|LeakSanitizer\|ERROR:" "$log"; then
	echo "server_job.sh: $van/$mode: a node reported a failure or a sanitizer error:" >&2
	# first, so that a report cut short still shows them
	grep -m 20 "FAIL\|AddressSanitizer\|runtime error:\|LeakSanitizer\|ERROR:\|SUMMARY:\|#[0-9]* 0x" "$log" >&2
	fail=1
fi
# PSL_JOB_LOG: where to keep the job's output (for callers' own checks)
[ -n "${PSL_JOB_LOG:-}" ] && cp "$log" "$PSL_JOB_LOG"
if [ $fail -ne 0 ]; then
	echo "----- output of the job ($van/$mode) -----" >&2
	tail -n 200 "$log" >&2
fi
exit $fail
