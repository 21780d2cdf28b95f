#!/bin/sh
# GPU buffers (--mem cpu2gpu, gpu2gpu, gpu2cpu) against the fake CUDA runtime (tests/integration/cuda_job.sh), over van ucx (tcp)
[ -n "${PSL_BUILDDIR:-}" ] || { [ -f tests/testenv.sh ] && . ./tests/testenv.sh; } || { echo "$0: run it from the build directory (where tests/testenv.sh is) or by make check TESTS=$0" >&2; exit 99; }
UCX_TLS=tcp; export UCX_TLS
exec "$PSL_SRCDIR/tests/integration/cuda_job.sh" ucx
