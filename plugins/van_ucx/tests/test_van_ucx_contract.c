/*
 * The van ABI contract (include/pslite/van.h), checked on van_ucx.so itself
 * with a host of our own instead of the core: two van instances in this
 * process talk over loopback, and fake peers (plain TCP listeners) play a
 * ZeroMQ node, another pslite van and a port that says nothing.
 *
 *   - messages from one sender arrive in order, with their data, meta and
 *     sender id, whatever the segment sizes (inline, eager, rendezvous);
 *   - send_done runs exactly once per successful send with a cookie, never
 *     after an error return;
 *   - connect() again with the node's new id replaces the endpoint: the
 *     receiver then sees the new id, and nothing sent before is lost;
 *   - a CUDA segment is refused with -ENOTSUP where UCX has no CUDA, bad
 *     input with -EINVAL, an unknown node with -EHOSTUNREACH;
 *   - PEER_UP when reached, PEER_DOWN when the peer's van stops,
 *     PEER_MISMATCH naming the peer's address and van (ZeroMQ, another
 *     pslite van) or a port that never greets, within bounded time (the
 *     core adds which van this node runs);
 *   - fini completes every send still in flight before it returns, no
 *     callback runs after it, and a message the host still holds can be
 *     released after fini;
 *   - recv_dest (ABI 1.1): a large segment the host asks for goes into the
 *     host's memory, the loan comes back (status 0) before the message is
 *     delivered pointing at it; a refused one comes the usual way; at fini
 *     every loan comes back exactly once, before fini returns.
 *
 * Needs PS_VAN_PATH to lead to van_ucx.so (make check sets it).
 */
#define _GNU_SOURCE 1
#include <arpa/inet.h>
#include <dlfcn.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include <pslite/van.h>

/* ------------------------------------------------------------ the host -- */

#define MAXMSG 4096
#define MAXEV 64

struct got {
	int32_t sender;
	uint32_t nseg;
	size_t meta_len;
	char meta[64];
	struct psl_van_rmsg *raw;
};

struct ev {
	int32_t id;
	int event, err;
	char detail[512];
};

struct thost {
	struct psl_van_host h;
	const char *name;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	struct got msgs[MAXMSG];
	int nmsg;
	struct ev evs[MAXEV];
	int nev;
	atomic_int done_calls;
	atomic_int done_errors;
	atomic_int callbacks; /* every callback, to check none runs after fini */
	const char *params[8][2];
	/* recv_dest: what the host lent (meta starting with 'L', segment 1) */
	bool lend;
	struct lent {
		void *buf;
		size_t len;
		int puts;   /* recv_dest_put calls */
		int status; /* of the last one */
		bool delivered;
	} lent[64];
	int nlent;
	int order_errors; /* delivered before its loan came back, or twice back */
	/* echo: every message received goes back to echo_to, sent from the
	 * receive callback (the van's thread) */
	struct psl_van *v;
	bool echo;
	int32_t echo_to;
	atomic_int echo_done, echo_errors;
	/* capture: the van's log lines, every level */
	bool capture;
	char log[8192];
	size_t loglen;
};

static struct thost *H(void *ctx)
{
	return ctx;
}

static int ops_send(struct psl_van *v, int32_t id, const void *meta, size_t meta_len,
		    const struct psl_van_seg *segs, uint32_t nseg, void *cookie);

static void t_vlog(void *ctx, int level, const char *van, const char *fmt, va_list ap)
{
	struct thost *t = H(ctx);
	if (t->capture) {
		va_list aq;
		int n;
		va_copy(aq, ap);
		pthread_mutex_lock(&t->mu);
		n = vsnprintf(t->log + t->loglen, sizeof(t->log) - t->loglen, fmt, aq);
		if (n > 0 && t->loglen + (size_t)n + 1 < sizeof(t->log)) {
			t->loglen += (size_t)n;
			t->log[t->loglen++] = '\n';
			t->log[t->loglen] = 0;
		}
		pthread_mutex_unlock(&t->mu);
		va_end(aq);
	}
	if (level > PSL_VAN_LOG_WARN && !getenv("TEST_VERBOSE"))
		return;
	fprintf(stderr, "[%s %d] ", van, level);
	vfprintf(stderr, fmt, ap);
	fprintf(stderr, "\n");
}

static const char *t_param(void *ctx, const char *name)
{
	struct thost *t = H(ctx);
	int i;
	for (i = 0; i < 8 && t->params[i][0]; i++)
		if (!strcmp(t->params[i][0], name))
			return t->params[i][1];
	return getenv(name);
}

static int t_recv_dest(void *ctx, int32_t sender, const void *meta, size_t meta_len,
		       uint32_t seg, size_t len, struct psl_van_dest *dest)
{
	struct thost *t = H(ctx);
	int rc = -ENOENT;
	(void)sender;
	atomic_fetch_add(&t->callbacks, 1);
	pthread_mutex_lock(&t->mu);
	if (t->lend && meta_len && ((const char *)meta)[0] == 'L' && seg == 1 &&
	    t->nlent < 64) {
		struct lent *l = &t->lent[t->nlent];
		l->buf = malloc(len);
		l->len = len;
		if (l->buf) {
			dest->data = l->buf;
			dest->mem_type = PSL_MEM_HOST;
			dest->dev_id = -1;
			dest->loan = (void *)(intptr_t)(t->nlent + 1);
			t->nlent++;
			rc = 0;
		}
	}
	pthread_mutex_unlock(&t->mu);
	return rc;
}

