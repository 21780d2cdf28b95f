#!/bin/sh
# A host cut off and reconnected, with recovery (docs/recovery.md, "A host
# cut off"): three hosts in network namespaces joined by veth pairs to a
# bridge (nshosts.sh): A holds the scheduler and server 0, B server 1 alone,
# C the two workers (recovnode: every value pulled is checked). Heartbeats
# every 1 s, 4 s timeout, PS_RECOVERY=1.
#   netns_cutoff.sh VAN [CASE]   prints the times measured
#   exits  (the default) at worker 0's round 60 the bridge drops every frame
#          to and from B (nftables): the scheduler declares server 1 lost by
#          the heartbeat; server 1 itself, its heartbeats unanswered, loses
#          the scheduler and exits 3 with one ERROR line, within a bound; B
#          is reconnected, a new server 1 started on B takes the lost one's
#          place, the workers' rounds (retried while server 1 was lost)
#          complete against it, every other node exits 0
#   ghost  the same, but server 1 has PS_HEARTBEAT_TIMEOUT=60 and B is
#          reconnected as soon as the scheduler declared it lost: the old
#          server 1 comes back under its old id; the scheduler refuses it
#          with a WARN line and tells it to stop, and it exits 3 saying so
#          (without that, it fought its replacement for the id: the job
#          failed)
#   taken  as ghost, but the new server 1 is started on host C while B is
#          still cut off, and takes the place before B is reconnected: the
#          old server 1 is refused (a new node took its place) or finds its
#          connections closed, and exits 3 saying it lost the scheduler; the
#          new one keeps its place (over zmq, the old one's connections
#          from B are left open, unused, so that it cannot take the
#          identity back) and the job ends whole
#   worker as exits, for a worker: B holds worker 1 (C worker 0 and server
#          1); the cut-off worker exits 3 by itself, a new worker 1 (100
#          rounds) started on B once reconnected takes its place, and every
#          value the workers pull is right (nothing the old one sent while
#          cut off reaches a server after the cut)
# Needs root, iproute2 and nft; skips (77) where namespaces or the rule
# cannot be made. Needs PSL_BUILDDIR (set by make check).
[ -n "${PSL_BUILDDIR:-}" ] || { [ -f tests/testenv.sh ] && . ./tests/testenv.sh; } || { echo "$0: run it from the build directory (where tests/testenv.sh is) or by make check TESTS=$0" >&2; exit 99; }
set -u
van=$1
case=${2:-exits}
b=${PSL_BUILDDIR:?run through make check, or set PSL_BUILDDIR}
node=$b/tests/integration/recovnode

skip() {
	echo "netns_cutoff.sh: SKIP: $*" >&2
	exit 77
}
case $case in exits | ghost | taken | worker) ;; *)
	echo "netns_cutoff.sh: unknown case '$case' (exits, ghost, taken or worker)" >&2
	exit 99
	;;
esac
[ "$(id -u)" = 0 ] || skip "needs root to make network namespaces"
command -v ip >/dev/null 2>&1 || skip "no ip command (apt-get install iproute2)"
command -v nft >/dev/null 2>&1 || skip "no nft command (apt-get install nftables)"

tag=pc$$ # namespace names; interface names stay short (<= 15 bytes)
hub=${tag}hub
dir=$(mktemp -d "${TMPDIR:-/tmp}/pslite-cutoff.XXXXXX")
pids=
made=
fail=0
ulimit -c 0 2>/dev/null
bad() { echo "netns_cutoff.sh $van $case: $*" >&2; fail=1; }
cleanup() {
	for p in $pids; do kill -9 "$p" 2>/dev/null; done
	wait 2>/dev/null
	for n in $made; do ip netns del "$n" 2>/dev/null; done
	rm -rf "$dir"
}
trap cleanup EXIT
trap 'exit 1' INT TERM

. "$PSL_SRCDIR/tests/integration/nshosts.sh"
nshost_hub "$hub"
i=1
for h in a b c; do
	ip netns add "$tag$h" || exit 1
	made="$made $tag$h"
	nshost_link "$tag$h" "$hub" "v$h" "10.77.0.$i/24"
	i=$((i + 1))
done
# the cut: B's port on the bridge drops everything, both ways (as a pulled
# cable: nobody is told, nothing is refused)
cut_b() {
	ip netns exec "$hub" nft -f - <<NFT 2>"$dir/err"
table bridge cutoff {
	chain f {
		type filter hook forward priority 0;
		iifname "vb" counter drop
		oifname "vb" counter drop
	}
}
NFT
}
cut_b || skip "nftables refused the rule: $(cat "$dir/err")"
ip netns exec "$hub" nft delete table bridge cutoff
sleep 1 # (the bridge's ports come up; nodes retry their connects anyway)

