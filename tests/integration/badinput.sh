#!/bin/bash
# Bad input: every mistake a user can make at start-up gets one clear ERROR
# line naming the variable or file and what was expected, a non-zero exit, and
# no hang, abort, crash or sanitizer report. Runs pslite-bench and startnode
# (a tiny psl_start program) under a bound; also bad tool arguments.
[ -n "${PSL_BUILDDIR:-}" ] || { [ -f tests/testenv.sh ] && . ./tests/testenv.sh; } || { echo "$0: run it from the build directory (where tests/testenv.sh is) or by make check TESTS=$0" >&2; exit 99; }
set -u
b=${PSL_BUILDDIR:?run through make check, or set PSL_BUILDDIR}
bench=$b/tools/pslite-bench
run=$b/tools/pslite-run
node=$b/tests/integration/startnode
testvans=$b/tests/unit/vans/.libs
tmp=$(mktemp -d "${TMPDIR:-/tmp}/pslite-badinput.XXXXXX")
pids=
cleanup() {
	for p in $pids; do kill "$p" 2>/dev/null; done
	rm -rf "$tmp"
}
trap cleanup EXIT
ulimit -c 0 2>/dev/null

fails=0 passes=0
fail() { echo "FAIL: $*" >&2; fails=$((fails + 1)); }

# A clean environment: only what each case sets.
for v in $(env | sed -n 's/^\(DMLC_[A-Z_]*\|PS_[A-Z_]*\|BYTEPS_[A-Z_]*\)=.*/\1/p'); do
	[ "$v" = PS_VAN_PATH ] || unset "$v"
done
base() { # the environment of a valid job, on a port nobody listens on
	export DMLC_ROLE=${1:-worker} DMLC_PS_ROOT_URI=127.0.0.1 DMLC_PS_ROOT_PORT=$dead_port \
		DMLC_NUM_WORKER=1 DMLC_NUM_SERVER=1 DMLC_NODE_HOST=127.0.0.1 \
		PS_CONNECT_TIMEOUT=2 PS_START_TIMEOUT=5
	unset DMLC_ENABLE_RDMA DMLC_PS_VAN_TYPE DMLC_PORT DMLC_GROUP_SIZE DMLC_INTERFACE DMLC_RANK DMLC_NODE_RANK STEPMESH_GPU DMLC_RANK_OFFSET
}
dead_port=$("$node" --free-port) || { echo "cannot find a free port" >&2; exit 1; }

# expect NAME MAX_SECONDS 'ERROR-LINE-TEXT'... -- COMMAND...
# The command must exit non-zero within MAX_SECONDS with exactly one ERROR
# line, holding every text, and nothing that looks like a crash.
expect() {
	local name=$1 max=$2 out=$tmp/out t0 t1 rc line
	shift 2
	local want=()
	while [ "$1" != -- ]; do want+=("$1"); shift; done
	shift
	t0=$(date +%s)
	timeout -k 5 $((max + 20)) "$@" >"$out" 2>&1 </dev/null
	rc=$?
	t1=$(date +%s)
	if [ $rc -eq 0 ]; then fail "$name: exited 0"; sed 's/^/    /' "$out" >&2; return; fi
	if [ $rc -eq 124 ] || [ $rc -eq 137 ]; then fail "$name: hung (killed after $((max + 20)) s)"; return; fi
	if [ $rc -gt 128 ]; then fail "$name: died of signal $((rc - 128))"; fi
	if [ $((t1 - t0)) -gt "$max" ]; then fail "$name: took $((t1 - t0)) s, expected at most $max"; fi
	if grep -qE 'Aborted|AddressSanitizer|LeakSanitizer|runtime error:|Segmentation|core dumped' "$out"; then
		fail "$name: crash or sanitizer report"
		sed 's/^/    /' "$out" >&2
		return
	fi
	if [ "$(grep -c 'ERROR' "$out")" -ne 1 ]; then
		fail "$name: $(grep -c 'ERROR' "$out") ERROR lines, expected exactly 1"
		sed 's/^/    /' "$out" >&2
		return
	fi
	line=$(grep 'ERROR' "$out")
	for w in "${want[@]}"; do
		case $line in
		*"$w"*) ;;
		*) fail "$name: the ERROR line lacks '$w': $line"; return ;;
		esac
	done
	passes=$((passes + 1))
	echo "ok: $name ($((t1 - t0)) s, exit $rc): $line"
}

