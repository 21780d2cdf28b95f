/*
 * A fake van for unit tests that drive the core through its public API: its
 * send records every message (decoded), and messages are fed in through the
 * core's receive callback, as a real van delivers them. Header only; include
 * after cmocka.h, postoffice.h and van_host.h.
 */
#ifndef PSL_FAKEVAN_H
#define PSL_FAKEVAN_H

#include "customer.h"

struct sent {
	int to;
	struct psl__meta m;
	uint8_t *meta;
	uint32_t nseg;
	size_t len[4];
	uint8_t *seg[4];
	int mem[4]; /* the segment's memory type (CUDA ones are copied out) */
};

#define MAX_SENT 1024
static struct sent g_sent[MAX_SENT];
static int g_nsent;
static int g_released, g_delivered;
static int g_fake_van; /* its address is the van instance */
/* called by send after it recorded message g_nsent - 1 (then cleared) */
static void (*g_send_hook)(void);

/* sends of a meta of at least g_fail_len bytes (0: none) fail with
 * g_fail_rc, as a van with a size limit does; g_fail_to (0: any): only
 * those to that node */
static size_t g_fail_len;
static int g_fail_rc, g_fail_to;

/* g_hold_done: send keeps each cookie (g_cookie) instead of calling
 * send_done at once, as a van still sending does; done_one() calls it */
static bool g_hold_done;
static void *g_cookie[MAX_SENT];
static int g_ncookie;

static inline void done_one(int i, int status)
{
	psl__po.host.send_done(psl__po.host.ctx, g_cookie[i], status);
}

static int fake_send(struct psl_van *v, int32_t id, const void *meta, size_t meta_len,
		     const struct psl_van_seg *segs, uint32_t nseg, void *cookie)
{
	struct sent *s;
	char why[128];
	uint32_t i;
	(void)v;
	if (g_fail_len && meta_len >= g_fail_len && (!g_fail_to || g_fail_to == id))
		return g_fail_rc;
	assert_true(g_nsent < MAX_SENT);
	assert_true(nseg <= 4);
	s = &g_sent[g_nsent++];
	memset(s, 0, sizeof(*s));
	s->to = id;
	s->meta = malloc(meta_len);
	memcpy(s->meta, meta, meta_len);
	if (psl__meta_decode(s->meta, meta_len, &s->m, why, sizeof(why)))
		fail_msg("the core sent a meta it cannot decode: %s", why);
	s->nseg = nseg;
	for (i = 0; i < nseg; i++) {
		s->len[i] = segs[i].len;
		s->seg[i] = malloc(segs[i].len ? segs[i].len : 1);
		s->mem[i] = segs[i].mem_type;
		if (segs[i].len && segs[i].mem_type == PSL_MEM_CUDA)
			assert_int_equal(psl_mem_copy(s->seg[i], PSL_MEM_HOST, -1, segs[i].data,
						      PSL_MEM_CUDA, segs[i].dev_id, segs[i].len),
					 0);
		else if (segs[i].len)
			memcpy(s->seg[i], segs[i].data, segs[i].len);
	}
	if (cookie && g_hold_done)
		g_cookie[g_ncookie++] = cookie;
	else if (cookie)
		psl__po.host.send_done(psl__po.host.ctx, cookie, 0);
	if (g_send_hook) {
		void (*hook)(void) = g_send_hook;
		g_send_hook = NULL;
		hook();
	}
	return 0;
}

/* connect calls: peer id and the id this node had then */
static int g_conn_to[64], g_conn_as[64], g_nconn;

static int fake_connect(struct psl_van *v, const struct psl_van_peer *p, int32_t my_id)
{
	(void)v;
	if (g_nconn < 64) {
		g_conn_to[g_nconn] = p->id;
		g_conn_as[g_nconn] = my_id;
	}
	g_nconn++;
	return 0;
}

static const struct psl_van_ops fake_ops = {
	.abi_version = PSL_VAN_ABI_VERSION,
	.size = sizeof(struct psl_van_ops),
	.name = "fake",
	.connect = fake_connect,
	.send = fake_send,
};

static void clear_sent(void)
{
	int i;
	uint32_t k;
	for (i = 0; i < g_nsent; i++) {
		psl__meta_clear(&g_sent[i].m);
		free(g_sent[i].meta);
		for (k = 0; k < g_sent[i].nseg; k++)
			free(g_sent[i].seg[k]);
	}
	g_nsent = 0;
}

