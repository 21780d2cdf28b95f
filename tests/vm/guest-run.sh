# Second stage of pslite's RDMA test VM (PID 1 after switch_root, run by the
# initramfs's busybox): brings up eth0 and rxe0, then runs the command that
# tests/vm/run.sh wrote into the control share, in bash, with its output on
# the second serial port and its exit status in ctl/rc. Powers off at the end.
bb=/run/pslvm/busybox
ctl=/run/pslvm/ctl
out=/dev/ttyS1
off() {
	sync
	echo o >/proc/sysrq-trigger
	$bb sleep 30
}
skip() {
	echo "$*" >$ctl/why
	echo 77 >$ctl/rc
	off
}
$bb stty -F $out raw -echo 2>/dev/null
echo started >$ctl/state
$bb cut -d" " -f1 /proc/uptime >$ctl/up
$bb ip link set lo up
$bb ip link set eth0 up || skip "no eth0 in the VM"
$bb ip addr add 10.0.2.15/24 dev eth0
$bb ip route add default via 10.0.2.2 2>/dev/null
$bb hostname pslvm
PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
export PATH
command -v rdma >/dev/null || skip "no rdma tool (Debian package iproute2)"
rdma link add rxe0 type rxe netdev eth0 2>$ctl/rxe.err ||
	skip "rdma link add rxe0 failed: $($bb head -n 1 $ctl/rxe.err)"
i=0
while ! [ -e /sys/class/infiniband/rxe0 ] || ! [ -e /dev/infiniband/uverbs0 ]; do
	i=$((i + 1))
	[ $i -lt 100 ] || skip "rxe0 did not appear"
	$bb sleep 0.1
done
echo rxe0 >$ctl/state
echo "booted $($bb cat $ctl/up) s, rxe0 at $($bb cut -d" " -f1 /proc/uptime) s" >$ctl/up
cd /
bash $ctl/cmd.sh >$out 2>&1 </dev/null
echo $? >$ctl/rc
off
