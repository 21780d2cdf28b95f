#!/bin/sh
# Issue 30's ordering cases with PyTorch on a real GPU (tests/gpu/gpu_order.py:
# a slow kernel then push; a queued reader then pull; a server answering
# from a tensor a kernel writes; a side stream; an AF batch; a pulled
# tensor freed at once) and StepMesh's
# test_fserver.py with CUDA tensors (python/tests/fserver_dtype_job.py
# cuda), over each van given (default zmq). Skips with one line (exit 77) without torch or a GPU
# that torch sees, which is every CI machine; with torch but no GPU it
# first runs the script on CPU tensors (GPU_ORDER_DEVICE=cpu) and fails if
# that fails.
#   tests/gpu/gpu_order.sh [VAN...]
[ -n "${PSL_BUILDDIR:-}" ] || { [ -f tests/testenv.sh ] && . ./tests/testenv.sh; } || { echo "$0: run it from the build directory (where tests/testenv.sh is) or by make check TESTS=$0" >&2; exit 99; }
set -u
b=${PSL_BUILDDIR:?run through make check, or set PSL_BUILDDIR}
s=${PSL_SRCDIR:?}
# PSL_PYTHON, else the first of python3 on PATH and Debian's that has torch
py=
for p in ${PSL_PYTHON:-$(command -v python3) /usr/bin/python3}; do
	[ -x "$p" ] && "$p" -c 'import torch' 2>/dev/null && { py=$p; break; }
done
[ -n "$py" ] || { echo "gpu_order.sh: SKIP: no python3 with torch (PSL_PYTHON names one)"; exit 77; }
if grep -q 'fsanitize=address' "$b/Makefile" 2>/dev/null; then
	echo "gpu_order.sh: SKIP: sanitizer build (an instrumented libpslite.so cannot be loaded into python3 without preloading the sanitizer runtimes); the plain build runs it"
	exit 77
fi
lib=${PSLITE_LIB:-$b/.libs/libpslite.so}
log=$(mktemp "${TMPDIR:-/tmp}/pslite-gpuorder.XXXXXX")
trap 'rm -f "$log"' EXIT
[ $# -gt 0 ] || set -- zmq
# job VAN SCRIPT OK [ENV...]: SCRIPT (and its arguments) in a job; 0 when
# a worker's line matched OK
job() {
	van=$1 script=$2 ok=$3
	shift 3
	# shellcheck disable=SC2086
	env PSLITE_LIB="$lib" PYTHONPATH="$s/python:$s/python/tests" DMLC_NODE_HOST=127.0.0.1 "$@" \
		timeout -k 10 200 "$b/tools/pslite-run" -s 1 -w 1 --van "$van" --timeout 180 -- \
		"$py" $script >"$log" 2>&1
	rc=$?
	grep "gpu_order\|fserver_dtype" "$log"
	[ $rc -eq 0 ] && grep -q "$ok" "$log" && return 0
	tail -n 30 "$log" >&2
	echo "gpu_order.sh ($van, $script): pslite-run exited $rc, no \"$ok\" from the worker" >&2
	return 1
}
order="$s/tests/gpu/gpu_order.py"
if ! "$py" -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 3)'; then
	# no GPU: the script's dry run on CPU tensors keeps it working
	job "$1" "$order" "gpu_order worker: OK" GPU_ORDER_DEVICE=cpu >/dev/null || exit 1
	echo "gpu_order.sh: SKIP: torch ($py) sees no GPU (the dry run on CPU tensors passed)"
	exit 77
fi
fail=0
for van in "$@"; do
	job "$van" "$order" "gpu_order worker: OK" || fail=1
	# StepMesh's test_fserver.py with CUDA tensors: the server gets them
	# typed and shaped on its GPU, answers sum(batch)
	job "$van" "$s/python/tests/fserver_dtype_job.py cuda" "fserver_dtype worker 0: OK" ||
		fail=1
done
[ $fail -eq 0 ] && echo "gpu_order.sh: OK"
exit $fail
