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
# the launchers (pslite-run's ssh, mpirun, Slurm and k8s paths): the plain
# build's tests (CI's sanitizer time goes to the library's own)
. "$PSL_SRCDIR/tests/plain_only.sh"
fail=0
bad() {
	echo "$me: FAIL: $*" >&2
	fail=1
}
# expect_line WANT CMD...: CMD exits 2 with one line holding WANT (kept in
# $line)
expect_line() {
	local want=$1 rc
	shift
	line=$("$@" 2>&1)
	rc=$?
	[ $rc -eq 2 ] && [ "$(echo "$line" | wc -l)" -eq 1 ] && echo "$line" | grep -q -- "$want" ||
		bad "$*: exit $rc, '$line', expected one line with '$want'"
}
# (why empty: the script checks for itself before it calls lan)
if [ -n "$why" ]; then
	[ "$(id -u)" = 0 ] || skip "needs root $why"
	command -v ip >/dev/null 2>&1 || skip "no ip command (apt-get install iproute2)"
fi

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

# ssh_hosts NET FROM HOST...: an sshd on every HOST (namespace $tag$HOST at
# NET.1, NET.2, ...) with a host key and root's authorized key made here;
# waits until each answers from FROM's namespace; PSLITE_SSH_OPTS is what
# logs in with that key. Needs openssh-server and openssh-client.
start_sshd() { # HOST
	ip netns exec "$tag$1" /usr/sbin/sshd -D -e -f "$dir/sshd_config" 2>>"$dir/sshd-$1.log" &
	bg="$bg $!"
	disown $! # (a test may kill it with its host: no "Killed" line from bash)
}
ssh_hosts() {
	local net=$1 from=$2 n i t
	shift 2
	[ -x /usr/sbin/sshd ] || skip "no /usr/sbin/sshd (apt-get install openssh-server)"
	command -v ssh >/dev/null 2>&1 || skip "no ssh (apt-get install openssh-client)"
	command -v ssh-keygen >/dev/null 2>&1 || skip "no ssh-keygen (apt-get install openssh-client)"
	ssh-keygen -q -t ed25519 -N '' -f "$dir/hostkey" || exit 1
	ssh-keygen -q -t ed25519 -N '' -f "$dir/userkey" || exit 1
	cp "$dir/userkey.pub" "$dir/authorized_keys"
	mkdir -p /run/sshd # sshd's privilege separation folder
	cat >"$dir/sshd_config" <<CFG
Port 22
HostKey $dir/hostkey
AuthorizedKeysFile $dir/authorized_keys
PermitRootLogin prohibit-password
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
StrictModes no
PidFile none
LogLevel ERROR
CFG
	for n in "$@"; do start_sshd "$n"; done
	export PSLITE_SSH_OPTS="-F /dev/null -i $dir/userkey -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o LogLevel=ERROR"
	i=1
	for n in "$@"; do
		t=0
		# shellcheck disable=SC2086
		until ip netns exec "$tag$from" ssh $PSLITE_SSH_OPTS -o BatchMode=yes "$net.$i" true 2>"$dir/err"; do
			t=$((t + 1))
			[ $t -lt 30 ] || { echo "$me: sshd on $net.$i never answered: $(cat "$dir/err")" >&2; cat "$dir"/sshd-*.log >&2; exit 1; }
			sleep 0.5
		done
		i=$((i + 1))
	done
}
