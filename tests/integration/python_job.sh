#!/bin/sh
# The Python package (python/pslite, ctypes over libpslite.so) in a 1+2+2
# job on one van: every role in Python (python/tests/job.py), the servers a
# Python KVServer summing pushes, the workers checking pull and push-pull
# against the sums, and bad inputs answered with exceptions (a read-only
# pull buffer, a buffer too small for the answer, a wrong dtype, and with
# python3-torch a non-contiguous tensor), CPU torch tensors pushed and pulled
# zero-copy; the default server (python/tests/store_job.py); before that the package's unit tests; then StepMesh's
# test_fserver shape (python/tests/af_job.py: 2 attention workers push three
# tensors a step, the FFN server answers with their sum, 50 steps checked),
# and with python3-torch the same through pslite.fserver, StepMesh's calls,
# and StepMesh's latency benchmark (bench/fserver_latency.py) on 2 servers;
# instance groups of 2 (a process per instance, and a whole group in one
# process: python/tests/group_job.py), and the joint role (pslite-run
# --joint 2: each process a Python server and worker).
#   python_job.sh VAN [all|van]
# van: only what goes through the van differently (the kv job's zero-copy
# tensors, the AF job and pslite.fserver); the rest is the same Python and C
# over any van, and python_zmq.sh runs it (all, the default).
[ -n "${PSL_BUILDDIR:-}" ] || { [ -f tests/testenv.sh ] && . ./tests/testenv.sh; } || { echo "$0: run it from the build directory (where tests/testenv.sh is) or by make check TESTS=$0" >&2; exit 99; }
set -u
van=$1
cases=${2:-all}
case $cases in all | van) ;; *) echo "python_job.sh: cases '$cases': all or van" >&2; exit 99 ;; esac
b=${PSL_BUILDDIR:?run through make check, or set PSL_BUILDDIR}
s=${PSL_SRCDIR:?}
# Debian's python3 first (CI installs python3-numpy for it), else the one on PATH
py=/usr/bin/python3
[ -x "$py" ] || py=$(command -v python3) || { echo "python_job.sh: SKIP: no python3 (apt-get install python3)"; exit 77; }
if grep -q 'fsanitize=address' "$b/Makefile" 2>/dev/null; then
	echo "python_job.sh: SKIP: sanitizer build (an instrumented libpslite.so cannot be loaded into python3 without preloading the sanitizer runtimes); the plain build runs it"
	exit 77
