#!/bin/sh
# kvtest's hang scenario over van ucx, UCX restricted to shared memory
# (posix and sysv segments, cross-memory attach, self for loopback).
[ -n "${PSL_BUILDDIR:-}" ] || { [ -f tests/testenv.sh ] && . ./tests/testenv.sh; } || { echo "$0: run it from the build directory (where tests/testenv.sh is) or by make check TESTS=$0" >&2; exit 99; }
UCX_TLS=posix,sysv,cma,self; export UCX_TLS
exec "$PSL_SRCDIR/tests/integration/job.sh" ucx hang 2 2
