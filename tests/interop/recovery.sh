#!/bin/bash
# Recovery in mixed jobs: a C++ ps-lite node takes a lost node's place in a
# pslite job, and a pslite node in a job whose scheduler is C++ ps-lite
# (docs/recovery.md, docs/interop.md). By hand, not part of make check:
#
#   tests/interop/recovery.sh -n /path/to/recovery_node [-k LOGDIR] [-l] [CASE...]
#
# -n  recovery_node built from tests/interop/recovery_node.cc against C++
#     ps-lite (byteps branch; its header says how); or PSLITE_INTEROP_CXX_RECOVERY_NODE
# -k  keep the logs in LOGDIR;  -l  list the cases
# Run it from the build directory after `make`, with recovnode built
# (make tests/integration/recovnode).
#
# Each case is a 1+2+2 job on 127.0.0.1 over van zmq with PS_RECOVERY=1,
# heartbeats every 1 s, PS_HEARTBEAT_TIMEOUT=4, PS_RECOVERY_WAIT=20 and the
# BytePS start (StartPS without barrier, then a group barrier unless
# is_recovery). Its nodes are recovnode (pslite, p) or recovery_node (C++, c);
# every worker pushes, pulls and checks every value, 10 ms apart. When worker
# 0 reaches round 60 the victim is killed (SIGKILL) and started again with
# the same role (a worker with 100 rounds): the case passes when the
# newcomer says "ready (recovery 1)", every worker ends with OK and every
# node exits 0 within the bound. A C++ scheduler finds a lost node only by
# its heartbeats and drops a registration that comes before it has (there is
# no place to take yet): there the victim is started again only after
# PS_HEARTBEAT_TIMEOUT + 2 s.
set -u

here=$(pwd)
cxx=${PSLITE_INTEROP_CXX_RECOVERY_NODE:-}
psl=${PSLITE_RECOVNODE:-$here/tests/integration/recovnode}
export PS_VAN_PATH=${PS_VAN_PATH:-$here/plugins/van_zmq/.libs}
keep= list=0 limit=90 hbt=4
usage() { sed -n '2,/^set -u/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2; exit 2; }
while [ $# -gt 0 ]; do
	case $1 in
	-n) cxx=$2; shift ;;
	-k) keep=$2; shift ;;
	-l) list=1 ;;
	-h | --help) usage ;;
	-*) echo "recovery.sh: unknown argument '$1'" >&2; usage ;;
	*) break ;;
	esac
	shift
done

# name | scheduler | servers | workers | victim (s1 or w1) | what it shows
cases() {
	echo "a-cxx-server|p|p,c|p,p|s1|C++ server killed in a pslite job"
	echo "a-cxx-worker|p|p,p|p,c|w1|C++ worker killed in a pslite job"
	echo "b-pslite-server|c|p,p|p,p|s1|pslite server killed, C++ scheduler"
	echo "b-pslite-worker|c|p,p|p,p|w1|pslite worker killed, C++ scheduler"
	echo "b-cxx-server|c|c,p|p,p|s0|C++ server killed, C++ scheduler, pslite workers"
}
if [ $list = 1 ]; then cases; exit 0; fi
if [ -z "$cxx" ] || [ ! -x "$cxx" ]; then
	echo "recovery.sh: give recovery_node with -n PATH; '$cxx' is not an executable" >&2
	exit 2
fi
[ -x "$psl" ] || { echo "recovery.sh: $psl not found: make tests/integration/recovnode" >&2; exit 2; }
if [ -n "$keep" ]; then
	mkdir -p "$keep" || exit 2
	logs=$(cd "$keep" && pwd)
else
	logs=$(mktemp -d "${TMPDIR:-/tmp}/pslite-interop-recovery.XXXXXX") || exit 2
fi

pids=()
cleanup() {
	local p
	for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null; done
	pids=()
}
trap 'cleanup; exit 130' INT TERM
trap cleanup EXIT

. "$(dirname "$0")/ports.sh"

# wait_for FILE PATTERN SECONDS
wait_for() {
	local i=0
	until grep -q "$2" "$1" 2>/dev/null; do
		sleep 0.1
		i=$((i + 1))
		[ $i -lt $(($3 * 10)) ] || return 1
	done
}

# start IMPL ROLE LOG [ROUNDS]: a node in the background, its pid in $last
# (no timeout(1) around it: the SIGKILL must reach the node itself)
start() {
	local bin=$psl
	[ "$1" = c ] && bin=$cxx
	DMLC_ROLE=$2 RECOV_ROUNDS=${4:-300} "$bin" >"$3" 2>&1 &
	last=$!
	pids+=("$last")
}

