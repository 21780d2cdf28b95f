#!/bin/sh
# A job across hosts: each node in its own network namespace, joined by veth
# pairs to a bridge (in a namespace of its own, so that the machine's network
# is not touched). Nodes find their address with DMLC_INTERFACE, as on a
# cluster, not DMLC_NODE_HOST.
#   1. data: kvtest's data scenario, 1 scheduler + 2 servers + 2 workers;
#   2. cut:  server 1's link is taken down in the middle of the job (the
#      process goes on running, nothing is closed): with heartbeats on, the
#      scheduler declares it lost, the workers' requests to it fail, the
#      others finish.
#   3. lossy: the data scenario while the bridge drops 1% of the frames at
#      random (nftables), so that TCP retransmits under every message size.
#   4. auto: the data scenario with DMLC_INTERFACE=auto (StepMesh's: each node
#      takes the address it reaches the scheduler from), each host having a
#      second interface (d0, 10.99.0.x, made only when auto is asked for)
#      that leads nowhere and comes first.
#   netns.sh VAN [SCENARIO...]   (default: data cut)
# Needs root and iproute2; skips (77) where namespaces cannot be made (a
# container without CAP_NET_ADMIN). Needs PSL_BUILDDIR (set by make check).
[ -n "${PSL_BUILDDIR:-}" ] || { [ -f tests/testenv.sh ] && . ./tests/testenv.sh; } || { echo "$0: run it from the build directory (where tests/testenv.sh is) or by make check TESTS=$0" >&2; exit 99; }
set -u
van=$1
shift
scenarios=${*:-data cut}
b=${PSL_BUILDDIR:?run through make check, or set PSL_BUILDDIR}

skip() {
	echo "netns.sh: SKIP: $*" >&2
	exit 77
}
[ "$(id -u)" = 0 ] || skip "needs root to make network namespaces"
command -v ip >/dev/null 2>&1 || skip "no ip command (apt-get install iproute2)"

tag=psl$$ # namespace names; interface names stay short (<= 15 bytes)
hub=${tag}hub
nodes="sc s0 s1 w0 w1"
dir=$(mktemp -d "${TMPDIR:-/tmp}/pslite-netns.XXXXXX")
pids=
made=
cleanup() {
	# TERM: timeout passes it on to kvtest (KILL would orphan kvtest)
	for p in $pids; do kill -TERM "$p" 2>/dev/null; done
	wait 2>/dev/null
	for n in $made; do ip netns del "$n" 2>/dev/null; done
	rm -rf "$dir"
}
trap cleanup EXIT
trap 'exit 1' INT TERM

. "$PSL_SRCDIR/tests/integration/nshosts.sh"
nshost_hub "$hub"
i=1
for n in $nodes; do
	ns=$tag$n
	ip netns add "$ns" || exit 1
	made="$made $ns"
	case " $scenarios " in *" auto "*)
		# d0 first, so that it is the first interface with an address (a
		# veth whose other end is on no bridge: it leads nowhere)
		ip link add d0 netns "$ns" type veth peer name "d$n" netns "$hub" 2>"$dir/err" ||
			skip "cannot make a veth pair: $(cat "$dir/err")"
		ip -n "$ns" addr add "10.99.0.$i/24" dev d0
		ip -n "$ns" link set d0 up
		ip -n "$hub" link set "d$n" up
		;;
	esac
	nshost_link "$ns" "$hub" "v$n" "10.77.0.$i/24"
	i=$((i + 1))
done
sleep 1 # (the bridge's ports come up; nodes retry their connects anyway)