# the nodes are not run under timeout(1): a node's own exit is measured;
# every wait below is bounded, and the cleanup kills what is left
export DMLC_ENABLE_RDMA=$van DMLC_PS_ROOT_URI=10.77.0.1 DMLC_PS_ROOT_PORT=9100 \
	DMLC_NUM_SERVER=2 DMLC_NUM_WORKER=2 DMLC_INTERFACE=e0 UCX_TLS=tcp FI_PROVIDER=tcp \
	PS_RECOVERY=1 PS_HEARTBEAT_INTERVAL=1 PS_HEARTBEAT_TIMEOUT=4 PS_RECOVERY_WAIT=20 \
	PS_START_TIMEOUT=60 PS_REQUEST_TIMEOUT=30
unset DMLC_PORT DMLC_NODE_HOST
# start HOST ROLE RANK LOG [VAR=VALUE...]: a node in the background; its pid
# in $last
start() {
	sh=$1 sr=$2 sk=$3 sl=$4
	shift 4
	ip netns exec "$tag$sh" env DMLC_ROLE=$sr ${sk:+DMLC_RANK=$sk} "$@" "$node" >"$dir/$sl" 2>&1 &
	last=$!
	pids="$pids $last"
}
# wait_for LOG PATTERN SECONDS [PID]: fails at once if PID ended
wait_for() {
	k=0
	until grep -q "$2" "$dir/$1" 2>/dev/null; do
		[ -z "${4:-}" ] || kill -0 "$4" 2>/dev/null || return 1
		sleep 0.1
		k=$((k + 1))
		[ $k -lt $(($3 * 10)) ] || return 1
	done
}
# finish: the checks every run ends with, the logs if anything failed; exits
finish() {
	grep -l "FAILED\|AddressSanitizer\|runtime error" "$dir"/* >/dev/null 2>&1 &&
		bad "a node failed a check: $(grep -h "FAILED\|AddressSanitizer\|runtime error" "$dir"/* | head -n 3)"
	if [ $fail -ne 0 ]; then
		for f in "$dir"/*; do
			echo "----- $(basename "$f") -----" >&2
			tail -n 25 "$f" >&2
		done
	fi
	exit $fail
}
now() { date +%s%N; }
ms() { echo $((($2 - $1) / 1000000)); }

# the victim, on B: server 1, or (case worker) worker 1; vlog and nlog are
# the old one's log and its replacement's
vrole=server vlog=s1 nlog=s1b rounds=
[ "$case" = worker ] && vrole=worker vlog=w1 nlog=w1b rounds=RECOV_ROUNDS=100
start a scheduler "" sched
sched=$last
start a server 0 s0
hb=4
[ "$case" = ghost ] || [ "$case" = taken ] && hb=60
if [ "$vrole" = server ]; then
	start b server 1 s1 PS_HEARTBEAT_TIMEOUT=$hb
	victim=$last
	start c worker 1 w1
else
	start c server 1 s1
	start b worker 1 w1
	victim=$last
fi
start c worker 0 w0
w0=$last
wait_for w0 "round 60$" 60 "$w0" || { bad "worker 0 did not reach round 60"; finish; }

t0=$(now)
cut_b || bad "nftables refused the rule: $(cat "$dir/err")"
wait_for sched "lost $vrole 1" 15 "$sched" || { bad "the scheduler did not declare $vrole 1 lost within 15 s"; finish; }
t_lost=$(now)
# reconnect: B back on the network (the frames dropped until then counted)
reconnect() {
	dropped=$(ip netns exec "$hub" nft list table bridge cutoff | awk '/counter packets/ {
		for (f = 1; f < NF; f++) if ($f == "packets") n += $(f + 1) } END { print n + 0 }')
	ip netns exec "$hub" nft delete table bridge cutoff
	t_reconnect=$(now)
}
# the new server or worker 1: on B once reconnected, or (taken) on C before that
replace() {
	start "$1" $vrole 1 $nlog $rounds
	wait_for $nlog "ready (recovery 1)" 30 "$last" || { bad "the new $vrole 1 did not start as a recovery"; finish; }
	t_back=$(now)
}
# the cut-off node ends by itself (its heartbeats unanswered), or, as a
# ghost, when the scheduler tells it to stop after the reconnect
[ "$case" = taken ] && replace c
{ [ "$case" = ghost ] || [ "$case" = taken ]; } && reconnect
k=0
while kill -0 "$victim" 2>/dev/null && [ $k -lt 150 ]; do
	sleep 0.1
	k=$((k + 1))
done
t_exit=$(now)
if kill -0 "$victim" 2>/dev/null; then
	bad "the cut-off $vrole 1 was still running 15 s after the scheduler declared it lost"
else
	wait "$victim"
	code=$?
	[ $code -eq 3 ] || bad "the cut-off $vrole 1 exited $code, expected 3"
fi
if [ "$case" = ghost ]; then
	grep -q "lost the scheduler .*: the scheduler declared this node .* lost earlier" "$dir/$vlog" ||
		bad "the ghost $vrole 1 did not say that the scheduler stopped it"
	grep -q "WARN: refused a heartbeat from .* under the id of server 1" "$dir/sched" ||
		bad "the scheduler did not say that it refused the ghost"
elif [ "$case" = taken ]; then
	# (told to stop, or its connections closed: either way it says so)
	grep -q "lost the scheduler" "$dir/$vlog" ||
		bad "the ghost $vrole 1 did not say that it lost the scheduler"
else
	grep -q "ERROR: lost the scheduler .*no heartbeat answer" "$dir/$vlog" ||
		bad "the cut-off $vrole 1 did not say that it lost the scheduler"
	reconnect
fi
[ "$case" = taken ] || replace b
echo "netns_cutoff.sh $van $case: B cut off at worker 0's round 60 (the bridge dropped ${dropped:-no} frames)"
echo "netns_cutoff.sh $van $case: the scheduler declared $vrole 1 lost $(ms "$t0" "$t_lost") ms after the cut"
echo "netns_cutoff.sh $van $case: B reconnected $(ms "$t0" "$t_reconnect") ms after the cut"
echo "netns_cutoff.sh $van $case: the cut-off $vrole 1 exited $(ms "$t0" "$t_exit") ms after the cut: $(grep -m1 "lost the scheduler" "$dir/$vlog" | sed 's/.*ERROR: //' | cut -c1-120)..."
if [ "$case" = taken ]; then
	echo "netns_cutoff.sh $van $case: the new server 1 (on host C) served $(ms "$t_lost" "$t_back") ms after the loss, before the reconnect"
else
	echo "netns_cutoff.sh $van $case: the new $vrole 1 served $(ms "$t_exit" "$t_back") ms after the old one exited"
fi

# every other node ends, with 0
for p in $pids; do
	[ "$p" = "$victim" ] && continue
	k=0
	while kill -0 "$p" 2>/dev/null && [ $k -lt 600 ]; do
		sleep 0.1
		k=$((k + 1))
	done
	kill -0 "$p" 2>/dev/null && { bad "a node (pid $p) did not end within 60 s"; continue; }
	wait "$p"
	code=$?
	[ $code -eq 0 ] || bad "a node (pid $p) exited $code"
done
echo "netns_cutoff.sh $van $case: the job ended $(ms "$t0" "$(now)") ms after the cut"
# the nodes that talk to the victim heard of its loss and of its return
if [ "$vrole" = server ]; then
	heard="w0 w1" ends="w0 w1"
else
	heard="s0 s1" ends="w0 w1b"
fi
for n in $heard; do
	grep -q "lost $vrole 1" "$dir/$n" || bad "$n did not hear that $vrole 1 was lost"
	grep -q "$vrole 1 .* is back" "$dir/$n" || bad "$n did not hear that $vrole 1 is back"
done
# what the cut-off worker sent before the cut, delivered once B is back, is
# dropped (the line says so where it came): a server that used it would try
# to answer the lost worker
if [ "$vrole" = worker ]; then
	grep -h "cannot answer request .* of worker 1" "$dir/s0" "$dir/s1" | head -n 2 | grep . &&
		bad "a server used a request that the lost worker 1 sent before the cut"
	grep -h "dropped a message (data) from worker 1 .*: it was declared lost" "$dir/s0" "$dir/s1" |
		head -n 1 | sed 's/^.*WARN/a server: WARN/'
fi
for w in $ends; do
	grep -q "OK (" "$dir/$w" || bad "$w did not finish with OK"
	grep "recovnode worker" "$dir/$w" | tail -n 1
done
grep -q "takes the place of lost $vrole 1" "$dir/sched" ||
	bad "the scheduler did not give the new $vrole 1 the lost one's place"
finish
