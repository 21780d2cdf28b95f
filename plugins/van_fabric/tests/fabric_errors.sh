#!/bin/sh
# Van fabric meets a mistake: each case must end quickly, with a message
# that names what to change.
#   1. a fabric worker whose scheduler runs van zmq
#   2. a zmq worker whose scheduler runs van fabric
#   3. FI_PROVIDER naming a provider that is not there
#   4. FI_PROVIDER=efa where there is no EFA device
# Needs PSL_BUILDDIR (set by make check).
set -u
b=${PSL_BUILDDIR:?run through make check, or set PSL_BUILDDIR}
kv=$b/tests/integration/kvtest
dir=$(mktemp -d "${TMPDIR:-/tmp}/pslite-fabric-errors.XXXXXX")
trap 'rm -rf "$dir"' EXIT
fail=0
FI_PROVIDER=tcp DMLC_PS_ROOT_URI=127.0.0.1 DMLC_NUM_WORKER=1 DMLC_NUM_SERVER=1 \
	DMLC_NODE_HOST=127.0.0.1 PS_START_TIMEOUT=20 PS_CONNECT_TIMEOUT=20
export FI_PROVIDER DMLC_PS_ROOT_URI DMLC_NUM_WORKER DMLC_NUM_SERVER DMLC_NODE_HOST \
	PS_START_TIMEOUT PS_CONNECT_TIMEOUT
unset DMLC_PORT DMLC_RANK

bad() {
	echo "fabric_errors.sh: $*" >&2
	fail=1
}

# has FILE PATTERN...: every pattern is in FILE
has() {
	f=$1
	shift
	for p in "$@"; do
		grep -q -- "$p" "$f" || { bad "$f lacks '$p'"; return 1; }
	done
	return 0
}

# mixed NAME SCHED_VAN NODE_VAN: starts a scheduler and a worker with other
# vans; the worker must fail within 15 s
mixed() {
	name=$1 svan=$2 nvan=$3 try=0
	while :; do
		port=$((20000 + ($$ * 7 + try * 131) % 40000))
		DMLC_ROLE=scheduler DMLC_PS_ROOT_PORT=$port DMLC_ENABLE_RDMA=$svan \
			timeout 30 "$kv" >"$dir/$name.sched" 2>&1 &
		spid=$!
		sleep 0.5
		if grep -q "already in use" "$dir/$name.sched" && [ $try -lt 5 ]; then
			wait $spid
			try=$((try + 1))
			continue
		fi
		break
	done
	t0=$(date +%s)
	DMLC_ROLE=worker DMLC_PS_ROOT_PORT=$port DMLC_ENABLE_RDMA=$nvan \
		timeout 30 "$kv" >"$dir/$name.node" 2>&1
	rc=$?
	t1=$(date +%s)
	kill $spid 2>/dev/null
	wait $spid 2>/dev/null
	[ $rc -ne 0 ] || bad "$name: the $nvan worker started although the scheduler runs $svan"
	[ $rc -ne 124 ] || bad "$name: the $nvan worker hung until the timeout"
	[ $((t1 - t0)) -le 15 ] || bad "$name: the $nvan worker took $((t1 - t0)) s to fail"
}

# 1. the fabric node names both vans
mixed fab_zmq zmq fabric
has "$dir/fab_zmq.node" "scheduler at 127.0.0.1" "speaks ZeroMQ (van 'zmq'" "van 'fabric'" \
	"DMLC_ENABLE_RDMA"

# 2. the zmq node fails (its van names the other van where it reads the
#    greeting); the fabric scheduler names both
mixed zmq_fab fabric zmq
has "$dir/zmq_fab.node" "scheduler at 127.0.0.1" "van 'zmq'" "DMLC_ENABLE_RDMA"
has "$dir/zmq_fab.sched" "speaks ZeroMQ (van 'zmq'" "runs van 'fabric'" "DMLC_ENABLE_RDMA"

# 3. FI_PROVIDER=nosuch: the error lists the providers there are
DMLC_ROLE=worker DMLC_PS_ROOT_PORT=1 DMLC_ENABLE_RDMA=fabric FI_PROVIDER=nosuch \
	timeout 30 "$kv" >"$dir/prov.node" 2>&1
rc=$?
[ $rc -ne 0 ] && [ $rc -ne 124 ] || bad "FI_PROVIDER=nosuch: worker exited $rc"
has "$dir/prov.node" "FI_PROVIDER=nosuch" "tcp" "Set FI_PROVIDER"
FI_PROVIDER=nosuch "$b/tools/pslite-info" >"$dir/prov.info" 2>&1
has "$dir/prov.info" "fabric" "init failed"

# 4. FI_PROVIDER=efa on a machine without EFA: "no device", said at INFO
DMLC_ROLE=worker DMLC_PS_ROOT_PORT=1 DMLC_ENABLE_RDMA=fabric FI_PROVIDER=efa \
	timeout 30 "$kv" >"$dir/efa.node" 2>&1
rc=$?
[ $rc -ne 0 ] && [ $rc -ne 124 ] || bad "FI_PROVIDER=efa: worker exited $rc"
has "$dir/efa.node" "INFO: FI_PROVIDER=efa: that provider finds no device" "no device"

if [ $fail -ne 0 ]; then
	for f in "$dir"/*; do
		echo "----- $f" >&2
		tail -n 20 "$f" >&2
	done
fi
exit $fail
