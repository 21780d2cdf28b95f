#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "customer.h"
#include "log.h"
#include "postoffice.h"
#include "van_host.h"

/* Messages that arrived before their customer existed (ps-lite aborted or
 * waited 5 s here; pslite holds them, bounded). */
struct held {
	struct psl__meta m;
	struct psl_van_rmsg *raw;
	int cid;
	size_t bytes;
	struct held *next;
};

/* bounds on what is held: messages, and bytes (meta and data) */
#define HELD_MAX 65536
#define HELD_MAX_BYTES ((size_t)1 << 30)

static pthread_mutex_t reg_mu = PTHREAD_MUTEX_INITIALIZER;
/* each node's customers and held messages, under reg_mu */
static struct registry {
	struct psl__customer *customers;
	struct held *held_head;
	struct held **held_tail;
	int nheld;
	size_t held_bytes;
} registries[PSL__OFFICES] = {
	{.held_tail = &registries[0].held_head},
	{.held_tail = &registries[1].held_head},
};
/* the current node's */
#define R (registries[psl__slot()])

/* the registry of the node c belongs to */
static struct registry *reg_of(const struct psl__customer *c)
{
	return &registries[c->office - psl__offices];
}

static int lookup_cid(const struct psl__meta *m)
{
	/* as ps-lite: workers route by (app, customer), others by (app, app) */
	return psl__po.role == PSL_WORKER ? m->customer_id : m->app_id;
}

static struct psl__customer *find_locked(int app_id, int cid)
{
	struct psl__customer *c;
	for (c = R.customers; c; c = c->next)
		if (c->app_id == app_id && c->customer_id == cid)
			return c;
	return NULL;
}

int psl__customer_init(struct psl__customer *c, int app_id, int customer_id,
		       const struct psl__customer_ops *ops)
{
	memset(c, 0, sizeof(*c));
	c->office = psl__cur;
	if (psl__po.max_id <= 0)
		return -EAGAIN;
	c->app_id = app_id;
	c->customer_id = customer_id;
	c->ops = ops;
	if (psl__tracker_init(c, psl__node_index(psl__po.max_id) + 1))
		return -ENOMEM;
	pthread_mutex_init(&c->mu, NULL);
	{
		/* on the monotonic clock: psl_kv_wait_timeout's deadlines */
		pthread_condattr_t a;
		pthread_condattr_init(&a);
		pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
		pthread_cond_init(&c->cv, &a);
		pthread_condattr_destroy(&a);
	}
	return 0;
}

static void deliver_held(struct psl__customer *c)
{
	struct registry *g = reg_of(c);
	for (;;) {
		struct held *list = NULL, **tail = &list, **pp, *h;

		pthread_mutex_lock(&reg_mu);
		for (pp = &g->held_head; *pp;) {
			h = *pp;
			if (h->m.app_id == c->app_id && h->cid == c->customer_id) {
				*pp = h->next;
				h->next = NULL;
				*tail = h;
				tail = &h->next;
				g->nheld--;
				g->held_bytes -= h->bytes;
			} else {
				pp = &h->next;
			}
		}
		g->held_tail = &g->held_head;
		for (h = g->held_head; h; h = h->next)
			g->held_tail = &h->next;
		if (!list) {
			c->next = g->customers;
			g->customers = c;
			pthread_mutex_unlock(&reg_mu);
			return;
		}
		pthread_mutex_unlock(&reg_mu);
		while (list) {
			h = list;
			list = h->next;
			c->ops->on_msg(c, &h->m, h->raw);
			free(h);
		}
	}
}

int psl__customer_add(struct psl__customer *c)
{
	psl__enter(c->office); /* (held messages are delivered for its node) */
	pthread_mutex_lock(&reg_mu);
	if (find_locked(c->app_id, c->customer_id)) {
		pthread_mutex_unlock(&reg_mu);
		return -EEXIST;
	}
	pthread_mutex_unlock(&reg_mu);
	/* delivers what was held, then links c in under the same lock that
	 * decides whether a new message is held, so nothing is reordered */
	deliver_held(c);
	return 0;
}

void psl__customer_remove(struct psl__customer *c)
{
	struct psl__customer **pp;

	/* wait while c is still registered: the answers (or the node-lost
	 * failures) its outstanding requests wait for must reach it */
	pthread_mutex_lock(&c->mu);
	while (c->pending > 0)
		pthread_cond_wait(&c->cv, &c->mu);
	pthread_mutex_unlock(&c->mu);

	pthread_mutex_lock(&reg_mu);
	for (pp = &reg_of(c)->customers; *pp; pp = &(*pp)->next) {
		if (*pp == c) {
			*pp = c->next;
			break;
		}
	}
	pthread_mutex_unlock(&reg_mu);
	psl__tracker_free(c);
	pthread_mutex_destroy(&c->mu);
	pthread_cond_destroy(&c->cv);
}

int psl__customer_recv_dest(const struct psl__meta *m, uint32_t seg, size_t len,
			    struct psl_van_dest *dest)
{
	struct psl__customer *c;
	int rc = -ENOENT;