static void t_recv_dest_put(void *ctx, void *loan, int status)
{
	struct thost *t = H(ctx);
	intptr_t i = (intptr_t)loan - 1;
	atomic_fetch_add(&t->callbacks, 1);
	pthread_mutex_lock(&t->mu);
	if (i < 0 || i >= t->nlent || t->lent[i].puts++)
		t->order_errors++;
	else
		t->lent[i].status = status;
	pthread_mutex_unlock(&t->mu);
}

static void t_recv(void *ctx, struct psl_van_rmsg *m)
{
	struct thost *t = H(ctx);
	uint32_t s;
	int i;
	atomic_fetch_add(&t->callbacks, 1);
	pthread_mutex_lock(&t->mu);
	for (s = 0; s < m->nseg; s++)
		for (i = 0; i < t->nlent; i++)
			if (m->segs[s].data == t->lent[i].buf) {
				if (t->lent[i].puts != 1 || t->lent[i].status != 0 ||
				    t->lent[i].delivered)
					t->order_errors++;
				t->lent[i].delivered = true;
			}
	if (t->nmsg < MAXMSG) {
		struct got *g = &t->msgs[t->nmsg++];
		g->sender = m->sender;
		g->nseg = m->nseg;
		g->meta_len = m->meta_len;
		memcpy(g->meta, m->meta, m->meta_len < sizeof(g->meta) ? m->meta_len : sizeof(g->meta));
		g->raw = m;
	} else {
		m->release(m);
	}
	pthread_cond_broadcast(&t->cv);
	pthread_mutex_unlock(&t->mu);
	if (t->echo) { /* the message stays until host_release_all */
		struct psl_van_seg segs[4];
		uint32_t nseg = m->nseg < 4 ? m->nseg : 4;
		for (s = 0; s < nseg; s++)
			segs[s] = (struct psl_van_seg){m->segs[s].data, m->segs[s].len, PSL_MEM_HOST,
						       -1, NULL};
		if (ops_send(t->v, t->echo_to, m->meta, m->meta_len, segs, nseg, &t->echo_done))
			atomic_fetch_add(&t->echo_errors, 1);
	}
}

static void t_send_done(void *ctx, void *cookie, int status)
{
	struct thost *t = H(ctx);
	atomic_int *c = cookie;
	atomic_fetch_add(&t->callbacks, 1);
	atomic_fetch_add(c, 1);
	atomic_fetch_add(&t->done_calls, 1);
	if (status)
		atomic_fetch_add(&t->done_errors, 1);
}

static void t_peer_event(void *ctx, int32_t id, int event, int err, const char *detail)
{
	struct thost *t = H(ctx);
	atomic_fetch_add(&t->callbacks, 1);
	pthread_mutex_lock(&t->mu);
	if (t->nev < MAXEV) {
		t->evs[t->nev] = (struct ev){id, event, err, ""};
		snprintf(t->evs[t->nev].detail, sizeof(t->evs[0].detail), "%s", detail ? detail : "");
		t->nev++;
	}
	pthread_cond_broadcast(&t->cv);
	pthread_mutex_unlock(&t->mu);
}

static void host_init(struct thost *t, const char *name)
{
	memset(t, 0, sizeof(*t));
	t->name = name;
	t->h.abi_version = PSL_VAN_ABI_VERSION;
	t->h.size = sizeof(t->h);
	t->h.ctx = t;
	t->h.log_level = getenv("TEST_VERBOSE") ? PSL_VAN_LOG_TRACE : PSL_VAN_LOG_WARN;
	t->h.vlog = t_vlog;
	t->h.param = t_param;
	t->h.recv = t_recv;
	t->h.send_done = t_send_done;
	t->h.peer_event = t_peer_event;
	t->h.recv_dest = t_recv_dest;
	t->h.recv_dest_put = t_recv_dest_put;
	pthread_mutex_init(&t->mu, NULL);
	pthread_cond_init(&t->cv, NULL);
}

static void host_release_all(struct thost *t)
{
	int i;
	pthread_mutex_lock(&t->mu);
	for (i = 0; i < t->nmsg; i++)
		if (t->msgs[i].raw) {
			t->msgs[i].raw->release(t->msgs[i].raw);
			t->msgs[i].raw = NULL;
		}
	t->nmsg = 0;
	pthread_mutex_unlock(&t->mu);
}

static void host_fini(struct thost *t)
{
	int i;
	host_release_all(t);
	for (i = 0; i < t->nlent; i++)
		free(t->lent[i].buf);
	pthread_mutex_destroy(&t->mu);
	pthread_cond_destroy(&t->cv);
}

static void deadline_in(struct timespec *ts, int ms)
{
	clock_gettime(CLOCK_REALTIME, ts);
	ts->tv_sec += ms / 1000;
	ts->tv_nsec += (long)(ms % 1000) * 1000000;
	if (ts->tv_nsec >= 1000000000) {
		ts->tv_sec++;
		ts->tv_nsec -= 1000000000;
	}
}

