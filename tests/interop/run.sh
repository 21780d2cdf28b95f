#!/bin/bash
# Mixed jobs of C++ ps-lite (byteps branch, ZMQ van) and pslite nodes.
#
#   tests/interop/run.sh -b /path/to/ps-lite/test_benchmark [options]
#
# Runs every case of the matrix below on loopback: one scheduler, servers and
# workers, each either a C++ ps-lite node running its tests/test_benchmark or
# a pslite node running tools/pslite-bench (same arguments: BYTES REPEAT
# MODE), and prints a PASS/FAIL table. A case passes when every node exits 0
# within the time limit. It builds nothing: give it an already built C++
# test_benchmark (-b, or PSLITE_INTEROP_CXX_BENCH). Not part of `make check`.
#
# Options:
#   -b PATH        the C++ ps-lite test_benchmark
#   -a PATH        also the C++ ps-lite tests/test_kv_app (1f763c2 has it): adds
#                  jobs of C++ test_kv_app servers and workers, which check
#                  the sums they pull, with a pslite scheduler
#   -y PATH        also tests/interop/byteps_worker.cc built against C++
#                  ps-lite: adds jobs of C++ workers that start, push, pull
#                  and stop as BytePS's worker does, against pslite-server
#                  as scheduler and servers; they check the sums. With -y,
#                  -b may be left out (then only those jobs run)
#   -q, --quick    only 4 KiB, modes 1 and 0, and the feature cases
#   -f, --filter RE
#                  only the cases whose name matches the extended regex RE
#   -r, --retries N
#                  run a failed case up to N more times (reported as FLAKY
#                  when a later try passes)
#   -k, --keep DIR keep every node's log under DIR (default: a temporary
#                  folder, removed at the end unless a case failed)
#   -t, --timeout S
#                  time limit of one job (default 90 s)
#   -l, --list     print the cases and exit
#   --goodput N    instead of the matrix: N runs each of C++-only and
#                  pslite-only jobs (modes 1/2/3, 4 KiB and 1 MiB), median
#                  goodput, and the idle scheduler's CPU over 10 s
#
# Environment: PSLITE_BENCH (default: tools/pslite-bench of this tree),
# PSLITE_SERVER (default: tools/pslite-server of this tree), PS_VAN_PATH
# (default: plugins/van_zmq/.libs of this tree).
#
# Every node runs with DMLC_NODE_HOST=127.0.0.1 and DMLC_GROUP_SIZE=1 (the
# C++ test_benchmark creates no KVServer without it). pslite-bench runs with
# PSLITE_BENCH_ACCEPT_ONES=1: the C++ test_benchmark pushes and serves 0x01
# bytes, not pslite-bench's pattern (see tools/pslite-bench.c).
set -u

here=$(cd "$(dirname "$0")/../.." && pwd)
cxx=${PSLITE_INTEROP_CXX_BENCH:-}
psl=${PSLITE_BENCH:-$here/tools/pslite-bench}
export PS_VAN_PATH=${PS_VAN_PATH:-$here/plugins/van_zmq/.libs}
kvapp=${PSLITE_INTEROP_CXX_KV_APP:-}
bpsw=${PSLITE_INTEROP_CXX_BYTEPS_WORKER:-}
pslserver=${PSLITE_SERVER:-$here/tools/pslite-server}
quick=0 filter= retries=0 keep= limit=90 list=0 goodput=0

usage() { sed -n '2,/^set -u/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2; exit 2; }
while [ $# -gt 0 ]; do
	case $1 in
	-b) cxx=$2; shift ;;
	-a) kvapp=$2; shift ;;
	-y) bpsw=$2; shift ;;
	-q | --quick) quick=1 ;;
	-f | --filter) filter=$2; shift ;;
	-r | --retries) retries=$2; shift ;;
	-k | --keep) keep=$2; shift ;;
	-t | --timeout) limit=$2; shift ;;
	-l | --list) list=1 ;;
	--goodput) goodput=$2; shift ;;
	-h | --help) usage ;;
	*) echo "run.sh: unknown argument '$1'" >&2; usage ;;
	esac
	shift
