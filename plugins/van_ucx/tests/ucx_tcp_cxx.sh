#!/bin/sh
# ps-lite's C++ API in jobs of C++ programs (tests/cxx/cxx_job.sh), over van ucx (UCX_TLS=tcp)
[ -n "${PSL_BUILDDIR:-}" ] || { [ -f tests/testenv.sh ] && . ./tests/testenv.sh; } || { echo "$0: run it from the build directory (where tests/testenv.sh is) or by make check TESTS=$0" >&2; exit 99; }
UCX_TLS=tcp; export UCX_TLS
exec "$PSL_SRCDIR/tests/cxx/cxx_job.sh" ucx
