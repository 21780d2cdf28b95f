#!/bin/sh
# pslite-vantest --strict, the van conformance suite, over every van that runs
# on real verbs, in the RDMA test VM (one boot): van_ibverbs on rxe0, van_ucx
# with UCX restricted to rc_verbs,ud_verbs,self and van_fabric on
# libfabric's verbs;ofi_rxm. A van that was not built is skipped with one
# line; the test skips when none of them was. Fails when a case fails.
# By hand, one van: PSL_VM_VANS="ucx" tests/vm/vantest_vm.sh
[ -n "${PSL_BUILDDIR:-}" ] || { [ -f tests/testenv.sh ] && . ./tests/testenv.sh; } || { echo "$0: run it from the build directory (where tests/testenv.sh is) or by make check TESTS=$0" >&2; exit 99; }
. "$PSL_SRCDIR/tests/vm/lib.sh"
vm_main 1500 "$@"

# Each van reads only its own transport's settings:
# UCX: GID 0, as rxe's IPv4-mapped GID 1 times out ("Endpoint timeout"), and
# rc_verbs needs ud_verbs beside it ("no auxiliary transport");
# libfabric: with the default FI_UNIVERSE_SIZE, verbs;ofi_rxm fails to create
# its completion queue on rxe ("Unable to create verbs CQ").
UCX_TLS=rc_verbs,ud_verbs,self UCX_IB_GID_INDEX=0
FI_PROVIDER='verbs;ofi_rxm' FI_UNIVERSE_SIZE=16
export UCX_TLS UCX_IB_GID_INDEX FI_PROVIDER FI_UNIVERSE_SIZE
unset UCX_NET_DEVICES

vantest=$PSL_BUILDDIR/tools/pslite-vantest
vans=${PSL_VM_VANS:-ibverbs ucx fabric}
ran=0

# find_van NAME: the path of van_NAME.so in PS_VAN_PATH, or nothing
find_van() {
	(
		IFS=:
		for d in ${PS_VAN_PATH:-}; do
			[ -f "$d/van_$1.so" ] && { echo "$d/van_$1.so"; exit 0; }
		done
	)
}

# vantest VAN [pslite-vantest options...]: one van's run, under 600 s
vantest() {
	name=$1
	shift
	so=$(find_van "$name")
	if [ -z "$so" ]; then
		echo "SKIP van $name: van_$name.so was not built (not in PS_VAN_PATH=${PS_VAN_PATH:-})"
		return 0
	fi
	ran=$((ran + 1))
	vm_step "pslite-vantest --strict $name"
	t=$(date +%s)
	timeout -k 10 600 "$vantest" --strict --timeout 120 "$@" "$so" >"$vm_tmp/$name.log" 2>&1
	rc=$?
	cat "$vm_tmp/$name.log"
	echo "van $name: exit $rc in $(($(date +%s) - t)) s"
	[ $rc -eq 0 ] || vm_bad "pslite-vantest --strict $name failed (exit $rc)"
	grep -q '^PASS connect$' "$vm_tmp/$name.log" ||
		vm_bad "$name: the connect case did not pass: the van never carried a message here"
}

for van in $vans; do
	case $van in
	ibverbs)
		vantest ibverbs --bad-setting BYTEPS_RDMA_RX_DEPTH=lots \
			--bad-setting PS_BUSY_POLL=2
		;;
	ucx) vantest ucx --bad-setting PS_UCX_INLINE=lots --bad-setting PS_BUSY_POLL=2 ;;
	fabric) vantest fabric --bad-setting PS_FABRIC_INLINE=lots --bad-setting PS_BUSY_POLL=2 ;;
	*) vm_bad "PSL_VM_VANS: unknown van '$van' (expected ibverbs, ucx or fabric)" ;;
	esac
done
vm_step "done"
[ $ran -gt 0 ] || vm_skip "none of van_ibverbs, van_ucx, van_fabric was built"
exit $vm_fail