done

# ------------------------------------------------------------------ cases --
# name | scheduler | servers | workers | bytes repeat mode | extra env | start order
# c = C++ ps-lite node (test_benchmark), p = pslite node (pslite-bench), k =
# C++ ps-lite node running test_kv_app, S = pslite-server (no arguments), y =
# C++ ps-lite worker byteps_worker.cc. Servers and workers are comma lists.
# Start order: words sched, servers, workers, sleepN (default: sched servers
# workers, each group once the scheduler listens).
cases() {
	local sizes="4096 1048576" modes="1 2 3 0" s m
	[ $quick = 1 ] && sizes=4096 modes="1 0"
	if [ -n "$bpsw" ]; then
		# C++ workers as BytePS's (one KVWorker<char>, cmd 0, the start-up
		# barrier, Barrier(all), the final barrier) against pslite-server
		echo "byteps-worker-sync|S|S,S|y,y,y|||"
		echo "byteps-worker-async|S|S,S|y,y,y||BYTEPS_ENABLE_ASYNC=1|"
		echo "byteps-worker-sync-hb|S|S,S|y,y,y||PS_HEARTBEAT_INTERVAL=1|"
		echo "byteps-worker-workers-first|S|S,S|y,y,y|||workers servers sleep2 sched"
		echo "byteps-worker-small-parts|S|S,S|y,y,y||BYTEPS_PARTITION_BYTES=4096 BPS_TEST_BYTES=20000 BPS_TEST_ROUNDS=30|"
	fi
	[ -z "$cxx" ] && return 0
	for s in $sizes; do
		for m in $modes; do
			echo "cxx-only-$m-$s|c|c|c|$s 3 $m||"
			echo "pslite-only-$m-$s|p|p|p|$s 3 $m||"
			echo "a-$m-$s|c|p|p|$s 3 $m||"
			echo "b-$m-$s|p|c|c|$s 3 $m||"
			echo "c-$m-$s|p|c|p|$s 3 $m||"
			echo "d-$m-$s|p|p|c|$s 3 $m||"
			echo "e-$m-$s|c|c|p|$s 3 $m||"
			echo "f-$m-$s|c|p|c|$s 3 $m||"
			echo "g-$m-$s|p|c,p|c,p|$s 3 $m||"
			echo "g2-$m-$s|c|p,c|p,c|$s 3 $m||"
			echo "h-$m-$s|c|c|c,p|$s 3 $m||"
			echo "i-$m-$s|p|p|p,c|$s 3 $m||"
		done
	done
	# pslite's fused push-pull (mode 4) against a C++ server
	echo "c-fused|p|c|p|4096 3 4||"
	echo "e-fused|c|c|p|4096 3 4||"
	# features
	local hb="PS_HEARTBEAT_INTERVAL=1 TOTAL_DURATION=400"
	local rs="PS_RESEND=1 PS_RESEND_TIMEOUT=500"
	local rk="s0:DMLC_RANK=1 s1:DMLC_RANK=0 w0:DMLC_RANK=1 w1:DMLC_RANK=0"
	for x in "a|c|p|p" "b|p|c|c" "c|p|c|p" "d|p|p|c" "e|c|c|p" "f|c|p|c" \
		"g|p|c,p|c,p" "g2|c|p,c|p,c"; do
		n=${x%%|*} r=${x#*|}
		echo "$n-heartbeat|$r|4096 3 1|$hb|"
		echo "$n-resend|$r|4096 3 1|$rs|"
	done
	# test_benchmark's ENABLE_RECV_BUFFER: registered buffers on C++ servers
	# and a group BARRIER (cmd 3) of workers and servers
	for x in "b|p|c|c" "g|p|c,p|c,p" "g2|c|p,c|p,c" "j|c|c,p|c,p" "k|p|p,c|p,c"; do
		n=${x%%|*} r=${x#*|}
		echo "$n-recv-buffer|$r|4096 3 1|ENABLE_RECV_BUFFER=1|"
	done
	if [ -n "$kvapp" ]; then
		echo "kv-app-cxx-only|k|k,k|k,k|||"
		echo "kv-app-pslite-sched|p|k,k|k,k|||"
		echo "kv-app-pslite-sched-hb|p|k,k|k,k||$hb|"
	fi
	for x in "g|p|c,p|c,p" "g2|c|p,c|p,c" "j|c|c,p|c,p" "k|p|p,c|p,c"; do
		n=${x%%|*} r=${x#*|}
		echo "$n-rank|$r|4096 3 1|$rk|"
		echo "$n-workers-first|$r|4096 3 1||workers servers sleep2 sched"
		echo "$n-sched-last|$r|4096 3 1||servers sleep1 workers sleep1 sched"
		echo "$n-servers-last|$r|4096 3 1||workers sleep1 sched sleep1 servers"
	done
}

if [ $list = 1 ]; then
	cases | if [ -n "$filter" ]; then grep -E "^($filter)"; else cat; fi
	exit 0
fi

# --------------------------------------------------------------- checks --
if { [ -z "$cxx" ] && [ -z "$bpsw" ]; } || { [ -n "$cxx" ] && [ ! -x "$cxx" ]; }; then
	echo "run.sh: give the C++ ps-lite test_benchmark with -b PATH (or" \
		"PSLITE_INTEROP_CXX_BENCH); '$cxx' is not an executable" >&2
	exit 2
fi
if [ -n "$bpsw" ] && { [ ! -x "$bpsw" ] || [ ! -x "$pslserver" ]; }; then
	echo "run.sh: -y '$bpsw' or pslite-server '$pslserver' is not an executable" >&2
	exit 2
fi
if [ -n "$kvapp" ] && [ ! -x "$kvapp" ]; then
	echo "run.sh: -a '$kvapp' is not an executable" >&2
	exit 2
fi
if [ ! -x "$psl" ]; then
	echo "run.sh: $psl not found: build pslite first (or set PSLITE_BENCH)" >&2
	exit 2
fi
for t in timeout ss; do
	command -v $t >/dev/null || { echo "run.sh: needs '$t'" >&2; exit 2; }
done

if [ -n "$keep" ]; then
	mkdir -p "$keep" || exit 2
	logs=$(cd "$keep" && pwd)
else
	logs=$(mktemp -d "${TMPDIR:-/tmp}/pslite-interop.XXXXXX") || exit 2
fi

pids=()
cleanup() {
	local p
	for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null; done
	sleep 0.2
	for p in "${pids[@]}"; do kill -KILL "$p" 2>/dev/null; done
	pids=()
}
trap 'cleanup; exit 130' INT TERM
trap cleanup EXIT

. "$(dirname "$0")/ports.sh"

listening() { ss -Hltn "( sport = :$1 )" 2>/dev/null | grep -q .; }

# run_job DIR SCHED SERVERS WORKERS "BYTES REPEAT MODE" "ENV" "ORDER"
# Leaves DIR/<node>.log and DIR/rc (one "node rc" line each).
run_job() {
	local dir=$1 sch=$2 srv=$3 wrk=$4 args=$5 envs=$6 order=${7:-}
	local port i name part S W
	mkdir -p "$dir" && rm -f "$dir"/*
	port=$(pick_port) || { echo "no free port" >"$dir/rc"; return 1; }
	IFS=, read -ra S <<<"$srv"
	IFS=, read -ra W <<<"$wrk"
	local -a names=() impls=() roles=()
	names+=(sched); impls+=("$sch"); roles+=(scheduler)
	for i in "${!S[@]}"; do names+=("s$i"); impls+=("${S[$i]}"); roles+=(server); done
	for i in "${!W[@]}"; do names+=("w$i"); impls+=("${W[$i]}"); roles+=(worker); done
	pids=()
	local -a started=()
	start() { # index
		local k=$1 bin kv env=() a=$args
		case ${impls[$k]} in
		c) bin=$cxx ;;
		k) bin=$kvapp ;;
		S) bin=$pslserver a= ;;
		y) bin=$bpsw a= ;;
		*) bin=$psl ;;
		esac
		for kv in $envs; do
			case $kv in
			*:*=*) [ "${kv%%:*}" = "${names[$k]}" ] && env+=("${kv#*:}") ;;
			*) env+=("$kv") ;;
			esac
		done
		env DMLC_ROLE="${roles[$k]}" DMLC_PS_ROOT_URI=127.0.0.1 DMLC_PS_ROOT_PORT=$port \
			DMLC_NODE_HOST=127.0.0.1 DMLC_NUM_SERVER=${#S[@]} DMLC_NUM_WORKER=${#W[@]} \
			DMLC_GROUP_SIZE=1 PSLITE_BENCH_ACCEPT_ONES=1 LOG_DURATION=10 \
			TOTAL_DURATION=$total NUM_KEY_PER_SERVER=$nkeys "${env[@]}" \
			timeout -k 5 "$limit" "$bin" $a >"$dir/${names[$k]}.log" 2>&1 &
		pids+=($!)
		started+=("$k")
	}
	local nkeys=40 total=100
	case $args in 1048576*) nkeys=4 total=10 ;; esac
	[ -z "$order" ] && order="sched waitsched servers workers"
	for part in $order; do
		case $part in
		sched) start 0 ;;
		waitsched)
			i=0
			while ! listening $port && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
			;;
		servers) for i in "${!names[@]}"; do [ "${roles[$i]}" = server ] && start "$i"; done ;;
		workers) for i in "${!names[@]}"; do [ "${roles[$i]}" = worker ] && start "$i"; done ;;
		sleep*) sleep "${part#sleep}" ;;
		esac
	done
	local rc k
	for i in "${!pids[@]}"; do
		wait "${pids[$i]}"
		rc=$?
		k=${started[$i]}
		echo "${names[$k]} ${impls[$k]} $rc" >>"$dir/rc"
	done
	pids=()
}

# Why a job failed, from its logs: the first telling line, with what is
# known about it.
diagnose() {
	local dir=$1 why
	local pat
	for pat in "Check failed" "is not explained|carried wrong data|pulled back wrong" \
		"cannot start|failed:|ERROR"; do
		why=$(grep -h -m1 -E "$pat" "$dir"/*.log 2>/dev/null | head -1 |
			sed 's/^\[[^]]*\] *//; s/^include\/dmlc[^]]*\] *//')
		[ -n "$why" ] && break
	done
	case $why in
	*"customer 0 ready"*) why="C++ server got data before its KVServer existed (C++ start-up race)" ;;
	*"request_handle_"*) why="C++ server got data before its request handler was set (C++ start-up race)" ;;
	*"ready_ call Start() first"*) why="C++ resender used the van after Stop (C++ bug)" ;;
	*"num_retry"*) why="C++ node gave up after 10 resends: $why" ;;
	esac
	grep -q " 124$\| 137$" "$dir/rc" 2>/dev/null && why="timeout; $why"
	echo "$why" | cut -c1-120
}