# expect_usage NAME 'TEXT'... -- COMMAND...: a tool's own argument check:
# exit 2 at once, the text on stderr, and no job started.
expect_usage() {
	local name=$1 out=$tmp/out rc
	shift
	local want=()
	while [ "$1" != -- ]; do want+=("$1"); shift; done
	shift
	timeout -k 5 20 "$@" >"$out" 2>&1 </dev/null
	rc=$?
	if [ $rc -ne 2 ]; then fail "$name: exit $rc, expected 2"; sed 's/^/    /' "$out" >&2; return; fi
	for w in "${want[@]}"; do
		grep -qF -- "$w" "$out" || { fail "$name: no '$w' in: $(cat "$out")"; return; }
	done
	if grep -qE 'AddressSanitizer|runtime error:|\[pslite ' "$out"; then
		fail "$name: $(cat "$out")"; return
	fi
	passes=$((passes + 1))
	echo "ok: $name"
}

# a port that something holds: it listens, accepts and never answers
"$node" --listen >"$tmp/held" 2>&1 &
pids="$pids $!"
i=0
while [ ! -s "$tmp/held" ] && [ $i -lt 50 ]; do sleep 0.1; i=$((i + 1)); done
held=$(head -n1 "$tmp/held")
[ -n "$held" ] || { echo "startnode --listen failed: $(cat "$tmp/held")" >&2; exit 1; }

