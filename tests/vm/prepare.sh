#!/bin/bash
# Prepares the assets of pslite's RDMA test VM (see docs/rdma-vm.md):
#   vmlinuz        Debian's generic linux-image-6.1.0-*-amd64 kernel (it has
#                  the soft-RoCE driver rdma_rxe; the -cloud flavour has not)
#   initrd.img     a busybox initramfs with the kernel modules the VM needs
#                  (virtio, 9p, overlay, rdma_rxe and what they depend on)
#   version        what the assets were built from
# into $PSL_VM_DIR (default /var/cache/pslite-vm). Nothing is installed on
# the host: the kernel package is fetched with apt-get download and unpacked
# with dpkg-deb -x in a temporary folder. Assets already there and built by
# the same version of this script from the same kernel are reused.
#
# usage: tests/vm/prepare.sh [--force] [--quiet]
# exit: 0 ready, 1 cannot (one line on stderr says why)
set -uo pipefail

dir=${PSL_VM_DIR:-/var/cache/pslite-vm}
force=0
quiet=0
for a in "$@"; do
	case $a in
	--force) force=1 ;;
	--quiet) quiet=1 ;;
	-h | --help)
		sed -n '2,14p' "$0"
		exit 0
		;;
	*)
		echo "prepare.sh: unknown option $a" >&2
		exit 1
		;;
	esac
done

# Bump when the initramfs layout or the module list changes.
layout=3
# The modules loaded at boot, in this order, with their dependencies.
modules="virtio_pci virtio_net 9pnet_virtio 9p overlay crc32_generic crc32_pclmul
	ib_uverbs rdma_ucm ib_umad rdma_rxe dummy veth"

say() { [ "$quiet" = 1 ] || echo "prepare.sh: $*" >&2; }
fail() {
	echo "prepare.sh: cannot prepare the RDMA VM: $*" >&2
	exit 1
}

for tool in qemu-system-x86_64:qemu-system-x86 cpio:cpio modprobe:kmod \
	depmod:kmod dpkg-deb:dpkg apt-get:apt; do
	command -v "${tool%%:*}" >/dev/null 2>&1 ||
		fail "${tool%%:*} not found (Debian package ${tool#*:})"
done
busybox=/bin/busybox
if ! [ -x "$busybox" ] || ! file -L "$busybox" 2>/dev/null | grep -q 'statically linked'; then
	# file(1) may be missing: ldd says "not a dynamic executable" then.
	if ! [ -x "$busybox" ] || ldd "$busybox" >/dev/null 2>&1; then
		fail "no static $busybox (Debian package busybox-static)"
	fi
fi

# The newest generic 6.1.0-N-amd64 kernel the package lists know.
pkg=$(apt-cache search --names-only '^linux-image-6\.1\.0-[0-9]+-amd64$' 2>/dev/null |
	awk '{print $1}' | sort -V | tail -n 1)
[ -n "$pkg" ] || fail "apt-cache knows no linux-image-6.1.0-*-amd64 package (apt-get update? a Debian 12 mirror in sources.list?)"
pkgver=$(apt-cache show "$pkg" 2>/dev/null | awk '/^Version:/ {print $2; exit}')
here=$(dirname "$(readlink -f "$0")")
scripts=$(cat "$here/guest-init.sh" "$here/guest-run.sh" 2>/dev/null | md5sum | cut -c1-12)
want="$pkg $pkgver layout=$layout guest=$scripts"

if [ "$force" = 0 ] && [ -f "$dir/version" ] && [ "$(cat "$dir/version")" = "$want" ] &&
	[ -s "$dir/vmlinuz" ] && [ -s "$dir/initrd.img" ]; then
	say "reusing $dir ($want)"
	exit 0
fi

mkdir -p "$dir" || fail "cannot create $dir"
work=$(mktemp -d "$dir/.work.XXXXXX") || fail "cannot create a folder in $dir"
trap 'rm -rf "$work"' EXIT

# The .deb is kept (one, the newest) so that a new layout needs no download.
deb=$(ls "$dir/$pkg"_"${pkgver//:/%3a}"_*.deb 2>/dev/null | head -n 1)
if [ -z "$deb" ]; then
	say "downloading $pkg $pkgver"
	if ! (cd "$work" && timeout 600 apt-get download -q "$pkg=$pkgver") >"$work/apt.log" 2>&1; then
		tail -n 3 "$work/apt.log" >&2
		fail "apt-get download $pkg failed (no network to the Debian mirror?)"
	fi
	new=$(ls "$work"/*.deb 2>/dev/null | head -n 1)
	[ -n "$new" ] || fail "apt-get download left no .deb"
	rm -f "$dir"/linux-image-*.deb
	mv "$new" "$dir/" || fail "cannot move the .deb into $dir"
	deb=$dir/$(basename "$new")
fi
dpkg-deb -x "$deb" "$work/k" || fail "dpkg-deb -x $deb failed"
kver=$(ls "$work/k/lib/modules" 2>/dev/null | head -n 1)
[ -n "$kver" ] && [ -f "$work/k/boot/vmlinuz-$kver" ] ||
	fail "$pkg has no boot/vmlinuz-* and lib/modules/*"
depmod -b "$work/k" "$kver" || fail "depmod on the unpacked $pkg failed"

# The initramfs: busybox, the modules in load order, the init scripts.
ird=$work/initrd
mkdir -p "$ird"/{bin,dev,proc,sys,mods,lower,newroot,rw} || fail "mkdir"
cp "$busybox" "$ird/bin/busybox" || fail "cannot copy $busybox"
: >"$ird/mods/order"
for m in $modules; do
	deps=$(modprobe -d "$work/k" -S "$kver" --show-depends "$m" 2>&1) ||
		fail "module $m: $deps"
	while read -r verb path _; do
		[ "$verb" = insmod ] || continue
		base=$(basename "$path")
		base=${base%.xz}
		base=${base%.zst}
		grep -qx "$base" "$ird/mods/order" && continue
		case $path in
		*.xz) xz -dc "$path" >"$ird/mods/$base" ;;
		*.zst) zstd -qdc "$path" >"$ird/mods/$base" ;;
		*) cp "$path" "$ird/mods/$base" ;;
		esac || fail "cannot unpack $path"
		echo "$base" >>"$ird/mods/order"
	done <<<"$deps"
done
cp "$here/guest-init.sh" "$ird/init" && cp "$here/guest-run.sh" "$ird/run.sh" &&
	chmod 755 "$ird/init" "$ird/run.sh" || fail "cannot copy the guest scripts from $here"
(cd "$ird" && find . | LC_ALL=C sort | cpio -o -H newc --quiet | gzip -1) \
	>"$work/initrd.img" || fail "cpio failed"
cp "$work/k/boot/vmlinuz-$kver" "$work/vmlinuz" || fail "no vmlinuz"

mv -f "$work/vmlinuz" "$dir/vmlinuz" && mv -f "$work/initrd.img" "$dir/initrd.img" &&
	echo "$want" >"$dir/version" || fail "cannot write into $dir"
say "ready in $dir: $pkg $pkgver (kernel $kver), $(wc -l <"$ird/mods/order") modules, initrd $(du -k "$dir/initrd.img" | cut -f1) KiB"