fail=0
# run SCENARIO: one job; prints what went wrong, sets fail
run() {
	sc=$1
	rm -f "$dir"/*.log "$dir/cut"
	pids=
	iface=e0 kvsc=$sc
	[ "$sc" = auto ] && iface=auto kvsc=data
	for n in $nodes; do
		case $n in
		sc) role=scheduler rank= ;;
		s*) role=server rank=${n#s} ;;
		w*) role=worker rank=${n#w} ;;
		esac
		ip netns exec "$tag$n" env DMLC_ROLE=$role ${rank:+DMLC_RANK=$rank} \
			DMLC_ENABLE_RDMA="$van" DMLC_PS_ROOT_URI=10.77.0.1 DMLC_PS_ROOT_PORT=9100 \
			DMLC_NUM_SERVER=2 DMLC_NUM_WORKER=2 DMLC_INTERFACE=$iface \
			KVTEST_SCENARIO="$kvsc" KVTEST_DIR="$dir" \
			timeout -k 5 180 "$b/tests/integration/kvtest" >"$dir/$n.log" 2>&1 &
		pids="$pids $!"
		eval "pid_$n=$!"
	done
	victim=
	if [ "$sc" = cut ]; then
		# wait for server 1 to ask, then take its link away at the bridge
		t=0
		while [ ! -e "$dir/cut" ] && [ $t -lt 1200 ]; do
			sleep 0.1
			t=$((t + 1))
		done
		victim=$(grep -l "asking for my link to be cut" "$dir/s0.log" "$dir/s1.log" 2>/dev/null | head -n 1)
		victim=$(basename "${victim:-none}" .log)
		if [ "$victim" = none ]; then
			echo "netns.sh: $van/cut: server 1 never asked for its link to be cut" >&2
			fail=1
		else
			ip -n "$hub" link set "v$victim" down
		fi
	fi
	for n in $nodes; do
		[ "$n" = "$victim" ] && continue
		eval "wait \$pid_$n"
		rc=$?
		[ $rc -eq 0 ] || { echo "netns.sh: $van/$sc: node $n exited $rc" >&2; fail=1; }
	done
	if [ -n "$victim" ] && [ "$victim" != none ]; then
		eval "kill -TERM \$pid_$victim" 2>/dev/null
		ip -n "$hub" link set "v$victim" up
	fi
	wait 2>/dev/null
	pids=
	for n in $nodes; do
		[ "$n" = "$victim" ] && continue
		grep -q "kvtest .*: OK" "$dir/$n.log" || { echo "netns.sh: $van/$sc: node $n did not say OK" >&2; fail=1; }
	done
	if [ "$sc" = cut ]; then
		cat "$dir"/*.log | grep -q "lost server 1" ||
			{ echo "netns.sh: $van/cut: nobody reported server 1 lost" >&2; fail=1; }
	elif grep -q "ERROR" "$dir"/*.log; then
		echo "netns.sh: $van/$sc: a node logged an ERROR in a job that ended well" >&2
		fail=1
	fi
	if cat "$dir"/*.log | grep -q "FAILED\|AddressSanitizer\|runtime error:\|LeakSanitizer"; then
		echo "netns.sh: $van/$sc: a node reported a failure or a sanitizer error" >&2
		fail=1
	fi
	# every node found its address on e0, not on loopback
	grep -q "listening on 10.77.0.1:9100" "$dir/sc.log" ||
		{ echo "netns.sh: $van/$sc: the scheduler did not listen on 10.77.0.1:9100" >&2; fail=1; }
	for n in s0 s1 w0 w1; do
		[ "$n" = "$victim" ] && continue
		grep -q "listening on 10\.77\.0\.[0-9]*:" "$dir/$n.log" ||
			{ echo "netns.sh: $van/$sc: node $n did not listen on its 10.77.0.x address" >&2; fail=1; }
	done
	if [ $fail -ne 0 ]; then
		for n in $nodes; do
			echo "----- $n ($van/$sc) -----" >&2
			tail -n 40 "$dir/$n.log" >&2
		done
	fi
}

for sc in $scenarios; do
	case $sc in
	lossy)
		if ! command -v nft >/dev/null 2>&1; then
			echo "netns.sh: $van/lossy not run: no nft (apt-get install nftables)" >&2
			continue
		fi
		if ! ip netns exec "$hub" nft -f - <<NFT 2>"$dir/err"
table bridge lossy {
	chain drops {
		type filter hook forward priority 0;
		numgen random mod 100 < 1 counter drop
	}
}
NFT
		then
			echo "netns.sh: $van/lossy not run: nftables refused the rule: $(cat "$dir/err")" >&2
			continue
		fi
		run data
		dropped=$(ip netns exec "$hub" nft list table bridge lossy | sed -n 's/.*counter packets \([0-9]*\).*/\1/p')
		ip netns exec "$hub" nft delete table bridge lossy
		echo "netns.sh: $van/lossy: the bridge dropped ${dropped:-no} frames"
		[ "${dropped:-0}" -gt 0 ] || { echo "netns.sh: $van/lossy: nothing was dropped" >&2; fail=1; }
		continue
		;;
	cut)
		# (generous, as in job.sh: a live node on a loaded machine must not
		# miss 10 heartbeats)
		PS_HEARTBEAT_INTERVAL=1 PS_HEARTBEAT_TIMEOUT=10
		export PS_HEARTBEAT_INTERVAL PS_HEARTBEAT_TIMEOUT
		;;
	esac
	run "$sc"
	unset PS_HEARTBEAT_INTERVAL PS_HEARTBEAT_TIMEOUT
done
exit $fail
