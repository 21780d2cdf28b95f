#!/bin/busybox sh
# PID 1 of pslite's RDMA test VM (packed into its initramfs by prepare.sh):
# loads the modules, mounts the host's / read-only (9p tag hostroot) under a
# tmpfs overlay, the control share (tag pslctl) and the read-write shares
# listed in it, and hands over to run.sh in the new root.
/bin/busybox --install -s /bin
export PATH=/bin
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
die() {
	echo "PSLVM-FAIL: $*" >/dev/ttyS0
	echo "PSLVM-FAIL: $*" >/dev/ttyS1
	echo o >/proc/sysrq-trigger
	sleep 30
}
for m in $(cat /mods/order); do
	insmod "/mods/$m" 2>/dev/null || [ -d "/sys/module/${m%.ko}" ] ||
		echo "pslvm: insmod $m failed" >/dev/ttyS0
done
o=trans=virtio,version=9p2000.L,msize=262144
mount -t 9p -o "$o,cache=loose,ro" hostroot /lower || die "cannot mount the host root over 9p"
mkdir -p /ov
mount -t tmpfs -o mode=755 tmpfs /ov || die "tmpfs"
mkdir -p /ov/u /ov/w
mount -t overlay -o lowerdir=/lower,upperdir=/ov/u,workdir=/ov/w overlay /newroot ||
	die "cannot mount the overlay root"
mount --move /proc /newroot/proc
mount --move /sys /newroot/sys
mount --move /dev /newroot/dev
mount -t tmpfs -o mode=755 tmpfs /newroot/run
mkdir -p /newroot/run/pslvm/ctl /newroot/dev/shm /newroot/dev/pts
mount -t tmpfs -o mode=1777 tmpfs /newroot/dev/shm
mount -t tmpfs -o mode=1777 tmpfs /newroot/tmp
mount -t devpts devpts /newroot/dev/pts
mount -t 9p -o "$o,cache=none" pslctl /newroot/run/pslvm/ctl || die "cannot mount the control share"
# rw shares: lines "TAG PATH" in ctl/shares.
while read -r tag path; do
	[ -n "$tag" ] || continue
	mkdir -p "/newroot$path" 2>/dev/null
	mount -t 9p -o "$o,cache=mmap" "$tag" "/newroot$path" ||
		die "cannot mount the read-write share $path"
done </newroot/run/pslvm/ctl/shares
cp /bin/busybox /run.sh /newroot/run/pslvm/
exec switch_root /newroot /run/pslvm/busybox sh /run/pslvm/run.sh