/* This node (role, my_id) of a ready job with S servers and W workers. */
static inline void node_up_as(int role, int my_id, int S, int W)
{
	int id;
	psl__po.cfg.num_servers = psl__po.cfg.server_groups = S;
	psl__po.cfg.group_size = 1;
	psl__po.cfg.num_workers = psl__po.cfg.worker_groups = W;
	psl__po.role = role;
	psl__po.my_id = my_id;
	psl__po.my_rank = my_id == 1 ? 0 : (my_id - 8) / 2;
	psl__po.max_id = 7 + 2 * W;
	if (6 + 2 * S > psl__po.max_id)
		psl__po.max_id = 6 + 2 * S;
	psl__po.peers = calloc((size_t)psl__po.max_id + 1, sizeof(*psl__po.peers));
	assert_non_null(psl__po.peers);
	psl__po.peers[1].known = true;
	for (id = 8; id <= psl__po.max_id; id++)
		psl__po.peers[id].known = psl__group_has(psl__cur, PSL_GROUP_SERVERS | PSL_GROUP_WORKERS, id);
	psl__po.lib.ops = &fake_ops;
	psl__po.van = (struct psl_van *)&g_fake_van;
	psl__host_init(psl__cur, &psl__po.host);
	psl__po.state = PSL__READY;
	g_nsent = g_released = g_delivered = g_nconn = 0;
	g_fail_len = 0;
	g_fail_to = 0;
	g_hold_done = false;
	g_ncookie = 0;
}

/* A worker node (id 9) of a job with S servers, ready. */
static inline void node_up(int S)
{
	node_up_as(PSL_WORKER, 9, S, 1);
}

static int node_down(void **state)
{
	(void)state;
	clear_sent();
	psl__po.state = PSL__STOPPED;
	psl__po.lib.ops = NULL;
	psl__po.van = NULL;
	free(psl__po.peers);
	psl__po.peers = NULL;
	psl__po.max_id = 0;
	psl__po.cfg.num_servers = psl__po.cfg.server_groups = 0;
	psl__customer_drop_held(psl__cur); /* as finalize: the next test's timestamps start at 0 */
	assert_int_equal(g_released, g_delivered);
	return 0;
}

/* ------------------------------------------------------ fed-in messages -- */

struct fake_rmsg {
	struct psl_van_rmsg pub;
	struct psl_van_rseg segs[4];
	bool lent[4]; /* the core's own memory (recv_dest): not ours to free */
	void *meta;
};

static void fake_release(struct psl_van_rmsg *pub)
{
	struct fake_rmsg *r = (struct fake_rmsg *)pub;
	uint32_t i;
	for (i = 0; i < pub->nseg; i++)
		if (!r->lent[i])
			free(r->segs[i].data);
	free(r->meta);
	free(r);
	g_released++;
}

/* Delivers raw meta bytes plus segments from sender, as a van would;
 * segment lent (if < nseg) is data[lent] itself, received where the core
 * said (recv_dest), in memory lent_mem of device lent_dev; the others are
 * copies in host memory. */
static void deliver_raw_lent_mem(int sender, const void *meta, size_t meta_len, uint32_t nseg,
				 const void *const *data, const size_t *len, uint32_t lent,
				 int32_t lent_mem, int32_t lent_dev)
{
	struct fake_rmsg *r = calloc(1, sizeof(*r));
	uint32_t i;
	assert_non_null(r);
	r->meta = malloc(meta_len ? meta_len : 1);
	memcpy(r->meta, meta, meta_len);
	for (i = 0; i < nseg; i++) {
		r->lent[i] = i == lent;
		r->segs[i].data = i == lent ? (void *)(uintptr_t)data[i]
					    : malloc(len[i] ? len[i] : 1);
		if (len[i] && i != lent)
			memcpy(r->segs[i].data, data[i], len[i]);
		r->segs[i].len = len[i];
		r->segs[i].mem_type = i == lent ? lent_mem : PSL_MEM_HOST;
		r->segs[i].dev_id = i == lent ? lent_dev : -1;
	}
	r->pub.sender = sender;
	r->pub.nseg = nseg;
	r->pub.meta = r->meta;
	r->pub.meta_len = meta_len;
	r->pub.segs = r->segs;
	r->pub.release = fake_release;
	g_delivered++;
	psl__po.host.recv(psl__po.host.ctx, &r->pub);
}

static void deliver_raw_lent(int sender, const void *meta, size_t meta_len, uint32_t nseg,
			     const void *const *data, const size_t *len, uint32_t lent)
{
	deliver_raw_lent_mem(sender, meta, meta_len, nseg, data, len, lent, PSL_MEM_HOST, -1);
}

static void deliver_raw(int sender, const void *meta, size_t meta_len, uint32_t nseg,
			const void *const *data, const size_t *len)
{
	deliver_raw_lent(sender, meta, meta_len, nseg, data, len, nseg);
}

/* The response meta for sent request s, encoded into buf; its length. */
static inline size_t reply_meta(const struct sent *s, int option, uint8_t *buf)
{
	struct psl__meta m;
	psl__meta_init(&m);
	m.head = s->m.head;
	m.app_id = s->m.app_id;
	m.customer_id = s->m.customer_id;
	m.timestamp = s->m.timestamp;
	m.request = false;
	m.push = s->m.push;
	m.simple_app = s->m.simple_app;
	m.option = option;
	m.key = s->m.key;
	m.src_dev_type = m.dst_dev_type = PSL_DEV_CPU;
	return psl__meta_encode(&m, buf);
}

#endif