# Goodput of a finished job: pslite-bench's summary, or the mean of C++
# test_benchmark's per-interval lines (sum over workers). Mode 0 prints
# push and pull times instead.
goodput() {
	local dir=$1 f tot=0 g found=0
	for f in "$dir"/w*.log; do
		g=$(grep -h "pslite-bench summary" "$f" | sed -n 's/.*goodput \([0-9.e+-]*\) Gbps.*/\1/p')
		if [ -z "$g" ]; then
			g=$(grep -h "Application goodput" "$f" |
				sed -n 's/.*goodput: \([0-9.e+-]*\) Gbps.*/\1/p' |
				awk '{s+=$1; n++} END {if (n) printf "%.4f", s/n}')
		fi
		[ -n "$g" ] && found=1 && tot=$(awk -v a="$tot" -v b="$g" 'BEGIN {printf "%.4f", a+b}')
	done
	if grep -q "^byteps_worker [0-9]*: " "$dir"/w*.log 2>/dev/null; then
		echo "$(cat "$dir"/w*.log | grep -c "^byteps_worker [0-9]*: PASS") of" \
			"$(ls "$dir"/w*.log | wc -l) workers checked their sums:" \
			"$(grep -h -m1 "^byteps_worker [0-9]*: PASS" "$dir"/w*.log | head -1 | cut -d: -f3-)"
	elif [ $found = 1 ]; then
		echo "$tot"
	elif grep -q "test_kv_app.cc.*error:" "$dir"/w*.log 2>/dev/null; then
		echo "pulled sums off by $(grep -h "error:" "$dir"/w*.log | sed 's/.*error: //' | tr '\n' ' ')"
	else
		for f in "$dir"/w*.log; do
			printf "%s: %s " "$(basename "$f" .log)" "$(grep -h "total_time=" "$f" |
				sed -n 's/.*\(push\|pull\) .*total_time=\([0-9.]*\)ms.*/\1 \2 ms/p' |
				awk '{printf "%s%s %.1f ms", (NR > 1 ? ", " : ""), $1, $2}')"
		done
	fi
}

