#!/bin/sh
# Inside the soft-RoCE VM: pslite-bench push-pull over van ibverbs beside
# ib_write_bw at 4 KiB, 64 KiB and 1 MiB, in the same boot, interleaved.
# Prints a markdown table. Emulated hardware: only the ratios mean anything.
#   ibv_vm_bench.sh [SECONDS]
set -u
b=${PSL_BUILDDIR:?}
secs=${1:-8}
export PS_VAN_PATH=${PS_VAN_PATH:-$b/plugins/van_ibverbs/.libs}
ulimit -l unlimited 2>/dev/null
ip=$(ip -4 -o addr show 2>/dev/null | awk '$2 != "lo" {sub("/.*", "", $4); print $4; exit}')
dev=$(ls /sys/class/infiniband 2>/dev/null | head -n 1)
out=$(mktemp -d "${TMPDIR:-/tmp}/ibv-bench.XXXXXX")
trap 'rm -rf "$out"' EXIT

wbw() { # size -> Gbps
	timeout $((secs + 40)) ib_write_bw -d "$dev" -s "$1" -D "$secs" -F --report_gbits \
		>"$out/srv" 2>&1 &
	sp=$!
	sleep 3
	timeout $((secs + 30)) ib_write_bw -d "$dev" -s "$1" -D "$secs" -F --report_gbits "$ip" \
		>"$out/cli" 2>&1
	wait $sp
	awk -v s="$1" '$1 == s {print $4; exit}' "$out/cli"
	grep -q "^ *$1 " "$out/cli" || tail -n 5 "$out/cli" >&2
}

psl() { # size -> Gbps (push-pull, 1 server, 1 worker)
	${KEYS:+env NUM_KEY_PER_SERVER=$KEYS} timeout $((secs * 4 + 120)) "$b/tools/pslite-run" -s 1 -w 1 \
		--van ibverbs --host "${PSL_HOST:-$ip}" --timeout $((secs * 4 + 100)) -- \
		"$b/tools/pslite-bench" "$1" 1 1 --seconds "$secs" --json --quiet >"$out/psl" 2>&1
	grep -o '"goodput_gbps":[0-9.]*' "$out/psl" | head -n 1 | cut -d: -f2
}

median() { tr ' ' '\n' | grep . | sort -g | awk '{a[NR]=$1} END {if (NR==0) print ""; else if (NR%2) print a[(NR+1)/2]; else print (a[NR/2]+a[NR/2+1])/2}'; }
rep=${REPEAT:-3}
echo "device $dev, address $ip, $secs s per run, median of $rep interleaved runs, $(nproc) vCPU"
echo
echo "| size | ib_write_bw (Gbps) | pslite push-pull over ibverbs (Gbps) | ratio | runs (ib_write_bw / pslite) |"
echo "|---|---|---|---|---|"
for size in 4096 65536 1048576; do
	ws= ps= i=0
	while [ $i -lt "$rep" ]; do
		ws="$ws $(wbw "$size")"
		p=$(psl "$size")
		[ -n "$p" ] || tail -n 20 "$out/psl" >&2
		ps="$ps $p"
		i=$((i + 1))
	done
	w=$(echo "$ws" | median)
	p=$(echo "$ps" | median)
	r=$(awk -v a="${p:-0}" -v b="${w:-0}" 'BEGIN {if (b > 0) printf "%.2f", a / b; else print "-"}')
	echo "| $size | ${w:-failed} | ${p:-failed} | $r |$ws /$ps |"
done
