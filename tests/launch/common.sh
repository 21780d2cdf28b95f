# Sourced by tests/launch/*.sh after they have read tests/testenv.sh, with
# me (the script's name) and why (what it needs root for) set: skip, bad,
# a scratch folder $dir, and lan, which makes the hosts; everything started
# ($bg), every namespace made ($made) and $dir go at exit.
set -u
b=${PSL_BUILDDIR:?run through make check, or set PSL_BUILDDIR}
run=$b/tools/pslite-run

skip() {
	echo "$me: SKIP: $*" >&2
	exit 77
}
fail=0
bad() {
	echo "$me: FAIL: $*" >&2
	fail=1
}
[ "$(id -u)" = 0 ] || skip "needs root $why"
command -v ip >/dev/null 2>&1 || skip "no ip command (apt-get install iproute2)"

tag=psl${me%%.*}$$ # namespace names (interface names: v + a host name)
dir=$(mktemp -d "${TMPDIR:-/tmp}/pslite-${me%%.*}.XXXXXX")
chmod 755 "$dir"
made=
bg=
cleanup() {
	local p n
	for p in $bg; do kill -TERM "$p" 2>/dev/null; done
	sleep 0.3
	for n in $made; do
		for p in $(ip netns pids "$n" 2>/dev/null); do kill -KILL "$p" 2>/dev/null; done
	done
	for p in $bg; do kill -KILL "$p" 2>/dev/null; done
	wait 2>/dev/null
	for n in $made; do
		ip netns del "$n" 2>/dev/null
		rm -rf "/etc/netns/$n"
	done
	rm -rf "$dir"
}
trap cleanup EXIT
trap 'exit 1' INT TERM

. "$PSL_SRCDIR/tests/integration/nshosts.sh"
# lan NET NAME...: a namespace $tag$NAME per name on one bridge, the names
# at NET.1, NET.2, ... and the last at NET.10 (where the launcher runs)
lan() {
	local net=$1 i=1 n
	shift
	nshost_hub "${tag}hub"
	for n in "$@"; do
		ip netns add "$tag$n" || exit 1
		made="$made $tag$n"
		[ "$n" = "${*: -1}" ] && i=10
		nshost_link "$tag$n" "${tag}hub" "v$n" "$net.$i/24"
		i=$((i + 1))
	done
}
