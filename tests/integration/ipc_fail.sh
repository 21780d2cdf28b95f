#!/bin/sh
# BYTEPS_ENABLE_IPC=1 when shared memory fails (over van zmq; the IPC code is
# the core's, the same for every van):
#  1. /dev/shm full (a 2 MiB tmpfs over it, in a mount namespace of the
#     test's own, 8 MiB rings asked for): one warning naming /dev/shm and
#     PS_IPC_BUF_MB per ring, and the data goes through the van, checked;
#  2. /dev/shm read-only: one warning per node naming it, data through the van;
#  3. a worker killed while it pushes and pulls through its ring: the others
#     fail with the lost node (nothing hangs); the server removes the dead
#     worker's ring, and the next IPC job's start removes the marker it left;
#  4. the whole job killed by pslite-run --timeout: pslite-run removes the
#     rings and markers its nodes left (in a /dev/shm of the test's own).
[ -n "${PSL_BUILDDIR:-}" ] || { [ -f tests/testenv.sh ] && . ./tests/testenv.sh; } || { echo "$0: run it from the build directory (where tests/testenv.sh is) or by make check TESTS=$0" >&2; exit 99; }
set -u
b=${PSL_BUILDDIR:?run through make check, or set PSL_BUILDDIR}
dir=$(mktemp -d "${TMPDIR:-/tmp}/pslite-ipcfail.XXXXXX")
trap 'rm -rf "$dir"' EXIT
ulimit -c 0 2>/dev/null
fail=0
bad() { echo "ipc_fail.sh: $*" >&2; fail=1; }
export BYTEPS_ENABLE_IPC=1
bench() { # log, then the pslite-run arguments' tail
	log=$1
	shift
	timeout -k 10 120 "$b/tools/pslite-run" -s 1 -w 1 --van zmq --timeout 100 "$@" \
		"$b/tools/pslite-bench" 1048576 1 1 --seconds 2 >"$log" 2>&1
}

if unshare -m true 2>/dev/null; then
	for case in full ro; do
		log=$dir/$case
		opt=size=2m
		[ $case = ro ] && opt=ro,size=2m
		PS_IPC_BUF_MB=8 IPC_OPT=$opt B=$b unshare -m sh -c '
			mount -t tmpfs -o "$IPC_OPT" tmpfs /dev/shm || exit 99
			exec timeout -k 10 120 "$B/tools/pslite-run" -s 1 -w 1 --van zmq --timeout 100 -- \
				"$B/tools/pslite-bench" 1048576 1 1 --seconds 2' >"$log" 2>&1
		rc=$?
		[ $rc -eq 0 ] || bad "$case: pslite-run exited $rc (the van should have carried the data)"
		grep -q "pslite-bench summary: push_pull .* 0 errors, data checked" "$log" ||
			bad "$case: the worker did not check its data"
		if [ $case = full ]; then
			n=$(grep -c "cannot make a 8 MiB shared-memory ring for node .* in /dev/shm (No space left on device): data to it goes through the van (.*PS_IPC_BUF_MB)" "$log")
			[ "$n" -eq 2 ] || bad "full: $n warnings about a ring /dev/shm had no room for, expected 2 (worker and server)"
		else
			n=$(grep -c "BYTEPS_ENABLE_IPC=1: cannot write /dev/shm/pslite-ipcnode-.*(Read-only file system).*is /dev/shm writable" "$log")
			[ "$n" -eq 2 ] || bad "ro: $n warnings about a read-only /dev/shm, expected 2"
		fi
		[ $fail -eq 0 ] || { echo "----- $case -----" >&2; tail -n 20 "$log" >&2; }
	done
	# 4. the whole job ended by --timeout (every node killed in the middle
	#    of its traffic): pslite-run removes the rings and markers they left
	log=$dir/killall
	f0=$fail
	PS_IPC_BUF_MB=8 B=$b unshare -m sh -c '
		mount -t tmpfs -o size=64m tmpfs /dev/shm || exit 99
		timeout -k 10 60 "$B/tools/pslite-run" -s 1 -w 1 --van zmq --timeout 4 -- \
			"$B/tools/pslite-bench" 1048576 1 1 --seconds 60
		echo "EXIT $?"; echo "LEFT $(ls /dev/shm | wc -l)"' >"$log" 2>&1
	grep -q "^EXIT 124" "$log" || bad "killall: pslite-run did not end the job at --timeout"
	grep -q "pslite-run: removed [1-9][0-9]* shared-memory file(s)" "$log" ||
		bad "killall: pslite-run did not say it removed the nodes' files"
	grep -q "^LEFT 0" "$log" || bad "killall: files left in /dev/shm ($(grep LEFT "$log"))"
	[ $fail -eq $f0 ] || { echo "----- killall -----" >&2; grep -v DEBUG "$log" | tail -n 20 >&2; }
else
	echo "ipc_fail.sh: cases full, ro and killall skipped: no mount namespace here (unshare -m needs root)"
fi

# 3. the worker killed 1 s into its loop
f0=$fail
log=$dir/kill
IPC_DIR=$dir timeout -k 10 120 "$b/tools/pslite-run" -s 1 -w 1 --van zmq --timeout 100 --keep-going -- \
	sh -c 'if [ "$DMLC_ROLE" = worker ]; then
			"$@" >"$IPC_DIR/w.out" 2>&1 & p=$!; echo $p >"$IPC_DIR/w.pid"
			i=0
			until grep -q "pslite-bench: push_pull" "$IPC_DIR/w.out" || [ $i -ge 600 ]; do
				sleep 0.1; i=$((i + 1)); done
			sleep 1; kill -9 $p; wait $p; echo "EXIT killed"; exit 137
		fi
		exec "$@"' sh "$b/tools/pslite-bench" 1048576 1 1 --seconds 30 >"$log" 2>&1
rc=$?
[ $rc -ne 124 ] || bad "kill: the job hung"
grep -q "\[worker 0\] EXIT killed" "$log" || bad "kill: the worker was not killed"
grep "^\[server 0\]" "$log" | grep -q "lost" || bad "kill: the server did not report the lost worker"
wpid=$(cat "$dir/w.pid" 2>/dev/null)
if [ -n "$wpid" ]; then
	ls /dev/shm | grep -q "^pslite-ipc-$wpid-" && bad "kill: the dead worker's ring is still in /dev/shm"
	left=$(grep -l "^$wpid " /dev/shm/pslite-ipcnode-* 2>/dev/null)
	[ -n "$left" ] || echo "ipc_fail.sh: (the killed worker left no marker)"
	bench "$dir/next" -- || bad "kill: the next IPC job failed"
	left=$(grep -l "^$wpid " /dev/shm/pslite-ipcnode-* 2>/dev/null)
	[ -z "$left" ] || bad "kill: the next IPC job's start did not remove $left"
fi
[ $fail -eq $f0 ] || { echo "----- kill -----" >&2; grep -v DEBUG "$log" | tail -n 20 >&2; }
[ $fail -eq 0 ] && echo "ipc_fail.sh: full and read-only /dev/shm, killed worker, killed job checked"
exit $fail
