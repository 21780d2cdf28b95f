# Sourced by the scripts of tests/interop (bash): pick_port prints a
# scheduler port below the kernel's ephemeral range, so that no node's port
# probe or outgoing connection can take it before the scheduler binds it
# (C++ ps-lite picks its port by binding port 0 and closing the socket).
eph_low=$(cut -f1 /proc/sys/net/ipv4/ip_local_port_range 2>/dev/null || echo 32768)
pick_port() {
	local p tries=0
	while [ $tries -lt 200 ]; do
		p=$((10000 + RANDOM % (eph_low - 10000)))
		if ! ss -Htan "( sport = :$p or dport = :$p )" 2>/dev/null | grep -q .; then
			echo $p
			return 0
		fi
		tries=$((tries + 1))
	done
	return 1
}