vanpath=${PS_VAN_PATH:-}
for prog in "$bench" "$node"; do
	p=$(basename "$prog")
	base; unset DMLC_ROLE
	expect "$p: DMLC_ROLE missing" 10 "DMLC_ROLE is not set" "expected scheduler, server, worker or joint" -- "$prog"
	base; export DMLC_ROLE=foo
	expect "$p: DMLC_ROLE=foo" 10 "DMLC_ROLE=foo" "expected scheduler, server, worker or joint" -- "$prog"
	for n in abc 0 -1; do
		base; export DMLC_NUM_SERVER=$n
		expect "$p: DMLC_NUM_SERVER=$n" 10 "DMLC_NUM_SERVER=$n" "expected a positive integer" -- "$prog"
	done
	base; export DMLC_NUM_WORKER=2.5
	expect "$p: DMLC_NUM_WORKER=2.5" 10 "DMLC_NUM_WORKER=2.5" "expected a positive integer" -- "$prog"
	base; unset DMLC_PS_ROOT_URI
	expect "$p: DMLC_PS_ROOT_URI missing" 10 "DMLC_PS_ROOT_URI is not set" -- "$prog"
	base; export DMLC_PS_ROOT_PORT=70000
	expect "$p: DMLC_PS_ROOT_PORT=70000" 10 "DMLC_PS_ROOT_PORT=70000" "expected an integer from 1 to 65535" -- "$prog"
	base; export DMLC_GROUP_SIZE=2
	expect "$p: DMLC_GROUP_SIZE=2" 10 "DMLC_GROUP_SIZE=2" "set DMLC_NODE_RANK" -- "$prog"
	base; unset DMLC_NODE_HOST; export DMLC_INTERFACE=nosuchif0
	expect "$p: DMLC_INTERFACE=nosuchif0" 10 "DMLC_INTERFACE=nosuchif0" "DMLC_NODE_HOST" -- "$prog"

	base; export DMLC_PS_ROOT_URI='bad host'
	expect "$p: DMLC_PS_ROOT_URI='bad host'" 10 "DMLC_PS_ROOT_URI=bad host" "expected a host name or address" -- "$prog"
	base; export DMLC_PS_ROOT_URI='%'
	expect "$p: DMLC_PS_ROOT_URI=% (no endpoint)" 10 "%:$dead_port" "DMLC_PS_ROOT_URI" -- "$prog"
	base scheduler; export DMLC_PS_ROOT_URI=192.0.2.1
	expect "$p: scheduler on an address not here" 10 "192.0.2.1:$dead_port" "DMLC_PS_ROOT_URI" -- "$prog"
	base; export DMLC_NODE_HOST=192.0.2.1
	expect "$p: DMLC_NODE_HOST not here" 10 "192.0.2.1" "DMLC_NODE_HOST" -- "$prog"
	base; export DMLC_PORT=-3
	expect "$p: DMLC_PORT=-3" 10 "DMLC_PORT=-3" "expected an integer from 0 to 65535" -- "$prog"
	base; export DMLC_RANK=' '
	expect "$p: DMLC_RANK=' '" 10 "DMLC_RANK= " "expected an integer" -- "$prog"

	# an unreachable scheduler: nothing listens; gives up after PS_CONNECT_TIMEOUT
	base
	expect "$p: unreachable scheduler" 8 "cannot reach the scheduler at 127.0.0.1:$dead_port" \
		"within 2 s (PS_CONNECT_TIMEOUT)" -- "$prog"
	# something listens there but is no scheduler (never answers)
	base; export DMLC_PS_ROOT_PORT=$held
	expect "$p: silent scheduler port" 8 "127.0.0.1:$held" "PS_CONNECT_TIMEOUT" -- "$prog"

	# the port is taken
	base scheduler; export DMLC_PS_ROOT_PORT=$held
	expect "$p: scheduler port in use" 10 "DMLC_PS_ROOT_PORT=$held" "already in use" -- "$prog"
	base server; export DMLC_PORT=$held
	expect "$p: DMLC_PORT in use" 10 "DMLC_PORT=$held" "already in use" -- "$prog"

	# vans
	base; export DMLC_ENABLE_RDMA=nosuchvan
	expect "$p: DMLC_ENABLE_RDMA=nosuchvan" 10 "DMLC_ENABLE_RDMA=nosuchvan" "van 'nosuchvan' not found" \
		"van_nosuchvan.so" -- "$prog"
	base; export DMLC_ENABLE_RDMA='../x'
	expect "$p: DMLC_ENABLE_RDMA=../x" 10 "DMLC_ENABLE_RDMA=../x" "expected 0 (zmq), 1 (ibverbs) or a van name" -- "$prog"
	# a van's own settings: the van names the variable, in the one ERROR line
	base; export PS_BUSY_POLL_US=abc
	expect "$p: PS_BUSY_POLL_US=abc" 10 "PS_BUSY_POLL_US=abc" "expected microseconds" -- "$prog"
	base; export PS_BUSY_POLL=2
	expect "$p: PS_BUSY_POLL=2" 10 "PS_BUSY_POLL=2" "expected 0, 1 or auto" -- "$prog"
	unset PS_BUSY_POLL_US PS_BUSY_POLL
	base; export PS_MALLOC_TUNE=yes
	expect "$p: PS_MALLOC_TUNE=yes" 10 "PS_MALLOC_TUNE=yes" "expected an integer from 0 to 1" -- "$prog"
	unset PS_MALLOC_TUNE
	base; export DMLC_ENABLE_RDMA=zmq PS_ZMQ_LINGER_MS=soon
	expect "$p: PS_ZMQ_LINGER_MS=soon" 10 "PS_ZMQ_LINGER_MS=soon" \
		"expected milliseconds (-1: for ever) from -1 to 3600000" -- "$prog"
	unset PS_ZMQ_LINGER_MS
	if [ -e "$b/plugins/van_fabric/.libs/van_fabric.so" ]; then
		base; export DMLC_ENABLE_RDMA=fabric FI_PROVIDER=tcp PS_FABRIC_RX_DEPTH=x
		expect "$p: PS_FABRIC_RX_DEPTH=x" 10 "PS_FABRIC_RX_DEPTH=x" \
			"expected a number of receive buffers from 4 to 65536" -- "$prog"
		unset PS_FABRIC_RX_DEPTH
		base; export DMLC_ENABLE_RDMA=fabric FI_PROVIDER=tcp PS_FABRIC_MR=2
		expect "$p: PS_FABRIC_MR=2" 10 "PS_FABRIC_MR=2" "expected 0 or 1" -- "$prog"
		unset PS_FABRIC_MR FI_PROVIDER
	fi
	if [ -e "$b/plugins/van_ucx/.libs/van_ucx.so" ]; then
		base; export DMLC_ENABLE_RDMA=ucx PS_UCX_INLINE=x
		expect "$p: PS_UCX_INLINE=x" 10 "PS_UCX_INLINE=x" "expected a number of bytes" -- "$prog"
		unset PS_UCX_INLINE
		base; export DMLC_ENABLE_RDMA=ucx PS_BUSY_POLL_US=-5
		expect "$p: ucx PS_BUSY_POLL_US=-5" 10 "PS_BUSY_POLL_US=-5" "expected microseconds" -- "$prog"
		unset PS_BUSY_POLL_US
		base; export DMLC_ENABLE_RDMA=ucx PS_UCX_PULL_IN_PLACE=yes
		expect "$p: PS_UCX_PULL_IN_PLACE=yes" 10 "PS_UCX_PULL_IN_PLACE=yes" "expected 0 or 1" -- "$prog"
		unset PS_UCX_PULL_IN_PLACE
		base; export DMLC_ENABLE_RDMA=ucx PS_UCX_BATCH_KB=4096
		expect "$p: PS_UCX_BATCH_KB=4096" 10 "PS_UCX_BATCH_KB=4096" "expected KiB from 0 to 1024" -- "$prog"
		unset PS_UCX_BATCH_KB
	fi
	if [ -f "$testvans/van_abi2.so" ]; then
		base; export DMLC_ENABLE_RDMA=abi2 PS_VAN_PATH=$testvans:$vanpath
		expect "$p: van for another ABI" 10 "DMLC_ENABLE_RDMA=abi2" \
			"$testvans/van_abi2.so" "built for van ABI 2.0" "expected ABI 1.x" -- "$prog"
		base; export DMLC_ENABLE_RDMA=v2only
		expect "$p: van with another ABI's entry" 10 "DMLC_ENABLE_RDMA=v2only" \
			"$testvans/van_v2only.so" "psl_van_entry_v2" -- "$prog"
		base; export DMLC_ENABLE_RDMA=nodev
		expect "$p: van without a device" 10 "DMLC_ENABLE_RDMA=nodev" \
			"no device" -- "$prog"
		export PS_VAN_PATH=$vanpath
	else
		echo "note: test vans not built (no cmocka?): ABI cases skipped"
	fi
