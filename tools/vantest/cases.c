/*
 * The cases of pslite-vantest. Each one is a function that returns VT_PASS,
 * VT_FAIL (with vt_why) or VT_SKIP, and runs in a process of its own. Node
 * A has id 8 and node B id 9, both on 127.0.0.1; "both ways" means A to B
 * and B to A at the same time.
 */
#define _GNU_SOURCE 1
#include <dlfcn.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <sys/select.h>
#include <sys/wait.h>
#include <unistd.h>

#include "vt.h"

#define A_ID 8
#define B_ID 9
#define DATA_MS 60000 /* how long data may take to arrive */
#define EVENT_MS 20000

/* The size of struct psl_van_ops in ABI 1.0. */
#define OPS_SIZE_1_0 (offsetof(struct psl_van_ops, dereg_mem) + sizeof(void *))

/* What every case checks at its end: no callback found an error, none ran
 * after fini. */
static bool host_clean(struct vt_node *n)
{
	if (!n->t.label)
		return true;
	if (!vt_host_ok(&n->t)) {
		vt_failf(__LINE__, "%s", n->t.err);
		return false;
	}
	if (atomic_load(&n->t.after_fini)) {
		vt_failf(__LINE__, "%s: %d host callbacks after fini returned (first: %s)",
			 n->t.label, atomic_load(&n->t.after_fini), n->t.after_what);
		return false;
	}
	return true;
}

/* fini both, wait a little for late callbacks, check both hosts. */
static int finish(struct vt_node *a, struct vt_node *b, bool ok)
{
	vt_node_down(a);
	if (b)
		vt_node_down(b);
	vt_sleep_ms(100);
	ok = host_clean(a) && ok;
	if (b)
		ok = host_clean(b) && ok;
	vt_node_free(a);
	if (b)
		vt_node_free(b);
	vt_orphans_free();
	return ok && !vt_why[0] ? VT_PASS : VT_FAIL;
}

static bool pair_up(struct vt_node *a, struct vt_node *b)
{
	return vt_node_up(a, "A", A_ID, true) && vt_node_up(b, "B", B_ID, true) && vt_link(a, b);
}

static long nrecv(struct vt_node *n)
{
	return atomic_load(&n->t.nrecv);
}

/* Waits until n received want messages, or a callback found an error. */
static bool wait_recv(struct vt_node *n, long want, int ms)
{
	bool ok = WAIT(nrecv(n) >= want || !vt_host_ok(&n->t), ms);
	if (!vt_host_ok(&n->t)) {
		vt_failf(__LINE__, "%s", n->t.err);
		return false;
	}
	if (!ok)
		vt_failf(__LINE__, "%s received %ld of %ld messages in %d s", n->t.label, nrecv(n),
			 want, ms / 1000);
	return ok;
}

static bool all_done(struct vt_send *s, int n)
{
	int i;
	for (i = 0; i < n; i++)
		if (atomic_load(&s[i].done) == 0)
			return false;
	return true;
}

/* Every cookie came back exactly once (twice is caught by the host). */
static bool check_done(struct vt_send *s, int n, const char *label, bool want_ok)
{
	int i;
	for (i = 0; i < n; i++) {
		int d = atomic_load(&s[i].done);
		if (d != 1) {
			vt_failf(__LINE__, "%s: send %d of %d got send_done %d times", label, i, n,
				 d);
			return false;
		}
		if (want_ok && atomic_load(&s[i].status) != 0) {
			vt_failf(__LINE__, "%s: send %d completed with status %d", label, i,
				 atomic_load(&s[i].status));
			return false;
		}
	}
	return true;
}

static void free_sends(struct vt_send *s, int n)
{
	int i;
	if (!s)
		return;
	for (i = 0; i < n; i++)
		vt_send_free(&s[i]);
	free(s);
}

/* --------------------------------------------------------------- load -- */

static int c_load(void)
{
	char err[1024];
	void *dl;
	psl_van_entry_fn entry;
	const struct psl_van_ops *o;
	int major;

	dlerror();
	dl = dlopen(vt.path, RTLD_NOW | RTLD_LOCAL);
	CHECK(dl, "dlopen: %s", dlerror());
	*(void **)&entry = dlsym(dl, PSL_VAN_ENTRY_NAME);
	if (!entry) {
		for (major = 0; major < 10; major++) {
			char sym[32];
			snprintf(sym, sizeof(sym), "psl_van_entry_v%d", major);
			CHECK(!dlsym(dl, sym), "exports %s, not %s: built for another van ABI", sym,
			      PSL_VAN_ENTRY_NAME);
		}
		CHECK(0, "does not export %s", PSL_VAN_ENTRY_NAME);
	}
	o = entry(PSL_VAN_ABI_VERSION);
	CHECK(o, "%s(%#x) returned NULL", PSL_VAN_ENTRY_NAME, PSL_VAN_ABI_VERSION);
	CHECK(PSL_VAN_ABI_MAJOR_OF(o->abi_version) == PSL_VAN_ABI_MAJOR,
	      "built for van ABI %u.%u, this is %u.%u", PSL_VAN_ABI_MAJOR_OF(o->abi_version),
	      PSL_VAN_ABI_MINOR_OF(o->abi_version), PSL_VAN_ABI_MAJOR, PSL_VAN_ABI_MINOR);
	CHECK(o->size >= OPS_SIZE_1_0, "its ops table says %u bytes, ABI 1.0 has %zu", o->size,
	      OPS_SIZE_1_0);
	CHECK(o->name && !strcmp(o->name, vt.name),
	      "the van calls itself '%s', its file says '%s' (van_%s.so)",
	      o->name ? o->name : "(null)", vt.name, vt.name);
	CHECK(o->init && o->fini && o->query && o->bind && o->connect && o->send,
	      "a mandatory operation is NULL:%s%s%s%s%s%s", o->init ? "" : " init",
	      o->fini ? "" : " fini", o->query ? "" : " query", o->bind ? "" : " bind",
	      o->connect ? "" : " connect", o->send ? "" : " send");
	CHECK(!o->reg_mem == !o->dereg_mem, "reg_mem and dereg_mem: one given, one NULL");
	CHECK(entry(PSL_VAN_ABI_MAKE(1, 0)) != NULL,
	      "returns no table to a core of ABI 1.0 (it could: the table only grew)");
	printf("van %s %s: ABI %u.%u, %s\n", o->name, o->version ? o->version : "(no version)",
	       PSL_VAN_ABI_MAJOR_OF(o->abi_version), PSL_VAN_ABI_MINOR_OF(o->abi_version),
	       o->description ? o->description : "(no description)");
	vt_ops = o;
	(void)err;
	return VT_PASS;
out:
	return VT_FAIL;
}

/* ---------------------------------------------------------- init-fini -- */

static int c_init_fini(void)
{
	struct vt_node a = {0};
	int round;
	for (round = 0; round < 3; round++) {
		memset(&a, 0, sizeof(a));
		CHECK(vt_node_up(&a, "A", A_ID, round == 2), "%s", vt_why);
		vt_node_down(&a);
		vt_sleep_ms(50);
		CHECK(host_clean(&a), "%s", vt_why);
		CHECK(!atomic_load(&a.t.log_errors), "init and fini logged an ERROR:\n%s", a.t.log);
		vt_node_free(&a);
	}
	{ /* two instances at once */
		struct vt_node b = {0};
		memset(&a, 0, sizeof(a));
		CHECK(vt_node_up(&a, "A", A_ID, true) && vt_node_up(&b, "B", B_ID, true), "%s",
		      vt_why);
		CHECK(a.port != b.port, "two instances bound the same port %d", a.port);
		return finish(&a, &b, true);
	}
out:
	vt_node_free(&a);
	return VT_FAIL;
}

/* -------------------------------------------------------------- query -- */

