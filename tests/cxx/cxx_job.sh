#!/bin/sh
# ps-lite's C++ API (include/ps, include/dmlc) in jobs of C++ programs over
# one van:
#   cxx_job.sh VAN
# 1. tests/cxx/kv_app_test with pslite-run -s 2 -w 2: push, pull and
#    push-pull in every form, callbacks, lens, cmd, a custom slicer, a
#    deferred Response, values kept after the answer, KVServerDefaultHandle,
#    SimpleApp, the node queries; every node says OK, and the program's
#    LOG lines come out in pslite's log format;
# 2. tests/cxx/bench_test (test_benchmark's manner: registered receive
#    buffers, two KVWorkers per worker on threads, every byte checked) with
#    -s 2 -w 2, then in two joint processes (-j 2).
# Skips (77) where configure found no C++14 compiler.
# Needs PSL_BUILDDIR (set by make check).
[ -n "${PSL_BUILDDIR:-}" ] || { [ -f tests/testenv.sh ] && . ./tests/testenv.sh; } || { echo "$0: run it from the build directory (where tests/testenv.sh is) or by make check TESTS=$0" >&2; exit 99; }
set -u
van=$1
b=${PSL_BUILDDIR:?run through make check, or set PSL_BUILDDIR}
[ -x "$b/tests/cxx/kv_app_test" ] && [ -x "$b/tests/cxx/bench_test" ] ||
	{ echo "cxx_job.sh: no C++ test programs (configure found no C++14 compiler): skipped"; exit 77; }
dir=$(mktemp -d "${TMPDIR:-/tmp}/pslite-cxx.XXXXXX")
trap 'rm -rf "$dir"' EXIT
trap 'exit 1' INT TERM
fail=0
say() { echo "cxx_job.sh ($van): $*" >&2; fail=1; }
unset DMLC_GROUP_SIZE DMLC_RANK DMLC_PORT DMLC_ROLE

# need LOG WHAT COUNT PATTERN: LOG has COUNT lines matching PATTERN
need() {
	n=$(grep -c -- "$4" "$1")
	[ "$n" -eq "$3" ] || say "$2: $n lines matching '$4', expected $3"
}
show() { # show LOG WHAT: the job's output when something failed
	[ $fail -eq 0 ] && return
	echo "----- $2 -----" >&2
	tail -n 60 "$1" >&2
}

# 1. the API's surface
log=$dir/kv.log
timeout -k 5 60 "$b/tools/pslite-run" -s 2 -w 2 --van "$van" --timeout 40 -- \
	"$b/tests/cxx/kv_app_test" >"$log" 2>&1 || say "kv_app_test: pslite-run exited $?"
need "$log" "kv_app_test" 1 "^\[worker [01]\] cxx kv worker 0: OK ([1-9][0-9]* checks)"
need "$log" "kv_app_test" 1 "^\[worker [01]\] cxx kv worker 1: OK ([1-9][0-9]* checks)"
need "$log" "kv_app_test" 1 "^\[server [01]\] cxx kv server 0: OK ([1-9][0-9]* requests)"
need "$log" "kv_app_test" 1 "^\[server [01]\] cxx kv server 1: OK ([1-9][0-9]* requests)"
need "$log" "kv_app_test" 1 "^\[scheduler\] cxx kv scheduler: OK"
need "$log" "LOG(INFO) through pslite's log" 2 \
	"^\[worker [01]\] \[pslite [0-9:.]* worker [01]\] INFO: kv_app_test.cc:[0-9]*: cxx kv worker [01] says hello through pslite's log$"
need "$log" "KVWorker for instance 1" 2 \
	"ERROR: pslite_bridge.h:[0-9]*: .*GetWorker for instance 1: pslite runs one instance per process; set DMLC_GROUP_SIZE=1"
need "$log" "kv_app_test" 0 "FAILED\|AddressSanitizer\|runtime error:\|LeakSanitizer"
show "$log" "kv_app_test"

# 2. the benchmark, plain and joint
for shape in "-s 2 -w 2" "-j 2"; do
	log=$dir/bench.log
	# shellcheck disable=SC2086
	BENCH_ROUNDS=10 timeout -k 5 60 "$b/tools/pslite-run" $shape --van "$van" --timeout 40 -- \
		"$b/tests/cxx/bench_test" >"$log" 2>&1 || say "bench_test $shape: pslite-run exited $?"
	need "$log" "bench_test $shape" 2 \
		"cxx bench worker [01]: OK: 2 threads x 10 rounds of 8 keys x 65536 bytes, [0-9.]* Gbit/s push+pull, data checked"
	need "$log" "bench_test $shape" 2 "cxx bench server [01]: OK (160 pushes)"
	need "$log" "bench_test $shape" 0 "FAILED\|AddressSanitizer\|runtime error:\|LeakSanitizer"
	show "$log" "bench_test $shape"
done
[ $fail -eq 0 ] && echo "cxx_job.sh ($van): OK"
exit $fail