	pthread_mutex_lock(&reg_mu); /* c cannot be removed meanwhile */
	c = find_locked(m->app_id, lookup_cid(m));
	if (c && c->ops->recv_dest)
		rc = c->ops->recv_dest(c, m, seg, len, dest);
	pthread_mutex_unlock(&reg_mu);
	return rc;
}

void psl__customer_dispatch(struct psl__meta *m, struct psl_van_rmsg *raw)
{
	struct psl__customer *c;
	struct held *h, *drop = NULL, **dtail = &drop;
	int cid = lookup_cid(m), ndrop = 0;
	uint32_t i;

	pthread_mutex_lock(&reg_mu);
	c = find_locked(m->app_id, cid);
	if (c) {
		pthread_mutex_unlock(&reg_mu);
		c->ops->on_msg(c, m, raw);
		return;
	}
	h = malloc(sizeof(*h));
	if (!h) {
		pthread_mutex_unlock(&reg_mu);
		PSL_WARN("dropped a message from node %d for app %d: out of memory", m->sender,
			 m->app_id);
		psl__raw_release(raw);
		return;
	}
	h->m = *m;
	h->m.nodes = NULL;
	h->m.node_size = 0;
	h->raw = raw;
	h->cid = cid;
	h->bytes = raw->meta_len;
	for (i = 0; i < raw->nseg; i++)
		h->bytes += raw->segs[i].len;
	h->next = NULL;
	*R.held_tail = h;
	R.held_tail = &h->next;
	R.nheld++;
	R.held_bytes += h->bytes;
	/* over a bound: drop the oldest (never the one just held) */
	while ((R.nheld > HELD_MAX || R.held_bytes > HELD_MAX_BYTES) && R.held_head != h) {
		struct held *d = R.held_head;
		R.held_head = d->next;
		R.nheld--;
		R.held_bytes -= d->bytes;
		d->next = NULL;
		*dtail = d;
		dtail = &d->next;
		ndrop++;
	}
	pthread_mutex_unlock(&reg_mu);
	PSL_DBG("holding a message from node %d for app %d customer %d: no such customer on "
		"this node yet",
		m->sender, m->app_id, cid);
	if (drop)
		PSL_WARN("dropped %d message(s), the first from node %d for app %d customer %d: "
			 "more than %d messages or %zu MiB are held for customers that do not "
			 "exist on this node",
			 ndrop, drop->m.sender, drop->m.app_id, drop->cid, HELD_MAX,
			 HELD_MAX_BYTES >> 20);
	while (drop) {
		struct held *n = drop->next;
		psl__raw_release(drop->raw);
		free(drop);
		drop = n;
	}
}

void psl__customers_finalize(void)
{
	struct psl__customer *c, **list = NULL;
	size_t n = 0, i;

	pthread_mutex_lock(&reg_mu);
	for (c = R.customers; c; c = c->next)
		if (c->ops->on_finalize)
			n++;
	if (n && (list = malloc(n * sizeof(*list)))) {
		n = 0;
		for (c = R.customers; c; c = c->next)
			if (c->ops->on_finalize)
				list[n++] = c;
	} else {
		n = 0;
	}
	pthread_mutex_unlock(&reg_mu);
	/* outside the lock: the callbacks send */
	for (i = 0; i < n; i++)
		list[i]->ops->on_finalize(list[i]);
	free(list);
}

void psl__customer_drop_held(void)
{
	struct held *h;
	pthread_mutex_lock(&reg_mu);
	h = R.held_head;
	R.held_head = NULL;
	R.held_tail = &R.held_head;
	if (R.nheld)
		PSL_WARN("%d message(s) never found their customer (app id / customer id) on "
			 "this node and were dropped",
			 R.nheld);
	R.nheld = 0;
	R.held_bytes = 0;
	pthread_mutex_unlock(&reg_mu);
	while (h) {
		struct held *n = h->next;
		psl__raw_release(h->raw);
		free(h);
		h = n;
	}
}

struct lost {
	struct psl__customer *c;
	struct psl__req *r;
};

void psl__customers_node_lost(int id, int err)
{
	struct psl__customer *c;
	struct lost *list = NULL;
	size_t n = 0, cap = 0, i;

	pthread_mutex_lock(&reg_mu);
	for (c = R.customers; c; c = c->next) {
		pthread_mutex_lock(&c->mu);
		for (i = 0; i < c->cap; i++) {
			struct psl__req *r = c->ring[i];
			if (!r || r->state != PSL__REQ_PENDING)
				continue;
			if (id > 0 ? !psl__req_answer_locked(c, r, id, err) : false)
				continue;
			if (id <= 0 && !psl__req_fail_locked(c, r, err))
				continue; /* every request: shutting down */
			if (n == cap) {
				struct lost *nl;
				cap = cap ? cap * 2 : 64;
				nl = realloc(list, cap * sizeof(*list));
				if (!nl) {
					/* cannot record it: leave it pending */
					r->state = PSL__REQ_PENDING;
					continue;
				}
				list = nl;
			}
			list[n].c = c;
			list[n].r = r;
			n++;
		}
		pthread_mutex_unlock(&c->mu);
	}
	pthread_mutex_unlock(&reg_mu);
	for (i = 0; i < n; i++)
		psl__req_finish(list[i].c, list[i].r);
	free(list);
}