static int c_query(void)
{
	struct vt_node a = {0};
	struct psl_van_caps caps;
	int rc;
	CHECK(vt_node_up(&a, "A", A_ID, false), "%s", vt_why);
	memset(&caps, 0x5a, sizeof(caps));
	caps.size = sizeof(caps);
	rc = vt_ops->query(a.v, &caps);
	CHECK(rc == 0, "query returned %d", rc);
	CHECK(memchr(caps.transports, 0, sizeof(caps.transports)),
	      "caps.transports is not a NUL-terminated string");
	CHECK(caps.flags & PSL_VAN_CAP_MEM_HOST, "caps.flags lacks PSL_VAN_CAP_MEM_HOST (%#x)",
	      caps.flags);
	CHECK(!(caps.flags & ~0x3fu), "caps.flags has bits van.h does not define (%#x)",
	      caps.flags);
	CHECK(!(caps.flags & PSL_VAN_CAP_NEEDS_MR) || (vt_ops->reg_mem && vt_ops->dereg_mem),
	      "PSL_VAN_CAP_NEEDS_MR without reg_mem/dereg_mem");
	vt_note("caps: flags %#x, max_msg_size %llu, transports \"%s\"", caps.flags,
		(unsigned long long)caps.max_msg_size, caps.transports);
	return finish(&a, NULL, true);
out:
	vt_node_free(&a);
	return VT_FAIL;
}

/* ------------------------------------------------------------ connect -- */

/* connect both ways, a message each way, PEER_UP on both sides */
static int c_connect(void)
{
	struct vt_node a = {0}, b = {0};
	int rc;
	CHECK(pair_up(&a, &b), "%s", vt_why);
	a.t.expect_sender = B_ID;
	b.t.expect_sender = A_ID;
	rc = vt_send_msg(&a, B_ID, 1, 0, 0, NULL, 0, 0, NULL);
	CHECK(rc == 0, "A: send to B returned %d", rc);
	rc = vt_send_msg(&b, A_ID, 1, 0, 0, NULL, 0, 0, NULL);
	CHECK(rc == 0, "B: send to A returned %d", rc);
	CHECK(wait_recv(&b, 1, DATA_MS) && wait_recv(&a, 1, DATA_MS), "%s", vt_why);
	CHECK(WAIT(vt_host_event(&a.t, B_ID, PSL_VAN_PEER_UP) >= 0, EVENT_MS),
	      "A reached B but reported no PSL_VAN_PEER_UP for node %d", B_ID);
	CHECK(WAIT(vt_host_event(&b.t, A_ID, PSL_VAN_PEER_UP) >= 0, EVENT_MS),
	      "B reached A but reported no PSL_VAN_PEER_UP for node %d", A_ID);
	CHECK(vt_host_event(&a.t, B_ID, PSL_VAN_PEER_MISMATCH) < 0 &&
		      vt_host_event(&a.t, B_ID, PSL_VAN_PEER_DOWN) < 0,
	      "A reported B mismatched or down");
	return finish(&a, &b, true);
out:
	return finish(&a, &b, false);
}

/* --------------------------------------------------- message kinds -- */

struct traffic {
	struct vt_node *from;
	int32_t to;
	uint32_t stream;
	int n;
	void (*shape)(int i, uint32_t *nseg, size_t *lens, size_t *meta_len);
	struct vt_send *sends;
	int rc_bad; /* first failed send's return, or 0 */
	int at;
	bool poison;
};

static void *traffic_main(void *arg)
{
	struct traffic *tr = arg;
	int i;
	for (i = 0; i < tr->n; i++) {
		uint32_t nseg = 0;
		size_t lens[VT_MAXSEG] = {0}, meta_len = 0;
		int rc;
		tr->shape(i, &nseg, lens, &meta_len);
		tr->sends[i].poison = tr->poison;
		rc = vt_send_msg(tr->from, tr->to, tr->stream, (uint32_t)i, nseg, lens, meta_len, 0,
				 &tr->sends[i]);
		if (rc) {
			tr->rc_bad = rc;
			tr->at = i;
			atomic_store(&tr->sends[i].done, 1); /* never coming */
			break;
		}
	}
	return NULL;
}

/* Sends n messages of shape A->B (stream 1) and B->A (stream 2) at once,
 * checks they all arrive whole, in order, and every send_done once. */
static int both_ways(int n, void (*shape)(int, uint32_t *, size_t *, size_t *), bool poison)
{
	struct vt_node a = {0}, b = {0};
	struct traffic ta = {&a, B_ID, 1, n, shape, NULL, 0, 0, poison},
		       tb = {&b, A_ID, 2, n, shape, NULL, 0, 0, poison};
	pthread_t th;
	bool started = false;

	ta.sends = calloc((size_t)n, sizeof(struct vt_send));
	tb.sends = calloc((size_t)n, sizeof(struct vt_send));
	CHECK(ta.sends && tb.sends, "out of memory");
	CHECK(pair_up(&a, &b), "%s", vt_why);
	a.t.expect_sender = B_ID;
	b.t.expect_sender = A_ID;
	CHECK(pthread_create(&th, NULL, traffic_main, &tb) == 0, "pthread_create");
	started = true;
	traffic_main(&ta);
	pthread_join(th, NULL);
	started = false;
	CHECK(!ta.rc_bad, "A: send %d to B returned %d (%s)", ta.at, ta.rc_bad,
	      strerror(-ta.rc_bad));
	CHECK(!tb.rc_bad, "B: send %d to A returned %d (%s)", tb.at, tb.rc_bad,
	      strerror(-tb.rc_bad));
	CHECK(wait_recv(&b, n, DATA_MS), "%s", vt_why);
	CHECK(wait_recv(&a, n, DATA_MS), "%s", vt_why);
	CHECK(WAIT(all_done(ta.sends, n) && all_done(tb.sends, n), DATA_MS),
	      "messages arrived, but not every send got send_done");
	vt_sleep_ms(50); /* a second send_done would come now */
	CHECK(check_done(ta.sends, n, "A", true) && check_done(tb.sends, n, "B", true), "%s",
	      vt_why);
	CHECK(nrecv(&a) == n && nrecv(&b) == n,
	      "more messages arrived than were sent (%ld, %ld of %d)", nrecv(&a), nrecv(&b), n);
	{
		int r = finish(&a, &b, true);
		free_sends(ta.sends, n);
		free_sends(tb.sends, n);
		return r;
	}
out:
	if (started)
		pthread_join(th, NULL);
	{
		int r = finish(&a, &b, false);
		free_sends(ta.sends, n);
		free_sends(tb.sends, n);
		return r == VT_PASS ? VT_FAIL : r;
	}
}

static void shape_meta(int i, uint32_t *nseg, size_t *lens, size_t *meta_len)
{
	static const size_t ml[] = {24, 25, 100, 333, 1000, 4096, 8191, 65536};
	(void)lens;
	*nseg = 0;
	*meta_len = ml[i % 8];
}

static int c_meta_only(void)
{
	return both_ways(400, shape_meta, false);
}

/* The metas of node lists: the core's ADD_NODE is 112 bytes plus 552 per
 * node (docs/wire.md 4.1; tests/unit/test_message.c checks that the core's
 * encoder gives these sizes), and the scheduler sends one listing every node
 * and itself. These stand for the lists of 16 + 1, 200 + 1 and 1000 + 1
 * nodes, the second being issue 31's 200-node job: the van must carry each
 * whole, byte for byte, with no segment. */
#define NODE_LIST_META(nodes) (112 + 552 * (size_t)((nodes) + 1))

static void shape_node_list(int i, uint32_t *nseg, size_t *lens, size_t *meta_len)
{
	static const size_t ml[] = {NODE_LIST_META(16), NODE_LIST_META(200),
				    NODE_LIST_META(1000)};
	(void)lens;
	*nseg = 0;
	*meta_len = ml[i % 3];
}

static int c_node_list(void)
{
	return both_ways(24, shape_node_list, false);
}

static void shape_segments(int i, uint32_t *nseg, size_t *lens, size_t *meta_len)
{
	static const size_t sz[] = {1, 8, 100, 4096, 5000, 65536, 100000, 300000};
	uint32_t s;
	*nseg = 1 + (uint32_t)i % VT_MAXSEG;
	for (s = 0; s < *nseg; s++)
		lens[s] = sz[(size_t)(i * 3 + (int)s * 5) % 8];
	*meta_len = 100 + (size_t)(i % 5) * 50;
}

static int c_segments(void)
{
	return both_ways(160, shape_segments, false);
}

