#!/bin/bash
# pslite-run --hostfile over a real ssh: each host a network namespace with
# its own address (10.78.0.x on a veth bridge, as tests/integration/netns.sh)
# running Debian's sshd with keys made here; pslite-run runs in a "login"
# namespace of its own.
#   1. data: kvtest's data scenario, 1 scheduler + 2 servers + 2 workers
#      spread over 3 hosts, every node on its host's address;
#   2. code: worker 1 exits 7: pslite-run returns 7, every other process on
#      every host ends;
#   3. kill: every process of server 1's host (its sshd included) is killed
#      in the middle of a pslite-bench job: pslite-run ends the job, its
#      error names the host, nothing is left running on the others;
#   4. signal: SIGINT to pslite-run ends the job everywhere (exit 130);
#      SIGKILL to pslite-run: every host ends its processes all the same;
#   5. bad input: an unreachable host, a bad host-file line, too few slots:
#      one line, exit 2, nothing started.
# Needs root, iproute2, openssh-server and openssh-client; skips (77) with
# one line where one is missing.
[ -n "${PSL_BUILDDIR:-}" ] || { [ -f tests/testenv.sh ] && . ./tests/testenv.sh; } || { echo "$0: run it from the build directory (where tests/testenv.sh is) or by make check TESTS=$0" >&2; exit 99; }
me=ssh.sh why="to make network namespaces and run sshd"
. "$PSL_SRCDIR/tests/launch/common.sh"

hosts="h1 h2 h3"
lan 10.78.0 $hosts lg

ssh_hosts 10.78.0 lg $hosts

printf '%s\n' "# three hosts, two processes each" "10.78.0.1 slots=2" "10.78.0.2 slots=2" \
	"root@10.78.0.3 slots=2 # user@host, as ssh takes it" >"$dir/hosts"

# launch LIMIT LOG ARGS...: pslite-run in the login namespace
launch() {
	local limit=$1 log=$2
	shift 2
	ip netns exec "${tag}lg" timeout -k 5 "$limit" "$run" "$@" >"$log" 2>&1
}

# what still runs in the host namespaces besides their sshd (pid list)
leftovers() {
	local n p out=
	for n in $hosts; do
		for p in $(ip netns pids "$tag$n" 2>/dev/null); do
			case $(cat /proc/"$p"/comm 2>/dev/null) in sshd | "") ;; *) out="$out $n:$p:$(cat /proc/"$p"/comm 2>/dev/null)" ;; esac
		done
	done
	echo "$out"
}
expect_clean() { # what: nothing left on any host within 10 s
	local t=0 left
	while left=$(leftovers) && [ -n "$left" ] && [ $t -lt 20 ]; do
		sleep 0.5
		t=$((t + 1))
	done
	[ -z "$left" ] || bad "$1: still running on the hosts:$left"
}

# ------------------------------------------------------------- 1. data --
t0=$(date +%s)
KVTEST_SCENARIO=data launch 200 "$dir/data.log" --hostfile "$dir/hosts" -s 2 -w 2 --van zmq \
	--port 9100 --timeout 180 -x KVTEST_SCENARIO -x KVTEST_DIR="$dir" -x ASAN_OPTIONS -x UBSAN_OPTIONS \
	-- "$b/tests/integration/kvtest"
rc=$?
[ $rc -eq 0 ] || bad "data: pslite-run exited $rc"
for want in "10.78.0.1 scheduler\] kvtest scheduler 0: OK" "10.78.0.2 server 0\] kvtest server 0: OK" \
	"10.78.0.3 server 1\] kvtest server 1: OK" "10.78.0.1 worker 0\] kvtest worker 0: OK" \
	"10.78.0.2 worker 1\] kvtest worker 1: OK"; do
	grep -q "$want" "$dir/data.log" || bad "data: no '$want'"
done
# every node on its host's address
grep -q "10.78.0.1 scheduler\] .*listening on 10.78.0.1:9100" "$dir/data.log" || bad "data: the scheduler did not listen on 10.78.0.1:9100"
for want in "10.78.0.2 server 0" "10.78.0.3 server 1" "10.78.0.1 worker 0" "10.78.0.2 worker 1"; do
	h=${want%% *}
	grep -q "$want\] .*listening on $h:" "$dir/data.log" || bad "data: $want did not listen on $h"
done
if grep -q "ERROR\|FAILED\|AddressSanitizer\|runtime error:\|LeakSanitizer" "$dir/data.log"; then
	bad "data: an error in a job that ended well"
fi
expect_clean data
[ $fail -eq 0 ] || tail -n 60 "$dir/data.log" >&2
echo "ssh.sh: data: 1+2+2 over 3 hosts, exit $rc ($(($(date +%s) - t0)) s)"

# ------------------------------------------------------------- 2. code --
t0=$(date +%s)
# shellcheck disable=SC2016
launch 60 "$dir/code.log" --hostfile "$dir/hosts" -s 2 -w 2 --port 9101 -- /bin/sh -c \
	'if [ "$DMLC_ROLE" = worker ] && [ "$DMLC_RANK" = 1 ]; then sleep 1; exit 7; fi; exec sleep 100'
rc=$?
[ $rc -eq 7 ] || bad "code: pslite-run exited $rc, expected worker 1's 7"
grep -q "10.78.0.2 worker 1 exited with code 7" "$dir/code.log" || bad "code: no line naming worker 1 on 10.78.0.2"
[ $(($(date +%s) - t0)) -lt 40 ] || bad "code: took $(($(date +%s) - t0)) s"
expect_clean code
[ $fail -eq 0 ] || cat "$dir/code.log" >&2
echo "ssh.sh: code: exit $rc ($(($(date +%s) - t0)) s)"

