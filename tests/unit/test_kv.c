/*
 * Unit tests for the KV worker and server, the request tracker and
 * SimpleApp (core/kv_worker.c, kv_server.c, customer.c, simple_app.c),
 * through the public API over a fake van (fakevan.h): many requests in
 * flight, push-pull, messages that arrive before their customer exists,
 * every frame check of the server, and the server's responses.
 */
#define _GNU_SOURCE 1
#include "config.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "clock.h"
#include "customer.h"
#include "kv.h"
#include "kv_tensor.h"
#include "message.h"
#include "postoffice.h"
#include "pslite.h"
#include "resender.h"
#include "van_host.h"
#include "testutil.h"
#include "fakevan.h"

/* Delivers a meta (encoded here) and frames from sender. */
static void deliver(int sender, const struct psl__meta *m, uint32_t nseg, const void *const *data,
		    const size_t *len)
{
	uint8_t buf[1024];
	size_t n = psl__meta_encode(m, buf);
	deliver_raw(sender, buf, n, nseg, data, len);
}

static void reply(const struct sent *s, int option, uint32_t nseg, const void *const *data,
		  const size_t *len)
{
	uint8_t buf[1024];
	size_t n = reply_meta(s, option, buf);
	deliver_raw(s->to, buf, n, nseg, data, len);
}

/* ------------------------------------------------------------- tracker -- */

#define NREQ 300
static int g_cb_status[NREQ + 8];
static int g_cb_calls[NREQ + 8];

static void count_cb(int ts, int status, void *arg)
{
	(void)arg;
	assert_true(ts >= 0 && ts < NREQ + 8);
	g_cb_status[ts] = status;
	g_cb_calls[ts]++;
}

/* Hundreds of requests in flight (the tracker grows), answered in reverse
 * order, some with errors: each completes once, with its own status. */
static void test_many_in_flight(void **state)
{
	struct psl_kv_worker *w;
	uint64_t key = 7;
	uint8_t v = 1;
	struct psl_kv kv = {&key, 1, &v, 1, NULL, PSL_MEM_HOST, 0};
	int ts[NREQ], i;
	(void)state;

	node_up(1);
	memset(g_cb_calls, 0, sizeof(g_cb_calls));
	assert_int_equal(psl_kv_worker_new(0, 0, PSL_UINT8, &w), 0);
	for (i = 0; i < NREQ; i++) {
		ts[i] = psl_kv_push(w, &kv, 0, count_cb, NULL);
		assert_int_equal(ts[i], i);
	}
	assert_int_equal(g_nsent, NREQ);
	for (i = NREQ - 1; i >= 0; i--)
		reply(&g_sent[i], i % 7 == 3 ? -EIO : 0, 0, NULL, NULL);
	for (i = 0; i < NREQ; i++) {
		assert_int_equal(psl_kv_wait(w, ts[i]), i % 7 == 3 ? -EIO : 0);
		assert_int_equal(g_cb_calls[ts[i]], 1);
		assert_int_equal(g_cb_status[ts[i]], i % 7 == 3 ? -EIO : 0);
	}
	/* a second answer to a finished request changes nothing */
	reply(&g_sent[3], 0, 0, NULL, NULL);
	assert_int_equal(g_cb_calls[3], 1);
	assert_int_equal(psl_kv_wait(w, 3), -EIO);
	psl_kv_worker_free(w);
}

/* ----------------------------------------------------------- push-pull -- */

static int g_pp_calls, g_pp_status;
static void pp_cb(int ts, int status, void *arg)
{
	(void)ts;
	(void)arg;
	g_pp_calls++;
	g_pp_status = status;
}

static void test_pushpull(void **state)
{
	const uint64_t q = 0x7FFFFFFFFFFFFFFFull;
	uint64_t keys[2] = {3, q + 3};
	uint8_t vals[4] = {1, 2, 3, 4}, out[4];
	struct psl_kv kv = {keys, 2, vals, 4, NULL, PSL_MEM_HOST, 0};
	struct psl_kv_out o = {out, 4, 0, NULL, PSL_MEM_HOST, 0};
	struct psl_kv_worker *w;
	const struct sent *push[2] = {NULL, NULL}, *pull[2] = {NULL, NULL};
	int ts, i;
	(void)state;

	node_up(2);
	assert_int_equal(psl_kv_worker_new(0, 0, PSL_UINT8, &w), 0);
	g_pp_calls = 0;
	ts = psl_kv_pushpull(w, &kv, &o, 9, pp_cb, NULL);
	assert_true(ts >= 0);
	assert_int_equal(g_nsent, 4); /* a push and a pull to each server */
	for (i = 0; i < 4; i++) {
		const struct sent *s = &g_sent[i];
		int r = s->to == 8 ? 0 : 1;
		assert_int_equal(s->m.head, 9);
		if (s->m.push)
			push[r] = s;
		else
			pull[r] = s;
	}
	assert_non_null(push[0]);
	assert_non_null(push[1]);
	assert_non_null(pull[0]);
	assert_non_null(pull[1]);
	assert_int_equal(pull[0]->m.timestamp, ts);
	assert_true(push[0]->m.timestamp != ts);
	assert_int_equal(push[0]->m.timestamp, push[1]->m.timestamp);
	/* the pulls are answered first: not complete until the pushes are */
	{
		uint8_t v0[2] = {1, 2}, v1[2] = {3, 4};
		const void *d0[2] = {&keys[0], v0}, *d1[2] = {&keys[1], v1};
		size_t l[2] = {8, 2};
		reply(pull[1], 0, 2, d1, l);
		reply(pull[0], 0, 2, d0, l);
	}
	assert_int_equal(g_pp_calls, 0);
	/* a bounded wait on the pending request says so, and leaves it be */
	assert_int_equal(psl_kv_wait_timeout(w, ts, 20), -ETIMEDOUT);
	assert_contains(psl_last_error(), "is still pending after 20 ms");
	assert_int_equal(psl_kv_wait_timeout(w, ts, 0), -ETIMEDOUT);
	reply(push[0], 0, 0, NULL, NULL);
	assert_int_equal(g_pp_calls, 0);
	reply(push[1], 0, 0, NULL, NULL);
	assert_int_equal(g_pp_calls, 1);
	assert_int_equal(psl_kv_wait_timeout(w, ts, 20), 0);
	assert_int_equal(g_pp_status, 0);
	assert_int_equal(psl_kv_wait(w, ts), 0);
	assert_int_equal(o.num_vals, 4);
	assert_memory_equal(out, vals, 4);

	/* a failed push fails the push-pull */
	clear_sent();
	g_pp_calls = 0;
	ts = psl_kv_pushpull(w, &kv, &o, 0, pp_cb, NULL);
	for (i = 0; i < 4; i++) {
		const struct sent *s = &g_sent[i];
		if (s->m.push)
			reply(s, s->to == 10 ? -EPERM : 0, 0, NULL, NULL);
	}
	for (i = 0; i < 4; i++) {
		const struct sent *s = &g_sent[i];
		if (!s->m.push) {
			uint8_t v[2] = {0, 0};
			const void *d[2] = {s->seg[0], v};
			size_t l[2] = {8, 2};
			reply(s, 0, 2, d, l);
		}
	}
	assert_int_equal(g_pp_calls, 1);
	assert_int_equal(psl_kv_wait(w, ts), -EPERM);
	psl_kv_worker_free(w);
}

/* A server lost while a request waits on it fails that request. */
static void test_node_lost(void **state)
{
	struct psl_kv_worker *w;
	uint64_t keys[2] = {1, 0x8000000000000000ull};
	uint8_t v[2] = {1, 2};
	struct psl_kv kv = {keys, 2, v, 2, NULL, PSL_MEM_HOST, 0};
	struct capture c;
	char *log;
	int ts;
	(void)state;

	node_up(2);
	assert_int_equal(psl_kv_worker_new(0, 0, PSL_UINT8, &w), 0);
	ts = psl_kv_push(w, &kv, 0, NULL, NULL);
	reply(&g_sent[0], 0, 0, NULL, NULL);
	capture_start(&c);
	psl__node_lost(psl__cur, g_sent[1].to, -ECONNRESET, "test");
	log = capture_end(&c);
	assert_contains(log, "ERROR: lost server 1 (id 10");
	free(log);
	assert_int_equal(psl_kv_wait(w, ts), -ECONNRESET);
	/* later requests to it fail at once: only server 0 is sent a slice */
	ts = psl_kv_push(w, &kv, 0, NULL, NULL);
	assert_int_equal(g_nsent, 3);
	assert_int_equal(g_sent[2].to, 8);
	reply(&g_sent[2], 0, 0, NULL, NULL);
	assert_int_equal(psl_kv_wait(w, ts), -EHOSTDOWN);
	psl_kv_worker_free(w);
}