static void shape_empty(int i, uint32_t *nseg, size_t *lens, size_t *meta_len)
{
	/* 0-byte segments alone, first, in the middle, last, all of them */
	static const size_t pat[6][4] = {{0, 0, 0, 0},	 {0, 10, 0, 0}, {10, 0, 10, 0},
					 {10, 10, 0, 0}, {0, 0, 0, 0},	{70000, 0, 0, 70000}};
	static const uint32_t ns[6] = {1, 2, 3, 3, 4, 4};
	uint32_t s;
	*nseg = ns[i % 6];
	for (s = 0; s < *nseg; s++)
		lens[s] = pat[i % 6][s];
	*meta_len = 64;
}

static int c_empty_segments(void)
{
	return both_ways(60, shape_empty, false);
}

static void shape_sizes(int i, uint32_t *nseg, size_t *lens, size_t *meta_len)
{
	/* every size alone, then as the middle of three */
	static const size_t sz[] = {
		1,	 2,    7,    63,    64,	   65,	  1023,	  1024,	   4095,	  4096,
		4097,	 8192, 8193, 65535, 65536, 65537, 262144, 1 << 20, (1 << 20) + 1, 4 << 20,
		16 << 20};
	enum { N = sizeof(sz) / sizeof(sz[0]) };
	int k = i % N;
	if (i < N) {
		*nseg = 1;
		lens[0] = sz[k];
	} else {
		*nseg = 3;
		lens[0] = 16;
		lens[1] = sz[k];
		lens[2] = 3;
	}
	*meta_len = 200;
}

static int c_sizes(void)
{
	return both_ways(42, shape_sizes, false);
}

/* ------------------------------------------------------------- order -- */

static void shape_order(int i, uint32_t *nseg, size_t *lens, size_t *meta_len)
{
	/* small and large mixed, so that a van with separate paths for them
	 * must keep them in order */
	static const size_t sz[] = {0, 1, 100, 4096, 9000, 65536, 200000, 16};
	uint32_t s;
	*nseg = (uint32_t)(i % 4);
	for (s = 0; s < *nseg; s++)
		lens[s] = i % 97 == 50 ? (size_t)(2 << 20) : sz[(size_t)(i + (int)s * 3) % 8];
	*meta_len = 40 + (size_t)(i % 7) * 20;
}

/* Two threads of A send streams 1 and 3 while B sends stream 2 back;
 * send_done poisons each buffer, so a van that still reads a segment after
 * its send_done delivers it spoiled. */
static int c_order(void)
{
	enum { N = 1500 };
	struct vt_node a = {0}, b = {0};
	struct traffic t1 = {&a, B_ID, 1, N, shape_order, NULL, 0, 0, true},
		       t3 = {&a, B_ID, 3, N, shape_order, NULL, 0, 0, true},
		       t2 = {&b, A_ID, 2, N, shape_order, NULL, 0, 0, true};
	pthread_t th2, th3;
	int started = 0;

	t1.sends = calloc(N, sizeof(struct vt_send));
	t2.sends = calloc(N, sizeof(struct vt_send));
	t3.sends = calloc(N, sizeof(struct vt_send));
	CHECK(t1.sends && t2.sends && t3.sends, "out of memory");
	CHECK(pair_up(&a, &b), "%s", vt_why);
	a.t.expect_sender = B_ID;
	b.t.expect_sender = A_ID;
	CHECK(pthread_create(&th2, NULL, traffic_main, &t2) == 0, "pthread_create");
	started++;
	CHECK(pthread_create(&th3, NULL, traffic_main, &t3) == 0, "pthread_create");
	started++;
	traffic_main(&t1);
	pthread_join(th2, NULL);
	pthread_join(th3, NULL);
	started = 0;
	CHECK(!t1.rc_bad && !t2.rc_bad && !t3.rc_bad, "a send returned %d",
	      t1.rc_bad	  ? t1.rc_bad
	      : t2.rc_bad ? t2.rc_bad
			  : t3.rc_bad);
	CHECK(wait_recv(&b, 2 * N, DATA_MS) && wait_recv(&a, N, DATA_MS), "%s", vt_why);
	CHECK(WAIT(all_done(t1.sends, N) && all_done(t2.sends, N) && all_done(t3.sends, N),
		   DATA_MS),
	      "messages arrived, but not every send got send_done");
	vt_sleep_ms(50);
	CHECK(check_done(t1.sends, N, "A", true) && check_done(t3.sends, N, "A", true) &&
		      check_done(t2.sends, N, "B", true),
	      "%s", vt_why);
	{
		int r = finish(&a, &b, true);
		free_sends(t1.sends, N);
		free_sends(t2.sends, N);
		free_sends(t3.sends, N);
		return r;
	}
out:
	if (started > 0)
		pthread_join(th2, NULL);
	if (started > 1)
		pthread_join(th3, NULL);
	finish(&a, &b, false);
	free_sends(t1.sends, N);
	free_sends(t2.sends, N);
	free_sends(t3.sends, N);
	return VT_FAIL;
}

/* ---------------------------------------------------------- send-done -- */

/* send_done: once per send with a cookie, never for one without, never for
 * a send that returned an error (to a node never connected) */
static int c_send_done(void)
{
	enum { N = 200 };
	struct vt_node a = {0}, b = {0};
	struct vt_send *s = calloc(N, sizeof(*s)), bad;
	int i, rc;
	CHECK(s, "out of memory");
	CHECK(pair_up(&a, &b), "%s", vt_why);
	for (i = 0; i < N; i++) {
		size_t lens[2] = {(size_t)i * 37 % 70000, 5};
		uint32_t nseg = (uint32_t)(i % 3);
		s[i].poison = true;
		if (i % 4 == 3) /* without a cookie */
			rc = vt_send_msg(&a, B_ID, 1, (uint32_t)i, nseg, lens, 50, 0, NULL);
		else
			rc = vt_send_msg(&a, B_ID, 1, (uint32_t)i, nseg, lens, 50, 0, &s[i]);
		CHECK(rc == 0, "send %d returned %d", i, rc);
		if (i % 4 == 3)
			atomic_store(&s[i].done, 1);
	}
	memset(&bad, 0, sizeof(bad));
	rc = vt_send_msg(&a, 4242, 1, 0, 1, (size_t[]){10}, 50, 0, &bad);
	CHECK(rc < 0, "send to node 4242, never connected, returned %d (expected -errno)", rc);
	CHECK(wait_recv(&b, N, DATA_MS), "%s", vt_why);
	CHECK(WAIT(all_done(s, N), DATA_MS), "not every send with a cookie got send_done");
	vt_sleep_ms(200);
	for (i = 0; i < N; i++)
		if (i % 4 != 3)
			CHECK(atomic_load(&s[i].done) == 1 && atomic_load(&s[i].status) == 0,
			      "send %d: send_done %d times, status %d", i, atomic_load(&s[i].done),
			      atomic_load(&s[i].status));
	CHECK(atomic_load(&a.t.done_calls) == N - N / 4,
	      "%ld send_done calls for %d sends with a cookie", atomic_load(&a.t.done_calls),
	      N - N / 4);
	vt_node_down(&a);
	CHECK(atomic_load(&bad.done) == 0, "a send that returned %d got send_done", rc);
	vt_send_free(&bad);
	{
		int r = finish(&a, &b, true);
		free_sends(s, N);
		return r;
	}
out:
	finish(&a, &b, false);
	free_sends(s, N);
	return VT_FAIL;
}

/* ------------------------------------------------------- bad-send -- */

static int c_bad_send(void)
{
	struct vt_node a = {0}, b = {0};
	struct psl_van_caps caps = {.size = sizeof(caps)};
	static uint8_t buf[4096];
	struct psl_van_seg seg;
	struct vt_send s;
	int rc;
	memset(&s, 0, sizeof(s));
	CHECK(pair_up(&a, &b), "%s", vt_why);
	rc = vt_ops->send(a.v, 4242, "VTM1", 4, NULL, 0, &s);
	CHECK(rc < 0, "send to node 4242, never connected, returned %d", rc);
	CHECK(vt_ops->query(a.v, &caps) == 0, "query failed");
	if (!(caps.flags & PSL_VAN_CAP_MEM_CUDA)) {
		seg = (struct psl_van_seg){buf, sizeof(buf), PSL_MEM_CUDA, 0, NULL};
		rc = vt_ops->send(a.v, B_ID, "VTM1xxxxxxxxxxxxxxxxxxxxxxxxxxxx", 32, &seg, 1, &s);
		CHECK(rc < 0,
		      "a PSL_MEM_CUDA segment was accepted (%d) by a van without "
		      "PSL_VAN_CAP_MEM_CUDA",
		      rc);
	}
	vt_sleep_ms(200);
	CHECK(atomic_load(&s.done) == 0, "a send that returned an error got send_done");
	CHECK(nrecv(&b) == 0, "B received a message whose send failed");
	/* and the van still works */
	rc = vt_send_msg(&a, B_ID, 1, 0, 1, (size_t[]){100}, 50, 0, &s);
	CHECK(rc == 0, "a good send after refused ones returned %d", rc);
	CHECK(wait_recv(&b, 1, DATA_MS), "%s", vt_why);
	CHECK(WAIT(atomic_load(&s.done), DATA_MS), "no send_done");
	vt_send_free(&s);
	return finish(&a, &b, true);
out:
	finish(&a, &b, false);
	return VT_FAIL;
}