/* Waits until n messages arrived; false on timeout. */
static bool wait_msgs(struct thost *t, int n, int ms)
{
	struct timespec ts;
	bool ok = true;
	deadline_in(&ts, ms);
	pthread_mutex_lock(&t->mu);
	while (t->nmsg < n && ok)
		ok = pthread_cond_timedwait(&t->cv, &t->mu, &ts) == 0;
	ok = t->nmsg >= n;
	pthread_mutex_unlock(&t->mu);
	return ok;
}

/* Waits for event ev about id; returns its index or -1. */
static int wait_event(struct thost *t, int32_t id, int ev, int ms)
{
	struct timespec ts;
	int i, found = -1;
	deadline_in(&ts, ms);
	pthread_mutex_lock(&t->mu);
	for (;;) {
		for (i = 0; i < t->nev; i++)
			if (t->evs[i].id == id && t->evs[i].event == ev) {
				found = i;
				break;
			}
		if (found >= 0 || pthread_cond_timedwait(&t->cv, &t->mu, &ts) != 0)
			break;
	}
	pthread_mutex_unlock(&t->mu);
	return found;
}

/* ----------------------------------------------------------- the van -- */

static const struct psl_van_ops *ops;
static void *dl;

static int load_van(void **state)
{
	const char *path = getenv("PS_VAN_PATH");
	char buf[4096], file[4200], *save = NULL, *dir;
	psl_van_entry_fn entry;
	(void)state;
	if (!path) {
		fprintf(stderr, "PS_VAN_PATH is not set: run through make check\n");
		return -1;
	}
	snprintf(buf, sizeof(buf), "%s", path);
	for (dir = strtok_r(buf, ":", &save); dir && !dl; dir = strtok_r(NULL, ":", &save)) {
		snprintf(file, sizeof(file), "%s/van_ucx.so", dir);
		if (access(file, R_OK) == 0)
			dl = dlopen(file, RTLD_NOW | RTLD_LOCAL);
	}
	if (!dl) {
		fprintf(stderr, "no loadable van_ucx.so in PS_VAN_PATH=%s\n", path);
		return -1;
	}
	entry = (psl_van_entry_fn)(uintptr_t)dlsym(dl, PSL_VAN_ENTRY_NAME);
	ops = entry ? entry(PSL_VAN_ABI_VERSION) : NULL;
	return ops ? 0 : -1;
}

static int ops_send(struct psl_van *v, int32_t id, const void *meta, size_t meta_len,
		    const struct psl_van_seg *segs, uint32_t nseg, void *cookie)
{
	return ops->send(v, id, meta, meta_len, segs, nseg, cookie);
}

static int unload_van(void **state)
{
	(void)state;
	/* UCX keeps threads and handlers of its own: leave it mapped */
	return 0;
}

struct node {
	struct thost t;
	struct psl_van *v;
	int port;
};

static void node_up(struct node *n, const char *name, bool bind)
{
	struct psl_van_bind_req req = {sizeof(req), 0, "127.0.0.1", 0};
	struct psl_van_bind_res res;
	host_init(&n->t, name);
	assert_int_equal(ops->init(&n->t.h, &n->v), 0);
	n->t.v = n->v;
	if (bind) {
		memset(&res, 0, sizeof(res));
		assert_int_equal(ops->bind(n->v, &req, &res), 0);
		assert_true(res.port > 0);
		assert_true(res.addr_len <= PSL_VAN_ADDR_MAX);
		n->port = res.port;
	}
}

static void node_down(struct node *n)
{
	if (n->v)
		ops->fini(n->v);
	n->v = NULL;
	host_fini(&n->t);
}

static int connect_to(struct node *from, int32_t id, int port, int32_t my_id)
{
	struct psl_van_peer p = {sizeof(p), id, 0, "127.0.0.1", port, NULL, 0};
	return ops->connect(from->v, &p, my_id);
}

static struct psl_van_seg hseg(const void *d, size_t len)
{
	return (struct psl_van_seg){d, len, PSL_MEM_HOST, -1, NULL};
}

static uint8_t pattern(uint32_t msg, uint32_t seg, size_t i)
{
	return (uint8_t)(msg * 131u + seg * 17u + i * 7u + (i >> 9));
}

/* ------------------------------------------------------------- tests -- */

static void test_query(void **state)
{
	struct node a;
	struct psl_van_caps caps;
	(void)state;
	node_up(&a, "a", false);
	memset(&caps, 0, sizeof(caps));
	caps.size = sizeof(caps);
	assert_int_equal(ops->query(a.v, &caps), 0);
	assert_true(caps.flags & PSL_VAN_CAP_ZC_SEND);
	assert_true(caps.flags & PSL_VAN_CAP_ZC_RECV);
	assert_true(caps.flags & PSL_VAN_CAP_MEM_HOST);
	assert_false(caps.flags & PSL_VAN_CAP_NEEDS_MR);
	assert_non_null(strstr(caps.transports, "UCX "));
	assert_non_null(strstr(caps.transports, "memory: host"));
	assert_string_equal(ops->name, "ucx");
	node_down(&a);
}