/* PS_RESEND with PS_RECOVERY: a push whose send fails because the van has
 * already dropped its server (the loss not yet known to the core) is kept
 * for the server's replacement, as one in flight at the loss is: it does
 * not fail with the van's error, the resender sends it again, and its
 * answer completes it. Without PS_RECOVERY it fails as before. */
static void test_send_races_loss(void **state)
{
	struct psl_kv_worker *w;
	uint64_t keys[1] = {1};
	uint8_t v[1] = {7};
	struct psl_kv kv = {keys, 1, v, 1, NULL, PSL_MEM_HOST, 0};
	int ts;
	(void)state;

	node_up(1);
	psl__po.cfg.resend = psl__po.cfg.recovery = true;
	assert_int_equal(psl__resender_init(psl__cur, 1000, true), 0);
	atomic_store(&psl__po.resend_live, true);
	assert_int_equal(psl_kv_worker_new(0, 0, PSL_UINT8, &w), 0);
	g_fail_len = 1, g_fail_rc = -EHOSTUNREACH, g_fail_to = 8;
	ts = psl_kv_push(w, &kv, 0, NULL, NULL);
	assert_true(ts >= 0);
	assert_int_equal(psl_kv_wait_timeout(w, ts, 20), -ETIMEDOUT); /* waits */
	assert_int_equal(psl__resender_pending(psl__cur), 1);
	g_fail_len = 0; /* the replacement is there: the resender's tick sends it */
	psl__resender_tick(psl__cur, psl__now_ms() + 5000);
	assert_int_equal(g_nsent, 1);
	assert_int_equal(g_sent[0].to, 8);
	reply(&g_sent[0], 0, 0, NULL, NULL);
	assert_int_equal(psl_kv_wait(w, ts), 0);
	/* without PS_RECOVERY: the van's error */
	psl__po.cfg.recovery = false;
	g_fail_len = 1;
	ts = psl_kv_push(w, &kv, 0, NULL, NULL);
	assert_int_equal(psl_kv_wait(w, ts), -EHOSTUNREACH);
	g_fail_len = 0, g_fail_rc = g_fail_to = 0;
	psl_kv_worker_free(w);
	psl__resender_fini(psl__cur);
	psl__po.cfg.resend = false;
}

/* PS_RESEND with PS_RECOVERY, on the node that takes a lost server's place:
 * a worker's held request can come before the node list (the node has no id,
 * so it cannot ACK it), and the worker's resend of it comes after. The
 * resend is a duplicate, dropped and ACKed: it once passed as a new request
 * (recorded under PSL_EMPTY, checked under the id), and pslite-server summed
 * that worker's push twice (server_restart.sh resend's wrong sums). */
static bool seen_as_dup(int app, int sender, int ts, bool request, int *acked_to)
{
	struct psl__meta m, ack;
	bool dup;
	psl__meta_init(&m);
	psl__meta_init(&ack);
	m.app_id = app, m.sender = sender, m.recver = psl__po.my_id;
	m.timestamp = ts, m.request = request;
	dup = psl__resender_on_recv(psl__cur, &m, &ack);
	*acked_to = ack.cmd == PSL_CMD_ACK ? ack.recver : -1;
	return dup;
}

static void test_resend_before_node_list(void **state)
{
	int to;
	(void)state;

	node_up_as(PSL_SERVER, 8, 1, 2);
	assert_int_equal(psl__resender_init(psl__cur, 1000, true), 0);
	psl__po.my_id = PSL_EMPTY; /* the replacement, before its node list */
	assert_false(seen_as_dup(0, 9, 41, true, &to));
	assert_int_equal(to, -1); /* (no ACK without an id) */
	assert_false(seen_as_dup(0, 11, 41, true, &to)); /* another worker's */
	psl__po.my_id = 8; /* the list came */
	assert_true(seen_as_dup(0, 9, 41, true, &to)); /* worker 0's resend */
	assert_int_equal(to, 9);
	assert_true(seen_as_dup(0, 11, 41, true, &to));
	assert_true(seen_as_dup(0, 9, 41, true, &to)); /* and a third copy */
	/* new requests still pass, once */
	assert_false(seen_as_dup(0, 9, 42, true, &to));
	assert_true(seen_as_dup(0, 9, 42, true, &to));
	assert_false(seen_as_dup(0, 9, 41, false, &to)); /* (a response is another message) */
	assert_false(seen_as_dup(1, 9, 41, true, &to));
	psl__resender_fini(psl__cur);
}

/* PS_RESEND's de-duplication window holds the last 65536 messages a node
 * got: past it the oldest are forgotten, the newest still count as seen,
 * and a node that gets many more goes on (it once evicted a signature it
 * had already evicted, and looked for it for ever). */
static void test_seen_window(void **state)
{
	const int window = 65536;
	int to, i;
	(void)state;

	node_up_as(PSL_SERVER, 8, 1, 2);
	assert_int_equal(psl__resender_init(psl__cur, 1000, true), 0);
	for (i = 0; i < 3 * window; i++)
		assert_false(seen_as_dup(0, 9, i, true, &to));
	for (i = 3 * window - 100; i < 3 * window; i++)
		assert_true(seen_as_dup(0, 9, i, true, &to));
	assert_false(seen_as_dup(0, 9, 2 * window - 200, true, &to)); /* forgotten */
	psl__resender_fini(psl__cur);
}

/* Every request fails at once (the scheduler is lost, or the node shuts
 * down) while a pull is still being sent to its servers: the request waits
 * for its sender to be done with it (the CI found the sender reading the
 * pull's state after the failure freed it), then completes once. */
static void fail_all(void)
{
	psl__customers_node_lost(psl__cur, 0, -ENOLINK);
}

static void test_fail_all_while_sending(void **state)
{
	struct psl_kv_worker *w;
	uint64_t keys[2] = {1, 0x8000000000000000ull};
	uint8_t out_v[2];
	struct psl_kv_out out = {out_v, sizeof(out_v), 0, NULL, PSL_MEM_HOST, 0};
	int ts;
	(void)state;

	node_up(2);
	memset(g_cb_calls, 0, sizeof(g_cb_calls));
	assert_int_equal(psl_kv_worker_new(0, 0, PSL_UINT8, &w), 0);
	g_send_hook = fail_all; /* after the slice for server 0 */
	ts = psl_kv_pull(w, keys, 2, &out, 0, count_cb, NULL);
	assert_true(ts >= 0);
	assert_null(g_send_hook);
	assert_int_equal(g_nsent, 2); /* server 1's slice was still sent */
	assert_int_equal(g_cb_calls[ts], 1);
	assert_int_equal(g_cb_status[ts], -ENOLINK);
	assert_int_equal(psl_kv_wait(w, ts), -ENOLINK);
	/* answers that come now find no request */
	reply(&g_sent[0], 0, 0, NULL, NULL);
	assert_int_equal(g_cb_calls[ts], 1);
	psl_kv_worker_free(w);
}

/* ---------------------------------------------------- pull in place -- */

static int lend(const struct sent *s, uint32_t seg, size_t len, struct psl_van_dest *d)
{
	uint8_t buf[256];
	size_t n = reply_meta(s, 0, buf);
	memset(d, 0, sizeof(*d));
	return psl__po.host.recv_dest(psl__po.host.ctx, s->to, buf, n, seg, len, d);
}

/* A van asks where a pull answer goes (recv_dest): the first server's part
 * of a worker's pull goes straight into out->vals, the request waits for
 * the loan, and the data is not copied again; what cannot be placed (a
 * later server's part, too big, a push answer, twice) is refused. */
