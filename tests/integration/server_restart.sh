#!/bin/sh
# pslite-server across a server's restart (docs/pslite-server.md, "A server
# started again"):  server_restart.sh VAN CASE
# A job of 2 pslite-server servers and 2 pslite-check --restart-ok workers
# (sync, every element checked) under pslite-run; server 1 is killed
# (SIGKILL) when worker 0 has done round 30.
#   restart  pslite-run --restart 1 starts it again: it takes its own place
#            with an empty store, the workers initialise its keys again,
#            agree on a round, and check exact sums of every later round;
#            every worker PASSes all its rounds and the job exits 0
#   resend   as restart, with PS_RESEND=1: the requests in flight to the lost
#            server are sent again to the new one (a push there is the
#            worker's first, a pull is refused): the same outcome
#   never    nobody starts it again (PS_RECOVERY=1, PS_RECOVERY_WAIT=3): the
#            workers FAIL, saying that server 1 did not come back
# VAN is what DMLC_ENABLE_RDMA gets (zmq, ucx, fabric, ...).
[ -n "${PSL_BUILDDIR:-}" ] || { [ -f tests/testenv.sh ] && . ./tests/testenv.sh; } || { echo "$0: run it from the build directory (where tests/testenv.sh is) or by make check TESTS=$0" >&2; exit 99; }
set -u
van=$1 case=$2
b=${PSL_BUILDDIR:?run through make check, or set PSL_BUILDDIR}
dir=$(mktemp -d "${TMPDIR:-/tmp}/pslite-srvrestart.XXXXXX")
trap 'rm -rf "$dir"' EXIT
fail=0
bad() { echo "server_restart.sh $van $case: $*" >&2; fail=1; }
rounds=150
unset DMLC_PORT DMLC_RANK BYTEPS_ENABLE_ASYNC BYTEPS_SERVER_ENGINE_BLOCKING \
	BYTEPS_SERVER_ENABLE_SCHEDULE PS_RESEND
export BYTEPS_PARTITION_BYTES=50000 UCX_TLS=tcp FI_PROVIDER=tcp PS_HEARTBEAT_INTERVAL=1 \
	PS_HEARTBEAT_TIMEOUT=4 PS_RECOVERY_WAIT=20 SR_DIR=$dir SR_LOG=$dir/log \
	SR_SERVER=$b/tools/pslite-server
case $case in
restart) opts="--restart 1" ;;
resend) opts="--restart 1"; export PS_RESEND=1 ;;
never) opts="--keep-going"; export PS_RECOVERY=1 PS_RECOVERY_WAIT=3 ;;
*) echo "server_restart.sh: unknown case '$case'" >&2; exit 2 ;;
esac
# the workers run pslite-check, the others pslite-server; server 1's first
# run is killed when worker 0 has done round 30 (or after 60 s)
node_cmd='[ "$DMLC_ROLE" = worker ] && exec "$@"
if [ "$DMLC_ROLE" = server ] && [ "$DMLC_RANK" = 1 ] && mkdir "$SR_DIR/killed" 2>/dev/null; then
	"$SR_SERVER" & p=$!
	i=0
	until grep -q "pslite-check worker 0: round 30 done" "$SR_LOG" || [ $i -ge 1200 ]; do
		sleep 0.05; i=$((i + 1))
	done
	date +%s%N >"$SR_DIR/kill_ns"
	kill -9 $p; wait $p; exit $?
fi
exec "$SR_SERVER"'
# shellcheck disable=SC2086
timeout -k 5 120 "$b/tools/pslite-run" -s 2 -w 2 --van "$van" --timeout 100 $opts -- \
	sh -c "$node_cmd" sh "$b/tools/pslite-check" --restart-ok --progress \
	--dtypes float32,float16,int64,uint8 --tensors 2 --size 60000 --rounds $rounds \
	>"$dir/log" 2>&1
code=$?
[ -d "$dir/killed" ] || bad "server 1 was never started"
grep -q "pslite-check worker 0: round 30 done" "$dir/log" || bad "worker 0 did not reach round 30"
case $case in
restart | resend)
	[ $code -eq 0 ] || bad "the job exited $code, expected 0"
	grep -q "^pslite-run: server 1 started again (1 of --restart 1)" "$dir/log" ||
		bad "pslite-run did not start server 1 again"
	grep -q "^\[server 1\].*pslite-server: this server took a lost one's place" "$dir/log" ||
		bad "the new server 1 did not say it took the lost one's place"
	for w in 0 1; do
		grep -q "^\[worker $w\] pslite-check worker $w: PASS: sync, $rounds rounds" "$dir/log" ||
			bad "worker $w did not pass all $rounds rounds"
		grep -q "^\[worker $w\] pslite-check worker $w: round [0-9]*: a request of server 1's keys failed" "$dir/log" ||
			bad "worker $w did not see server 1 lost"
		grep -q "^\[worker $w\] pslite-check worker $w: 1 server restart(s), [1-9][0-9]* round(s) of their keys lost" "$dir/log" ||
			bad "worker $w did not count 1 restart and its lost rounds"
	done
	# both workers use server 1's keys again from the same round, well
	# before the last
	n=$(sed -n "s/.*server 1 is back; its keys are used again from round \([0-9]*\):.*/\1/p" "$dir/log" | sort -u)
	[ "$(echo "$n" | wc -w)" -eq 1 ] || bad "the workers used server 1's keys again from different rounds: $n"
	[ -n "$n" ] && [ "$n" -lt $((rounds - 10)) ] || bad "server 1's keys were used again only from round '$n'"
	;;
never)
	[ $code -ne 0 ] || bad "the job exited 0 although server 1 never came back"
	for w in 0 1; do
		grep -q "^\[worker $w\] pslite-check worker $w: server 1 did not come back within 3 s" "$dir/log" ||
			bad "worker $w did not say that server 1 did not come back"
		grep -q "^\[worker $w\] pslite-check worker $w: FAIL" "$dir/log" || bad "worker $w did not FAIL"
	done
	;;
esac
if grep -q "AddressSanitizer\|runtime error:\|LeakSanitizer" "$dir/log"; then
	bad "a sanitizer error"
fi
if [ $fail -ne 0 ] || [ "$case" != never ] && grep -q "FAIL" "$dir/log"; then
	[ $fail -ne 0 ] || bad "a worker said FAIL"
	grep -v "round [0-9]* done$" "$dir/log" | tail -n 60 >&2
fi
grep -h "is back; its keys\|server restart(s)\|started again\|PASS\|FAIL" "$dir/log"
exit $fail
