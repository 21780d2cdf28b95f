#!/bin/sh
# No silent hang for a new user (issue 26, cases 1 and 2), over van zmq:
#  1. the README's C example, extracted from README.md and run as written
#     under pslite-run, completes and pulls what it pushed;
#  2. a worker whose servers have no KV server for its app (the README's
#     old, worker-only example) fails its push with ENXIO after
#     PS_HELD_TIMEOUT=3, each side naming the fix, instead of hanging;
#  3. a handler that never answers: psl_kv_wait fails with ETIMEDOUT after
#     PS_REQUEST_TIMEOUT=2, and psl_kv_worker_free returns at once after a
#     psl_kv_wait_timeout that gave up.
# Every job runs under pslite-run --timeout and timeout(1).
[ -n "${PSL_BUILDDIR:-}" ] || { [ -f tests/testenv.sh ] && . ./tests/testenv.sh; } || { echo "$0: run it from the build directory (where tests/testenv.sh is) or by make check TESTS=$0" >&2; exit 99; }
set -u
b=${PSL_BUILDDIR:?run through make check, or set PSL_BUILDDIR}
src=${PSL_SRCDIR:-$b}
case ":$PS_VAN_PATH:" in *"/van_zmq/"*) ;; *) echo "nohang.sh: van zmq not built, skipped"; exit 77 ;; esac
dir=$(mktemp -d "${TMPDIR:-/tmp}/pslite-nohang.XXXXXX")
trap 'rm -rf "$dir"' EXIT
ulimit -c 0 2>/dev/null
fail=0
bad() { echo "nohang.sh: $*" >&2; fail=1; }
CC=${CC:-cc}
# a sanitizer build's library needs its runtime first in the program
san=
grep -q 'fsanitize=address' "$b/Makefile" 2>/dev/null && san="-fsanitize=address,undefined"
build() { # name: $dir/name.c -> $dir/name
	$CC $san -o "$dir/$1" "$dir/$1.c" -I"$src/include" -I"$b/include" -L"$b/.libs" -lpslite \
		-Wl,-rpath,"$b/.libs" 2>"$dir/$1.cc" || { cat "$dir/$1.cc" >&2; bad "cannot build $1"; }
}
run() { # limit log args...: a job of 1 server and 1 worker
	lim=$1 log=$2
	shift 2
	t0=$(date +%s)
	timeout -k 5 $((lim + 30)) "$b/tools/pslite-run" -s 1 -w 1 --timeout $((lim + 20)) -- "$@" \
		>"$log" 2>&1
	rc=$?
	took=$(( $(date +%s) - t0 ))
}

# 1. the README's example, as written
awk '/^## Using the library/ {u = 1} u && /^```c$/ {c = 1; next} c && /^```$/ {exit} c' \
	"$src/README.md" >"$dir/readme.c"
grep -q "psl_kv_server_new" "$dir/readme.c" || bad "README.md's C example was not found"
build readme
run 30 "$dir/readme.log" "$dir/readme"
[ $rc -eq 0 ] || bad "the README example exited $rc after $took s (log: $(tail -5 "$dir/readme.log"))"
grep -qi "\[worker 0\] pull: success, 1 2 3 4" "$dir/readme.log" ||
	bad "the README example's worker did not pull 1 2 3 4: $(grep pull: "$dir/readme.log")"