static void test_pull_in_place(void **state)
{
	const uint64_t q = 0x7FFFFFFFFFFFFFFFull;
	uint64_t keys[2] = {3, q + 3};
	uint16_t out[8] = {0}, v0[3] = {11, 12, 13}, v1[2] = {21, 22};
	int lens[2] = {-1, -1}, ln0 = 3, ln1 = 2;
	struct psl_kv_out o = {out, 8, 0, lens, PSL_MEM_HOST, 0};
	struct psl_kv_worker *w;
	struct psl_van_dest d, d2;
	const struct sent *p0, *p1;
	uint8_t buf[256];
	size_t n;
	int ts, i;
	(void)state;

	node_up(2);
	assert_int_equal(psl_kv_worker_new(0, 0, PSL_UINT16, &w), 0);
	g_pp_calls = 0;
	ts = psl_kv_zpull(w, keys, 2, &o, 0, pp_cb, NULL);
	assert_true(ts >= 0);
	assert_int_equal(g_nsent, 2);
	p0 = g_sent[0].to == 8 ? &g_sent[0] : &g_sent[1];
	p1 = g_sent[0].to == 8 ? &g_sent[1] : &g_sent[0];
	/* refused: server 1's part (where it goes depends on server 0's
	 * length), keys or lens, not a multiple of the value size, too big */
	assert_true(lend(p1, 1, 4, &d) < 0);
	assert_true(lend(p0, 0, 8, &d) < 0);
	assert_true(lend(p0, 1, 5, &d) < 0);
	assert_true(lend(p0, 1, 18, &d) < 0);
	/* granted: server 0's values, into out itself; only once */
	assert_int_equal(lend(p0, 1, 6, &d), 0);
	assert_ptr_equal(d.data, out);
	assert_int_equal(d.mem_type, PSL_MEM_HOST);
	assert_true(lend(p0, 1, 6, &d2) < 0);
	memcpy(d.data, v0, sizeof(v0)); /* the van receives */
	/* server 1 answers (copied); the request still waits for server 0 */
	{
		const void *data[3] = {&keys[1], v1, &ln1};
		size_t len[3] = {8, 4, 4};
		n = reply_meta(p1, 0, buf);
		deliver_raw(p1->to, buf, n, 3, data, len);
	}
	assert_int_equal(g_pp_calls, 0);
	/* the loan comes back with the data, then the message pointing at it */
	psl__po.host.recv_dest_put(psl__po.host.ctx, d.loan, 0);
	assert_int_equal(g_pp_calls, 0);
	{
		const void *data[3] = {&keys[0], out, &ln0};
		size_t len[3] = {8, 6, 4};
		n = reply_meta(p0, 0, buf);
		deliver_raw_lent(p0->to, buf, n, 3, data, len, 1);
	}
	assert_int_equal(psl_kv_wait(w, ts), 0);
	assert_int_equal(g_pp_calls, 1);
	assert_int_equal(o.num_vals, 5);
	for (i = 0; i < 3; i++)
		assert_int_equal(out[i], v0[i]);
	for (i = 0; i < 2; i++)
		assert_int_equal(out[3 + i], v1[i]);
	assert_int_equal(lens[0], 3);
	assert_int_equal(lens[1], 2);

	/* a push's answer has nothing to place */
	{
		uint16_t pv[2] = {1, 2};
		struct psl_kv kv = {keys, 1, pv, 2, NULL, PSL_MEM_HOST, 0};
		ts = psl_kv_zpush(w, &kv, 0, NULL, NULL);
		assert_true(lend(&g_sent[g_nsent - 1], 1, 4, &d) < 0);
		reply(&g_sent[g_nsent - 1], 0, 0, NULL, NULL);
		assert_int_equal(psl_kv_wait(w, ts), 0);
	}

	/* the server is lost while its answer is on its way into out: the
	 * request fails, but only once the van gave the memory back */
	g_pp_calls = 0;
	ts = psl_kv_zpull(w, keys, 1, &o, 0, pp_cb, NULL);
	assert_int_equal(lend(&g_sent[g_nsent - 1], 1, 6, &d), 0);
	psl__customers_node_lost(psl__cur, 8, -ECONNRESET);
	assert_int_equal(g_pp_calls, 0);
	psl__po.host.recv_dest_put(psl__po.host.ctx, d.loan, -ECANCELED);
	assert_int_equal(g_pp_calls, 1);
	assert_int_equal(g_pp_status, -ECONNRESET);
	assert_int_equal(psl_kv_wait(w, ts), -ECONNRESET);

	/* a loan that comes back without data: the answer may still come,
	 * the usual way */
	ts = psl_kv_zpull(w, keys, 1, &o, 0, NULL, NULL);
	assert_int_equal(lend(&g_sent[g_nsent - 1], 1, 6, &d), 0);
	psl__po.host.recv_dest_put(psl__po.host.ctx, d.loan, -EIO);
	{
		uint16_t v[3] = {7, 8, 9};
		const void *data[3] = {&keys[0], v, &ln0};
		size_t len[3] = {8, 6, 4};
		n = reply_meta(&g_sent[g_nsent - 1], 0, buf);
		deliver_raw(8, buf, n, 3, data, len);
	}
	assert_int_equal(psl_kv_wait(w, ts), 0);
	assert_int_equal(out[0], 7);
	assert_int_equal(out[2], 9);
	psl_kv_worker_free(w);
}

/* -------------------------------------------------------------- server -- */

static struct psl_kv_request *g_req[16];
static int g_nreq;

static void keep_handler(struct psl_kv_server *s, struct psl_kv_request *req, void *arg)
{
	(void)s;
	(void)arg;
	assert_true(g_nreq < 16);
	g_req[g_nreq++] = req;
}

static void request_meta(struct psl__meta *m, int ts, bool push)
{
	psl__meta_init(m);
	m->head = 5;
	m->app_id = 0;
	m->customer_id = 3;
	m->timestamp = ts;
	m->request = true;
	m->push = push;
	m->key = 0x1234;
	m->addr = 0xABCD;
	m->val_len = 2;
	m->option = 0;
	m->src_dev_type = m->dst_dev_type = PSL_DEV_CPU;
}

/* A request that comes before its server exists waits for it. */
static void test_server_held_request(void **state)
{
	struct psl_kv_server *srv;
	struct psl__meta m;
	uint64_t key = 42;
	float vals[2] = {1.5f, 2.5f};
	const void *d[2] = {&key, vals};
	size_t l[2] = {8, 8};
	const struct sent *s;
	(void)state;

	node_up_as(PSL_SERVER, 8, 1, 2);
	g_nreq = 0;
	request_meta(&m, 17, true);
	deliver(11, &m, 2, d, l); /* worker 1, before the server exists */
	assert_int_equal(g_nsent, 0);
	assert_int_equal(psl_kv_server_new(0, PSL_FLOAT32, keep_handler, NULL, &srv), 0);
	assert_int_equal(g_nreq, 1);
	assert_true(g_req[0]->meta.push);
	assert_false(g_req[0]->meta.pull);
	assert_int_equal(g_req[0]->meta.sender, 11);
	assert_int_equal(g_req[0]->meta.timestamp, 17);
	assert_int_equal(g_req[0]->meta.cmd, 5);
	assert_int_equal(g_req[0]->meta.customer_id, 3);
	assert_int_equal(g_req[0]->kv.num_keys, 1);
	assert_true(g_req[0]->kv.keys[0] == 42);
	assert_int_equal(g_req[0]->kv.num_vals, 2);
	assert_true(((float *)g_req[0]->kv.vals)[1] == 2.5f);
	assert_int_equal(psl_kv_respond(g_req[0], NULL), 0);
	assert_int_equal(g_nsent, 1);
	s = &g_sent[0];
	assert_int_equal(s->to, 11);
	assert_false(s->m.request);
	assert_true(s->m.push);
	assert_int_equal(s->m.timestamp, 17);
	assert_int_equal(s->m.customer_id, 3);
	assert_int_equal(s->m.head, 5);
	assert_true(s->m.key == 0x1234 && s->m.addr == 0xABCD);
	assert_int_equal(s->m.val_len, 2);
	assert_int_equal(s->nseg, 0);
	/* a second server for the same app is refused */
	{
		struct psl_kv_server *again;
		struct capture c;
		char *log;
		capture_start(&c);
		assert_int_equal(psl_kv_server_new(0, PSL_FLOAT32, keep_handler, NULL, &again),
				 -EEXIST);
		log = capture_end(&c);
		free(log);
	}
	psl_kv_server_free(srv);
}

/* Every frame check of the server: each bad request is answered with an
 * error (option -EBADMSG) and never reaches the handler. */
