#!/bin/sh
# van_ibverbs on real verbs: boots the soft-RoCE VM once (tests/vm/run.sh)
# and runs the whole suite, ibv_vm_inner.sh, in it. Skips (77) with one line
# when the VM cannot run here (no qemu, no VM assets: tests/vm/prepare.sh).
[ -n "${PSL_BUILDDIR:-}" ] || { [ -f tests/testenv.sh ] && . ./tests/testenv.sh; } || { echo "$0: run it from the build directory (where tests/testenv.sh is) or by make check TESTS=$0" >&2; exit 99; }
set -u
s=${PSL_SRCDIR:?run through make check}
b=${PSL_BUILDDIR:?run through make check}
run=$s/tests/vm/run.sh
if [ ! -x "$run" ]; then
	echo "ibv_vm.sh: SKIP: no VM test bed in this tree (tests/vm/run.sh)"
	exit 77
fi
if [ -z "${PSL_VM_SANITIZERS:-}" ] && grep -q 'fsanitize=address' "$b/Makefile" 2>/dev/null; then
	echo "ibv_vm.sh: SKIP: sanitizer build: the VM tests run in the plain build only (too slow under emulation; PSL_VM_SANITIZERS=1 runs them)"
	exit 77
fi
export PSL_SRCDIR PSL_BUILDDIR
cd "$b" || exit 99
# one VM at a time on this machine, as tests/vm/lib.sh's tests take it
if command -v flock >/dev/null 2>&1; then
	exec flock -w 2400 "${TMPDIR:-/tmp}/pslite-vm-tests.lock" \
		"$run" --timeout 1800 -- "$s/plugins/van_ibverbs/tests/ibv_vm_inner.sh" "$@"
fi
exec "$run" --timeout 1800 -- "$s/plugins/van_ibverbs/tests/ibv_vm_inner.sh" "$@"
