#!/bin/sh
# van_ucx over real verbs: in the RDMA test VM, with UCX restricted to
# rc_verbs,ud_verbs,self on rxe0, kvtest's data job (keys of 0 B to 16 MiB,
# every form of push and pull, values checked) and a pslite-server sync job
# (sums checked by pslite-check). Fails when UCX carries the messages over
# anything but rc_verbs (a silent fall-back to tcp included). One boot.
[ -n "${PSL_BUILDDIR:-}" ] || { [ -f tests/testenv.sh ] && . ./tests/testenv.sh; } || { echo "$0: run it from the build directory (where tests/testenv.sh is) or by make check TESTS=$0" >&2; exit 99; }
. "$PSL_SRCDIR/tests/vm/lib.sh"
vm_main 420 "$@"

# GID 0 (link-local, from the MAC): the IPv4-mapped GID 1 of rxe times out
export UCX_TLS=rc_verbs,ud_verbs,self UCX_IB_GID_INDEX=0 PS_VERBOSE=1
unset UCX_NET_DEVICES

vm_step "ucx_info"
ucx_info -d >"$vm_tmp/info" 2>&1
grep -A1 'Transport: rc_verbs' "$vm_tmp/info" | grep -q 'Device: rxe0' ||
	vm_bad "ucx_info -d lists no rc_verbs transport on rxe0"

# every endpoint of the job must carry its active messages over rc_verbs
lanes() { # lanes WHAT LOG
	n=$(grep -c 'active messages over' "$2")
	other=$(grep 'active messages over' "$2" | grep -v 'active messages over rc_verbs/rxe0' | head -n 3)
	echo "$1: $n endpoint(s), $(grep -c 'active messages over rc_verbs/rxe0' "$2") over rc_verbs/rxe0"
	[ "$n" -gt 0 ] || vm_bad "$1: the log names no transport (van_ucx's 'active messages over' lines)"
	[ -z "$other" ] || vm_bad "$1: endpoints over another transport than rc_verbs: $other"
	grep -q 'UCX [0-9.]*: .*rc_verbs/rxe0' "$2" || vm_bad "$1: UCX did not list rc_verbs/rxe0"
	if grep 'INFO: UCX [0-9.]*:' "$2" | grep -q 'tcp/'; then
		vm_bad "$1: UCX offered tcp although UCX_TLS excludes it"
	fi
}

vm_step "kvtest data, 1 server, 1 worker"
PSL_JOB_LOG=$vm_tmp/data.log "$vm_src/tests/integration/job.sh" ucx data 1 1 150 ||
	vm_bad "the kvtest data job failed"
[ -f "$vm_tmp/data.log" ] && lanes "data job" "$vm_tmp/data.log"

vm_step "pslite-server sync job"
# (not after a failed data job: it would wait for its whole limit as well)
[ $vm_fail -eq 0 ] || { echo "not run: the data job failed"; exit 1; }
PSL_JOB_LOG=$vm_tmp/sync.log "$vm_src/tests/integration/server_job.sh" ucx sync 150 ||
	vm_bad "the pslite-server sync job failed"
[ -f "$vm_tmp/sync.log" ] && lanes "sync job" "$vm_tmp/sync.log"
vm_step "done"
exit $vm_fail