static void test_server_frame_checks(void **state)
{
	struct psl_kv_server *srv;
	struct psl__meta m;
	uint64_t keys[2] = {1, 2};
	float vals[4] = {1, 2, 3, 4};
	static const int32_t l1[1] = {2}, l22[2] = {2, 2}, l13[2] = {1, 3}, neg[2] = {-1, 5},
			     l21[2] = {2, 1};
	struct capture c;
	char *log;
	static const struct {
		uint32_t nseg;
		size_t klen, vlen, llen;
		const int32_t *lens;
		bool push;
		const char *why;
	} bad[] = {
		{1, 16, 0, 0, NULL, true, "1 data frames, expected 0, 2 or 3"},
		{4, 16, 16, 8, l22, true, "4 data frames"},
		{2, 12, 16, 0, NULL, true, "keys frame of 12 bytes"},
		{2, 16, 6, 0, NULL, true, "6 value bytes is not a multiple of the value size 4"},
		{3, 16, 16, 4, l1, true, "1 lens for 2 keys"},
		{3, 16, 16, 8, neg, true, "lens[0]=-1 is negative"},
		{3, 16, 16, 8, l21, true, "lens add up to 3 values but 4 came"},
		{2, 16, 12, 0, NULL, true, "3 values do not split evenly over 2 keys"},
	};
	size_t i;
	(void)state;

	node_up_as(PSL_SERVER, 8, 1, 1);
	g_nreq = 0;
	assert_int_equal(psl_kv_server_new(0, PSL_FLOAT32, keep_handler, NULL, &srv), 0);
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		const void *d[4] = {keys, vals, bad[i].lens, vals};
		size_t l[4] = {bad[i].klen, bad[i].vlen, bad[i].llen, 4};
		const struct sent *s;
		request_meta(&m, 100 + (int)i, bad[i].push);
		capture_start(&c);
		deliver(9, &m, bad[i].nseg, d, l);
		log = capture_end(&c);
		assert_contains(log, "from worker 0 (id 9");
		assert_contains(log, bad[i].why);
		assert_contains(log, "answered with an error");
		free(log);
		assert_int_equal(g_nreq, 0);
		assert_int_equal(g_nsent, (int)i + 1);
		s = &g_sent[i];
		assert_int_equal(s->to, 9);
		assert_false(s->m.request);
		assert_int_equal(s->m.option, -EBADMSG);
		assert_int_equal(s->m.timestamp, 100 + (int)i);
		assert_int_equal(s->nseg, 0);
	}
	/* what is fine: lens that add up, a pull with keys only, a request
	 * without frames, and pull lens that need not add up */
	{
		const void *d[3] = {keys, vals, l13};
		size_t l[3] = {16, 16, 8};
		request_meta(&m, 200, true);
		deliver(9, &m, 3, d, l);
		assert_int_equal(g_nreq, 1);
		assert_non_null(g_req[0]->kv.lens);
		assert_int_equal(g_req[0]->kv.lens[1], 3);
		request_meta(&m, 201, false);
		l[1] = 0;
		deliver(9, &m, 2, d, l);
		assert_int_equal(g_nreq, 2);
		assert_true(g_req[1]->meta.pull);
		assert_int_equal(g_req[1]->kv.num_keys, 2);
		assert_int_equal(g_req[1]->kv.num_vals, 0);
		request_meta(&m, 202, true);
		deliver(9, &m, 0, NULL, NULL);
		assert_int_equal(g_nreq, 3);
		assert_int_equal(g_req[2]->kv.num_keys, 0);
		request_meta(&m, 203, false);
		l[1] = 0;
		d[2] = l21;
		deliver(9, &m, 3, d, l);
		assert_int_equal(g_nreq, 4);
	}
	for (i = 0; i < 4; i++)
		psl_kv_respond_error(g_req[i], i == 0 ? 5 : -ENOSPC); /* 5 is no error code */
	assert_int_equal(g_sent[g_nsent - 4].m.option, -EIO);
	assert_int_equal(g_sent[g_nsent - 1].m.option, -ENOSPC);
	psl_kv_server_free(srv);
}

static int g_done_calls;
static void done_cb(void *arg)
{
	(void)arg;
	g_done_calls++;
}

static void test_server_responses(void **state)
{
	struct psl_kv_server *srv;
	struct psl__meta m;
	uint64_t keys[2] = {1, 2};
	const void *d[2] = {keys, NULL};
	size_t l[2] = {16, 0};
	double rv[3] = {0.5, 1.5, 2.5};
	int rl[2] = {1, 2}, bad_lens[2] = {1, 1};
	struct psl_kv res = {0};
	const struct sent *s;
	(void)state;

	node_up_as(PSL_SERVER, 8, 1, 1);
	g_nreq = 0;
	assert_int_equal(psl_kv_server_new(0, PSL_FLOAT64, keep_handler, NULL, &srv), 0);
	for (int i = 0; i < 4; i++) {
		request_meta(&m, 300 + i, false);
		deliver(9, &m, 2, d, l);
	}
	assert_int_equal(g_nreq, 4);

	/* a copied response: keys, values and lens */
	res = (struct psl_kv){keys, 2, rv, 3, rl, PSL_MEM_HOST, 0};
	assert_int_equal(psl_kv_respond(g_req[0], &res), 0);
	s = &g_sent[g_nsent - 1];
	assert_int_equal(s->m.timestamp, 300);
	assert_false(s->m.push);
	assert_int_equal(s->nseg, 3);
	assert_int_equal(s->len[0], 16);
	assert_memory_equal(s->seg[0], keys, 16);
	assert_int_equal(s->len[1], 24);
	assert_memory_equal(s->seg[1], rv, 24);
	assert_int_equal(s->len[2], 8);
	assert_memory_equal(s->seg[2], rl, 8);
	assert_int_equal(s->m.data_type_size, 3);
	assert_int_equal(s->m.data_type[1], PSL_FLOAT64);

	/* zero-copy: done runs once, when the van lets go */
	g_done_calls = 0;
	res = (struct psl_kv){keys, 2, rv, 2, NULL, PSL_MEM_HOST, 0};
	assert_int_equal(psl_kv_zrespond(g_req[1], &res, done_cb, NULL), 0);
	assert_int_equal(g_done_calls, 1);
	s = &g_sent[g_nsent - 1];
	assert_int_equal(s->nseg, 2);
	assert_int_equal(s->len[1], 16);

	/* lens that do not add up: the worker must still get an answer (an
	 * error), or its request would wait for ever */
	{
		int before = g_nsent;
		struct capture c;
		char *log;
		res = (struct psl_kv){keys, 2, rv, 3, bad_lens, PSL_MEM_HOST, 0};
		capture_start(&c);
		assert_int_equal(psl_kv_respond(g_req[2], &res), -EINVAL);
		log = capture_end(&c);
		free(log);
		assert_string_equal(psl_last_error(),
				    "psl_kv_respond: lens add up to 2 values but 3 were given");
		assert_int_equal(g_nsent, before + 1);
		s = &g_sent[g_nsent - 1];
		assert_int_equal(s->m.timestamp, 302);
		assert_int_equal(s->m.option, -EINVAL);
		assert_int_equal(s->nseg, 0);
		assert_int_equal(s->m.val_len, 0); /* (the pull's was 2) */
	}
	/* zero-copy with nothing to send: done at once */
	g_done_calls = 0;
	assert_int_equal(psl_kv_zrespond(g_req[3], NULL, done_cb, NULL), 0);
	assert_int_equal(g_done_calls, 1);
	assert_int_equal(psl_kv_respond(NULL, NULL), -EINVAL);
	psl_kv_server_free(srv);
}

/* ------------------------------------------- batch tensors, KV store -- */

/* A batch message from worker 9: key with vals (push) or room (pull), the
 * tensor's dtype and shape from t, message idx of count. */
static void batch_msg(int ts, bool push, const struct psl_kv_tensor *t, size_t bytes, int count,
		      int idx)
{
	struct psl__meta m;
	char shape[PSL__TDESC_BODY];
	const void *d[2] = {&t->key, push ? t->vals : NULL};
	size_t l[2] = {8, push ? bytes : 0};
	request_meta(&m, ts, push);
	m.customer_id = 0;
	m.option = PSL_KV_BATCH_OPTION(count, idx);
	m.val_len = (int)bytes;
	m.data_type_size = 2;
	m.data_type[0] = 8;
	m.data_type[1] = PSL_BYTES;
	if (push)
		psl__tdesc_put(&m, PSL_BYTES, t, shape);
	deliver(9, &m, 2, d, l);
}