/* ------------------------------------------------ send-from-callback -- */

/* B's host: every message goes back to A from the receive callback (the
 * first n with cookies). False when out of memory. */
static bool echo_host(struct vt_host *t, int n)
{
	vt_host_init(t, "B");
	t->echo = true;
	t->echo_to = A_ID;
	t->echo_cap = n;
	t->echo_cookies = calloc((size_t)n, sizeof(struct vt_send));
	return t->echo_cookies != NULL;
}

/* B sends every message back to A from its receive callback (a server's
 * answers are sent from the van's thread): no deadlock, all back, in order. */
static int c_echo(void)
{
	enum { N = 300 };
	struct vt_node a = {0}, b = {0};
	struct vt_send *s = calloc(N, sizeof(*s));
	int i, rc;
	CHECK(s, "out of memory");
	CHECK(echo_host(&b.t, N), "out of memory");
	CHECK(pair_up(&a, &b), "%s", vt_why);
	a.t.expect_sender = B_ID;
	for (i = 0; i < N; i++) {
		uint32_t nseg = 0;
		size_t lens[VT_MAXSEG] = {0}, ml = 0;
		shape_order(i, &nseg, lens, &ml);
		rc = vt_send_msg(&a, B_ID, 1, (uint32_t)i, nseg, lens, ml, 0, &s[i]);
		CHECK(rc == 0, "send %d returned %d", i, rc);
	}
	CHECK(wait_recv(&a, N, DATA_MS), "%s", vt_why);
	CHECK(atomic_load(&b.t.echo_fail) == 0, "%ld sends from B's receive callback failed",
	      atomic_load(&b.t.echo_fail));
	CHECK(WAIT(all_done(s, N) && all_done(b.t.echo_cookies, N), DATA_MS),
	      "not every send got send_done");
	vt_sleep_ms(50);
	CHECK(check_done(s, N, "A", true) && check_done(b.t.echo_cookies, N, "B", true), "%s",
	      vt_why);
	{
		int r = finish(&a, &b, true);
		free_sends(s, N);
		return r;
	}
out:
	finish(&a, &b, false);
	free_sends(s, N);
	return VT_FAIL;
}

/* ----------------------------------------------------------- progress -- */

static bool has_progress(void)
{
	return vt_ops->size >= PSL_VAN_OPS_SIZE_1_3 && vt_ops->progress;
}

/* Drives a until it received want messages (or ms passed): progress()
 * returns > 0, 0 or -EBUSY. False with vt_why set. */
static bool drive_until(struct vt_node *a, long want, int ms)
{
	int64_t end = vt_now_ms() + ms;
	while (nrecv(a) < want && vt_now_ms() < end && vt_host_ok(&a->t)) {
		int rc = vt_ops->progress(a->v, 1000);
		if (rc < 0 && rc != -EBUSY) {
			vt_failf(__LINE__, "progress returned %d (expected > 0, 0 or -EBUSY)", rc);
			return false;
		}
	}
	return wait_recv(a, want, 0);
}

struct co_driver {
	struct vt_node *a;
	atomic_bool stop;
	atomic_int bad;
};

static void *co_drive_main(void *arg)
{
	struct co_driver *d = arg;
	while (!atomic_load(&d->stop)) {
		int rc = vt_ops->progress(d->a->v, 200);
		if (rc < 0 && rc != -EBUSY)
			atomic_store(&d->bad, rc);
	}
	return NULL;
}

/* Message i of stream 1 to B, shaped as in case order. */
static bool send_shaped(struct vt_node *a, int i, struct vt_send *s)
{
	uint32_t nseg = 0;
	size_t lens[VT_MAXSEG] = {0}, ml = 0;
	int rc;
	shape_order(i, &nseg, lens, &ml);
	rc = vt_send_msg(a, B_ID, 1, (uint32_t)i, nseg, lens, ml, 0, &s[i]);
	if (rc)
		vt_failf(__LINE__, "send %d returned %d", i, rc);
	return rc == 0;
}

/* One ping-pong message A -> B -> A, A driving until the answer is in. */
static bool ping(struct vt_node *a, int i, struct vt_send *s)
{
	return send_shaped(a, i, s) && drive_until(a, i + 1, DATA_MS);
}

/* ABI 1.3's optional progress(): a van without it passes. A ping-pongs with
 * B (which echoes) driving its van from this thread: the answers arrive, at
 * least some on this thread, and a progress() from the receive callback is
 * refused with -EDEADLK; then two threads drive at once; then nobody drives
 * and the van's own thread delivers. */
static int c_progress(void)
{
	enum { N1 = 200, N2 = 200, N3 = 50, N = N1 + N2 + N3 };
	struct vt_node a = {0}, b = {0};
	struct vt_send *s = calloc(N, sizeof(*s));
	struct co_driver co = {.a = &a};
	pthread_t th;
	bool co_up = false;
	int i;
	CHECK(s, "out of memory");
	if (!has_progress()) {
		vt_note("no progress entry (optional, ABI 1.3)");
		free(s);
		return VT_PASS;
	}
	CHECK(echo_host(&b.t, N), "out of memory");
	vt_host_init(&a.t, "A");
	a.t.driver = pthread_self();
	atomic_store(&a.t.has_driver, true);
	a.t.drive_in_recv = true;
	CHECK(pair_up(&a, &b), "%s", vt_why);
	a.t.van = a.v;
	a.t.expect_sender = B_ID;
	for (i = 0; i < N1; i++)
		CHECK(ping(&a, i, s), "%s", vt_why);
	CHECK(atomic_load(&a.t.on_driver) > 0,
	      "none of %d answers was delivered on the thread that called progress() "
	      "(it should progress the transport itself)", N1);
	vt_note("%ld of %d answers delivered on the driving thread",
		atomic_load(&a.t.on_driver), N1);
	CHECK(!atomic_load(&a.t.recv_drive_bad),
	      "progress() called from the recv callback returned %d (%d times), not -EDEADLK",
	      atomic_load(&a.t.recv_drive_rc), atomic_load(&a.t.recv_drive_bad));
	CHECK(!pthread_create(&th, NULL, co_drive_main, &co), "pthread_create failed");
	co_up = true;
	for (; i < N1 + N2; i++)
		CHECK(ping(&a, i, s), "%s (two threads driving)", vt_why);
	atomic_store(&co.stop, true);
	pthread_join(th, NULL);
	co_up = false;
	CHECK(!atomic_load(&co.bad), "progress() on a second thread returned %d",
	      atomic_load(&co.bad));
	for (; i < N; i++) /* nobody drives: the van's thread delivers */
		CHECK(send_shaped(&a, i, s) && wait_recv(&a, i + 1, 10000),
		      "%s (after the caller stopped driving)", vt_why);
	CHECK(WAIT(all_done(s, N) && all_done(b.t.echo_cookies, N), DATA_MS),
	      "not every send got send_done");
	{
		int r = finish(&a, &b, true);
		free_sends(s, N);
		return r;
	}
out:
	if (co_up) {
		atomic_store(&co.stop, true);
		pthread_join(th, NULL);
	}
	finish(&a, &b, false);
	free_sends(s, N);
	return VT_FAIL;
}

/* ---------------------------------------------------- release-later -- */

/* The host keeps what it received and gives it back later, from another
 * thread, after the van's fini: the memory stays valid until release. */
static void *release_main(void *arg)
{
	vt_host_release(arg);
	return NULL;
}

