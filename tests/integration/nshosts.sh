# Hosts of their own on one machine, for tests that need several addresses
# (sourced by tests/integration/netns.sh and tests/launch/ssh.sh): network
# namespaces joined by veth pairs to a bridge that lives in a namespace of
# its own, so that the machine's network is not touched. The caller defines
# skip (prints its line, exits 77) and dir (a scratch folder), and removes
# the namespaces it made (listed in $made) at the end.

# nshost_hub HUB: the namespace of the bridge br0; skips where namespaces
# or bridges cannot be made (a container without CAP_NET_ADMIN)
nshost_hub() {
	ip netns add "$1" 2>"$dir/err" || skip "cannot make a network namespace: $(cat "$dir/err")"
	made="${made:+$made }$1"
	ip netns exec "$1" true 2>"$dir/err" || skip "cannot run in a network namespace: $(cat "$dir/err")"
	ip -n "$1" link add br0 type bridge 2>"$dir/err" || skip "cannot make a bridge: $(cat "$dir/err")"
	ip -n "$1" link set br0 up
}

# nshost_link NS HUB PEER ADDR/PREFIX [IF]: a veth from NS (interface IF,
# default e0, holding ADDR, up) to HUB's bridge (interface PEER there)
nshost_link() {
	ip link add "${5:-e0}" netns "$1" type veth peer name "$3" netns "$2" 2>"$dir/err" ||
		skip "cannot make a veth pair: $(cat "$dir/err")"
	ip -n "$1" addr add "$4" dev "${5:-e0}"
	ip -n "$1" link set lo up
	ip -n "$1" link set "${5:-e0}" up
	ip -n "$2" link set "$3" master br0
	ip -n "$2" link set "$3" up
}
