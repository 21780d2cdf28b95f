#!/bin/sh
# GPU buffers through whole jobs, with the fake CUDA runtime (no GPU here):
#   cuda_job.sh VAN
# pslite-bench (1 scheduler, 1 server, 1 worker) with --mem cpu2gpu, gpu2gpu
# and gpu2cpu, in push-pull, push only, pull only and fused push-pull, every
# pull checked against what was pushed, and pslite-afbench --mem gpu (AF
# batches from and into GPU memory); the fake runtime's device memory is
# out of the host's reach, so a GPU buffer read or written as host memory
# crashes the job. Then: the pinned pool does not grow with the requests
# (FAKE_CUDA_STATS at exit), a GPU copy that fails (FAKE_CUDA_FAIL) fails
# requests and ends the job with exit 1, no hang, and a GPU mode on a
# machine without a GPU is one line, exit 2. Needs PSL_BUILDDIR.
[ -n "${PSL_BUILDDIR:-}" ] || { [ -f tests/testenv.sh ] && . ./tests/testenv.sh; } || { echo "$0: run it from the build directory (where tests/testenv.sh is) or by make check TESTS=$0" >&2; exit 99; }
set -u
van=$1
b=${PSL_BUILDDIR:?run through make check, or set PSL_BUILDDIR}
fake=$b/tests/unit/.libs/libfakecudart.so
[ -f "$fake" ] || { echo "cuda_job.sh: $fake is not built (make check builds it)" >&2; exit 99; }
dir=$(mktemp -d "${TMPDIR:-/tmp}/pslite-cuda.XXXXXX")
trap 'rm -rf "$dir"' EXIT
trap 'exit 1' INT TERM
fail=0
say() { echo "cuda_job.sh ($van): $*" >&2; fail=1; }
PS_CUDA_LIB=$fake DMLC_NODE_HOST=127.0.0.1
export PS_CUDA_LIB DMLC_NODE_HOST

# bench LOG [env...] -- ARGS: one job; its exit code
bench() {
	log=$1
	shift
	env "$@" "$b/tools/pslite-run" -s 1 -w 1 --van "$van" --timeout 120 -- \
		"$b/tools/pslite-bench" $bench_args >"$log" 2>&1
}

for mem in cpu2gpu gpu2gpu gpu2cpu; do
	for mode in 1 2 3 4; do
		log=$dir/$mem.$mode.log
		bench_args="65536 10 $mode --mem $mem"
		bench "$log" NUM_KEY_PER_SERVER=4 TOTAL_DURATION=40 LOG_DURATION=20
		rc=$?
		if [ $rc -ne 0 ] || ! grep -q "pslite-bench summary: .*, $mem: .* 0 errors, data checked" "$log"; then
			say "--mem $mem mode $mode: exit $rc, or no checked summary:"
			tail -20 "$log" >&2
		fi
	done
done

# AF batches (pslite-afbench, 2 servers) with the worker's push and pull
# tensors on the GPU: every word pulled back checked, and the failure checks
log=$dir/af.log
"$b/tools/pslite-run" -s 2 -w 1 --van "$van" --timeout 120 -- "$b/tools/pslite-afbench" \
	--mem gpu --steps 100 --warmup 10 --push-bytes 65536 --pull-bytes 65536 --checks \
	--json >"$log" 2>&1
rc=$?
if [ $rc -ne 0 ] || ! grep -q '"mem":"gpu".*"bad_words":0,"failed":0' "$log"; then
	say "pslite-afbench --mem gpu: exit $rc, or no clean summary:"
	tail -20 "$log" >&2
fi

# sizes across the pinned pool's classes, more requests: no growth
log=$dir/pool.log
bench_args="300000 10 1 --mem gpu2gpu"
bench "$log" NUM_KEY_PER_SERVER=8 TOTAL_DURATION=300 LOG_DURATION=100 FAKE_CUDA_STATS=1
rc=$?
[ $rc -eq 0 ] || { say "pool run: exit $rc"; tail -20 "$log" >&2; }
# each staged buffer is 512 KiB (the class of 300000 bytes); a worker has
# at most 2 per key in flight, the server 1 per key
sed -n 's/.*fake_cuda: pinned blocks \([0-9]*\) bytes \([0-9]*\),.*/\1 \2/p' "$log" |
while read -r n bytes; do
	if [ "$n" -gt 24 ]; then
		echo "cuda_job.sh ($van): $n pinned blocks ($bytes bytes) held after 2400 requests" >&2
		exit 1
	fi
done || fail=1
[ "$(grep -c "fake_cuda: pinned" "$log")" -ge 2 ] || { say "no FAKE_CUDA_STATS lines from the nodes"; tail -5 "$log" >&2; }

# a GPU copy fails on the worker: requests fail with EIO, the job ends
log=$dir/fail.log
bench_args="65536 10 1 --mem gpu2gpu"
bench "$log" NUM_KEY_PER_SERVER=4 TOTAL_DURATION=40 LOG_DURATION=20 FAKE_CUDA_FAIL=copy@30+
rc=$?
[ $rc -eq 1 ] || say "a failing GPU copy: exit $rc, expected 1"
grep -q "injected by FAKE_CUDA_FAIL" "$log" || say "a failing GPU copy is not logged with CUDA's words"
grep -q "request for key .* failed: Input/output error" "$log" || say "no request failed with EIO"
grep -qi "sanitizer\|Segmentation\|Aborted" "$log" && say "a crash:" && tail -20 "$log" >&2

# no GPU: the worker says so in one line
log=$dir/nogpu.log
bench_args="4096 10 1 --mem gpu2cpu"
bench "$log" FAKE_CUDA_DEVICES=0
rc=$?
[ $rc -eq 2 ] || say "no GPU: exit $rc, expected 2"
grep -q "cannot set up GPU 0's buffers: .*finds no GPU on this machine" "$log" ||
	{ say "no GPU: no line saying so"; tail -5 "$log" >&2; }

[ $fail -eq 0 ] && echo "cuda_job.sh ($van): OK"
exit $fail
