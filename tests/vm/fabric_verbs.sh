#!/bin/sh
# van_fabric over real verbs: in the RDMA test VM, with libfabric's
# verbs;ofi_rxm provider on rxe0, kvtest's data job (keys of 0 B to 16 MiB,
# every form of push and pull, values checked) and a pslite-server sync job
# (sums checked by pslite-check). Fails when another provider is chosen.
# One boot.
[ -n "${PSL_BUILDDIR:-}" ] || { [ -f tests/testenv.sh ] && . ./tests/testenv.sh; } || { echo "$0: run it from the build directory (where tests/testenv.sh is) or by make check TESTS=$0" >&2; exit 99; }
. "$PSL_SRCDIR/tests/vm/lib.sh"
vm_main 420 "$@"

# van_fabric matches FI_PROVIDER's names against each part of a layered
# provider's name: "verbs" selects verbs;ofi_rxm (checked below).
# FI_UNIVERSE_SIZE: with its default, verbs;ofi_rxm fails to create its
# completion queue on rxe ("Unable to create verbs CQ").
export FI_PROVIDER=verbs FI_UNIVERSE_SIZE=16 PS_VERBOSE=1

vm_step "fi_info"
fi_info -p 'verbs;ofi_rxm' -t FI_EP_RDM >"$vm_tmp/info" 2>&1
grep -q 'domain: rxe0' "$vm_tmp/info" || vm_bad "fi_info finds no verbs;ofi_rxm on rxe0"

prov() { # prov WHAT LOG: every node chose verbs;ofi_rxm on rxe0
	n=$(grep -c 'DEBUG: provider ' "$2")
	other=$(grep 'DEBUG: provider ' "$2" | grep -v 'DEBUG: provider verbs;ofi_rxm ' | head -n 3)
	echo "$1: $n node(s), $(grep -c 'on verbs;ofi_rxm/rxe0' "$2") endpoint(s) on verbs;ofi_rxm/rxe0"
	[ "$n" -gt 0 ] || vm_bad "$1: the log names no provider (van_fabric's 'provider' lines)"
	[ -z "$other" ] || vm_bad "$1: another provider than verbs;ofi_rxm: $other"
	[ "$(grep -c 'on verbs;ofi_rxm/rxe0' "$2")" = "$n" ] ||
		vm_bad "$1: not every endpoint is on verbs;ofi_rxm/rxe0"
}

vm_step "kvtest data, 1 server, 1 worker"
PSL_JOB_LOG=$vm_tmp/data.log "$vm_src/tests/integration/job.sh" fabric data 1 1 150 ||
	vm_bad "the kvtest data job failed"
[ -f "$vm_tmp/data.log" ] && prov "data job" "$vm_tmp/data.log"

vm_step "pslite-server sync job"
PSL_JOB_LOG=$vm_tmp/sync.log "$vm_src/tests/integration/server_job.sh" fabric sync 150 ||
	vm_bad "the pslite-server sync job failed"
[ -f "$vm_tmp/sync.log" ] && prov "sync job" "$vm_tmp/sync.log"
vm_step "done"
exit $vm_fail
