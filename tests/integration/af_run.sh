#!/bin/sh
# The AF benchmark's short form over one van (af_VAN.sh sets the van up):
# 2 FFN servers x 2 attention workers with the failure checks (batch over
# the servers' limit, answer larger than the pull buffer, a server failing a
# batch, answering twice, unknown batch) and the compute loop; then 1 x 1
# with the callback and 5 micro-batches of odd sizes; then 2 x 1 routed by
# key range (each tensor to the server whose range holds its key).
[ -n "${PSL_BUILDDIR:-}" ] || { [ -f tests/testenv.sh ] && . ./tests/testenv.sh; } || { echo "$0: run it from the build directory (where tests/testenv.sh is) or by make check TESTS=$0" >&2; exit 99; }
set -u
van=$1
j=$PSL_SRCDIR/tests/integration/af_job.sh
"$j" "$van" 2 2 --steps 20 --warmup 2 --checks --serve loop || exit 1
"$j" "$van" 1 1 --steps 20 --warmup 2 --serve callback --micro-batches 5 \
	--push-bytes 4100 --pull-bytes 65540 || exit 1
"$j" "$van" 2 1 --steps 10 --warmup 1 --route keys --push-bytes 65536 --pull-bytes 131072 || exit 1
