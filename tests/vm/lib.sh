# Sourced by the tests/vm/*.sh tests (POSIX sh). Each test runs itself a
# second time inside the RDMA test VM, one boot per test:
#   . "$PSL_SRCDIR/tests/vm/lib.sh"
#   vm_main LIMIT "$@"       # on the host: skip or boot; returns in the VM
#   ... the checks, run in the VM with rxe0 up ...
# make check runs tests in the build directory, which the VM shares
# read-write; one VM at a time (a lock), since TCG takes both cores.
vm_src=${PSL_SRCDIR:?run through make check, or set PSL_SRCDIR and PSL_BUILDDIR}
vm_build=${PSL_BUILDDIR:?run through make check, or set PSL_BUILDDIR}

vm_skip() {
	echo "SKIP: $*"
	exit 77
}

# vm_main LIMIT ARGS: on the host, boots the VM to run "$0 --in-vm" under
# LIMIT seconds and exits with its status; in the VM (--in-vm), returns.
# vm_mem (MiB), when the test sets it, is the VM's memory.
vm_main() {
	vm_limit=$1
	shift
	if [ "${1:-}" = --in-vm ]; then
		vm_t0=$(date +%s)
		vm_tmp=$(mktemp -d "${TMPDIR:-/tmp}/pslite-vmtest.XXXXXX")
		trap 'rm -rf "$vm_tmp"' EXIT
		return 0
	fi
	# ASan + UBSan binaries under TCG emulation run ~10x slower than
	# plain ones inside an already ~10x slower VM: the jobs would not fit
	# make check's time; the plain build runs the same tests.
	if [ -z "${PSL_VM_SANITIZERS:-}" ] && grep -q 'fsanitize=address' "$vm_build/Makefile" 2>/dev/null; then
		vm_skip "sanitizer build: the VM tests run in the plain build only (too slow under emulation; PSL_VM_SANITIZERS=1 runs them)"
	fi
	command -v qemu-system-x86_64 >/dev/null 2>&1 ||
		vm_skip "no qemu-system-x86_64 (Debian package qemu-system-x86)"
	d=${PSL_VM_DIR:-/var/cache/pslite-vm}
	[ -s "$d/vmlinuz" ] && [ -s "$d/initrd.img" ] ||
		vm_skip "no VM assets in $d (run tests/vm/prepare.sh as root)"
	lock=${TMPDIR:-/tmp}/pslite-vm-tests.lock
	if command -v flock >/dev/null 2>&1; then
		exec flock -w $((vm_limit + 600)) "$lock" \
			"$vm_src/tests/vm/run.sh" --timeout "$vm_limit" ${vm_mem:+--mem "$vm_mem"} \
			--rw "$vm_build" -- "$0" --in-vm
	fi
	exec "$vm_src/tests/vm/run.sh" --timeout "$vm_limit" ${vm_mem:+--mem "$vm_mem"} --rw "$vm_build" -- \
		"$0" --in-vm
}

vm_fail=0
vm_bad() {
	echo "FAIL: $*"
	vm_fail=1
}
vm_step() {
	echo "--- $* ($(($(date +%s) - vm_t0)) s)"
}

# vm_pair LIMIT SERVER_CMD -- CLIENT_CMD: the server in the background, the
# client 3 s later (rdmacm and perftest need the server listening), both
# under LIMIT seconds; output in $vm_tmp/server and $vm_tmp/client. Fails
# (returns 1) when either fails.
vm_pair() {
	lim=$1
	shift
	srv=
	while [ $# -gt 0 ] && [ "$1" != -- ]; do
		srv="$srv $1"
		shift
	done
	shift
	# shellcheck disable=SC2086
	timeout -k 5 "$lim" $srv >"$vm_tmp/server" 2>&1 &
	spid=$!
	sleep 3
	timeout -k 5 "$lim" "$@" >"$vm_tmp/client" 2>&1
	crc=$?
	wait $spid
	src=$?
	[ $crc -eq 0 ] && [ $src -eq 0 ] && return 0
	echo "server (exit $src):"
	tail -n 15 "$vm_tmp/server"
	echo "client (exit $crc):"
	tail -n 15 "$vm_tmp/client"
	return 1
}
