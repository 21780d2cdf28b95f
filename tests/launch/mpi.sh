#!/bin/bash
# pslite-run --mpi under Debian's Open MPI (openmpi-bin):
#   1. local: mpirun -n 5 pslite-run --mpi -- kvtest on this machine (the
#      scheduler is 127.0.0.1: every rank is local), a 1+2+2 data job;
#   2. hosts: mpirun -n 6 over ssh on two hosts (network namespaces with
#      their own addresses and sshd, as ssh.sh), --servers-per-node 1 and
#      --scheduler the first host: one server on each host, every node on
#      its host's address (needs root and openssh; not run, with one line,
#      without them);
#   3. variables: MPICH Hydra's and PMIx's variables, and bad sets of them;
#   4. bad: mpirun -n 2 (too few) and --mpi outside mpirun: one line each.
# Skips (77) with one line where mpirun is missing.
[ -n "${PSL_BUILDDIR:-}" ] || { [ -f tests/testenv.sh ] && . ./tests/testenv.sh; } || { echo "$0: run it from the build directory (where tests/testenv.sh is) or by make check TESTS=$0" >&2; exit 99; }
me=mpi.sh why=
. "$PSL_SRCDIR/tests/launch/common.sh"
command -v mpirun >/dev/null 2>&1 || skip "no mpirun (apt-get install openmpi-bin)"
mpirun --version 2>/dev/null | grep -q "Open MPI" || skip "mpirun is not Open MPI's: $(mpirun --version 2>&1 | head -n 1)"
# as root (CI) Open MPI wants to be told; 2 cores run 5 ranks
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
port=$("$b/tests/integration/startnode" --free-port) || { echo "mpi.sh: no free port" >&2; exit 1; }
export KVTEST_SCENARIO=data KVTEST_DIR=$dir

# ok_job NAME LOG WANT...: every node said OK, no error
ok_job() {
	local name=$1 log=$2 w
	shift 2
	for w in "kvtest scheduler 0: OK" "$@"; do
		grep -q "$w" "$log" || bad "$name: no '$w'"
	done
	if grep -q "ERROR\|FAILED\|AddressSanitizer\|runtime error:\|LeakSanitizer" "$log"; then
		bad "$name: an error in a job that ended well"
	fi
}

# ------------------------------------------------------------ 1. local --
t0=$(date +%s)
timeout -k 5 200 mpirun -n 5 --tag-output "$run" --mpi --van zmq --port "$port" -- \
	"$b/tests/integration/kvtest" >"$dir/local.log" 2>&1
rc=$?
[ $rc -eq 0 ] || bad "local: mpirun exited $rc"
ok_job local "$dir/local.log" "\[1,1\]<stdout>:kvtest server 0: OK" "\[1,2\]<stdout>:kvtest server 1: OK" \
	"\[1,3\]<stdout>:kvtest worker 0: OK" "\[1,4\]<stdout>:kvtest worker 1: OK"
[ $fail -eq 0 ] || tail -n 40 "$dir/local.log" >&2
echo "mpi.sh: local: mpirun -n 5: exit $rc ($(($(date +%s) - t0)) s)"

# the same with instance groups of 2: 2 server and 2 worker instances, one
# group each (DMLC_NUM_SERVER=1, DMLC_RANK the instance's rank)
t0=$(date +%s)
port=$("$b/tests/integration/startnode" --free-port) || { echo "mpi.sh: no free port" >&2; exit 1; }
DMLC_GROUP_SIZE=2 timeout -k 5 200 mpirun -n 5 --tag-output "$run" --mpi --van zmq --port "$port" -- \
	"$b/tests/integration/kvtest" >"$dir/groups.log" 2>&1
rc=$?
[ $rc -eq 0 ] || bad "groups: mpirun exited $rc"
ok_job groups "$dir/groups.log" "\[1,1\]<stdout>:kvtest server 0: OK" "\[1,2\]<stdout>:kvtest server 0: OK" \
	"\[1,3\]<stdout>:kvtest worker 0: OK" "\[1,4\]<stdout>:kvtest worker 0: OK"
[ $fail -eq 0 ] || tail -n 40 "$dir/groups.log" >&2
echo "mpi.sh: groups: DMLC_GROUP_SIZE=2 mpirun -n 5: exit $rc ($(($(date +%s) - t0)) s)"

# ------------------------------------------------------------ 2. hosts --
if [ "$(id -u)" != 0 ] || ! command -v ip >/dev/null 2>&1 || [ ! -x /usr/sbin/sshd ]; then
	echo "mpi.sh: hosts: not run: needs root, iproute2 and openssh-server"
