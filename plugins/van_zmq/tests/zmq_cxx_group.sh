#!/bin/sh
# ps-lite's instance groups in one process through the C++ API (tests/cxx/cxx_group.sh), over van zmq
[ -n "${PSL_BUILDDIR:-}" ] || { [ -f tests/testenv.sh ] && . ./tests/testenv.sh; } || { echo "$0: run it from the build directory (where tests/testenv.sh is) or by make check TESTS=$0" >&2; exit 99; }
exec "$PSL_SRCDIR/tests/cxx/cxx_group.sh" zmq