# run_case DIR SCHED SERVERS WORKERS VICTIM: 0 when it passed; the reason
# in DIR/why otherwise, the timings in DIR/times
run_case() {
	local dir=$1 sch=$2 vic=$5 S W i name t0 t1 t2 p code victim=
	IFS=, read -ra S <<<"$3"
	IFS=, read -ra W <<<"$4"
	mkdir -p "$dir" && rm -f "$dir"/*
	export DMLC_PS_ROOT_URI=127.0.0.1 DMLC_NODE_HOST=127.0.0.1 DMLC_NUM_SERVER=${#S[@]} \
		DMLC_NUM_WORKER=${#W[@]} DMLC_GROUP_SIZE=1 PS_RECOVERY=1 PS_HEARTBEAT_INTERVAL=1 \
		PS_HEARTBEAT_TIMEOUT=$hbt PS_RECOVERY_WAIT=20 PS_START_TIMEOUT=60 \
		PS_REQUEST_TIMEOUT=30 RECOV_GROUP_BARRIER=1
	# a C++ scheduler counts a lost server's request for the final barrier
	# and its replacement's both: there the servers enter it only once the
	# workers are done (RECOV_END_FILE)
	export RECOV_END_FILE=
	[ "$sch" = c ] && RECOV_END_FILE=$dir/end
	DMLC_PS_ROOT_PORT=$(pick_port) || { echo "no free port" >"$dir/why"; return 1; }
	export DMLC_PS_ROOT_PORT
	local -A impl=([sched]=$sch) pid=()
	start "$sch" scheduler "$dir/sched"
	pid[sched]=$last
	for i in "${!S[@]}"; do
		impl[s$i]=${S[$i]}
		start "${S[$i]}" server "$dir/s$i"
		pid[s$i]=$last
	done
	for i in "${!W[@]}"; do
		impl[w$i]=${W[$i]}
		start "${W[$i]}" worker "$dir/w$i"
		pid[w$i]=$last
	done
	if ! wait_for "$dir/w0" "round 60$" 40; then
		echo "worker 0 did not reach round 60" >"$dir/why"
		return 1
	fi
	t0=$(date +%s%N)
	kill -9 "${pid[$vic]}"
	wait "${pid[$vic]}" 2>/dev/null
	victim=${pid[$vic]}
	# a C++ scheduler takes a newcomer only once its heartbeats say lost
	[ "$sch" = c ] && sleep $((hbt + 2))
	local role=server rounds=300
	case $vic in w*) role=worker rounds=100 ;; esac
	start "${impl[$vic]}" $role "$dir/${vic}b" $rounds
	pid[${vic}b]=$last
	impl[${vic}b]=${impl[$vic]}
	if ! wait_for "$dir/${vic}b" "ready (recovery 1)" 30; then
		echo "the new ${vic} did not start as a recovery" >"$dir/why"
		return 1
	fi
	t1=$(date +%s%N)
	# serving: a worker hears the new server is back; the new worker's first round
	local ts=
	if [ "$role" = server ]; then
		wait_for "$dir/w0" "is back" 30 && ts=$(date +%s%N)
	else
		wait_for "$dir/${vic}b" "round 0$" 30 && ts=$(date +%s%N)
	fi
	if [ -n "$RECOV_END_FILE" ]; then
		for name in "${!pid[@]}"; do
			case $name in w?) [ "$name" = "$vic" ] && continue ;; w?b) ;; *) continue ;; esac
			wait_for "$dir/$name" "OK (\|FAILED\|gave up" $limit
		done
		touch "$RECOV_END_FILE"
	fi
	for name in "${!pid[@]}"; do
		p=${pid[$name]}
		[ "$p" = "$victim" ] && continue
		i=0
		while kill -0 "$p" 2>/dev/null && [ $i -lt $((limit * 10)) ]; do
			sleep 0.1
			i=$((i + 1))
		done
		if kill -0 "$p" 2>/dev/null; then
			echo "$name did not end within $limit s" >>"$dir/why"
			continue
		fi
		wait "$p"
		code=$?
		[ $code -eq 0 ] || echo "$name exited $code" >>"$dir/why"
	done
	t2=$(date +%s%N)
	for name in "${!pid[@]}"; do
		case $name in w?) [ "$name" = "$vic" ] && continue ;; w?b) ;; *) continue ;; esac
		grep -q "OK (" "$dir/$name" || echo "$name did not end with OK" >>"$dir/why"
	done
	grep -h "FAILED" "$dir"/* 2>/dev/null | head -n 2 >>"$dir/why"
	echo "ready (recovery 1) $((($t1 - $t0) / 1000000)) ms after the kill," \
		"serving $([ -n "$ts" ] && echo $((($ts - $t0) / 1000000)) || echo ?) ms, job ended" \
		"$((($t2 - $t0) / 1000000)) ms after it" >"$dir/times"
	[ ! -s "$dir/why" ]
}

printf "%-18s %-5s %-7s %-7s %-6s %-6s %s\n" case sched servers workers killed result "timing / why"
npass=0 nfail=0
while IFS='|' read -r name sch srv wrk vic what; do
	if [ $# -gt 0 ] && ! printf '%s\n' "$@" | grep -qx "$name"; then continue; fi
	if run_case "$logs/$name" "$sch" "$srv" "$wrk" "$vic"; then
		result=PASS note=$(cat "$logs/$name/times")
		npass=$((npass + 1))
	else
		result=FAIL note=$(tr '\n' ';' <"$logs/$name/why")
		nfail=$((nfail + 1))
	fi
	cleanup
	printf "%-18s %-5s %-7s %-7s %-6s %-6s %s\n" "$name" "$sch" "$srv" "$wrk" "$vic" "$result" "$note"
done < <(cases)
echo
echo "$npass passed, $nfail failed"
if [ $nfail -gt 0 ] || [ -n "$keep" ]; then echo "logs: $logs"; else rm -rf "$logs"; fi
[ $nfail -eq 0 ]