fi
lib=$b/.libs/libpslite.so
[ -f "$lib" ] || { echo "python_job.sh: $lib missing: build first" >&2; exit 99; }
log=$(mktemp "${TMPDIR:-/tmp}/pslite-py.XXXXXX")
trap 'rm -f "$log"' EXIT
export PS_VAN_PATH
# job SERVERS SCRIPT PATTERN WHAT [WORKERS]: a job of every role running
# SCRIPT; fails unless pslite-run exits 0 and WORKERS (2) workers print PATTERN
# (SCRIPT: in python/tests, or a path from the source tree with its arguments)
job() {
	case $2 in */*) script="$s/$2" ;; *) script="$s/python/tests/$2" ;; esac
	PSLITE_LIB=$lib PYTHONPATH=$s/python timeout -k 10 150 "$b/tools/pslite-run" -s "$1" -w 2 \
		--van "$van" --timeout 120 -- "$py" $script >"$log" 2>&1
	rc=$?
	n=$(grep -c "$3" "$log")
	if [ $rc -ne 0 ] || [ "$n" -ne "${5:-2}" ]; then
		tail -n 60 "$log"
		echo "python_job.sh $van: $4: pslite-run exited $rc, $n of ${5:-2} workers OK" >&2
		exit 1
	fi
}
if [ "$cases" = all ]; then
	# the package's unit tests (buffers, numpy, torch), by pytest where it is installed
	if "$py" -c 'import pytest' 2>/dev/null; then
		PSLITE_LIB=$lib "$py" -m pytest -q -p no:cacheprovider "$s/python/tests/test_unit.py" ||
			{ echo "python_job.sh $van: unit tests failed" >&2; exit 1; }
	else
		PSLITE_LIB=$lib "$py" "$s/python/tests/test_unit.py" || { echo "python_job.sh $van: unit tests failed" >&2; exit 1; }
	fi
fi
job 2 job.py "python worker [01]: OK (van $van)" kv
grep "numpy\|torch\|dtype\|tensor" "$log"
# PyTorch CPU tensors where Debian's python3-torch is installed (CI installs it)
if "$py" -c 'import torch' 2>/dev/null && [ "$(grep -c "torch push/pull OK" "$log")" -ne 2 ]; then
	echo "python_job.sh $van: torch is installed but not both workers said 'torch push/pull OK'" >&2
	exit 1
fi
if [ "$cases" = all ]; then
	# the default server (KVStoreServer, ps-lite's KVServerDefaultHandle in C),
	# 2 servers: pushes summed, or overwritten; a pull of an unknown key: ENOENT
	job 2 "python/tests/store_job.py sum" "store worker [01]: OK (sum)" "store sum"
	job 2 "python/tests/store_job.py overwrite" "store worker [01]: OK (overwrite)" "store overwrite"
fi
job 1 af_job.py "python af worker [01]: OK, 50 steps checked" af
# StepMesh's test_fserver.py on pslite.fserver (bfloat16 torch tensors)
if "$py" -c 'import torch' 2>/dev/null; then
	job 1 fserver_job.py "fserver worker [01]: OK, 30 steps checked" fserver
	grep "fserver worker" "$log"
else
	echo "python_job.sh $van: torch not installed (apt-get install python3-torch): fserver cases skipped"
fi
if [ "$cases" = van ]; then
	echo "python_job.sh $van: OK (the van's cases)"
	exit 0
fi
if "$py" -c 'import torch' 2>/dev/null; then
	# StepMesh's latency benchmark, 2 servers (every push to both, one pull
	# from each, answers checked), short
	job 2 "bench/fserver_latency.py --iters 300 --report 150" \
		"fserver_latency worker [01]: OK, 300 steps" "fserver latency benchmark"
	grep "fserver_latency worker .* p50" "$log"
	# StepMesh's test_fserver.py logic with CPU torch tensors: the server
	# gets float32 [1, 8192] tensors, answers sum(batch), workers allclose
	job 1 "python/tests/fserver_dtype_job.py torch" "fserver_dtype worker [01]: OK" "fserver dtype torch"
fi
# the same with numpy arrays on both sides
if "$py" -c 'import numpy' 2>/dev/null; then
	job 1 "python/tests/fserver_dtype_job.py numpy" "fserver_dtype worker [01]: OK" "fserver dtype numpy"
fi
# instance groups of 2: 2 server and 4 worker processes, one per instance
DMLC_GROUP_SIZE=2 job 1 job.py "python worker [01]: OK (van $van)" "groups of 2" 4
grep -q "python worker 1: instance 1 of 2, instance rank 3" "$log" ||
	{ echo "python_job.sh $van: groups: no worker said it was instance 1 of 2 of group 1" >&2; exit 1; }
# a whole instance group of 2 in each Python process (start(group=True)):
# a scheduler, one server and one worker process, by hand
gport=$("$b/tests/integration/startnode" --free-port) || exit 99
for r in scheduler server worker; do
	DMLC_ROLE=$r DMLC_GROUP_SIZE=2 DMLC_NUM_SERVER=1 DMLC_NUM_WORKER=1 DMLC_ENABLE_RDMA=$van \
		DMLC_PS_ROOT_URI=127.0.0.1 DMLC_PS_ROOT_PORT=$gport DMLC_NODE_HOST=127.0.0.1 \
		PSLITE_LIB=$lib PYTHONPATH=$s/python timeout -k 5 90 "$py" \
		"$s/python/tests/group_job.py" >"$log.$r" 2>&1 &
	gpids="${gpids:-} $!"
done
gfail=0
for p in $gpids; do wait "$p" || gfail=1; done
for r in scheduler server worker; do
	grep -q "Traceback\|ERROR" "$log.$r" && gfail=1
done
[ "$(grep -c "group worker instance [01] of 2: OK" "$log.worker")" -eq 2 ] || gfail=1
if [ $gfail -ne 0 ]; then
	tail -n 30 "$log.scheduler" "$log.server" "$log.worker"
	echo "python_job.sh $van: a group of 2 in one process: failed" >&2
	rm -f "$log".*
	exit 1
fi
rm -f "$log".*
# the joint role: 2 processes, each a Python KVServer and a KVWorker
PSLITE_LIB=$lib PYTHONPATH=$s/python timeout -k 10 150 "$b/tools/pslite-run" -j 2 \
	--van "$van" --timeout 120 -- "$py" "$s/python/tests/job.py" >"$log" 2>&1
rc=$?
n=$(grep -c "^\[joint [01]\] python worker [01]: OK (van $van)" "$log")
if [ $rc -ne 0 ] || [ "$n" -ne 2 ]; then
	tail -n 60 "$log"
	echo "python_job.sh $van: joint: pslite-run -j 2 exited $rc, $n of 2 joint workers OK" >&2
	exit 1
fi
echo "python_job.sh $van: OK"