/* sizes that take every path: empty, inline, just past inline, eager, rndv */
static const size_t sizes[] = {0, 1, 8, 4096, 8192, 8193, 65536, 300000, 1 << 20, 2 << 20};
#define NSIZES (sizeof(sizes) / sizeof(sizes[0]))

static size_t seg_len(int i, uint32_t s)
{
	return i % 10 == 9 ? 0 : sizes[(size_t)(i * 3 + (int)s * 5) % NSIZES];
}

/* Message i's nseg segments, of len_of(i, s) bytes of pattern each, in new
 * buffers (bufs). */
static void make_segs(int i, uint32_t nseg, size_t (*len_of)(int, uint32_t), uint8_t **bufs,
		      struct psl_van_seg *segs)
{
	uint32_t s;
	for (s = 0; s < nseg; s++) {
		size_t len = len_of(i, s), k;
		uint8_t *p = malloc(len ? len : 1);
		assert_non_null(p);
		for (k = 0; k < len; k++)
			p[k] = pattern((uint32_t)i, s, k);
		bufs[s] = p;
		segs[s] = hseg(p, len);
	}
}

/* g is message i as make_segs made it, with meta "<prefix><i>", from sender. */
static void check_msg(const struct got *g, int i, const char *prefix, int32_t sender,
		      uint32_t nseg, size_t (*len_of)(int, uint32_t))
{
	char want[32];
	uint32_t s;
	snprintf(want, sizeof(want), "%s%d", prefix, i);
	assert_int_equal(g->sender, sender);
	assert_int_equal(g->meta_len, strlen(want));
	assert_memory_equal(g->meta, want, g->meta_len);
	assert_int_equal(g->nseg, nseg);
	for (s = 0; s < nseg; s++) {
		size_t len = len_of(i, s), k, bad = 0;
		const uint8_t *p = g->raw->segs[s].data;
		assert_int_equal(g->raw->segs[s].len, len);
		assert_int_equal(g->raw->segs[s].mem_type, PSL_MEM_HOST);
		for (k = 0; k < len; k++)
			bad += p[k] != pattern((uint32_t)i, s, k);
		assert_int_equal(bad, 0);
	}
}

static void test_order_data_send_done(void **state)
{
	enum { N = 120 };
	struct node a, b;
	uint8_t *bufs[N][3];
	atomic_int cookies[N];
	int i, up, tries;
	(void)state;
	node_up(&a, "a", true);
	node_up(&b, "b", true);
	assert_int_equal(connect_to(&a, 9, b.port, PSL_VAN_ID_NONE), 0);
	for (i = 0; i < N; i++) {
		/* message i: meta "m<i>", i % 4 segments of every size class */
		char meta[32];
		struct psl_van_seg segs[3];
		uint32_t nseg = (uint32_t)(i % 4);
		int n = snprintf(meta, sizeof(meta), "m%d", i);
		make_segs(i, nseg, seg_len, bufs[i], segs);
		atomic_init(&cookies[i], 0);
		assert_int_equal(ops->send(a.v, 9, meta, (size_t)n, segs, nseg, &cookies[i]), 0);
	}
	assert_true(wait_msgs(&b.t, N, 30000));
	up = wait_event(&a.t, 9, PSL_VAN_PEER_UP, 1000);
	assert_true(up >= 0);
	for (i = 0; i < N; i++) /* in order */
		check_msg(&b.t.msgs[i], i, "m", PSL_VAN_ID_NONE, (uint32_t)(i % 4), seg_len);
	/* send_done exactly once each; only then may the segments go */
	for (i = 0, tries = 0; i < N && tries < 10000; tries++) {
		if (atomic_load(&cookies[i]))
			i++;
		else
			usleep(1000);
	}
	for (i = 0; i < N; i++)
		assert_int_equal(atomic_load(&cookies[i]), 1);
	assert_int_equal(atomic_load(&a.t.done_errors), 0);
	for (i = 0; i < N; i++) {
		uint32_t s;
		for (s = 0; s < (uint32_t)(i % 4); s++)
			free(bufs[i][s]);
	}
	node_down(&a);
	node_down(&b);
}

/*
 * Answers sent from the receive callback to a peer reached over tcp go out
 * in batches (several whole messages in one active message), and a message
 * with one large part as one active message: an echo of messages of every
 * kind (empty, inline, with large parts of their own) comes back whole and
 * in order, every send is done once, and both ways were used.
 */
static size_t echo_len(int i, uint32_t s)
{
	static const size_t lens[] = {0, 8, 100, 4096, 8192, 20000, 70000};
	return lens[(size_t)(i + (int)s * 3) % 7];
}