done

# a real scheduler holds the port; a second one must say so and go
base scheduler
port2=$("$node" --free-port)
export DMLC_PS_ROOT_PORT=$port2 PS_START_TIMEOUT=30
"$node" >"$tmp/first" 2>&1 &
first=$!
pids="$pids $first"
i=0
while ! grep -q "listening on" "$tmp/first" && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
grep -q "listening on" "$tmp/first" || fail "the first scheduler did not start: $(cat "$tmp/first")"
expect "second scheduler on a taken port" 10 "DMLC_PS_ROOT_PORT=$port2" "already in use" -- "$bench"
kill "$first" 2>/dev/null
wait "$first" 2>/dev/null

# two workers asking for the same DMLC_RANK: the scheduler refuses the
# second (one registration must not end the job: it may be a stranger's),
# which fails at once naming DMLC_RANK; the scheduler gives up at its
# PS_START_TIMEOUT naming the refusal, the others give up too; nobody hangs
port3=$("$node" --free-port)
t0=$(date +%s)
(base scheduler; export DMLC_PS_ROOT_PORT=$port3 DMLC_NUM_WORKER=2 PS_START_TIMEOUT=8
	exec timeout -k 5 40 "$node" >"$tmp/rank-sched" 2>&1) &
rs=$!
sleep 0.3
(base server; export DMLC_PS_ROOT_PORT=$port3 DMLC_NUM_WORKER=2 DMLC_RANK=0 PS_START_TIMEOUT=15
	exec timeout -k 5 40 "$node" >"$tmp/rank-server" 2>&1) &
r0=$!
(base worker; export DMLC_PS_ROOT_PORT=$port3 DMLC_NUM_WORKER=2 DMLC_RANK=0 PS_START_TIMEOUT=15
	exec timeout -k 5 40 "$node" >"$tmp/rank-w1" 2>&1) &
r1=$!
(base worker; export DMLC_PS_ROOT_PORT=$port3 DMLC_NUM_WORKER=2 DMLC_RANK=0 PS_START_TIMEOUT=15
	exec timeout -k 5 40 "$node" >"$tmp/rank-w2" 2>&1) &
r2=$!
pids="$pids $rs $r0 $r1 $r2"
wait $rs; rc_s=$?
t1=$(date +%s)
wait $r0; rc_0=$?
wait $r1; rc_1=$?
wait $r2; rc_2=$?
t2=$(date +%s)
nref=$(cat "$tmp/rank-w1" "$tmp/rank-w2" | grep ERROR | grep -c "refused this node's registration: DMLC_RANK=0")
if [ $rc_s -eq 124 ] || [ $rc_s -eq 137 ]; then
	fail "same DMLC_RANK twice: the scheduler hung"
elif [ $rc_s -eq 0 ] || [ "$(grep -c ERROR "$tmp/rank-sched")" -ne 1 ] ||
	! grep ERROR "$tmp/rank-sched" | grep -q "refused: the worker at .*DMLC_RANK=0"; then
	fail "same DMLC_RANK twice: scheduler exit $rc_s: $(cat "$tmp/rank-sched")"
elif [ "$nref" -ne 1 ]; then
	fail "same DMLC_RANK twice: $nref workers said they were refused for DMLC_RANK=0, expected 1"
