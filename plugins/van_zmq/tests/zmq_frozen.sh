#!/bin/sh
# a frozen server over van zmq, 4 MiB values
[ -n "${PSL_BUILDDIR:-}" ] || { [ -f tests/testenv.sh ] && . ./tests/testenv.sh; } || { echo "$0: run it from the build directory (where tests/testenv.sh is) or by make check TESTS=$0" >&2; exit 99; }
FROZEN_BYTES=4194304; export FROZEN_BYTES
exec "$PSL_SRCDIR/tests/integration/frozen.sh" zmq