static void test_batches(void **state)
{
	enum { N = 400 };
	struct node a, b;
	uint8_t *bufs[N][2];
	atomic_int cookies[N];
	const char *batches;
	int i;
	(void)state;
	setenv("UCX_TLS", "tcp", 1);
	node_up(&a, "a", true);
	node_up(&b, "b", true);
	b.t.capture = true;
	b.t.h.log_level = PSL_VAN_LOG_DEBUG;
	b.t.echo = true;
	b.t.echo_to = 8;
	assert_int_equal(connect_to(&b, 8, a.port, 9), 0);
	assert_true(wait_event(&b.t, 8, PSL_VAN_PEER_UP, 10000) >= 0);
	assert_int_equal(connect_to(&a, 9, b.port, 8), 0);
	for (i = 0; i < N; i++) {
		char meta[32];
		struct psl_van_seg segs[2];
		uint32_t nseg = (uint32_t)(i % 3);
		int n = snprintf(meta, sizeof(meta), "e%d", i);
		make_segs(i, nseg, echo_len, bufs[i], segs);
		atomic_init(&cookies[i], 0);
		assert_int_equal(ops->send(a.v, 9, meta, (size_t)n, segs, nseg, &cookies[i]), 0);
	}
	assert_true(wait_msgs(&a.t, N, 30000));
	for (i = 0; i < N; i++)
		check_msg(&a.t.msgs[i], i, "e", 9, (uint32_t)(i % 3), echo_len);
	host_release_all(&a.t);
	node_down(&a);
	b.t.echo = false;
	node_down(&b); /* (releases b's messages after fini: the echoes are done) */
	assert_int_equal(atomic_load(&b.t.echo_done), N);
	assert_int_equal(atomic_load(&b.t.echo_errors), 0);
	assert_int_equal(atomic_load(&a.t.done_errors), 0);
	for (i = 0; i < N; i++)
		assert_int_equal(atomic_load(&cookies[i]), 1);
	assert_non_null(strstr(b.t.log, "active messages over tcp/lo, in batches"));
	batches = strstr(b.t.log, "messages in ");
	assert_non_null(batches); /* "sent X messages in Y batches, Z with their data
				     joined", at fini */
	while (batches > b.t.log && batches[-1] != '\n')
		batches--;
	print_message("b: %.*s\n", (int)strcspn(batches, "\n"), batches);
	/* the large single parts (20000 and 70000 bytes) went joined */
	assert_null(strstr(batches, " 0 with their data joined"));
	for (i = 0; i < N; i++) {
		uint32_t s;
		for (s = 0; s < (uint32_t)(i % 3); s++)
			free(bufs[i][s]);
	}
	unsetenv("UCX_TLS");
}

static void test_reconnect_new_id(void **state)
{
	enum { N = 40 };
	struct node a, b;
	int i;
	(void)state;
	node_up(&a, "a", true);
	node_up(&b, "b", true);
	assert_int_equal(connect_to(&a, 1, b.port, PSL_VAN_ID_NONE), 0);
	for (i = 0; i < N; i++) {
		char meta[16];
		int n = snprintf(meta, sizeof(meta), "old%d", i);
		assert_int_equal(ops->send(a.v, 1, meta, (size_t)n, NULL, 0, NULL), 0);
	}
	/* the node learnt its id: the scheduler's endpoint is replaced */
	assert_int_equal(connect_to(&a, 1, b.port, 9), 0);
	for (i = 0; i < N; i++) {
		char meta[16];
		int n = snprintf(meta, sizeof(meta), "new%d", i);
		assert_int_equal(ops->send(a.v, 1, meta, (size_t)n, NULL, 0, NULL), 0);
	}
	assert_true(wait_msgs(&b.t, 2 * N, 20000));
	{
		int olds = 0, news = 0, next_old = 0, next_new = 0;
		for (i = 0; i < 2 * N; i++) {
			struct got *g = &b.t.msgs[i];
			char want[16];
			if (g->meta[0] == 'o') {
				snprintf(want, sizeof(want), "old%d", next_old++);
				assert_int_equal(g->sender, PSL_VAN_ID_NONE);
				olds++;
			} else {
				snprintf(want, sizeof(want), "new%d", next_new++);
				assert_int_equal(g->sender, 9);
				news++;
			}
			assert_memory_equal(g->meta, want, strlen(want));
		}
		assert_int_equal(olds, N);
		assert_int_equal(news, N);
	}
	/* the replaced endpoint went quietly: no PEER_DOWN for it */
	assert_int_equal(wait_event(&a.t, 1, PSL_VAN_PEER_DOWN, 300), -1);
	node_down(&a);
	node_down(&b);
}

static void test_bad_input(void **state)
{
	struct node a, b;
	struct psl_van_seg seg;
	struct psl_van_caps caps = {.size = sizeof(caps)};
	atomic_int cookie;
	static char gpu_ptr[64]; /* never touched: refused before */
	(void)state;
	node_up(&a, "a", true);
	node_up(&b, "b", true);
	atomic_init(&cookie, 0);
	assert_int_equal(ops->send(a.v, 9, "x", 1, NULL, 0, &cookie), -EHOSTUNREACH);
	assert_int_equal(connect_to(&a, 0, b.port, PSL_VAN_ID_NONE), -EINVAL);
	assert_int_equal(connect_to(&a, 9, 0, PSL_VAN_ID_NONE), -EINVAL);
	assert_int_equal(connect_to(&a, 9, b.port, PSL_VAN_ID_NONE), 0);
	ops->query(a.v, &caps);
	seg = (struct psl_van_seg){gpu_ptr, sizeof(gpu_ptr), PSL_MEM_CUDA, 0, NULL};
	if (caps.flags & PSL_VAN_CAP_MEM_CUDA)
		print_message("UCX has CUDA here: skipping the no-CUDA refusal\n");
	else
		assert_int_equal(ops->send(a.v, 9, "x", 1, &seg, 1, &cookie), -ENOTSUP);
	seg.dev_id = -1;
	assert_int_equal(ops->send(a.v, 9, "x", 1, &seg, 1, &cookie), -EINVAL);
	seg = (struct psl_van_seg){gpu_ptr, 8, 5, 0, NULL};
	assert_int_equal(ops->send(a.v, 9, "x", 1, &seg, 1, &cookie), -EINVAL);
	{
		struct psl_van_seg many[65];
		int i;
		for (i = 0; i < 65; i++)
			many[i] = hseg(gpu_ptr, 1);
		assert_int_equal(ops->send(a.v, 9, "x", 1, many, 65, &cookie), -EINVAL);
	}
	/* a good one still works, and the refused ones never got send_done */
	seg = hseg(gpu_ptr, 8);
	assert_int_equal(ops->send(a.v, 9, "x", 1, &seg, 1, &cookie), 0);
	assert_true(wait_msgs(&b.t, 1, 10000));
	node_down(&a);
	assert_int_equal(atomic_load(&cookie), 1);
	node_down(&b);
}