# ------------------------------------------------------------- 3. kill --
t0=$(date +%s)
launch 120 "$dir/kill.log" --hostfile "$dir/hosts" -s 2 -w 2 --van zmq --port 9102 \
	-x ASAN_OPTIONS -x UBSAN_OPTIONS -- "$b/tools/pslite-bench" 65536 1 1 --seconds 90 &
lpid=$!
bg="$bg $lpid"
t=0
until grep -q "goodput" "$dir/kill.log" 2>/dev/null; do
	t=$((t + 1))
	[ $t -lt 600 ] || break
	sleep 0.1
done
grep -q "goodput" "$dir/kill.log" || bad "kill: the job never got going"
for p in $(ip netns pids "${tag}h3"); do kill -KILL "$p" 2>/dev/null; done
tk=$(date +%s)
wait $lpid
rc=$?
tend=$(date +%s)
[ $rc -ne 0 ] || bad "kill: pslite-run exited 0 after host 10.78.0.3 was killed"
[ $rc -ne 124 ] && [ $rc -ne 137 ] || bad "kill: pslite-run ran into its timeout"
[ $((tend - tk)) -le 30 ] || bad "kill: pslite-run took $((tend - tk)) s to end the job"
grep "^pslite-run:" "$dir/kill.log" | head -n 1 | grep -q "10.78.0.3" ||
	bad "kill: the first error does not name 10.78.0.3: $(grep -m1 '^pslite-run:' "$dir/kill.log")"
expect_clean kill
[ $fail -eq 0 ] || tail -n 30 "$dir/kill.log" >&2
echo "ssh.sh: kill: exit $rc, $((tend - tk)) s after the kill: $(grep -m1 '^pslite-run:' "$dir/kill.log")"
start_sshd h3
sleep 1

# ----------------------------------------------------------- 4. signal --
sleeps() { # the job's sleep 100 processes on the hosts
	local n p c=0
	for n in $hosts; do
		for p in $(ip netns pids "$tag$n" 2>/dev/null); do
			[ "$(tr '\0' ' ' 2>/dev/null <"/proc/$p/cmdline")" = "/bin/sleep 100 " ] && c=$((c + 1))
		done
	done
	echo $c
}
# sleep_job NAME PORT SIGNAL: a job of 5 sleep 100 on the hosts; once all
# run, SIGNAL to pslite-run (found by its own arguments); sets rc
sleep_job() {
	local name=$1 port=$2 sig=$3 lpid t=0 p
	# (the subshell's own stderr away: no "Killed" line from bash)
	launch 60 "$dir/$name.log" --hostfile "$dir/hosts" -s 2 -w 2 --port "$port" -- /bin/sleep 100 2>/dev/null &
	lpid=$!
	bg="$bg $lpid"
	until [ "$(sleeps)" -ge 5 ] || [ $t -ge 100 ]; do
		sleep 0.2
		t=$((t + 1))
	done
	[ "$(sleeps)" -eq 5 ] || bad "$name: $(sleeps) sleeps ran, expected 5: $(leftovers)"
	for p in $(pgrep -f -- "^$run --hostfile $dir/hosts -s 2 -w 2 --port $port"); do kill -"$sig" "$p"; done
	wait $lpid
	rc=$?
	expect_clean "$name"
}
t0=$(date +%s)
sleep_job signal 9103 INT
[ $rc -eq 130 ] || bad "signal: pslite-run exited $rc, expected 130"
[ $fail -eq 0 ] || cat "$dir/signal.log" >&2
echo "ssh.sh: signal: exit $rc ($(($(date +%s) - t0)) s)"

# pslite-run itself killed (SIGKILL, nothing to clean up with): its ssh
# connections close, and every host ends its processes
t0=$(date +%s)
sleep_job gone 9105 KILL
echo "ssh.sh: gone: pslite-run killed, every host clean ($(($(date +%s) - t0)) s)"

# -------------------------------------------------------- 5. bad input --
# bad_case NAME WANT HOSTFILE-LINES...: exit 2, one line holding WANT
bad_case() {
	local name=$1 want=$2 t0
	shift 2
	printf '%s\n' "$@" >"$dir/bad-hosts"
	t0=$(date +%s)
	launch 60 "$dir/bad.log" --hostfile "$dir/bad-hosts" -s 2 -w 2 --port 9104 \
		--ssh-opts "-o ConnectTimeout=3" -- "${badcmd:-/bin/sleep}" 100
	rc=$?
	[ $rc -eq 2 ] || bad "$name: pslite-run exited $rc, expected 2"
	[ "$(wc -l <"$dir/bad.log")" -eq 1 ] || bad "$name: $(wc -l <"$dir/bad.log") lines, expected 1"
	grep -q -- "$want" "$dir/bad.log" || bad "$name: no '$want' in: $(cat "$dir/bad.log")"
	[ $(($(date +%s) - t0)) -lt 30 ] || bad "$name: took $(($(date +%s) - t0)) s"
	[ -z "$(leftovers)" ] || bad "$name: something was started: $(leftovers)"
	echo "ssh.sh: $name: $(cat "$dir/bad.log")"
}
bad_case unreachable "host 10.78.0.99: .*10.78.0.99" "10.78.0.1 slots=2" "10.78.0.2 slots=2" "10.78.0.99 slots=2"
bad_case badline "bad-hosts:2: 'slot=2': expected slots=N" "10.78.0.1 slots=2" "10.78.0.2 slot=2"
bad_case slots "too few slots: the job is 5 processes" "10.78.0.1 slots=2" "10.78.0.2 slots=2"
badcmd=/no/such/program bad_case nocmd "no command '/no/such/program' there" "10.78.0.1 slots=5"
exit $fail
