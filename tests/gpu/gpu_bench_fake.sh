#!/bin/sh
# tests/gpu/gpu_bench.sh (the real-GPU benchmark) against the fake CUDA
# runtime, --quick: keeps the script and bench/cuda_copy_ref working where
# there is no GPU (its figures mean nothing: the fake copies with memmove);
# and gpu_bench.sh without a runtime's GPU skips with one line.
[ -n "${PSL_BUILDDIR:-}" ] || { [ -f tests/testenv.sh ] && . ./tests/testenv.sh; } || { echo "$0: run it from the build directory (where tests/testenv.sh is) or by make check TESTS=$0" >&2; exit 99; }
b=${PSL_BUILDDIR:?}
# a script's check: the plain build's (test_cuda, test_cuda_order and the
# cuda_*.sh jobs run the CUDA path under the sanitizers)
me=gpu_bench_fake.sh
. "$PSL_SRCDIR/tests/plain_only.sh"
fake=$b/tests/unit/.libs/libfakecudart.so
[ -f "$fake" ] || { echo "gpu_bench_fake.sh: $fake is not built (make check builds it)" >&2; exit 99; }
out=$(FAKE_CUDA_DEVICES=0 PS_CUDA_LIB=$fake "$PSL_SRCDIR/tests/gpu/gpu_bench.sh" --quick 2>&1)
rc=$?
[ $rc -eq 77 ] && echo "$out" | grep -q "SKIP: no GPU: .*finds no GPU" ||
	{ echo "gpu_bench_fake.sh: without a GPU: exit $rc, '$out', expected exit 77 and one SKIP line" >&2; exit 1; }
PS_CUDA_LIB=$fake exec "$PSL_SRCDIR/tests/gpu/gpu_bench.sh" --quick