static int c_release_later(void)
{
	enum { N = 60 };
	struct vt_node a = {0}, b = {0};
	struct vt_send *s = calloc(N, sizeof(*s));
	pthread_t th;
	int i, rc;
	CHECK(s, "out of memory");
	vt_host_init(&b.t, "B");
	b.t.hold = true;
	CHECK(pair_up(&a, &b), "%s", vt_why);
	for (i = 0; i < N; i++) {
		size_t lens[2] = {(size_t)(i % 3) * 400000 + 10, 4096};
		rc = vt_send_msg(&a, B_ID, 1, (uint32_t)i, 2, lens, 64, 0, &s[i]);
		CHECK(rc == 0, "send %d returned %d", i, rc);
	}
	CHECK(wait_recv(&b, N, DATA_MS), "%s", vt_why);
	CHECK(WAIT(all_done(s, N), DATA_MS), "not every send got send_done");
	vt_node_down(&a);
	vt_node_down(&b);
	/* every held message is still whole after its van's fini */
	for (i = 0; i < b.t.nheld; i++) {
		struct psl_van_rmsg *m = b.t.held[i];
		size_t k, len = m->segs[0].len;
		const uint8_t *p = m->segs[0].data;
		uint32_t seq;
		memcpy(&seq, (const uint8_t *)m->meta + 8, 4);
		for (k = 0; k < len; k += 4093)
			CHECK(p[k] == vt_pat(vt_seed(1, seq, 0), k),
			      "message %u: its data changed between fini and release (byte %zu)",
			      seq, k);
	}
	CHECK(pthread_create(&th, NULL, release_main, &b.t) == 0, "pthread_create");
	pthread_join(th, NULL);
	{
		int r = finish(&a, &b, true);
		free_sends(s, N);
		return r;
	}
out:
	finish(&a, &b, false);
	free_sends(s, N);
	return VT_FAIL;
}

/* --------------------------------------------------------- reconnect -- */

/* connect() again to the same node with this node's new id (a node's
 * connection to the scheduler, once it learnt its id): B then sees the new
 * sender id; nothing sent before is lost; no PEER_DOWN for the old one */
static int c_reconnect(void)
{
	enum { N = 50 };
	struct vt_node a = {0}, b = {0};
	int i, rc;
	long olds = 0;
	CHECK(vt_node_up(&a, "A", A_ID, true) && vt_node_up(&b, "B", B_ID, true), "%s", vt_why);
	CHECK(vt_connect(&a, B_ID, b.port, PSL_VAN_ID_NONE) == 0, "connect failed");
	for (i = 0; i < N; i++)
		CHECK((rc = vt_send_msg(&a, B_ID, 1, (uint32_t)i, 0, NULL, 40, 0, NULL)) == 0,
		      "send %d returned %d", i, rc);
	CHECK(wait_recv(&b, N, DATA_MS), "%s", vt_why);
	pthread_mutex_lock(&b.t.mu);
	for (i = 0; i < b.t.nstreams; i++)
		if (b.t.streams[i].sender == PSL_VAN_ID_NONE)
			olds = b.t.streams[i].next;
	pthread_mutex_unlock(&b.t.mu);
	CHECK(olds == N,
	      "messages sent before this node had an id arrived with another sender than "
	      "PSL_VAN_ID_NONE");
	rc = vt_connect(&a, B_ID, b.port, A_ID);
	CHECK(rc == 0, "connect again with the new id returned %d", rc);
	for (i = 0; i < N; i++)
		CHECK((rc = vt_send_msg(&a, B_ID, 1, (uint32_t)i, 1, (size_t[]){1000}, 40, 0,
					NULL)) == 0,
		      "send %d returned %d", i, rc);
	CHECK(wait_recv(&b, 2 * N, DATA_MS), "%s", vt_why);
	pthread_mutex_lock(&b.t.mu);
	for (i = 0; i < b.t.nstreams; i++)
		if (b.t.streams[i].sender == A_ID)
			olds = -(long)b.t.streams[i].next;
	pthread_mutex_unlock(&b.t.mu);
	CHECK(olds == -N, "after connect with id %d, B did not see sender %d", A_ID, A_ID);
	vt_sleep_ms(300);
	CHECK(vt_host_event(&a.t, B_ID, PSL_VAN_PEER_DOWN) < 0,
	      "replacing the connection reported PSL_VAN_PEER_DOWN");
	return finish(&a, &b, true);
out:
	finish(&a, &b, false);
	return VT_FAIL;
}

/* -------------------------------------------------- connect-early -- */

/* connect to a port nobody listens on yet, send; the peer binds it later:
 * the message arrives (nodes of a job start in any order) */
static int c_connect_early(void)
{
	struct vt_node a = {0}, b = {0};
	struct sockaddr_in sa = {.sin_family = AF_INET};
	socklen_t sl = sizeof(sa);
	int fd, port, rc;
	fd = socket(AF_INET, SOCK_STREAM, 0);
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	CHECK(fd >= 0 && bind(fd, (void *)&sa, sizeof(sa)) == 0 &&
		      getsockname(fd, (void *)&sa, &sl) == 0,
	      "cannot find a free port");
	port = ntohs(sa.sin_port);
	close(fd);
	CHECK(vt_node_up(&a, "A", A_ID, true), "%s", vt_why);
	rc = vt_connect(&a, B_ID, port, A_ID);
	CHECK(rc == 0, "connect to a port not yet listening returned %d (the van should retry)",
	      rc);
	rc = vt_send_msg(&a, B_ID, 1, 0, 1, (size_t[]){5000}, 64, 0, NULL);
	CHECK(rc == 0, "send before the peer listens returned %d", rc);
	vt_sleep_ms(500);
	CHECK(vt_node_up(&b, "B", B_ID, false), "%s", vt_why);
	{
		struct psl_van_bind_req req = {sizeof(req), 0, "127.0.0.1", port};
		struct psl_van_bind_res res;
		memset(&res, 0, sizeof(res));
		rc = vt_ops->bind(b.v, &req, &res);
		if (rc == -EADDRINUSE) {
			finish(&a, &b, true);
			snprintf(vt_why, sizeof(vt_why), "port %d was taken meanwhile", port);
			return VT_SKIP;
		}
		CHECK(rc == 0 && res.port == port, "bind to port %d returned %d (port %d)", port,
		      rc, res.port);
	}
	b.t.expect_sender = A_ID;
	CHECK(wait_recv(&b, 1, DATA_MS), "%s", vt_why);
	return finish(&a, &b, true);
out:
	finish(&a, &b, false);
	return VT_FAIL;
}

/* ----------------------------------------------------------- mismatch -- */

/* A TCP port that behaves as another pslite van's would: it greets
 * ("PSLVAN1 vtother\n"), then closes the connection when the connector
 * sends something it does not understand, or says nothing for 5 s. */
struct fake {
	int fd, port;
	pthread_t th;
	atomic_bool stop;
};

static void *fake_main(void *arg)
{
	struct fake *f = arg;
	static const char greet[] = "PSLVAN1 vtother\n";
	int conns[32], n = 0, i;
	int64_t since[32];
	while (!atomic_load(&f->stop)) {
		struct timeval tv = {0, 50000};
		fd_set rs;
		int c, maxfd = f->fd;
		FD_ZERO(&rs);
		FD_SET(f->fd, &rs);
		for (i = 0; i < n; i++) {
			FD_SET(conns[i], &rs);
			maxfd = conns[i] > maxfd ? conns[i] : maxfd;
		}
		if (select(maxfd + 1, &rs, NULL, NULL, &tv) < 0)
			continue;
		for (i = 0; i < n; i++) {
			char junk[256];
			bool done = vt_now_ms() - since[i] > 5000;
			if (FD_ISSET(conns[i], &rs))
				done = recv(conns[i], junk, sizeof(junk), MSG_DONTWAIT) >= 0 ||
				       done;
			if (done) {
				close(conns[i]);
				conns[i] = conns[--n];
				since[i] = since[n];
				i--;
			}
		}
		if (!FD_ISSET(f->fd, &rs) || (c = accept(f->fd, NULL, NULL)) < 0)
			continue;
		if (n == 32 || send(c, greet, sizeof(greet) - 1, MSG_NOSIGNAL) < 0) {
			close(c);
			continue;
		}
		since[n] = vt_now_ms();
		conns[n++] = c;
	}
	for (i = 0; i < n; i++)
		close(conns[i]);
	return NULL;
}