# ---------------------------------------------------------------- goodput --
# CPU used by pid (the program that `timeout` runs under it) over secs, in
# % of one core.
cpu_over() {
	local pid=$1 secs=$2 t0 t1 hz c
	hz=$(getconf CLK_TCK)
	c=$(pgrep -P "$pid" | head -1)
	[ -n "$c" ] && pid=$c
	t0=$(awk '{print $14+$15}' "/proc/$pid/stat" 2>/dev/null) || return 1
	sleep "$secs"
	t1=$(awk '{print $14+$15}' "/proc/$pid/stat" 2>/dev/null) || return 1
	awk -v a="$t0" -v b="$t1" -v hz="$hz" -v s="$secs" \
		'BEGIN {printf "%.0f%%", 100 * (b - a) / hz / s}'
}

median() { sort -g | awk '{v[NR]=$1} END {if (NR) print v[int((NR+1)/2)]; else print "-"}'; }

if [ "$goodput" != 0 ]; then
	echo "goodput (Gbps, median of $goodput runs; 1 scheduler, 1 server, 1 worker on loopback)"
	printf "%-8s %-10s %12s %12s\n" mode bytes "C++ ps-lite" pslite
	for s in 4096 1048576; do
		for m in 1 2 3; do
			line=()
			for impl in c p; do
				for r in $(seq 1 "$goodput"); do
					d="$logs/goodput-$impl-$m-$s-$r"
					run_job "$d" $impl $impl $impl "$s 3 $m" "" ""
					goodput "$d"
				done | median > "$logs/.med"
				line+=("$(cat "$logs/.med")")
			done
			printf "%-8s %-10s %12s %12s\n" "$m" "$s" "${line[0]}" "${line[1]}"
		done
	done
	echo
	echo "scheduler CPU over 10 s (% of one core)"
	for impl in c p; do
		[ $impl = c ] && bin=$cxx || bin=$psl
		port=$(pick_port)
		# alone, waiting for registrations
		env DMLC_ROLE=scheduler DMLC_PS_ROOT_URI=127.0.0.1 DMLC_PS_ROOT_PORT=$port \
			DMLC_NODE_HOST=127.0.0.1 DMLC_NUM_SERVER=1 DMLC_NUM_WORKER=1 \
			DMLC_GROUP_SIZE=1 timeout -k 2 15 "$bin" >"$logs/idle-$impl.log" 2>&1 &
		p=$!; pids=($p)
		sleep 1
		alone=$(cpu_over $p 10)
		cleanup
		wait $p 2>/dev/null
		# during a job (pslite-bench --seconds keeps a pslite worker busy)
		d="$logs/busy-$impl"
		mkdir -p "$d"
		port=$(pick_port)
		for role in scheduler server worker; do
			env DMLC_ROLE=$role DMLC_PS_ROOT_URI=127.0.0.1 DMLC_PS_ROOT_PORT=$port \
				DMLC_NODE_HOST=127.0.0.1 DMLC_NUM_SERVER=1 DMLC_NUM_WORKER=1 \
				DMLC_GROUP_SIZE=1 PSLITE_BENCH_ACCEPT_ONES=1 TOTAL_DURATION=100000 \
				timeout -k 2 20 "$bin" 4096 3 1 >"$d/$role.log" 2>&1 &
			pids+=($!)
			[ $role = scheduler ] && sp=$!
		done
		sleep 3
		busy=$(cpu_over "$sp" 10)
		cleanup
		wait 2>/dev/null
		printf "%-12s alone (waiting for registrations): %5s   during a 4 KiB push-pull job: %5s\n" \
			"$([ $impl = c ] && echo "C++ ps-lite" || echo pslite)" "$alone" "$busy"
	done
	echo "logs: $logs"
	exit 0
