#!/bin/sh
# ps-lite's instance groups in one process through the C++ API (tests/cxx/cxx_group.sh), over van fabric (FI_PROVIDER=tcp)
[ -n "${PSL_BUILDDIR:-}" ] || { [ -f tests/testenv.sh ] && . ./tests/testenv.sh; } || { echo "$0: run it from the build directory (where tests/testenv.sh is) or by make check TESTS=$0" >&2; exit 99; }
FI_PROVIDER=tcp; export FI_PROVIDER
exec "$PSL_SRCDIR/tests/cxx/cxx_group.sh" fabric