/* A node of another van answers: PSL_VAN_PEER_MISMATCH (err < 0) naming
 * it, never PEER_UP; a send to it fails or completes with an error */
static int c_mismatch(void)
{
	struct vt_node a = {0};
	struct fake f = {.fd = -1};
	struct sockaddr_in sa = {.sin_family = AF_INET};
	socklen_t sl = sizeof(sa);
	struct vt_send s;
	bool started = false;
	int e, rc;

	memset(&s, 0, sizeof(s));
	f.fd = socket(AF_INET, SOCK_STREAM, 0);
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	CHECK(f.fd >= 0 && bind(f.fd, (void *)&sa, sizeof(sa)) == 0 && listen(f.fd, 16) == 0 &&
		      getsockname(f.fd, (void *)&sa, &sl) == 0,
	      "cannot listen on 127.0.0.1");
	f.port = ntohs(sa.sin_port);
	CHECK(pthread_create(&f.th, NULL, fake_main, &f) == 0, "pthread_create");
	started = true;
	CHECK(vt_node_up(&a, "A", A_ID, true), "%s", vt_why);
	rc = vt_connect(&a, B_ID, f.port, A_ID);
	CHECK(rc == 0 || rc == -EPROTO, "connect to a node of another van returned %d", rc);
	if (rc == 0) {
		rc = vt_send_msg(&a, B_ID, 1, 0, 1, (size_t[]){100}, 40, 0, &s);
		CHECK(rc <= 0, "send returned %d", rc);
	}
	CHECK(WAIT(vt_host_event(&a.t, B_ID, PSL_VAN_PEER_MISMATCH) >= 0, EVENT_MS),
	      "a port that greets as van 'vtother' got no PSL_VAN_PEER_MISMATCH within %d s",
	      EVENT_MS / 1000);
	e = vt_host_event(&a.t, B_ID, PSL_VAN_PEER_MISMATCH);
	CHECK(a.t.evs[e].err < 0, "PSL_VAN_PEER_MISMATCH with err %d (expected -errno)",
	      a.t.evs[e].err);
	CHECK(strstr(a.t.evs[e].detail, "vtother"),
	      "PSL_VAN_PEER_MISMATCH's detail \"%s\" does not name the van that answered "
	      "(vtother)",
	      a.t.evs[e].detail);
	CHECK(vt_host_event(&a.t, B_ID, PSL_VAN_PEER_UP) < 0,
	      "PSL_VAN_PEER_UP for a node of another van");
	if (rc == 0) {
		if (!WAIT(atomic_load(&s.done), 5000))
			vt_note("the send to a mismatched node is still pending after 5 s");
	}
	vt_node_down(&a);
	CHECK(atomic_load(&s.done) == (rc == 0 ? 1 : 0),
	      "the send to a mismatched node (send returned %d) got send_done %d times", rc,
	      atomic_load(&s.done));
	if (rc == 0 && atomic_load(&s.status) == 0)
		vt_note("the send to a mismatched node completed with status 0");
	CHECK(!vt.strict || rc != 0 || atomic_load(&s.status) < 0,
	      "--strict: the send to a mismatched node completed with status 0");
	atomic_store(&f.stop, true);
	pthread_join(f.th, NULL);
	close(f.fd);
	vt_send_free(&s);
	return finish(&a, NULL, true);
out:
	if (started) {
		atomic_store(&f.stop, true);
		pthread_join(f.th, NULL);
	}
	if (f.fd >= 0)
		close(f.fd);
	finish(&a, NULL, false);
	vt_send_free(&s);
	return VT_FAIL;
}

/* --------------------------------------------------------- peer-down -- */

/* B's van stops (fini): A reports PSL_VAN_PEER_DOWN with an error; a send
 * to B then fails or completes with an error; A's fini does not hang */
static int c_peer_down(void)
{
	struct vt_node a = {0}, b = {0};
	struct vt_send s;
	int d, rc;
	memset(&s, 0, sizeof(s));
	CHECK(pair_up(&a, &b), "%s", vt_why);
	CHECK(vt_send_msg(&a, B_ID, 1, 0, 0, NULL, 30, 0, NULL) == 0, "send failed");
	CHECK(wait_recv(&b, 1, DATA_MS), "%s", vt_why);
	vt_node_down(&b);
	CHECK(WAIT(vt_host_event(&a.t, B_ID, PSL_VAN_PEER_DOWN) >= 0, EVENT_MS),
	      "B's van stopped; A reported no PSL_VAN_PEER_DOWN for node %d within %d s", B_ID,
	      EVENT_MS / 1000);
	d = vt_host_event(&a.t, B_ID, PSL_VAN_PEER_DOWN);
	CHECK(a.t.evs[d].err < 0, "PSL_VAN_PEER_DOWN with err %d (expected -errno)",
	      a.t.evs[d].err);
	rc = vt_send_msg(&a, B_ID, 1, 1, 1, (size_t[]){100000}, 30, 0, &s);
	if (rc == 0) {
		/* it completes by fini at the latest (a van may keep it for a
		 * peer that comes back, as ZeroMQ does) */
		if (!WAIT(atomic_load(&s.done), 5000)) {
			vt_note("a send to a node that is down is still pending after 5 s");
			CHECK(!vt.strict, "--strict: a send to a node reported down is still "
					  "pending after 5 s");
		}
	} else {
		vt_sleep_ms(100);
		CHECK(atomic_load(&s.done) == 0, "a send that returned %d got send_done", rc);
	}
	vt_node_down(&a);
	CHECK(atomic_load(&s.done) == (rc == 0 ? 1 : 0),
	      "fini returned; the send to the lost peer (send returned %d) got send_done %d times",
	      rc, atomic_load(&s.done));
	vt_send_free(&s);
	return finish(&a, &b, true);
out:
	finish(&a, &b, false);
	return VT_FAIL;
}

/* -------------------------------------------------------- peer-killed -- */

/* The peer process: B, connected back to A, echoing what it receives. */
int vt_peer_child(int aport)
{
	struct vt_node b = {0};
	vt_host_init(&b.t, "B(child)");
	b.t.echo = true;
	b.t.echo_to = A_ID;
	if (!vt_node_up(&b, "B(child)", B_ID, true) || vt_connect(&b, A_ID, aport, B_ID)) {
		fprintf(stderr, "peer: %s\n", vt_why);
		return 1;
	}
	printf("PORT %d\n", b.port);
	fflush(stdout);
	for (;;)
		pause();
}