static void test_peer_down(void **state)
{
	struct node a, b;
	atomic_int cookie;
	int d, rc;
	(void)state;
	node_up(&a, "a", true);
	node_up(&b, "b", true);
	assert_int_equal(connect_to(&a, 10, b.port, 9), 0);
	assert_int_equal(ops->send(a.v, 10, "hi", 2, NULL, 0, NULL), 0);
	assert_true(wait_msgs(&b.t, 1, 10000));
	assert_true(wait_event(&a.t, 10, PSL_VAN_PEER_UP, 5000) >= 0);
	node_down(&b); /* its process "ends" */
	d = wait_event(&a.t, 10, PSL_VAN_PEER_DOWN, 5000);
	assert_true(d >= 0);
	assert_true(a.t.evs[d].err < 0);
	/* sends to it now fail, or complete with an error */
	atomic_init(&cookie, 0);
	rc = ops->send(a.v, 10, "x", 1, NULL, 0, &cookie);
	if (rc == 0) {
		int tries = 0;
		while (!atomic_load(&cookie) && tries++ < 5000)
			usleep(1000);
		assert_int_equal(atomic_load(&cookie), 1);
	} else {
		assert_true(rc < 0);
		assert_int_equal(atomic_load(&cookie), 0);
	}
	node_down(&a);
}

/* A TCP listener that sends greet (len bytes, may be 0) to whoever connects. */
struct fake {
	int fd, port;
	const void *greet;
	size_t len;
	pthread_t th;
	atomic_bool stop;
};