/* StepMesh's tensors through a batch server: a float32 [2, 2] push arrives
 * as one, and a bfloat16 [4] answer carries its dtype and shape (issue 26
 * case 7: they used to arrive as flat bytes). */
static void test_batch_tensor_desc(void **state)
{
	struct psl_kv_batch_server *bs;
	const struct psl_kv_batch_req *req;
	float v[4] = {1, 2, 3, 4};
	uint16_t half[4] = {1, 2, 3, 4};
	struct psl_kv_tensor push = {.key = 7, .vals = v, .len = 16, .dtype = PSL_FLOAT32,
				     .ndim = 2, .shape = {2, 2}};
	struct psl_kv_tensor pull = {.key = 9, .len = 8};
	struct psl_kv_tensor out = {.key = 9, .vals = half, .len = 8, .dtype = PSL_BFLOAT16,
				    .ndim = 1, .shape = {4}};
	struct psl__tdesc d;
	const struct sent *s;
	(void)state;

	node_up_as(PSL_SERVER, 8, 1, 1);
	assert_int_equal(psl_kv_batch_server_new(0, PSL_BYTES, 0, NULL, NULL, &bs), 0);
	batch_msg(500, true, &push, 16, 2, 0);
	batch_msg(500, false, &pull, 8, 2, 1);
	assert_int_equal(psl_kv_batch_next(bs, 1000, &req), 0);
	assert_int_equal(req->npush, 1);
	assert_int_equal(req->push[0].dtype, PSL_FLOAT32);
	assert_int_equal(req->push[0].ndim, 2);
	assert_int_equal(req->push[0].shape[0], 2);
	assert_int_equal(req->push[0].shape[1], 2);
	assert_memory_equal(req->push[0].vals, v, 16);
	/* a shape that does not cover the values is refused, naming it */
	out.shape[0] = 5;
	assert_int_equal(psl_kv_batch_respond(bs, req->id, &out, 1), -EINVAL);
	out.shape[0] = 4;
	assert_int_equal(psl_kv_batch_respond(bs, req->id, &out, 1), 0);
	s = &g_sent[g_nsent - 1]; /* the pull's answer (the push's came first) */
	assert_int_equal(s->m.timestamp, 500);
	assert_false(s->m.push);
	psl__tdesc_get(&s->m, &d);
	assert_int_equal(d.dtype, PSL_BFLOAT16);
	assert_int_equal(d.ndim, 1);
	assert_int_equal(d.shape[0], 4);
	psl_kv_batch_server_free(bs);
}

/* The default server (ps-lite's KVServerDefaultHandle): two pushes of key
 * 5 summed, a pull answers the sum; overwrite keeps the last; an unknown
 * key's pull fails with ENOENT. */
static void store_push(int ts, bool push, const float *vals, size_t n)
{
	struct psl__meta m;
	uint64_t key = 5;
	const void *d[2] = {&key, vals};
	size_t l[2] = {8, n * 4};
	request_meta(&m, ts, push);
	m.customer_id = 0;
	deliver(9, &m, 2, d, l);
}

static void test_store(void **state)
{
	struct psl_kv_store *st;
	float a[3] = {1, 2, 3}, b[3] = {10, 20, 30}, sum[3] = {11, 22, 33};
	const struct sent *s;
	struct psl__meta m;
	uint64_t other = 6;
	const void *d[2] = {&other, NULL};
	size_t l[2] = {8, 0};
	int mode;
	(void)state;

	node_up_as(PSL_SERVER, 8, 1, 1);
	assert_int_equal(psl_kv_store_new(0, PSL_BFLOAT16, PSL_KV_STORE_SUM, &st), -EINVAL);
	for (mode = PSL_KV_STORE_SUM; mode <= PSL_KV_STORE_OVERWRITE; mode++) {
		assert_int_equal(psl_kv_store_new(0, PSL_FLOAT32, mode, &st), 0);
		store_push(600, true, a, 3);
		store_push(601, true, b, 3);
		store_push(602, false, NULL, 0);
		s = &g_sent[g_nsent - 1];
		assert_int_equal(s->m.timestamp, 602);
		assert_int_equal(s->nseg, 2);
		assert_int_equal(s->len[1], 12);
		assert_memory_equal(s->seg[1], mode == PSL_KV_STORE_SUM ? sum : b, 12);
		request_meta(&m, 603, false);
		m.customer_id = 0;
		deliver(9, &m, 2, d, l);
		s = &g_sent[g_nsent - 1];
		assert_int_equal(s->m.timestamp, 603);
		assert_int_equal(s->m.option, -ENOENT);
		psl_kv_store_free(st);
	}
}

/* ---------------------------------------------------------- SimpleApp -- */

static int g_sa_resp;
static char g_sa_body[8][64];
static void sa_resp(struct psl_simple_app *app, const struct psl_simple_msg *msg, void *arg)
{
	(void)app;
	(void)arg;
	assert_false(msg->request);
	snprintf(g_sa_body[g_sa_resp++ % 8], 64, "%d:%.*s", msg->sender, (int)msg->body_len,
		 msg->body ? msg->body : "");
}

static void test_simple_app(void **state)
{
	struct psl_simple_app *app;
	int ts, i;
	(void)state;

	node_up_as(PSL_WORKER, 9, 2, 2);
	g_sa_resp = 0;
	assert_int_equal(psl_simple_app_new(1, 1, NULL, sa_resp, NULL, &app), 0);
	ts = psl_simple_request(app, 7, "hi", 2, PSL_GROUP_SERVERS);
	assert_true(ts >= 0);
	assert_int_equal(g_nsent, 2);
	for (i = 0; i < 2; i++) {
		struct psl__meta m;
		const struct sent *s = &g_sent[i];
		assert_true(s->m.simple_app && s->m.request);
		assert_int_equal(s->m.head, 7);
		assert_int_equal(s->m.body_size, 2);
		psl__meta_init(&m);
		m.head = 7;
		m.app_id = 1;
		m.customer_id = 1;
		m.timestamp = ts;
		m.simple_app = true;
		m.body = "ok";
		m.body_size = 2;
		deliver(s->to, &m, 0, NULL, NULL);
	}
	assert_int_equal(psl_simple_wait(app, ts), 0);
	assert_int_equal(g_sa_resp, 2);
	assert_true(!strcmp(g_sa_body[0], "8:ok") || !strcmp(g_sa_body[0], "10:ok"));

	/* to the workers' group, this node included: its own request comes
	 * back through the loopback and is answered with an empty body */
	clear_sent();
	ts = psl_simple_request(app, 8, "me", 2, PSL_GROUP_WORKERS);
	assert_true(ts >= 0);
	assert_int_equal(g_nsent, 1); /* to worker 1; the one to itself did not use the van */
	assert_int_equal(g_sent[0].to, 11);
	{
		struct psl__meta m;
		psl__meta_init(&m);
		m.head = 8;
		m.app_id = 1;
		m.customer_id = 1;
		m.timestamp = ts;
		m.simple_app = true;
		deliver(11, &m, 0, NULL, NULL);
	}
	assert_int_equal(psl_simple_wait(app, ts), 0);
	assert_int_equal(g_sa_resp, 4);

	/* not a group and not a node */
	{
		struct capture c;
		char *log;
		capture_start(&c);
		assert_int_equal(psl_simple_request(app, 1, "x", 1, 5000), -EINVAL);
		assert_int_equal(psl_simple_request(app, 1, "x", 1, 0), -EINVAL);
		log = capture_end(&c);
		assert_contains(log, "5000 is neither a node group");
		free(log);
	}
	assert_int_equal(psl_simple_request(app, 1, NULL, 3, PSL_GROUP_SERVERS), -EINVAL);
	psl_simple_app_free(app);
}

/* Messages for a customer that never comes are held, but only so many. */
static void test_held_bound(void **state)
{
	struct psl__meta m;
	uint8_t buf[256];
	size_t len;
	struct capture c;
	char *log;
	int i;
	(void)state;

	node_up_as(PSL_SERVER, 8, 1, 1);
	request_meta(&m, 0, false);
	m.app_id = 99; /* no such server on this node */
	len = psl__meta_encode(&m, buf);
	for (i = 0; i < 65536; i++)
		deliver_raw(9, buf, len, 0, NULL, NULL);
	assert_int_equal(g_released, 0);
	capture_start(&c);
	deliver_raw(9, buf, len, 0, NULL, NULL);
	deliver_raw(9, buf, len, 0, NULL, NULL);
	log = capture_end(&c);
	assert_int_equal(g_released, 2); /* the two oldest went */
	assert_int_equal(count_lines_with(log, "more than 65536 messages or 1024 MiB are held"), 2);
	free(log);
	capture_start(&c);
	psl__customer_drop_held(psl__cur);
	log = capture_end(&c);
	assert_contains(log, "65536 message(s) never found their customer");
	free(log);
	assert_int_equal(g_released, g_delivered);
}

