#!/bin/bash
# pslite-run --slurm under a real Slurm (Debian's slurm-wlm and munge): the
# test starts munged, slurmctld and two slurmd "nodes" (n1, n2), each node a
# network namespace with its own address (10.79.0.x, tests/integration/
# nshosts.sh) and host names of its own (/etc/netns/NS/hosts), then runs
#   1. srun -N 2 -n 5 pslite-run --slurm -- kvtest: a 1+2+2 data job whose
#      roles, ranks and scheduler (the first node of SLURM_JOB_NODELIST)
#      come from Slurm's variables;
#   2. sbatch -N 2 -n 6 of a script running srun pslite-run --slurm
#      --servers-per-node 1 (n1: scheduler, server 0, 1 worker; n2: server
#      1, 2 workers): the batch job must complete and its output hold every
#      node's OK;
#   3. a task of srun that is not pslite-run's shape (2 tasks): one line, the
#      step fails, nothing left.
# Needs root, iproute2, slurm-wlm (slurmctld, slurmd, srun) and munge; skips
# (77) with one line where one is missing.
[ -n "${PSL_BUILDDIR:-}" ] || { [ -f tests/testenv.sh ] && . ./tests/testenv.sh; } || { echo "$0: run it from the build directory (where tests/testenv.sh is) or by make check TESTS=$0" >&2; exit 99; }
me=slurm.sh why="to run slurmctld, slurmd and munged and make network namespaces"
. "$PSL_SRCDIR/tests/launch/common.sh"
for p in slurmctld slurmd srun sbatch scontrol; do
	command -v $p >/dev/null 2>&1 || [ -x /usr/sbin/$p ] || skip "no $p (apt-get install slurm-wlm)"
done
[ -x /usr/sbin/munged ] || skip "no /usr/sbin/munged (apt-get install munge)"

nodes="n1 n2"
lan 10.79.0 $nodes ctl
# the cluster's names, seen by everything ip netns exec starts there
for n in $nodes ctl; do
	mkdir -p "/etc/netns/$tag$n"
	printf '127.0.0.1 localhost\n10.79.0.1 n1\n10.79.0.2 n2\n10.79.0.10 %s %s ctl\n' "$(hostname)" "$(hostname -s)" \
		>"/etc/netns/$tag$n/hosts"
done

# munge: a key of the test's own, its socket in $dir
dd if=/dev/urandom of="$dir/munge.key" bs=1024 count=1 2>/dev/null
chmod 400 "$dir/munge.key"
mkdir -m 755 "$dir/munge"
/usr/sbin/munged -F -f --socket="$dir/munge/sock" --key-file="$dir/munge.key" \
	--pid-file="$dir/munge/pid" --log-file="$dir/munged.log" --seed-file="$dir/munge/seed" \
	2>>"$dir/munged.log" &
bg="$bg $!"

mkdir -p "$dir/state" "$dir/spool"
cat >"$dir/slurm.conf" <<CFG
ClusterName=psltest
SlurmctldHost=$(hostname -s)(10.79.0.10)
SlurmctldPort=6817
SlurmdPort=6818
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$dir/munge/sock
CredType=cred/munge
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool/%n
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd-%n.pid
SlurmctldLogFile=$dir/slurmctld.log
SlurmdLogFile=$dir/slurmd-%n.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SwitchType=switch/none
MpiDefault=none
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SlurmdParameters=config_overrides
ReturnToService=2
JobCompType=jobcomp/none
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
InactiveLimit=0
KillWait=5
# 3 CPUs a node (SlurmdParameters=config_overrides: whatever the machine has),
# so that block distribution puts -n 5 as 3+2 and -n 6 as 3+3
NodeName=n1 NodeAddr=10.79.0.1 CPUs=3 RealMemory=500 State=UNKNOWN
NodeName=n2 NodeAddr=10.79.0.2 CPUs=3 RealMemory=500 State=UNKNOWN
PartitionName=psl Nodes=n1,n2 Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES
CFG
# (cgroup v2 machines: slurmd makes its own cgroup, no systemd asked)
printf 'CgroupPlugin=autodetect\nIgnoreSystemd=yes\n' >"$dir/cgroup.conf"
export SLURM_CONF=$dir/slurm.conf
ip netns exec "${tag}ctl" /usr/sbin/slurmctld -D -c -i -f "$SLURM_CONF" >>"$dir/slurmctld.out" 2>&1 &
bg="$bg $!"
# slurmd needs the machine's cgroup mounts, which ip netns exec hides (it
# mounts a sysfs of the namespace's own): the same mounts again in its
# mount namespace
awk '$2 ~ "^/sys/fs/cgroup" { printf "mkdir -p %s; mount -t %s -o %s %s %s || exit 1\n", $2, $3, $4, $3, $2 }' \
	/proc/self/mounts >"$dir/cgmount.sh"