static int c_peer_killed(void)
{
	enum { N = 32 };
	struct vt_node a = {0}, b = {.id = B_ID};
	struct vt_send *s = calloc(N, sizeof(*s));
	int pfd[2] = {-1, -1}, st, i, rc;
	pid_t pid = -1;
	char line[64] = "", port[16];
	FILE *f = NULL;
	int64_t t0;

	CHECK(s, "out of memory");
	CHECK(vt_node_up(&a, "A", A_ID, true), "%s", vt_why);
	CHECK(pipe(pfd) == 0, "pipe");
	snprintf(port, sizeof(port), "%d", a.port);
	pid = fork();
	CHECK(pid >= 0, "fork");
	if (pid == 0) {
		char *args[] = {(char *)vt.self, "--peer-child", port, vt.path, NULL};
		dup2(pfd[1], 1);
		close(pfd[0]);
		execv(vt.self, args);
		_exit(127);
	}
	close(pfd[1]);
	pfd[1] = -1;
	f = fdopen(pfd[0], "r");
	CHECK(f && fgets(line, sizeof(line), f) && sscanf(line, "PORT %d", &b.port) == 1,
	      "the peer process did not start (\"%s\")", line);
	CHECK(vt_connect(&a, B_ID, b.port, A_ID) == 0, "connect to the peer process failed");
	a.t.expect_sender = B_ID;
	rc = vt_send_msg(&a, B_ID, 1, 0, 1, (size_t[]){1000}, 40, 0, &s[0]);
	CHECK(rc == 0, "send returned %d", rc);
	CHECK(wait_recv(&a, 1, DATA_MS), "%s (the echo of the peer process)", vt_why);
	/* large sends, then the peer dies while they are on their way */
	for (i = 1; i < N; i++) {
		rc = vt_send_msg(&a, B_ID, 1, (uint32_t)i, 1, (size_t[]){1 << 20}, 40, 0, &s[i]);
		CHECK(rc == 0, "send %d returned %d", i, rc);
	}
	kill(pid, SIGKILL);
	waitpid(pid, &st, 0);
	pid = -1;
	t0 = vt_now_ms();
	CHECK(WAIT(vt_host_event(&a.t, B_ID, PSL_VAN_PEER_DOWN) >= 0, EVENT_MS),
	      "the peer process was killed; A reported no PSL_VAN_PEER_DOWN within %d s",
	      EVENT_MS / 1000);
	vt_note("PEER_DOWN after %lld ms", (long long)(vt_now_ms() - t0));
	/* every pending send completes, by fini at the latest (with an error,
	 * or 0 if it left before) */
	if (!WAIT(all_done(s, N), 5000)) {
		int pending = 0;
		for (i = 0; i < N; i++)
			pending += atomic_load(&s[i].done) == 0;
		vt_note("%d of %d sends to the lost peer still pending 5 s after "
			"PSL_VAN_PEER_DOWN (they must complete by fini)",
			pending, N);
		CHECK(!vt.strict,
		      "--strict: %d of %d sends to the lost peer still pending 5 s after "
		      "PSL_VAN_PEER_DOWN",
		      pending, N);
	}
	vt_node_down(&a);
	CHECK(check_done(s, N, "A", false), "%s", vt_why);
	{
		int errs = 0;
		for (i = 0; i < N; i++)
			errs += atomic_load(&s[i].status) < 0;
		vt_note("%d of %d sends completed with an error", errs, N);
	}
	atomic_store(&a.t.nrecv, 0);
	{
		int r;
		fclose(f);
		r = finish(&a, NULL, true);
		free_sends(s, N);
		return r;
	}
out:
	if (pid > 0) {
		kill(pid, SIGKILL);
		waitpid(pid, &st, 0);
	}
	if (f)
		fclose(f);
	else if (pfd[0] >= 0)
		close(pfd[0]);
	if (pfd[1] >= 0)
		close(pfd[1]);
	finish(&a, NULL, false);
	free_sends(s, N);
	return VT_FAIL;
}

/* ------------------------------------------------------- fini-pending -- */

/* fini right after many large sends: every send_done before fini returns,
 * none after; B can release what it holds after its own fini */
static int c_fini_pending(void)
{
	enum { N = 48 };
	struct vt_node a = {0}, b = {0};
	struct vt_send *s = calloc(N, sizeof(*s));
	int i, rc;
	CHECK(s, "out of memory");
	vt_host_init(&b.t, "B");
	b.t.hold = true;
	CHECK(pair_up(&a, &b), "%s", vt_why);
	for (i = 0; i < N; i++) {
		rc = vt_send_msg(&a, B_ID, 1, (uint32_t)i, 2, (size_t[]){2 << 20, 100}, 40, 0,
				 &s[i]);
		CHECK(rc == 0, "send %d returned %d", i, rc);
	}
	vt_node_down(&a); /* at once: most are still on their way */
	for (i = 0; i < N; i++)
		CHECK(atomic_load(&s[i].done) == 1,
		      "fini returned, but send %d of %d had send_done %d times", i, N,
		      atomic_load(&s[i].done));
	vt_note("B got %ld of %d by the time A's fini returned", nrecv(&b), N);
	{
		int r = finish(&a, &b, true);
		free_sends(s, N);
		return r;
	}
out:
	finish(&a, &b, false);
	free_sends(s, N);
	return VT_FAIL;
}

/* ---------------------------------------------------------- recv-dest -- */

static bool guards_ok(struct vt_host *t, char *why, size_t wl)
{
	int i;
	size_t k;
	bool ok = true;
	pthread_mutex_lock(&t->mu);
	for (i = 0; i < t->nloans && ok; i++) {
		struct vt_loan *l = &t->loans[i];
		for (k = 0; k < 64 && ok; k++)
			if (l->mem[k] != 0xA5 || l->mem[64 + l->len + k] != 0xA5) {
				snprintf(why, wl,
					 "the van wrote outside lent buffer %d (%zu bytes)", i,
					 l->len);
				ok = false;
			}
	}
	pthread_mutex_unlock(&t->mu);
	return ok;
}

/* recv_dest (ABI 1.1): B lends segment 1 of the messages flagged so; a van
 * that asks writes only into the lent buffer and gives each loan back once
 * (status 0 before it delivers the message pointing at it); at fini every
 * outstanding loan comes back before fini returns. A van that never asks
 * is fine (SKIP). */
static int c_recv_dest(void)
{
	enum { N = 24, BIG = 4 << 20 };
	struct vt_node a = {0}, b = {0};
	struct vt_send *s = calloc(2 * N, sizeof(*s));
	char why[256];
	int i, rc, lent = 0;
	CHECK(s, "out of memory");
	vt_host_init(&b.t, "B");
	b.t.lend = true;
	b.t.hold = true;
	CHECK(pair_up(&a, &b), "%s", vt_why);
	for (i = 0; i < N; i++) {
		size_t lens[3] = {64, (size_t)(i % 2 ? BIG : 70000 + i), 10};
		rc = vt_send_msg(&a, B_ID, 1, (uint32_t)i, 3, lens, 64, i % 3 ? VT_F_LEND : 0,
				 &s[i]);
		CHECK(rc == 0, "send %d returned %d", i, rc);
	}
	CHECK(wait_recv(&b, N, DATA_MS), "%s", vt_why);
	CHECK(guards_ok(&b.t, why, sizeof(why)), "%s", why);
	pthread_mutex_lock(&b.t.mu);
	for (i = 0; i < b.t.nloans; i++) {
		lent += b.t.loans[i].delivered;
		if (b.t.loans[i].puts == 1 && b.t.loans[i].status == 0 && !b.t.loans[i].delivered) {
			pthread_mutex_unlock(&b.t.mu);
			CHECK(0,
			      "loan %d came back with status 0, but no message was delivered into "
			      "it",
			      i);
		}
	}
	pthread_mutex_unlock(&b.t.mu);
	vt_note("recv_dest: %d calls, %d loans, %d messages delivered into them",
		atomic_load(&b.t.dest_calls), b.t.nloans, lent);
	if (atomic_load(&b.t.dest_calls) == 0) {
		finish(&a, &b, true);
		free_sends(s, 2 * N);
		if (vt_why[0])
			return VT_FAIL;
		snprintf(vt_why, sizeof(vt_why), "the van never called recv_dest (it is optional)");
		return VT_SKIP;
	}
	vt_host_release(&b.t);
	/* fini while lent segments are on their way */
	for (i = N; i < 2 * N; i++) {
		size_t lens[3] = {64, BIG, 10};
		rc = vt_send_msg(&a, B_ID, 1, (uint32_t)i, 3, lens, 64, VT_F_LEND, &s[i]);
		CHECK(rc == 0, "send %d returned %d", i, rc);
	}
	WAIT(b.t.nloans > N / 2 + 2 || nrecv(&b) >= 2 * N, DATA_MS);
	vt_node_down(&b);
	pthread_mutex_lock(&b.t.mu);
	for (i = 0; i < b.t.nloans; i++)
		if (b.t.loans[i].puts != 1) {
			int p = b.t.loans[i].puts;
			pthread_mutex_unlock(&b.t.mu);
			CHECK(0, "fini returned, and loan %d of %d came back %d times", i,
			      b.t.nloans, p);
		}
	pthread_mutex_unlock(&b.t.mu);
	CHECK(guards_ok(&b.t, why, sizeof(why)), "%s", why);
	{
		int r = finish(&a, &b, true);
		free_sends(s, 2 * N);
		return r;
	}
out:
	finish(&a, &b, false);
	free_sends(s, 2 * N);
	return VT_FAIL;
}

