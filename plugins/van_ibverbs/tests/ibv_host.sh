#!/bin/sh
# van_ibverbs on a machine without an RDMA device (make check on most hosts):
# a job over ibverbs stops at once with the van's "no ibverbs device" line, and
# a bad setting is one line naming it (settings are read before the device).
# Skips (77) where an ibverbs device exists: the VM suite covers that case.
[ -n "${PSL_BUILDDIR:-}" ] || { [ -f tests/testenv.sh ] && . ./tests/testenv.sh; } || { echo "$0: run it from the build directory (where tests/testenv.sh is) or by make check TESTS=$0" >&2; exit 99; }
set -u
b=${PSL_BUILDDIR:?run through make check}
if [ -n "$(ls /sys/class/infiniband 2>/dev/null)" ]; then
	echo "ibv_host.sh: SKIP: this machine has an ibverbs device (the VM suite tests it)"
	exit 77
fi
log=$(mktemp "${TMPDIR:-/tmp}/ibv-host.XXXXXX")
trap 'rm -f "$log"' EXIT
fail=0
timeout 120 "$b/tools/pslite-run" -s 1 -w 1 --van ibverbs --timeout 100 -- \
	"$b/tests/integration/kvtest" >"$log" 2>&1
rc=$?
if [ $rc -eq 0 ] || [ $rc -eq 124 ] ||
	! grep -q "DMLC_ENABLE_RDMA=ibverbs but this machine has no ibverbs device (ibv_get_device_list found none): " "$log" ||
	grep -q "AddressSanitizer\|runtime error" "$log"; then
	echo "ibv_host.sh: no device: rc $rc, expected a failure with the van's line"; cat "$log"; fail=1
fi
# DMLC_ENABLE_RDMA=1 is ibverbs
DMLC_ENABLE_RDMA=1 timeout 120 "$b/tools/pslite-run" -s 1 -w 1 --timeout 100 -- \
	"$b/tests/integration/kvtest" >"$log" 2>&1
if ! grep -q "this machine has no ibverbs device" "$log"; then
	echo "ibv_host.sh: DMLC_ENABLE_RDMA=1 did not reach van_ibverbs"; cat "$log"; fail=1
fi
for kv in BYTEPS_RDMA_RX_DEPTH=abc BYTEPS_RDMA_START_DEPTH=0 DMLC_SPLIT_QP_LAG=99 \
	PS_IBV_MR_CACHE=2; do
	env "$kv" timeout 120 "$b/tools/pslite-run" -s 1 -w 1 --van ibverbs --timeout 100 -- \
		"$b/tests/integration/kvtest" >"$log" 2>&1
	rc=$?
	if [ $rc -eq 0 ] || ! grep -q "van_ibverbs\] ERROR: $kv: expected" "$log" ||
		grep -q "no ibverbs device" "$log"; then
		echo "ibv_host.sh: $kv: rc $rc, expected one line naming it"; cat "$log"; fail=1
	fi
done
exit $fail