for n in $nodes; do
	mkdir -p "$dir/spool/$n"
	ip netns exec "$tag$n" sh -c ". '$dir/cgmount.sh' && exec /usr/sbin/slurmd -D -N $n -f '$SLURM_CONF'" \
		>>"$dir/slurmd-$n.out" 2>&1 &
	bg="$bg $!"
done
in_ctl() { ip netns exec "${tag}ctl" "$@"; }
# both nodes idle (slurmd registered) within 60 s
t=0
until [ "$(in_ctl sinfo -h -N -t idle -o %N 2>/dev/null | sort -u | wc -l)" -eq 2 ]; do
	t=$((t + 1))
	if [ $t -ge 120 ]; then
		echo "slurm.sh: the two slurmd nodes never came up: $(in_ctl sinfo -N 2>&1 | tr '\n' ' ')" >&2
		tail -n 20 "$dir"/slurmctld.log "$dir"/slurmd-*.log "$dir"/*.out "$dir/munged.log" >&2 2>/dev/null
		exit 1
	fi
	sleep 0.5
done
echo "slurm.sh: slurmctld and slurmd n1, n2 up ($((t / 2)) s)"

# ------------------------------------------------------------- 1. srun --
t0=$(date +%s)
KVTEST_SCENARIO=data KVTEST_DIR=$dir in_ctl timeout -k 5 200 srun -N 2 -n 5 -l --kill-on-bad-exit=1 \
	"$run" --slurm --van zmq -- "$b/tests/integration/kvtest" >"$dir/srun.log" 2>&1
rc=$?
[ $rc -eq 0 ] || bad "srun: exited $rc"
for want in "kvtest scheduler 0: OK" "kvtest server 0: OK" "kvtest server 1: OK" \
	"kvtest worker 0: OK" "kvtest worker 1: OK"; do
	grep -q "$want" "$dir/srun.log" || bad "srun: no '$want'"
done
# task 0 the scheduler on n1, listening on n1's address; the others on
# their nodes' addresses (block distribution: tasks 0-2 on n1, 3-4 on n2)
grep -q "^0: .*scheduler listening on n1:" "$dir/srun.log" || bad "srun: the scheduler (task 0) did not listen on n1"
grep -q "^4: .*listening on 10.79.0.2:" "$dir/srun.log" || bad "srun: task 4 did not listen on n2 (10.79.0.2)"
if grep -q "ERROR\|FAILED\|AddressSanitizer\|runtime error:\|LeakSanitizer" "$dir/srun.log"; then
	bad "srun: an error in a job that ended well"
fi
[ $fail -eq 0 ] || tail -n 60 "$dir/srun.log" >&2
echo "slurm.sh: srun -N 2 -n 5: exit $rc ($(($(date +%s) - t0)) s)"

# ----------------------------------------------------------- 2. sbatch --
t0=$(date +%s)
cat >"$dir/job.sh" <<JOB
#!/bin/sh
# one server on each node: n1 scheduler, server 0, worker 0; n2 server 1,
# workers 1 and 2
srun -l --kill-on-bad-exit=1 "$run" --slurm --servers-per-node 1 --van zmq -- "$b/tests/integration/kvtest"
JOB
id=$(KVTEST_SCENARIO=data KVTEST_DIR=$dir in_ctl sbatch --parsable -N 2 -n 6 -t 5 -o "$dir/sbatch.out" "$dir/job.sh" 2>"$dir/err")
[ -n "$id" ] || bad "sbatch: no job id: $(cat "$dir/err")"
state=
t=0
while [ -n "$id" ] && [ $t -lt 400 ]; do
	state=$(in_ctl scontrol show job "$id" 2>/dev/null | sed -n 's/.*JobState=\([A-Z_]*\).*/\1/p')
	case $state in COMPLETED | FAILED | CANCELLED | TIMEOUT | NODE_FAIL | OUT_OF_MEMORY) break ;; esac
	sleep 0.5
	t=$((t + 1))
