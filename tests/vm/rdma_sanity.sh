#!/bin/sh
# The RDMA test VM works: rxe0 is an ibverbs device with an active port, and
# perftest's ib_write_bw and ibv_rc_pingpong (with its buffer check) run
# between two processes over it. One boot.
[ -n "${PSL_BUILDDIR:-}" ] || { [ -f tests/testenv.sh ] && . ./tests/testenv.sh; } || { echo "$0: run it from the build directory (where tests/testenv.sh is) or by make check TESTS=$0" >&2; exit 99; }
. "$PSL_SRCDIR/tests/vm/lib.sh"
vm_main 240 "$@"

ip=10.0.2.15
vm_step "devices"
ibv_devices
ibv_devices | grep -q '^ *rxe0 ' || vm_bad "ibv_devices does not list rxe0"
ibv_devinfo -d rxe0 | grep -q 'state:.*PORT_ACTIVE' || vm_bad "rxe0's port is not active"
rdma link show

vm_step "ib_write_bw 64 KiB"
if vm_pair 60 ib_write_bw -d rxe0 -x 0 -F -s 65536 -n 500 -- \
	ib_write_bw -d rxe0 -x 0 -F -s 65536 -n 500 $ip; then
	# "#bytes #iterations BW peak[MB/sec] BW average[MB/sec] MsgRate[Mpps]"
	bw=$(awk '$1 == 65536 && $2 == 500 {print $4}' "$vm_tmp/client")
	echo "ib_write_bw 64 KiB: ${bw:-?} MB/s"
	awk -v b="${bw:-0}" 'BEGIN {exit !(b > 0)}' || vm_bad "ib_write_bw gave no bandwidth"
else
	vm_bad "ib_write_bw failed"
fi

vm_step "ibv_rc_pingpong 4 KiB, buffers checked"
if vm_pair 60 ibv_rc_pingpong -d rxe0 -g 0 -s 4096 -n 200 -c -- \
	ibv_rc_pingpong -d rxe0 -g 0 -s 4096 -n 200 -c $ip; then
	grep 'iters in' "$vm_tmp/client"
	grep -q '200 iters in' "$vm_tmp/client" || vm_bad "ibv_rc_pingpong did not report 200 iterations"
else
	vm_bad "ibv_rc_pingpong failed"
fi
vm_step "done"
exit $vm_fail