fi

# ----------------------------------------------------------------- matrix --
printf "%-26s %-5s %-7s %-7s %-11s %-12s %-7s %s\n" case sched servers workers "bytes/mode" env result \
	"goodput Gbps / why it failed"
npass=0 nfail=0 nflaky=0 failed=()
while IFS='|' read -r name sch srv wrk args envs order; do
	[ -n "$filter" ] && ! [[ $name =~ ^($filter) ]] && continue
	try=0
	result=FAIL
	while :; do
		dir="$logs/$name"
		[ $try -gt 0 ] && dir="$logs/$name.try$try"
		run_job "$dir" "$sch" "$srv" "$wrk" "$args" "$envs" "$order"
		if [ -s "$dir/rc" ] && ! awk '$3 != 0 {bad=1} END {exit !bad}' "$dir/rc"; then
			[ $try -eq 0 ] && result=PASS || result=FLAKY
			break
		fi
		try=$((try + 1))
		[ $try -gt "$retries" ] && break
	done
	set -- $args - - -
	short=
	for kv in $envs; do
		case $kv in
		PS_RESEND=*) short="${short}resend " ;;
		PS_HEARTBEAT_INTERVAL=*) short="${short}hb=1 " ;;
		ENABLE_RECV_BUFFER=*) short="${short}recvbuf " ;;
		BYTEPS_ENABLE_ASYNC=*) short="${short}async " ;;
		BYTEPS_PARTITION_BYTES=*) short="${short}4k-parts " ;;
		*DMLC_RANK=*) case $short in *rank*) ;; *) short="${short}rank " ;; esac ;;
		esac
	done
	[ -n "$order" ] && short="${short}order "
	[ -z "$short" ] && short=-
	if [ $result = FAIL ]; then
		note="$(diagnose "$dir") [$(awk '$3 != 0 {printf "%s=%s ", $1, $3}' "$dir/rc")]"
		nfail=$((nfail + 1))
		failed+=("$name")
	else
		note=$(goodput "$dir")
		[ $result = FLAKY ] && note="$note (failed $try time(s) first: $(diagnose "$logs/$name"))" &&
			nflaky=$((nflaky + 1))
		npass=$((npass + 1))
	fi
	printf "%-26s %-5s %-7s %-7s %-11s %-12s %-7s %s\n" "$name" "$sch" "$srv" "$wrk" \
		"$( [ "$1" = - ] && echo - || echo "$(numfmt --to=iec "$1" 2>/dev/null || echo "$1")/$3")" \
		"${short% }" "$result" "$note"
done < <(cases)

echo
echo "$npass passed ($nflaky only after a retry), $nfail failed${failed:+: ${failed[*]}}"
if [ $nfail -gt 0 ] || [ -n "$keep" ]; then
	echo "logs: $logs"
else
	rm -rf "$logs"
fi
[ $nfail -eq 0 ]