/* ------------------------------------------ no silent hang (issue 26) -- */

/* A request for an app this server node does not have: a WARN naming the
 * fix after a few seconds, then (PS_HELD_TIMEOUT) an error answer -ENXIO to
 * its sender; the worker's request fails with ENXIO and says why. */
static void test_held_fails_back(void **state)
{
	struct psl__meta m;
	uint8_t buf[256];
	size_t len;
	struct capture c;
	char *log;
	int64_t t0 = psl__now_ms();
	(void)state;

	node_up_as(PSL_SERVER, 8, 1, 1);
	psl__po.cfg.held_timeout_s = 30;
	request_meta(&m, 21, false);
	m.app_id = 7; /* no KV server for app 7 here */
	len = psl__meta_encode(&m, buf);
	deliver_raw(9, buf, len, 0, NULL, NULL);
	capture_start(&c);
	psl__customers_tick(psl__cur, t0 + 1000);
	psl__customers_tick(psl__cur, t0 + 6000);
	psl__customers_tick(psl__cur, t0 + 7000);
	log = capture_end(&c);
	assert_int_equal(count_lines_with(log, "this node has no KV server for app 7"), 1);
	assert_contains(log, "create a KV server for app 7 on this node (psl_kv_server_new)");
	assert_contains(log, "worker 0 (id 9");
	free(log);
	assert_int_equal(g_nsent, 0);
	capture_start(&c);
	psl__customers_tick(psl__cur, t0 + 31000);
	log = capture_end(&c);
	assert_contains(log, "request 21 from worker 0 (id 9");
	assert_contains(log, "fails with ENXIO");
	free(log);
	assert_int_equal(g_nsent, 1);
	assert_int_equal(g_sent[0].to, 9);
	assert_false(g_sent[0].m.request);
	assert_int_equal(g_sent[0].m.app_id, 7);
	assert_int_equal(g_sent[0].m.timestamp, 21);
	assert_int_equal(g_sent[0].m.option, -ENXIO);
	assert_int_equal(g_sent[0].nseg, 0);
	/* the pull's key and addr echoed, but no values: val_len 0, or a C++
	 * worker's RDMA or UCX van would take val_len bytes of its own pull
	 * buffer for the answer (docs/interop.md) */
	assert_false(g_sent[0].m.push);
	assert_int_equal(g_sent[0].m.key, 0x1234);
	assert_int_equal(g_sent[0].m.addr, 0xABCD);
	assert_int_equal(g_sent[0].m.val_len, 0);
	assert_int_equal(g_released, g_delivered);
	psl__po.cfg.held_timeout_s = 0;
}

static void test_worker_gets_enxio(void **state)
{
	struct psl_kv_worker *w;
	uint64_t key = 3;
	uint8_t v = 1;
	struct psl_kv kv = {&key, 1, &v, 1, NULL, PSL_MEM_HOST, 0};
	struct capture c;
	char *log;
	int ts;
	(void)state;

	node_up(1);
	assert_int_equal(psl_kv_worker_new(0, 0, PSL_UINT8, &w), 0);
	ts = psl_kv_push(w, &kv, 0, NULL, NULL);
	capture_start(&c);
	reply(&g_sent[0], -ENXIO, 0, NULL, NULL);
	log = capture_end(&c);
	assert_contains(log, "has no KV server for app 0");
	assert_contains(log, "psl_kv_server_new");
	free(log);
	assert_int_equal(psl_kv_wait(w, ts), -ENXIO);
	psl_kv_worker_free(w);
}

/* A request nobody answers fails with -ETIMEDOUT at its deadline, through
 * its callback and wait; a late answer is dropped. */
static void test_request_deadline(void **state)
{
	struct psl_kv_worker *w;
	uint64_t key = 3;
	uint8_t v = 1;
	struct psl_kv kv = {&key, 1, &v, 1, NULL, PSL_MEM_HOST, 0};
	struct capture c;
	char *log;
	int ts;
	(void)state;

	node_up(1);
	memset(g_cb_calls, 0, sizeof(g_cb_calls));
	assert_int_equal(psl_kv_worker_new(0, 0, PSL_UINT8, &w), 0);
	assert_int_equal(psl_kv_worker_set_timeout(w, -1), -EINVAL);
	assert_int_equal(psl_kv_worker_set_timeout(w, 2000), 0);
	ts = psl_kv_push(w, &kv, 0, count_cb, NULL);
	psl__customers_tick(psl__cur, psl__now_ms() + 1000);
	assert_int_equal(psl_kv_wait_timeout(w, ts, 0), -ETIMEDOUT); /* still pending */
	assert_int_equal(g_cb_calls[ts], 0);
	capture_start(&c);
	psl__customers_tick(psl__cur, psl__now_ms() + 2100);
	log = capture_end(&c);
	assert_contains(log, "got no answer from server 0 (id 8");
	assert_contains(log, "within 2000 ms");
	free(log);
	assert_int_equal(g_cb_calls[ts], 1);
	assert_int_equal(g_cb_status[ts], -ETIMEDOUT);
	assert_int_equal(psl_kv_wait(w, ts), -ETIMEDOUT);
	/* the waiter learns it too (the reason was logged on the timer's
	 * thread): the deadline, or, run after the test where this process
	 * lost a server, the timeout and that node */
	if (!strstr(psl_last_error(), "request 0 of app 0 failed: no answer within this "
				      "worker's deadline") &&
	    !strstr(psl_last_error(), "request 0 of app 0 failed (timed out)"))
		fail_msg("the waiter's reason: %s", psl_last_error());
	capture_start(&c);
	reply(&g_sent[0], 0, 0, NULL, NULL); /* late */
	log = capture_end(&c);
	free(log);
	assert_int_equal(g_cb_calls[ts], 1);
	psl_kv_worker_free(w);
}

/* The worker is freed after psl_kv_wait_timeout gave up on a request that
 * has no deadline: free returns (the request is cancelled), and an answer
 * that comes after is dropped without touching the freed worker. */
static void *free_worker(void *arg)
{
	psl_kv_worker_free(arg);
	return NULL;
}

static void test_free_cancels(void **state)
{
	struct psl_kv_worker *w;
	uint64_t key = 3;
	uint8_t v = 1;
	struct psl_kv kv = {&key, 1, &v, 1, NULL, PSL_MEM_HOST, 0};
	pthread_t th;
	int ts, i, done = 0;
	(void)state;

	node_up(1);
	memset(g_cb_calls, 0, sizeof(g_cb_calls));
	assert_int_equal(psl_kv_worker_new(0, 0, PSL_UINT8, &w), 0);
	assert_int_equal(psl_kv_worker_set_timeout(w, 0), 0);
	ts = psl_kv_push(w, &kv, 0, count_cb, NULL);
	assert_int_equal(psl_kv_wait_timeout(w, ts, 10), -ETIMEDOUT);
	assert_int_equal(pthread_create(&th, NULL, free_worker, w), 0);
	for (i = 0; i < 300 && !done; i++) { /* at most 3 s */
		usleep(10000);
		done = g_cb_calls[ts] == 1;
	}
	assert_true(done); /* (the old code blocked here for ever) */
	pthread_join(th, NULL);
	assert_int_equal(g_cb_status[ts], -ECANCELED);
	reply(&g_sent[0], 0, 0, NULL, NULL); /* late: no customer, dropped */
	assert_int_equal(g_released, g_delivered);
}

/* psl_kv_worker_free from the worker's own callback, psl_kv_server_free
 * from its server's handler: one error line naming the call and nothing
 * freed (both go on working), where the old code waited in the callback
 * for that callback to return, for ever. */
static struct psl_kv_worker *g_self_w;
static struct psl_kv_server *g_self_s;
static atomic_int g_self_calls;

static void free_self_cb(int ts, int status, void *arg)
{
	(void)ts;
	(void)status;
	(void)arg;
	psl_kv_worker_free(g_self_w);
	atomic_fetch_add(&g_self_calls, 1);
}