# 2. no KV server for the worker's app
cat >"$dir/noserver.c" <<'C'
#include <pslite.h>
#include <stdio.h>
int main(void)
{
	psl_start(0, true);
	if (psl_is_worker()) {
		struct psl_kv_worker *w;
		uint64_t b, e;
		float v = 1;
		psl_kv_worker_new(0, 0, PSL_FLOAT32, &w);
		psl_server_key_range(0, &b, &e);
		struct psl_kv kv = {.keys = &b, .num_keys = 1, .vals = &v, .num_vals = 1};
		int rc = psl_kv_wait(w, psl_kv_push(w, &kv, 0, NULL, NULL));
		printf("push: %d\n", rc);
		psl_kv_worker_free(w);
	}
	psl_finalize(0, true);
	return 0;
}
C
build noserver
PS_HELD_TIMEOUT=3 run 15 "$dir/noserver.log" "$dir/noserver"
[ $rc -ne 124 ] && [ $rc -ne 137 ] && [ $took -le 15 ] || bad "no KV server: the job took $took s (rc $rc), expected the push to fail after 3 s"
grep -q "\[worker 0\] push: -6$" "$dir/noserver.log" || bad "no KV server: the push did not fail with -ENXIO: $(grep push: "$dir/noserver.log")"
grep -q "\[server 0\] .*WARN: holding 1 message(s) .*this node has no KV server for app 0.*psl_kv_server_new" "$dir/noserver.log" ||
	bad "no KV server: the server did not warn naming the app and the fix"
grep -q "\[worker 0\] .*WARN: request 0 of app 0 fails with ENXIO: server 0 .*has no KV server for app 0.*psl_kv_server_new" "$dir/noserver.log" ||
	bad "no KV server: the worker's log does not say why its push failed"

# 3. a handler that never answers
cat >"$dir/silent.c" <<'C'
#include <errno.h>
#include <pslite.h>
#include <stdio.h>
#include <time.h>
static void handle(struct psl_kv_server *s, struct psl_kv_request *req, void *arg)
{
	(void)s, (void)req, (void)arg; /* never answers */
}
int main(void)
{
	struct psl_kv_server *srv = NULL;
	psl_start(0, true);
	if (psl_is_server())
		psl_kv_server_new(0, PSL_FLOAT32, handle, NULL, &srv);
	if (psl_is_worker()) {
		struct psl_kv_worker *w;
		uint64_t b, e;
		float v = 1;
		time_t t0;
		psl_kv_worker_new(0, 0, PSL_FLOAT32, &w);
		psl_server_key_range(0, &b, &e);
		struct psl_kv kv = {.keys = &b, .num_keys = 1, .vals = &v, .num_vals = 1};
		printf("wait: %d\n", psl_kv_wait(w, psl_kv_push(w, &kv, 0, NULL, NULL)));
		psl_kv_worker_set_timeout(w, 0); /* no deadline: free must not wait for it */
		printf("wait_timeout: %d\n",
		       psl_kv_wait_timeout(w, psl_kv_push(w, &kv, 0, NULL, NULL), 100));
		t0 = time(NULL);
		psl_kv_worker_free(w);
		printf("free: %d s\n", (int)(time(NULL) - t0));
	}
	psl_finalize(0, true);
	psl_kv_server_free(srv);
	return 0;
}
C
build silent
PS_REQUEST_TIMEOUT=2 run 15 "$dir/silent.log" "$dir/silent"
[ $rc -ne 124 ] && [ $rc -ne 137 ] && [ $took -le 15 ] || bad "silent handler: the job took $took s (rc $rc)"
grep -q "\[worker 0\] wait: -$(printf '%d' 110)$" "$dir/silent.log" || bad "silent handler: psl_kv_wait did not fail with -ETIMEDOUT: $(grep wait: "$dir/silent.log")"
grep -q "\[worker 0\] .*WARN: request 0 of app 0 customer 0 got no answer from server 0 .*within 2000 ms.*PS_REQUEST_TIMEOUT" "$dir/silent.log" ||
	bad "silent handler: no WARN naming the server and the setting"
grep -q "\[worker 0\] wait_timeout: -110$" "$dir/silent.log" || bad "silent handler: psl_kv_wait_timeout did not return -ETIMEDOUT"
grep -q "\[worker 0\] free: [01] s$" "$dir/silent.log" || bad "silent handler: psl_kv_worker_free did not return at once: $(grep free: "$dir/silent.log")"

[ $fail -eq 0 ] || { echo "--- logs:" >&2; tail -n 30 "$dir"/*.log >&2; }
exit $fail