/* a host of ABI 1.0 has no recv_dest: the van must not call it */
static int c_host_1_0(void)
{
	enum { N = 8 };
	struct vt_node a = {0}, b = {0};
	struct vt_send s[N];
	int i, rc;
	memset(s, 0, sizeof(s));
	vt_host_init(&b.t, "B");
	vt_host_make_1_0(&b.t);
	b.t.lend = true;
	vt_host_init(&a.t, "A");
	vt_host_make_1_0(&a.t);
	CHECK(pair_up(&a, &b), "%s", vt_why);
	for (i = 0; i < N; i++) {
		rc = vt_send_msg(&a, B_ID, 1, (uint32_t)i, 2, (size_t[]){64, 4 << 20}, 64,
				 VT_F_LEND, &s[i]);
		CHECK(rc == 0, "send %d returned %d", i, rc);
	}
	CHECK(wait_recv(&b, N, DATA_MS), "%s", vt_why);
	CHECK(WAIT(all_done(s, N), DATA_MS), "not every send got send_done");
	for (i = 0; i < N; i++)
		vt_send_free(&s[i]);
	return finish(&a, &b, true);
out:
	finish(&a, &b, false);
	return VT_FAIL;
}

/* -------------------------------------------------------- bad-setting -- */

static int c_bad_setting(void)
{
	int i;
	if (!vt.nbad) {
		snprintf(vt_why, sizeof(vt_why),
			 "no --bad-setting NAME=VALUE given (a value of a setting the van reads "
			 "that it must refuse)");
		return VT_SKIP;
	}
	for (i = 0; i < vt.nbad; i++) {
		struct vt_host t;
		struct psl_van *v = NULL;
		const char *line = NULL, *p;
		int rc, nerr;
		vt_host_init(&t, "A");
		t.pname[0] = vt.bad_name[i];
		t.pval[0] = vt.bad_value[i];
		rc = vt_ops->init(&t.h, &v);
		if (rc == 0) {
			vt_ops->fini(v);
			vt_host_free(&t);
			CHECK(0, "init accepted %s=%s", vt.bad_name[i], vt.bad_value[i]);
		}
		nerr = atomic_load(&t.log_errors);
		for (p = t.log; *p; p = strchr(p, '\n') + 1) {
			if (p[0] == '0' && p[1] == ' ') { /* an ERROR line */
				const char *e = strchr(p, '\n');
				if (memmem(p, (size_t)(e - p), vt.bad_name[i],
					   strlen(vt.bad_name[i])))
					line = p;
			}
			if (!strchr(p, '\n'))
				break;
		}
		vt_note("%s=%s: init returned %d; log:\n%s", vt.bad_name[i], vt.bad_value[i], rc,
			t.log);
		vt_host_free(&t);
		CHECK(line, "init refused %s=%s (%d) without an ERROR line naming %s",
		      vt.bad_name[i], vt.bad_value[i], rc, vt.bad_name[i]);
		CHECK(nerr == 1, "init refused %s=%s with %d ERROR lines, expected one",
		      vt.bad_name[i], vt.bad_value[i], nerr);
	}
	return VT_PASS;
out:
	return VT_FAIL;
}

/* ------------------------------------------------------------- secret -- */

/* ABI 1.2's job secret: A has one; B proves the same, C another, D none.
 * Only B's messages may reach A's host, and A warns about the others. */
static int c_secret(void)
{
	enum { N = 3, C_ID = 11, D_ID = 13 };
	struct vt_node a = {0}, b = {0}, c = {0}, d = {0};
	struct vt_node *from[3] = {&b, &c, &d};
	int i, k, rc;
	long strangers = 0;
	vt_host_init(&a.t, "A");
	vt_host_init(&b.t, "B");
	vt_host_init(&c.t, "C");
	vt_host_init(&d.t, "D");
	a.t.secret = b.t.secret = "one secret";
	c.t.secret = "another secret";
	CHECK(vt_node_up(&a, "A", A_ID, true) && vt_node_up(&b, "B", B_ID, true) &&
		      vt_node_up(&c, "C", C_ID, true) && vt_node_up(&d, "D", D_ID, true),
	      "%s", vt_why);
	for (k = 0; k < 3; k++) {
		rc = vt_connect(from[k], A_ID, a.port, from[k]->id);
		CHECK(rc == 0, "%s: connect to A returned %d", from[k]->t.label, rc);
	}
	/* the strangers first, so that their messages would be there before B's */
	for (k = 2; k >= 0; k--)
		for (i = 0; i < N; i++) {
			rc = vt_send_msg(from[k], A_ID, 1, (uint32_t)i, 1, (size_t[]){100}, 40, 0,
					 NULL);
			CHECK(rc == 0 || k > 0, "B: send %d to A returned %d", i, rc);
		}
	CHECK(wait_recv(&a, N, DATA_MS), "%s", vt_why);
	vt_sleep_ms(1500);
	pthread_mutex_lock(&a.t.mu);
	for (i = 0; i < a.t.nstreams; i++)
		if (a.t.streams[i].sender != B_ID)
			strangers += a.t.streams[i].next;
	pthread_mutex_unlock(&a.t.mu);
	CHECK(strangers == 0 && nrecv(&a) == N,
	      "A (with a secret) received %ld messages from nodes that proved another secret "
	      "or none (%ld in all, %d from B expected)",
	      strangers, nrecv(&a), N);
	CHECK(atomic_load(&a.t.log_warns) > 0,
	      "A dropped the strangers' connections without a warning");
	vt_node_down(&c);
	vt_node_down(&d);
	vt_node_free(&c);
	vt_node_free(&d);
	return finish(&a, &b, true);
out:
	vt_node_free(&c);
	vt_node_free(&d);
	return finish(&a, &b, false);
}

/* -------------------------------------------------------------- table -- */

const struct vt_case vt_cases[] = {
	{"load", "loads; ABI major, ops size, name = file name, mandatory ops", c_load},
	{"init-fini", "init/fini three times, two instances at once, no ERROR logged", c_init_fini},
	{"query", "query: MEM_HOST, known flags only, transports a string", c_query},
	{"connect", "bind, connect both ways, one message each way, PEER_UP both sides", c_connect},
	{"meta-only", "400 messages without segments both ways, meta 24 B to 64 KiB", c_meta_only},
	{"node-list", "24 metas of node lists both ways: 16, 200 and 1000 nodes (9 KB to 553 KB)",
	 c_node_list},
	{"segments", "1 to 8 segments of 1 B to 300 KB both ways, content checked", c_segments},
	{"empty-segments", "0-byte segments alone, first, middle, last, all", c_empty_segments},
	{"sizes", "one segment of 1 B .. 16 MiB (and as the middle of three) both ways", c_sizes},
	{"order",
	 "3 streams under load (2 sender threads + the other way), buffers spoiled "
	 "at send_done",
	 c_order},
	{"send-done", "once per send with a cookie, never without one or after an error",
	 c_send_done},
	{"bad-send", "unknown node, CUDA memory without MEM_CUDA: -errno, no send_done",
	 c_bad_send},
	{"send-from-callback", "the receiver sends every message back from its recv callback",
	 c_echo},
	{"progress",
	 "ABI 1.3's optional progress(): answers delivered on the thread that drives, "
	 "-EDEADLK from a callback, two drivers, the van's thread after them",
	 c_progress},
	{"release-later", "received messages stay valid after fini, released by another thread",
	 c_release_later},
	{"reconnect", "connect again with a new id: new sender id, nothing lost, no PEER_DOWN",
	 c_reconnect},
	{"connect-early", "connect and send before the peer listens: delivered once it does",
	 c_connect_early},
	{"mismatch", "a port greeting as another van: PEER_MISMATCH naming it, no PEER_UP",
	 c_mismatch},
	{"peer-down",
	 "the peer's fini: PEER_DOWN with -errno; a later send fails, or "
	 "completes by fini",
	 c_peer_down},
	{"peer-killed", "the peer process killed mid-transfer: PEER_DOWN, sends complete by fini",
	 c_peer_killed},
	{"fini-pending", "fini with sends pending: every send_done before fini returns",
	 c_fini_pending},
	{"recv-dest", "ABI 1.1 lent buffers: written only there, each loan back once", c_recv_dest},
	{"host-1-0", "a host of ABI 1.0: the van never calls recv_dest", c_host_1_0},
	{"bad-setting", "--bad-setting NAME=VALUE: init fails with one ERROR line naming NAME",
	 c_bad_setting},
	{"secret", "PS_JOB_SECRET (ABI 1.2): messages over a connection that proves another "
		   "secret or none never reach the host, with a warning",
	 c_secret},
};
const int vt_ncases = sizeof(vt_cases) / sizeof(vt_cases[0]);
