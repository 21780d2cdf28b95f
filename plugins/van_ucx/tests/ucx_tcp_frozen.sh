#!/bin/sh
# a frozen server over van ucx (TCP), 4 MiB values: rendezvous into lent
# buffers are in flight when it freezes
[ -n "${PSL_BUILDDIR:-}" ] || { [ -f tests/testenv.sh ] && . ./tests/testenv.sh; } || { echo "$0: run it from the build directory (where tests/testenv.sh is) or by make check TESTS=$0" >&2; exit 99; }
UCX_TLS=tcp; export UCX_TLS
FROZEN_BYTES=4194304; export FROZEN_BYTES
exec "$PSL_SRCDIR/tests/integration/frozen.sh" ucx