static void free_self_handler(struct psl_kv_server *s, struct psl_kv_request *req, void *arg)
{
	(void)arg;
	psl_kv_server_free(s);
	assert_int_equal(psl_kv_respond(req, NULL), 0);
	atomic_fetch_add(&g_self_calls, 1);
}

static void *reply_first(void *arg)
{
	reply(arg, 0, 0, NULL, NULL);
	return NULL;
}

static void *deliver_request(void *arg)
{
	struct psl__meta m;
	uint64_t key = 42;
	const void *d[2] = {&key, arg};
	size_t l[2] = {8, 2};
	request_meta(&m, 5, true);
	m.val_len = 2;
	deliver(9, &m, 2, d, l);
	return NULL;
}

/* runs fn(arg) on a thread: true once one more callback returned (3 s) */
static bool callback_returns(void *(*fn)(void *), void *arg)
{
	pthread_t th;
	int i, before = atomic_load(&g_self_calls);
	assert_int_equal(pthread_create(&th, NULL, fn, arg), 0);
	for (i = 0; i < 300 && atomic_load(&g_self_calls) == before; i++)
		usleep(10000);
	if (atomic_load(&g_self_calls) == before)
		return false; /* (the thread is left blocked) */
	pthread_join(th, NULL);
	return true;
}

static void test_free_in_callback(void **state)
{
	uint64_t key = 3;
	uint8_t v[2] = {1, 2};
	struct psl_kv kv = {&key, 1, v, 1, NULL, PSL_MEM_HOST, 0};
	struct capture c;
	char *log;
	bool returned;
	int ts;
	(void)state;

	node_up(1);
	assert_int_equal(psl_kv_worker_new(0, 0, PSL_UINT8, &g_self_w), 0);
	ts = psl_kv_push(g_self_w, &kv, 0, free_self_cb, NULL);
	assert_true(ts >= 0);
	capture_start(&c);
	returned = callback_returns(reply_first, (void *)&g_sent[0]);
	log = capture_end(&c);
	if (!returned)
		fprintf(stderr, "%s", log);
	assert_true(returned);
	assert_non_null(strstr(log, "psl_kv_worker_free from one of its own callbacks"));
	assert_non_null(strstr(log, "it is not freed"));
	free(log);
	assert_int_equal(psl_kv_wait(g_self_w, ts), 0);
	ts = psl_kv_push(g_self_w, &kv, 0, NULL, NULL); /* (still there) */
	assert_true(ts >= 0 && g_nsent == 2);
	reply(&g_sent[1], 0, 0, NULL, NULL);
	assert_int_equal(psl_kv_wait(g_self_w, ts), 0);
	psl_kv_worker_free(g_self_w);
	node_down(NULL);

	node_up_as(PSL_SERVER, 8, 1, 2);
	assert_int_equal(psl_kv_server_new(0, PSL_UINT8, free_self_handler, NULL, &g_self_s), 0);
	capture_start(&c);
	returned = callback_returns(deliver_request, v);
	log = capture_end(&c);
	if (!returned)
		fprintf(stderr, "%s", log);
	assert_true(returned);
	assert_non_null(strstr(log, "psl_kv_server_free from one of its own callbacks"));
	free(log);
	assert_true(callback_returns(deliver_request, v)); /* (it still serves) */
	psl_kv_server_free(g_self_s);
}

/* A late answer never completes a newer request: (a) after a worker whose
 * wait timed out is freed, a new one with the same ids numbers its requests
 * after the old one's, so the old request's late error answer is dropped
 * and the new request gets its own; (b) when timestamps come round again
 * (2^30 requests), one still pending keeps its own. */
static void test_no_stale_answer(void **state)
{
	struct psl_kv_worker *w;
	struct psl__customer *c;
	uint64_t key = 3;
	uint8_t v = 1;
	struct psl_kv kv = {&key, 1, &v, 1, NULL, PSL_MEM_HOST, 0};
	int ts1, ts2;
	(void)state;

	node_up(1);
	assert_int_equal(psl_kv_worker_new(0, 0, PSL_UINT8, &w), 0);
	assert_int_equal(psl_kv_worker_set_timeout(w, 0), 0);
	ts1 = psl_kv_push(w, &kv, 0, NULL, NULL);
	assert_int_equal(psl_kv_wait_timeout(w, ts1, 10), -ETIMEDOUT);
	psl_kv_worker_free(w); /* cancels it */
	assert_int_equal(psl_kv_worker_new(0, 0, PSL_UINT8, &w), 0);
	ts2 = psl_kv_push(w, &kv, 0, NULL, NULL);
	assert_int_equal(g_nsent, 2);
	assert_int_not_equal(ts2, ts1);
	reply(&g_sent[0], -EIO, 0, NULL, NULL); /* the late answer to ts1 */
	assert_int_equal(psl_kv_wait_timeout(w, ts2, 0), -ETIMEDOUT);
	reply(&g_sent[1], 0, 0, NULL, NULL);
	assert_int_equal(psl_kv_wait(w, ts2), 0);

	/* (b): ts2 + 1 still pending when the numbering comes round to it */
	ts1 = psl_kv_push(w, &kv, 0, NULL, NULL);
	assert_int_equal(psl_kv_wait_timeout(w, ts1, 0), -ETIMEDOUT);
	c = &w->c;
	pthread_mutex_lock(&c->mu);
	c->next_ts = ts1;
	pthread_mutex_unlock(&c->mu);
	ts2 = psl_kv_push(w, &kv, 0, NULL, NULL);
	assert_int_equal(ts2, ts1 + 1);
	reply(&g_sent[3], 0, 0, NULL, NULL);
	assert_int_equal(psl_kv_wait(w, ts2), 0);
	assert_int_equal(psl_kv_wait_timeout(w, ts1, 0), -ETIMEDOUT);
	reply(&g_sent[2], 0, 0, NULL, NULL);
	assert_int_equal(psl_kv_wait(w, ts1), 0);
	psl_kv_worker_free(w);
}

/* ------------------------------------------------- STEPMESH_BIND_CPU_CORE -- */

struct bind_probe {
	int cpu_count, on_cpu;
};

/* A van thread: delivers a message, then reads its own CPU set. */
static void *deliver_and_probe(void *arg)
{
	struct bind_probe *p = arg;
	static const uint8_t junk[3] = {1, 2, 3}; /* a malformed meta: dropped */
	cpu_set_t set;
	deliver_raw(8, junk, sizeof(junk), 0, NULL, NULL);
	CPU_ZERO(&set);
	pthread_getaffinity_np(pthread_self(), sizeof(set), &set);
	p->cpu_count = CPU_COUNT(&set);
	p->on_cpu = CPU_ISSET(psl__po.cfg.bind_cpu, &set);
	return NULL;
}

/* The thread that delivers the van's messages is bound to cfg.bind_cpu
 * (STEPMESH_BIND_CPU_CORE); a CPU the machine lacks is one WARN, and the
 * thread stays as it was. */
static void test_bind_receive_thread(void **state)
{
	struct bind_probe p = {0, 0};
	pthread_t th;
	struct capture cap;
	char *log;
	(void)state;

	node_up(1);
	psl__po.cfg.bind = true;
	psl__po.cfg.bind_cpu = sysconf(_SC_NPROCESSORS_ONLN) > 1 ? 1 : 0;
	capture_start(&cap);
	assert_int_equal(pthread_create(&th, NULL, deliver_and_probe, &p), 0);
	pthread_join(th, NULL);
	log = capture_end(&cap);
	assert_int_equal(p.cpu_count, 1);
	assert_true(p.on_cpu);
	assert_non_null(strstr(log, "receive thread is bound to CPU"));
	free(log);

	psl__po.cfg.bind_cpu = 4000; /* no such CPU here */
	capture_start(&cap);
	assert_int_equal(pthread_create(&th, NULL, deliver_and_probe, &p), 0);
	pthread_join(th, NULL);
	log = capture_end(&cap);
	assert_true(p.cpu_count > 1 || sysconf(_SC_NPROCESSORS_ONLN) == 1);
	assert_non_null(strstr(log, "cannot bind the van's receive thread to CPU 4000"));
	free(log);
	psl__po.cfg.bind_cpu = -1;
	psl__po.cfg.bind = false;
}

/* A rejected call's reason is the caller's (psl_last_error), with the text
 * of the WARN line, and a later call starts afresh (issue 26, case 4). */