done
[ "$state" = COMPLETED ] || bad "sbatch: job $id ended $state, expected COMPLETED"
for want in "kvtest scheduler 0: OK" "kvtest server 0: OK" "kvtest server 1: OK" \
	"kvtest worker 0: OK" "kvtest worker 1: OK" "kvtest worker 2: OK"; do
	grep -q "$want" "$dir/sbatch.out" || bad "sbatch: no '$want'"
done
grep -q "^3: .*server listening on 10.79.0.2:" "$dir/sbatch.out" || bad "sbatch: task 3 (n2's first) is not a server on n2"
grep -q "^2: .*worker listening on 10.79.0.1:" "$dir/sbatch.out" || bad "sbatch: task 2 is not a worker on n1"
[ $fail -eq 0 ] || tail -n 60 "$dir/sbatch.out" >&2
echo "slurm.sh: sbatch -N 2 -n 6, --servers-per-node 1: job $id $state ($(($(date +%s) - t0)) s)"

# -------------------------------------------------------- 3. bad shapes --
# expect_bad NAME WANT SRUN-ARGS... -- PSLITE-RUN-ARGS...: the step fails
# fast, every task says WANT in one line, nothing is left on the nodes
expect_bad() {
	local name=$1 want=$2 t0 rc lines
	shift 2
	local sargs=()
	while [ "$1" != -- ]; do sargs+=("$1"); shift; done
	shift
	t0=$(date +%s)
	in_ctl timeout -k 5 60 srun -l -K "${sargs[@]}" "$run" --slurm "$@" -- /bin/sleep 100 >"$dir/bad.log" 2>&1
	rc=$?
	[ $rc -ne 0 ] && [ $rc -ne 124 ] || bad "$name: srun exited $rc"
	lines=$(grep -v "^srun: \|slurmstepd" "$dir/bad.log") # (srun's and Slurm's own)
	[ -n "$lines" ] || bad "$name: no output"
	echo "$lines" | grep -qv -- "$want" && bad "$name: a line without '$want': $lines"
	[ $(($(date +%s) - t0)) -lt 30 ] || bad "$name: took $(($(date +%s) - t0)) s"
	echo "slurm.sh: $name: $(echo "$lines" | head -n 1)"
}
expect_bad two "2 tasks: a job needs at least 3" -N 1 -n 2 --
expect_bad spn "leaves no worker" -N 2 -n 5 -- --servers-per-node 2
# cyclic placement: task 1 is on n2, not where --servers-per-node counts it
# (srun -K ends task 0, which cannot tell)
expect_bad cyclic "needs block distribution (srun -m block)" -N 2 -n 6 -m cyclic -- --servers-per-node 1
# Slurm's variables that disagree
expect_line "inconsistent Slurm variables" env SLURM_PROCID=1 SLURM_NTASKS=5 SLURM_JOB_NODELIST='n[1-3]' \
	SLURM_TASKS_PER_NODE='3,2' "$run" --slurm -- /bin/true
echo "slurm.sh: inconsistent: $line"
expect_line "SLURM_JOB_NODELIST: host list 'n\[1-': a '\[' without '\]'" env SLURM_PROCID=1 SLURM_NTASKS=5 \
	SLURM_JOB_NODELIST='n[1-' "$run" --slurm -- /bin/true
echo "slurm.sh: bad node list: $line"
# outside srun, no Slurm variable: one line
expect_line "SLURM_PROCID is not set" env -u SLURM_PROCID "$run" --slurm -- /bin/true
# nothing but slurmd left on the nodes (a step's slurmstepd ends in a moment)
left() {
	for n in $nodes; do
		for p in $(ip netns pids "$tag$n"); do
			echo "$n:$(cat "/proc/$p/comm" 2>/dev/null)"
		done
	done | grep -v ":slurmd$\|:$" | tr '\n' ' '
}
t=0
while [ -n "$(left)" ] && [ $t -lt 40 ]; do
	sleep 0.5
	t=$((t + 1))
done
[ -z "$(left)" ] || bad "still running on the nodes: $(left)"
exit $fail