elif [ $((t1 - t0)) -gt 25 ]; then
	fail "same DMLC_RANK twice: the scheduler took $((t1 - t0)) s"
elif [ $rc_0 -eq 0 ] || [ $rc_1 -eq 0 ] || [ $rc_2 -eq 0 ] || [ $((t2 - t0)) -gt 35 ]; then
	fail "same DMLC_RANK twice: the other nodes exited $rc_0 $rc_1 $rc_2 after $((t2 - t0)) s"
else
	passes=$((passes + 1))
	echo "ok: same DMLC_RANK twice ($((t1 - t0)) s, all gone in $((t2 - t0)) s): $(grep ERROR "$tmp/rank-sched")"
fi

# the tools' own arguments
base
expect_usage "pslite-bench abc" "argument 'abc'" "expected bytes per key" -- "$bench" abc
expect_usage "pslite-bench bad mode" "argument '9'" "mode (0-4)" -- "$bench" 100 10 9
expect_usage "pslite-bench 0 bytes" "argument '0'" -- "$bench" 0
expect_usage "pslite-bench too many numbers" "argument '4'" -- "$bench" 1 2 3 4
expect_usage "pslite-bench --seconds -1" "--seconds -1: expected a positive number" -- "$bench" --seconds -1
expect_usage "pslite-bench --mem gpu" "--mem gpu: expected cpu2cpu, cpu2gpu, gpu2gpu or gpu2cpu" -- "$bench" --mem gpu
expect_usage "pslite-bench --bogus" "usage: pslite-bench" -- "$bench" --bogus
NUM_KEY_PER_SERVER=abc expect_usage "NUM_KEY_PER_SERVER=abc" "NUM_KEY_PER_SERVER=abc: expected a positive integer" -- "$bench"
expect_usage "pslite-run no arguments" "usage: pslite-run" -- "$run"
expect_usage "pslite-run -s abc" "-s abc: expected an integer from 1 to 16000" -- "$run" -s abc -w 1 -- true
expect_usage "pslite-run -s 0" "-s 0: expected an integer from 1 to 16000" -- "$run" -s 0 -w 1 -- true
expect_usage "pslite-run -w 16001" "-w 16001: expected an integer" -- "$run" -s 1 -w 16001 -- true
expect_usage "pslite-run --port 70000" "--port 70000: expected an integer from 1 to 65535" -- "$run" -s 1 -w 1 --port 70000 -- true
expect_usage "pslite-run --timeout 0" "--timeout 0" -- "$run" -s 1 -w 1 --timeout 0 -- true
expect_usage "pslite-run no command" "usage: pslite-run" -- "$run" -s 1 -w 1 --
expect_usage "pslite-run unknown option" "usage: pslite-run" -- "$run" -s 1 -w 1 --frobnicate -- true

# pslite-run: a command that is not there, a node that fails, a job that hangs
out=$tmp/run
timeout -k 5 30 "$run" -s 1 -w 1 -- "$tmp/no-such-program" >"$out" 2>&1
rc=$?
if [ $rc -eq 127 ] && grep -q "cannot run $tmp/no-such-program" "$out"; then
	passes=$((passes + 1)); echo "ok: pslite-run, missing command: exit 127"
else fail "pslite-run, missing command: exit $rc: $(cat "$out")"; fi
timeout -k 5 30 "$run" -s 1 -w 1 -- sh -c '[ "$DMLC_ROLE" = worker ] && exit 3; sleep 20' >"$out" 2>&1
rc=$?
if [ $rc -eq 3 ] && grep -q "worker 0 exited with code 3" "$out"; then
	passes=$((passes + 1)); echo "ok: pslite-run, a failing node ends the job: exit 3"
else fail "pslite-run, failing node: exit $rc: $(cat "$out")"; fi
t0=$(date +%s)
timeout -k 5 30 "$run" -s 1 -w 1 --timeout 2 -- sleep 20 >"$out" 2>&1
rc=$?
t1=$(date +%s)
if [ $rc -eq 124 ] && [ $((t1 - t0)) -le 10 ] && grep -q "ran past --timeout 2 s" "$out"; then
	passes=$((passes + 1)); echo "ok: pslite-run --timeout ends a hung job ($((t1 - t0)) s)"
else fail "pslite-run --timeout: exit $rc after $((t1 - t0)) s: $(cat "$out")"; fi

echo "$passes passed, $fails failed"
[ $fails -eq 0 ]
