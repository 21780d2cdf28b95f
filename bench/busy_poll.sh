#!/bin/sh
# bench/busy_poll.sh: PS_BUSY_POLL=1 against the default, per van, one 4 KiB
# key push-pull (1 scheduler, 1 server, 1 worker on loopback), interleaved.
#
#   bench/busy_poll.sh [--rounds N] [--seconds S] [--before DIR] [--hog N] [--only VAN]
#
# --before DIR: van plugins of another build (e.g. copies of
# plugins/*/.libs/van_*.so made before a change), measured in the same
# rounds as this build's, so that before and after see the same machine.
# --hog N: N busy loops beside the job (a machine whose CPUs are wanted by
# others, such as a build running beside the job).
# --only VAN: only that van's jobs (zmq, ucx or fabric).
# Prints one line per job: round|van and settings|build|PS_BUSY_POLL|p50 p99
# (us)|cores used by all nodes (CPU seconds / wall).
set -eu

here=$(cd "$(dirname "$0")" && pwd)
B=${PSL_BUILDDIR:-$(cd "$here/.." && pwd)}
R=3 S=2 BEFORE= HOG=0 ONLY=
while [ $# -gt 0 ]; do
	case $1 in
	--rounds) R=$2; shift 2 ;;
	--seconds) S=$2; shift 2 ;;
	--before) BEFORE=$2; shift 2 ;;
	--hog) HOG=$2; shift 2 ;;
	--only) ONLY=$2; shift 2 ;;
	*) echo "usage: bench/busy_poll.sh [--rounds N] [--seconds S] [--before DIR] [--hog N] [--only VAN]" >&2; exit 2 ;;
	esac
done
vp=
for d in "$B"/plugins/*/.libs; do [ -d "$d" ] && vp=${vp:+$vp:}$d; done
builds="after:$vp"
[ -n "$BEFORE" ] && builds="before:$BEFORE $builds"

hogs=
i=0
while [ $i -lt "$HOG" ]; do
	sh -c 'while :; do :; done' &
	hogs="$hogs $!"
	i=$((i + 1))
done
trap '[ -z "$hogs" ] || kill $hogs' EXIT

r=1
while [ $r -le "$R" ]; do
	for cfg in "zmq" "ucx UCX_TLS=tcp" "ucx UCX_TLS=posix,sysv,cma,self" "fabric FI_PROVIDER=tcp"; do
		set -- $cfg
		van=$1
		shift
		[ -z "$ONLY" ] || [ "$ONLY" = "$van" ] || continue
		for b in $builds; do
			for bp in 0 1; do
				all=$(env PS_VAN_PATH="${b#*:}" NUM_KEY_PER_SERVER=1 LOG_DURATION=10 PS_BUSY_POLL=$bp "$@" \
					"$B/tools/pslite-run" -s 1 -w 1 --van "$van" --timeout 60 -- \
					"$B/tools/pslite-bench" 4096 1 1 --json --quiet --seconds "$S" 2>&1 || true)
				out=$(echo "$all" | grep -o '{"tool".*}' || true)
				p=$(echo "$out" | grep '"tool":"pslite-bench"' |
					sed 's/.*"p50_us":\([0-9.]*\).*"p99_us":\([0-9.]*\).*/\1 \2/')
				c=$(echo "$out" | grep '"tool":"pslite-bench-node"' |
					sed 's/.*"cpu_s":\([0-9.]*\).*"wall_s":\([0-9.]*\).*/\1 \2/' |
					awk '{ s += $1 / $2 } END { printf "%.2f", s }')
				if [ -z "$p" ]; then
					# keep what the failed job said
					f=${TMPDIR:-/tmp}/busy_poll.$$.$r.$van.${b%%:*}.$bp.log
					echo "$all" > "$f"
					p="failed (its output: $f)"
				fi
				echo "$r|$cfg|${b%%:*}|$bp|$p|$c"
			done
		done
	done
	r=$((r + 1))
done