else
	t0=$(date +%s)
	lan 10.80.0 h1 h2 lg
	ssh_hosts 10.80.0 lg h1 h2
	ip netns exec "${tag}lg" timeout -k 5 200 mpirun -n 6 -H 10.80.0.1:3,10.80.0.2:3 \
		--mca plm_rsh_agent "ssh $PSLITE_SSH_OPTS" --mca oob_tcp_if_include e0 --tag-output \
		-x KVTEST_SCENARIO -x KVTEST_DIR -x PS_VAN_PATH -x ASAN_OPTIONS \
		"$run" --mpi --servers-per-node 1 --scheduler 10.80.0.1 --van zmq --port 9100 -- \
		"$b/tests/integration/kvtest" >"$dir/hosts.log" 2>&1
	rc=$?
	[ $rc -eq 0 ] || bad "hosts: mpirun exited $rc"
	# h1: scheduler, server 0, worker 0; h2: server 1, workers 1 and 2
	ok_job hosts "$dir/hosts.log" "\[1,1\]<stdout>:kvtest server 0: OK" "\[1,3\]<stdout>:kvtest server 1: OK" \
		"\[1,2\]<stdout>:kvtest worker 0: OK" "\[1,4\]<stdout>:kvtest worker 1: OK" "\[1,5\]<stdout>:kvtest worker 2: OK"
	grep -q "\[1,0\]<stderr>:.*scheduler listening on 10.80.0.1:9100" "$dir/hosts.log" || bad "hosts: the scheduler did not listen on 10.80.0.1:9100"
	grep -q "\[1,3\]<stderr>:.*server listening on 10.80.0.2:" "$dir/hosts.log" || bad "hosts: rank 3 is not a server on 10.80.0.2"
	[ $fail -eq 0 ] || tail -n 40 "$dir/hosts.log" >&2
	echo "mpi.sh: hosts: mpirun -n 6 on 2 hosts: exit $rc ($(($(date +%s) - t0)) s)"
fi

# -------------------------------------------------------- 3. variables --
# what MPICH's Hydra (PMI_*, MPI_LOCAL*) and PMIx give a rank
got=$(env PMI_RANK=2 PMI_SIZE=5 MPI_LOCALRANKID=2 MPI_LOCALNRANKS=5 "$run" --mpi --dry-run -- true | tr '\n' ' ')
case $got in "DMLC_ROLE=server DMLC_RANK=1 DMLC_PS_ROOT_URI=127.0.0.1 DMLC_PS_ROOT_PORT=9091 DMLC_NUM_SERVER=2 DMLC_NUM_WORKER=2 "*) ;;
*) bad "hydra: $got" ;; esac
got=$(env PMIX_RANK=4 "$run" --mpi --world 6 --scheduler head -s 1 --dry-run -- true | tr '\n' ' ')
case $got in "DMLC_ROLE=worker DMLC_RANK=2 DMLC_PS_ROOT_URI=head DMLC_PS_ROOT_PORT=9091 DMLC_NUM_SERVER=1 DMLC_NUM_WORKER=4 "*) ;;
*) bad "pmix: $got" ;; esac
got=$(env DMLC_GROUP_SIZE=2 PMI_RANK=2 PMI_SIZE=5 MPI_LOCALRANKID=2 MPI_LOCALNRANKS=5 "$run" --mpi --dry-run -- true | tr '\n' ' ')
case $got in "DMLC_ROLE=server DMLC_RANK=1 DMLC_PS_ROOT_URI=127.0.0.1 DMLC_PS_ROOT_PORT=9091 DMLC_NUM_SERVER=1 DMLC_NUM_WORKER=1 "*) ;;
*) bad "groups of 2: $got" ;; esac
bad_env() { # WANT VAR=VALUE...: pslite-run --mpi says WANT in one line, exit 2
	local want=$1
	shift
	expect_line "$want" env "$@" "$run" --mpi -- /bin/true
}
bad_env "PMIX_RANK is set but no world size" PMIX_RANK=1
bad_env "the job spans several machines: pass --scheduler HOST" OMPI_COMM_WORLD_RANK=1 OMPI_COMM_WORLD_SIZE=8 OMPI_COMM_WORLD_LOCAL_SIZE=4
bad_env "inconsistent MPI variables" OMPI_COMM_WORLD_RANK=1 OMPI_COMM_WORLD_SIZE=4 OMPI_COMM_WORLD_LOCAL_SIZE=8
bad_env "OMPI_COMM_WORLD_RANK=x: expected an integer" OMPI_COMM_WORLD_RANK=x OMPI_COMM_WORLD_SIZE=4
expect_line "DMLC_GROUP_SIZE=2: the job's 1 server and 3 worker tasks are instances and must be whole groups" \
	env DMLC_GROUP_SIZE=2 PMI_RANK=2 PMI_SIZE=5 MPI_LOCALRANKID=2 MPI_LOCALNRANKS=5 "$run" --mpi -s 1 -- /bin/true
echo "mpi.sh: variables: Hydra's and PMIx's, groups, and 5 bad sets"

# -------------------------------------------------------------- 4. bad --
timeout -k 5 60 mpirun -n 2 --tag-output "$run" --mpi -- /bin/sleep 100 >"$dir/bad.log" 2>&1
rc=$?
[ $rc -ne 0 ] && [ $rc -ne 124 ] || bad "bad: mpirun -n 2 exited $rc"
[ "$(grep -c "pslite-run --mpi: 2 tasks: a job needs at least 3" "$dir/bad.log")" -eq 2 ] ||
	bad "bad: mpirun -n 2: $(cat "$dir/bad.log")"
bad_env "no MPI rank" -u OMPI_COMM_WORLD_RANK -u PMIX_RANK -u PMI_RANK
echo "mpi.sh: bad: $line"
exit $fail