static void test_last_error(void **state)
{
	struct psl_kv_worker *w, *w2;
	uint64_t keys[2] = {9, 3};
	uint8_t v[4] = {1, 2, 3, 4}; /* room for the 3 values of the bad call */
	struct psl_kv kv = {keys, 2, v, 2, NULL, PSL_MEM_HOST, 0};
	(void)state;

	node_up(1);
	assert_int_equal(psl_kv_worker_new(0, 0, PSL_UINT8, &w), 0);
	assert_int_equal(psl_kv_push(w, &kv, 0, NULL, NULL), -EINVAL);
	assert_non_null(strstr(psl_last_error(), "keys must be sorted ascending, but key[0]=9"));
	kv.num_vals = 3;
	keys[0] = 1;
	assert_int_equal(psl_kv_push(w, &kv, 0, NULL, NULL), -EINVAL);
	assert_non_null(strstr(psl_last_error(), "3 values for 2 keys"));
	kv.num_vals = 2;
	g_nsent = 0;
	assert_int_equal(psl_kv_push(w, &kv, 0, NULL, NULL), 0);
	assert_string_equal(psl_last_error(), "");
	assert_int_equal(g_nsent, 1);
	reply(&g_sent[0], 0, 0, NULL, NULL);
	assert_int_equal(psl_kv_wait(w, 0), 0);
	assert_int_equal(psl_kv_worker_new(0, 0, PSL_UINT8, &w2), -EEXIST);
	assert_non_null(strstr(psl_last_error(), "app 0 customer 0 already exists"));
	assert_null(strstr(psl_strerror(-EPROTO), "another van"));
	psl_kv_worker_free(w);
}

/* server, batch server, store, SimpleApp, barrier and query calls that fail
 * leave the reason as psl_last_error(), and a call that succeeds empties it */
static void test_last_error_server(void **state)
{
	struct psl_kv_server *srv;
	struct psl_kv_batch_server *bs;
	struct psl_kv_store *st;
	struct psl_simple_app *app;
	uint64_t b, e;
	(void)state;

	node_up_as(PSL_SERVER, 8, 1, 1);
	assert_int_equal(psl_kv_server_new(0, PSL_FLOAT32, NULL, NULL, &srv), -EINVAL);
	assert_string_equal(psl_last_error(), "psl_kv_server_new: handler is NULL");
	assert_int_equal(psl_kv_server_new(0, PSL_FLOAT32, keep_handler, NULL, &srv), 0);
	assert_string_equal(psl_last_error(), "");
	assert_int_equal(psl_kv_server_new(0, PSL_FLOAT32, keep_handler, NULL, &srv), -EEXIST);
	assert_non_null(strstr(psl_last_error(), "app 0 already has a server on this node"));
	assert_int_equal(psl_kv_server_recv_buffer(srv, -1, 1, &b, 8, PSL_MEM_HOST, -1), -EINVAL);
	assert_non_null(strstr(psl_last_error(), "worker_rank is negative"));
	assert_int_equal(psl_kv_server_recv_buffer(srv, 0, 1, &b, 8, 7, -1), -EINVAL);
	assert_non_null(strstr(psl_last_error(), "memory type 7 is neither PSL_MEM_HOST"));
	psl_kv_server_free(srv);

	assert_int_equal(psl_kv_store_new(1, PSL_FLOAT32, 9, &st), -EINVAL);
	assert_non_null(strstr(psl_last_error(), "mode is neither PSL_KV_STORE_SUM"));
	assert_int_equal(psl_kv_batch_server_new(2, PSL_FLOAT32, PSL_KV_BATCH_MAX + 1, NULL, NULL,
						 &bs), -EINVAL);
	assert_non_null(strstr(psl_last_error(), "max_tensors is above PSL_KV_BATCH_MAX"));
	assert_int_equal(psl_kv_batch_server_new(2, PSL_FLOAT32, 0, NULL, NULL, &bs), 0);
	assert_int_equal(psl_kv_batch_respond(bs, 77, NULL, 0), -ENOENT);
	assert_non_null(strstr(psl_last_error(), "answer to batch 77, which is not held here"));
	assert_int_equal(psl_kv_batch_next(bs, 0, NULL), -EINVAL);
	assert_string_equal(psl_last_error(), "psl_kv_batch_next: req is NULL");
	psl_kv_batch_server_free(bs);

	assert_int_equal(psl_simple_app_new(3, 0, NULL, NULL, NULL, &app), 0);
	assert_int_equal(psl_simple_request(app, 0, NULL, 0, 40000), -EINVAL);
	assert_non_null(strstr(psl_last_error(), "recv_id 40000 is neither a node group"));
	assert_int_equal(psl_simple_wait(app, -2), -EINVAL);
	assert_non_null(strstr(psl_last_error(), "ts -2 is negative"));
	psl_simple_app_free(app);

	assert_int_equal(psl_barrier(0, 9), -EINVAL);
	assert_non_null(strstr(psl_last_error(), "group 9 is no node group"));
	assert_int_equal(psl_server_key_range(3, &b, &e), -EINVAL);
	assert_string_equal(psl_last_error(), "psl_server_key_range: rank 3: this job has servers "
					      "0 to 0");
	assert_int_equal(psl_server_key_range(0, &b, &e), 0);
	assert_string_equal(psl_last_error(), "");
}

/* A zero-copy request completes only once the van let go of its buffers
 * (each send's send_done), even when it failed before (its deadline); a
 * copying request does not wait for the van. */
static void test_zero_copy_waits_for_van(void **state)
{
	struct psl_kv_worker *w;
	uint64_t keys[2], e;
	uint8_t v[2] = {1, 2};
	struct psl_kv kv = {keys, 2, v, 2, NULL, PSL_MEM_HOST, 0};
	struct capture c;
	int tz, tc;
	(void)state;

	node_up(2);
	memset(g_cb_calls, 0, sizeof(g_cb_calls));
	psl_server_key_range(0, &keys[0], &e);
	psl_server_key_range(1, &keys[1], &e);
	assert_int_equal(psl_kv_worker_new(0, 0, PSL_UINT8, &w), 0);
	assert_int_equal(psl_kv_worker_set_timeout(w, 1000), 0);
	g_hold_done = true;
	tz = psl_kv_zpush(w, &kv, 0, count_cb, NULL); /* cookies 0, 1 */
	tc = psl_kv_push(w, &kv, 0, count_cb, NULL);  /* cookies 2, 3 */
	assert_true(tz >= 0 && tc >= 0);
	assert_int_equal(g_ncookie, 4);
	capture_start(&c);
	psl__customers_tick(psl__cur, psl__now_ms() + 1100);
	free(capture_end(&c));
	assert_int_equal(g_cb_calls[tc], 1);
	assert_int_equal(g_cb_status[tc], -ETIMEDOUT);
	assert_int_equal(g_cb_calls[tz], 0); /* the van still holds its buffers */
	assert_int_equal(psl_kv_wait_timeout(w, tz, 0), -ETIMEDOUT);
	done_one(0, 0);
	assert_int_equal(g_cb_calls[tz], 0);
	done_one(1, -ECONNRESET);
	assert_int_equal(g_cb_calls[tz], 1);
	assert_int_equal(g_cb_status[tz], -ETIMEDOUT);
	assert_int_equal(psl_kv_wait(w, tz), -ETIMEDOUT);
	done_one(2, 0);
	done_one(3, 0);
	psl_kv_worker_free(w);
}

#define T(f) cmocka_unit_test_teardown(f, node_down)

int main(void)
{
	const struct CMUnitTest tests[] = {
		T(test_many_in_flight),	    T(test_pushpull),
		T(test_node_lost), T(test_send_races_loss), T(test_resend_before_node_list), T(test_seen_window),	    T(test_fail_all_while_sending),
		T(test_pull_in_place),	    T(test_server_held_request),
		T(test_server_frame_checks), T(test_server_responses),
		T(test_simple_app),	    T(test_held_bound),
		T(test_bind_receive_thread), T(test_held_fails_back),
		T(test_worker_gets_enxio),  T(test_request_deadline),
		T(test_free_cancels),	    T(test_free_in_callback),
		T(test_batch_tensor_desc),
		T(test_store),		T(test_last_error),
		T(test_last_error_server),  T(test_no_stale_answer),
		T(test_zero_copy_waits_for_van),
	};
	return cmocka_run_group_tests_name("kv", tests, NULL, NULL);
}