static void *fake_main(void *arg)
{
	struct fake *f = arg;
	while (!atomic_load(&f->stop)) {
		struct timeval tv = {0, 100000};
		fd_set rs;
		int c;
		FD_ZERO(&rs);
		FD_SET(f->fd, &rs);
		if (select(f->fd + 1, &rs, NULL, NULL, &tv) <= 0)
			continue;
		c = accept(f->fd, NULL, NULL);
		if (c < 0)
			continue;
		if (f->len && send(c, f->greet, f->len, MSG_NOSIGNAL) < 0) {
			close(c);
			continue;
		}
		/* keep it open for a while, as a real peer would */
		tv = (struct timeval){3, 0};
		setsockopt(c, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
		{
			char junk[256];
			while (!atomic_load(&f->stop) && recv(c, junk, sizeof(junk), 0) > 0)
				;
		}
		close(c);
	}
	return NULL;
}

static void fake_start(struct fake *f, const void *greet, size_t len)
{
	struct sockaddr_in sa = {.sin_family = AF_INET};
	socklen_t sl = sizeof(sa);
	memset(f, 0, sizeof(*f));
	f->greet = greet;
	f->len = len;
	f->fd = socket(AF_INET, SOCK_STREAM, 0);
	assert_true(f->fd >= 0);
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	assert_int_equal(bind(f->fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	assert_int_equal(listen(f->fd, 8), 0);
	assert_int_equal(getsockname(f->fd, (struct sockaddr *)&sa, &sl), 0);
	f->port = ntohs(sa.sin_port);
	assert_int_equal(pthread_create(&f->th, NULL, fake_main, f), 0);
}

static void fake_stop(struct fake *f)
{
	atomic_store(&f->stop, true);
	pthread_join(f->th, NULL);
	close(f->fd);
}

static void check_mismatch(const void *greet, size_t len, const char *names, int within_ms,
			   const char *param, const char *value)
{
	struct node a;
	struct fake f;
	atomic_int cookie;
	const char *want[2] = {names, "127.0.0.1:"}; /* what runs there, and where */
	int e, i, rc;

	fake_start(&f, greet, len);
	host_init(&a.t, "a");
	a.t.params[0][0] = param;
	a.t.params[0][1] = value;
	assert_int_equal(ops->init(&a.t.h, &a.v), 0);
	{
		struct psl_van_bind_req req = {sizeof(req), 0, "127.0.0.1", 0};
		struct psl_van_bind_res res;
		assert_int_equal(ops->bind(a.v, &req, &res), 0);
	}
	assert_int_equal(connect_to(&a, 1, f.port, PSL_VAN_ID_NONE), 0);
	atomic_init(&cookie, 0);
	/* the van may already know: then the send fails at once */
	rc = ops->send(a.v, 1, "register", 8, NULL, 0, &cookie);
	assert_true(rc == 0 || rc == -EPROTO);
	e = wait_event(&a.t, 1, PSL_VAN_PEER_MISMATCH, within_ms);
	assert_true(e >= 0);
	assert_true(a.t.evs[e].err < 0);
	for (i = 0; i < 2; i++)
		if (!strstr(a.t.evs[e].detail, want[i]))
			fail_msg("mismatch detail \"%s\" does not name \"%s\"", a.t.evs[e].detail,
				 want[i]);
	assert_int_equal(wait_event(&a.t, 1, PSL_VAN_PEER_UP, 0), -1);
	/* a queued send completes, with an error; a refused one never */
	for (i = 0; i < 2000 && rc == 0 && !atomic_load(&cookie); i++)
		usleep(1000);
	assert_int_equal(atomic_load(&cookie), rc == 0 ? 1 : 0);
	assert_int_equal(atomic_load(&a.t.done_errors), rc == 0 ? 1 : 0);
	node_down(&a);
	fake_stop(&f);
}

static void test_mismatch_zmq(void **state)
{
	static const uint8_t zmtp[] = {0xff, 0, 0, 0, 0, 0, 0, 0, 1, 0x7f};
	(void)state;
	check_mismatch(zmtp, sizeof(zmtp), "van zmq", 3000, NULL, NULL);
}

static void test_mismatch_other_van(void **state)
{
	(void)state;
	check_mismatch("PSLVAN1 fabric\n", 15, "van fabric", 3000, NULL, NULL);
}

static void test_mismatch_silent(void **state)
{
	(void)state;
	/* a port that accepts and says nothing: bounded by the handshake limit */
	check_mismatch(NULL, 0, "sent no greeting", 4000, "PS_UCX_HANDSHAKE_TIMEOUT", "1");
}

static void test_bad_setting(void **state)
{
	struct thost t;
	struct psl_van *v = NULL;
	(void)state;
	host_init(&t, "a");
	t.params[0][0] = "PS_UCX_INLINE";
	t.params[0][1] = "lots";
	assert_int_equal(ops->init(&t.h, &v), -EINVAL);
	t.params[0][0] = "PS_UCX_ERR_MODE";
	t.params[0][1] = "sometimes";
	assert_int_equal(ops->init(&t.h, &v), -EINVAL);
	t.params[0][0] = "PS_BUSY_POLL";
	t.params[0][1] = "2";
	assert_int_equal(ops->init(&t.h, &v), -EINVAL);
	t.params[0][1] = "automatic";
	assert_int_equal(ops->init(&t.h, &v), -EINVAL);
	t.params[0][1] = "auto"; /* the window from the gaps between messages */
	assert_int_equal(ops->init(&t.h, &v), 0);
	ops->fini(v);
	host_fini(&t);
}

static void test_fini_in_flight(void **state)
{
	enum { N = 64 };
	struct node a, b;
	atomic_int cookies[N];
	uint8_t *big = malloc(2 << 20);
	int i, before;
	(void)state;
	memset(big, 0x5a, 2 << 20);
	node_up(&a, "a", true);
	node_up(&b, "b", true);
	assert_int_equal(connect_to(&a, 9, b.port, 1), 0);
	for (i = 0; i < N; i++) {
		struct psl_van_seg seg = hseg(big, 2 << 20);
		atomic_init(&cookies[i], 0);
		assert_int_equal(ops->send(a.v, 9, "big", 3, &seg, 1, &cookies[i]), 0);
	}
	ops->fini(a.v); /* at once: most are still in flight */
	a.v = NULL;
	for (i = 0; i < N; i++)
		assert_int_equal(atomic_load(&cookies[i]), 1);
	before = atomic_load(&a.t.callbacks);
	usleep(200000);
	assert_int_equal(atomic_load(&a.t.callbacks), before); /* none after fini */
	/* b got some of them, whole; it stops while still holding them, and
	 * releases them afterwards */
	ops->fini(b.v);
	b.v = NULL;
	before = atomic_load(&b.t.callbacks);
	for (i = 0; i < b.t.nmsg; i++) {
		const uint8_t *p = b.t.msgs[i].raw->segs[0].data;
		assert_int_equal(b.t.msgs[i].raw->segs[0].len, 2 << 20);
		assert_int_equal(p[0], 0x5a);
		assert_int_equal(p[(2 << 20) - 1], 0x5a);
	}
	host_release_all(&b.t);
	usleep(100000);
	assert_int_equal(atomic_load(&b.t.callbacks), before);
	node_down(&a);
	node_down(&b);
	free(big);
}

/* recv_dest: segment 1 of 'L' messages is lent by the host. */
static void test_recv_in_place(void **state)
{
	enum { N = 12, BIG = 4 << 20 };
	struct node a, b;
	uint8_t *small = malloc(64), *big = malloc(BIG);
	atomic_int cookies[N];
	int i, lent = 0;
	size_t k;
	(void)state;
	for (k = 0; k < BIG; k++)
		big[k] = pattern(7, 1, k);
	memset(small, 0x11, 64);
	node_up(&a, "a", true);
	node_up(&b, "b", true);
	b.t.lend = true;
	assert_int_equal(connect_to(&a, 9, b.port, 1), 0);
	for (i = 0; i < N; i++) {
		/* L: lend; R: the host refuses; both with a small and a big segment */
		struct psl_van_seg segs[2] = {hseg(small, 64), hseg(big, BIG)};
		atomic_init(&cookies[i], 0);
		assert_int_equal(ops->send(a.v, 9, i % 3 ? "L" : "R", 1, segs, 2, &cookies[i]), 0);
	}
	assert_true(wait_msgs(&b.t, N, 30000));
	pthread_mutex_lock(&b.t.mu);
	for (i = 0; i < N; i++) {
		struct psl_van_rmsg *m = b.t.msgs[i].raw;
		const uint8_t *p = m->segs[1].data;
		size_t bad = 0;
		int j, mine = -1;
		assert_int_equal(b.t.msgs[i].meta[0], i % 3 ? 'L' : 'R');
		assert_int_equal(m->nseg, 2);
		assert_int_equal(m->segs[1].len, BIG);
		for (k = 0; k < BIG; k++)
			bad += p[k] != pattern(7, 1, k);
		assert_int_equal(bad, 0);
		for (j = 0; j < b.t.nlent; j++)
			if (b.t.lent[j].buf == m->segs[1].data)
				mine = j;
		if (i % 3 == 0)
			assert_int_equal(mine, -1); /* refused: the van's own memory */
		lent += mine >= 0;
	}
	/* a segment this size goes by rendezvous: every 'L' was lent */
	assert_int_equal(lent, N - (N + 2) / 3);
	assert_int_equal(b.t.nlent, lent);
	assert_int_equal(b.t.order_errors, 0);
	pthread_mutex_unlock(&b.t.mu);
	host_release_all(&b.t);

	/* fini while lent segments are on their way: each loan comes back once,
	 * before fini returns, and nothing is delivered after */
	for (i = 0; i < N; i++) {
		struct psl_van_seg segs[2] = {hseg(small, 64), hseg(big, BIG)};
		atomic_init(&cookies[i], 0);
		assert_int_equal(ops->send(a.v, 9, "L", 1, segs, 2, &cookies[i]), 0);
	}
	for (i = 0; i < 5000; i++) {
		pthread_mutex_lock(&b.t.mu);
		k = (size_t)b.t.nlent;
		pthread_mutex_unlock(&b.t.mu);
		if ((int)k > lent)
			break;
		usleep(1000);
	}
	ops->fini(b.v);
	b.v = NULL;
	pthread_mutex_lock(&b.t.mu);
	for (i = 0; i < b.t.nlent; i++)
		if (b.t.lent[i].puts != 1)
			fail_msg("loan %d came back %d times", i, b.t.lent[i].puts);
	assert_int_equal(b.t.order_errors, 0);
	pthread_mutex_unlock(&b.t.mu);
	node_down(&a);
	node_down(&b);
	free(small);
	free(big);
}

static void test_connect_before_peer_listens(void **state)
{
	struct node a, b;
	struct fake probe;
	int port;
	(void)state;
	/* a port nobody listens on yet */
	fake_start(&probe, NULL, 0);
	port = probe.port;
	fake_stop(&probe);
	node_up(&a, "a", true);
	assert_int_equal(connect_to(&a, 9, port, 1), 0);
	assert_int_equal(ops->send(a.v, 9, "early", 5, NULL, 0, NULL), 0);
	usleep(300000); /* refused a few times */
	host_init(&b.t, "b");
	assert_int_equal(ops->init(&b.t.h, &b.v), 0);
	{
		struct psl_van_bind_req req = {sizeof(req), 0, "127.0.0.1", port};
		struct psl_van_bind_res res;
		int rc = ops->bind(b.v, &req, &res);
		if (rc == -EADDRINUSE) {
			print_message("port %d was taken meanwhile: skipping\n", port);
			node_down(&a);
			node_down(&b);
			skip();
		}
		assert_int_equal(rc, 0);
		assert_int_equal(res.port, port);
	}
	assert_true(wait_msgs(&b.t, 1, 10000));
	assert_memory_equal(b.t.msgs[0].meta, "early", 5);
	assert_int_equal(b.t.msgs[0].sender, 1);
	node_down(&a);
	node_down(&b);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_query),
		cmocka_unit_test(test_order_data_send_done),
		cmocka_unit_test(test_batches),
		cmocka_unit_test(test_reconnect_new_id),
		cmocka_unit_test(test_bad_input),
		cmocka_unit_test(test_bad_setting),
		cmocka_unit_test(test_peer_down),
		cmocka_unit_test(test_mismatch_zmq),
		cmocka_unit_test(test_mismatch_other_van),
		cmocka_unit_test(test_mismatch_silent),
		cmocka_unit_test(test_fini_in_flight),
		cmocka_unit_test(test_recv_in_place),
		cmocka_unit_test(test_connect_before_peer_listens),
	};
	alarm(300); /* a van that hangs fails the test instead of make check */
	return cmocka_run_group_tests(tests, load_van, unload_van);
}
