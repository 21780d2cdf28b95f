#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "clock.h"
#include "customer.h"
#include "kv.h"
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
	int64_t since; /* psl__now_ms() when held */
	bool warned;
	struct held *next;
};

/* bounds on what is held: messages, and bytes (meta and data) */
#define HELD_MAX 65536
#define HELD_MAX_BYTES ((size_t)1 << 30)

static pthread_mutex_t reg_mu = PTHREAD_MUTEX_INITIALIZER;
/* signalled when a customer's last dispatch in progress returns */
static pthread_cond_t reg_cv = PTHREAD_COND_INITIALIZER;
/* each node's customers and held messages, under reg_mu */
static struct registry {
	struct psl__customer *customers;
	struct held *held_head;
	struct held **held_tail;
	int nheld;
	size_t held_bytes;
	/* where a new customer's timestamps start: after those of every
	 * customer removed from this node (ts_resume) */
	int ts_next;
} registries[PSL__OFFICES]; /* (held_tail NULL: the list is empty) */
/* the current node's */
#define R (registries[o - psl__offices])

/* the customer whose on_msg this thread runs (its callbacks, its handler) */
static __thread const struct psl__customer *dispatching_here;

/* the registry of the node c belongs to */
static struct registry *reg_of(const struct psl__customer *c)
{
	return &registries[c->office - psl__offices];
}

static int lookup_cid(struct psl__office *o, const struct psl__meta *m)
{
	/* as ps-lite: workers route by (app, customer), others by (app, app) */
	return o->role == PSL_WORKER ? m->customer_id : m->app_id;
}

static void drain(struct psl__office *o, struct psl__customer *c);

static struct psl__customer *find_locked(struct psl__office *o, int app_id, int cid)
{
	struct psl__customer *c;
	for (c = R.customers; c; c = c->next)
		if (c->app_id == app_id && c->customer_id == cid)
			return c;
	return NULL;
}

int psl__customer_init(struct psl__office *o, struct psl__customer *c, int app_id, int customer_id,
		       const struct psl__customer_ops *ops)
{
	memset(c, 0, sizeof(*c));
	c->office = o;
	if (o->max_id <= 0)
		return -EAGAIN;
	c->app_id = app_id;
	c->customer_id = customer_id;
	c->ops = ops;
	if (psl__tracker_init(c, psl__node_index(o->max_id) + 1))
		return -ENOMEM;
	pthread_mutex_lock(&reg_mu);
	c->next_ts = R.ts_next;
	pthread_mutex_unlock(&reg_mu);
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
	struct psl__office *o = c->office;
	psl__enter(o); /* (held messages are delivered for its node) */
	pthread_mutex_lock(&reg_mu);
	if (find_locked(o, c->app_id, c->customer_id)) {
		pthread_mutex_unlock(&reg_mu);
		return -EEXIST;
	}
	pthread_mutex_unlock(&reg_mu);
	/* delivers what was held, then links c in under the same lock that
	 * decides whether a new message is held, so nothing is reordered */
	deliver_held(c);
	return 0;
}

/* With reg_mu held, c being removed: a later customer of this node (the
 * same app and customer id, say) numbers its requests after c's, so that a
 * late answer to a request c gave up on (held while no customer is there,
 * or delivered to the new one) finds no request of the new one with its
 * timestamp. (Timestamps wrap after 2^30 requests; the tracker skips one
 * still in flight, psl__req_new_locked.) */
static void ts_resume(const struct psl__customer *c)
{
	struct registry *g = reg_of(c);
	if (c->next_ts > g->ts_next)
		g->ts_next = c->next_ts;
}

bool psl__customer_in_own_callback(const struct psl__customer *c, bool after_thread,
				   const char *call)
{
	if (dispatching_here != c && !after_thread)
		return false;
	PSL_ERR("%s from one of its own callbacks or its handler (on a pslite %s thread, "
		"which still uses it): it is not freed; free it from another thread (the one "
		"that made it) once its requests are done",
		call, after_thread ? "CUDA" : "receive");
	return true;
}

void psl__customer_remove(struct psl__office *o, struct psl__customer *c)
{
	struct psl__customer **pp;

	/* wait while c is still registered: the answers (or the node-lost
	 * failures, or their deadlines) its outstanding requests wait for must
	 * reach it; those a caller gave up waiting for are cancelled at once */
	drain(o, c);

	pthread_mutex_lock(&reg_mu);
	for (pp = &reg_of(c)->customers; *pp; pp = &(*pp)->next) {
		if (*pp == c) {
			*pp = c->next;
			break;
		}
	}
	/* a receive thread that found c before it was unlinked (a late answer
	 * to a cancelled request) may still be in its on_msg */
	while (c->dispatching > 0)
		pthread_cond_wait(&reg_cv, &reg_mu);
	ts_resume(c);
	pthread_mutex_unlock(&reg_mu);
	psl__tracker_free(c);
	pthread_mutex_destroy(&c->mu);
	pthread_cond_destroy(&c->cv);
}

int psl__customer_recv_dest(struct psl__office *o, const struct psl__meta *m, uint32_t seg,
			    size_t len, struct psl_van_dest *dest)
{
	struct psl__customer *c;
	int rc = -ENOENT;

	pthread_mutex_lock(&reg_mu); /* c cannot be removed meanwhile */
	c = find_locked(o, m->app_id, lookup_cid(o, m));
	if (c && c->ops->recv_dest)
		rc = c->ops->recv_dest(c, m, seg, len, dest);
	pthread_mutex_unlock(&reg_mu);
	return rc;
}

void psl__customer_dispatch(struct psl__office *o, struct psl__meta *m, struct psl_van_rmsg *raw)
{
	struct psl__customer *c;
	struct held *h, *drop = NULL, **dtail = &drop;
	int cid = lookup_cid(o, m), ndrop = 0;
	uint32_t i;

	pthread_mutex_lock(&reg_mu);
	c = find_locked(o, m->app_id, cid);
	if (c) {
		const struct psl__customer *outer = dispatching_here;
		c->dispatching++;
		pthread_mutex_unlock(&reg_mu);
		dispatching_here = c;
		c->ops->on_msg(c, m, raw);
		dispatching_here = outer;
		pthread_mutex_lock(&reg_mu);
		if (--c->dispatching == 0)
			pthread_cond_broadcast(&reg_cv);
		pthread_mutex_unlock(&reg_mu);
		return;
	}
	if (!m->request) {
		/* a response outlives its customer when that was freed
		 * (requests cancelled), or answers a request this node never
		 * made: nobody can take it */
		pthread_mutex_unlock(&reg_mu);
		PSL_DBG("dropped a response from node %d for app %d customer %d: no such "
			"customer on this node (freed, or never created here)",
			m->sender, m->app_id, cid);
		psl__raw_release(raw);
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
	h->since = psl__now_ms();
	h->warned = false;
	h->next = NULL;
	*(R.held_tail ? R.held_tail : &R.held_head) = h;
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

void psl__customers_finalize(struct psl__office *o)
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

void psl__customer_drop_held(struct psl__office *o)
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
	R.ts_next = 0; /* finalized: no answer of this job comes any more */
	pthread_mutex_unlock(&reg_mu);
	while (h) {
		struct held *n = h->next;
		psl__raw_release(h->raw);
		free(h);
		h = n;
	}
}

/* Requests a sweep completed, to finish outside the locks. */
struct lost_list {
	struct {
		struct psl__customer *c;
		struct psl__req *r;
	} *v;
	size_t n, cap;
};

/* With c->mu held: decides whether r fails now; true when it completed. */
typedef bool (*sweep_fn)(struct psl__customer *c, struct psl__req *r, void *ctx);

static bool list_push(struct lost_list *l, struct psl__customer *c, struct psl__req *r)
{
	if (l->n == l->cap) {
		size_t cap = l->cap ? l->cap * 2 : 64;
		void *nv = realloc(l->v, cap * sizeof(*l->v));
		if (!nv)
			return false;
		l->v = nv;
		l->cap = cap;
	}
	l->v[l->n].c = c;
	l->v[l->n].r = r;
	l->n++;
	return true;
}

static void sweep_customer(struct psl__customer *c, sweep_fn fn, void *ctx, struct lost_list *l)
{
	uint32_t i;

	pthread_mutex_lock(&c->mu);
	for (i = 0; i < c->cap; i++) {
		struct psl__req *r = c->ring[i];
		if (!r || r->state != PSL__REQ_PENDING || !fn(c, r, ctx))
			continue;
		if (!list_push(l, c, r))
			r->state = PSL__REQ_PENDING; /* cannot record it: leave it pending */
	}
	pthread_mutex_unlock(&c->mu);
}

static void list_finish(struct lost_list *l)
{
	size_t i;
	for (i = 0; i < l->n; i++)
		psl__req_finish(l->v[i].c, l->v[i].r);
	free(l->v);
}

struct node_lost {
	int id, err;
};

static bool lost_one(struct psl__customer *c, struct psl__req *r, void *ctx)
{
	struct node_lost *nl = ctx;
	if (nl->id > 0)
		return psl__req_answer_locked(c, r, nl->id, nl->err);
	return psl__req_fail_locked(c, r, nl->err); /* every request: shutting down */
}

void psl__customers_node_lost(struct psl__office *o, int id, int err)
{
	struct node_lost nl = {id, err};
	struct lost_list l = {0};
	struct psl__customer *c;

	pthread_mutex_lock(&reg_mu);
	for (c = R.customers; c; c = c->next)
		sweep_customer(c, lost_one, &nl, &l);
	pthread_mutex_unlock(&reg_mu);
	list_finish(&l);
}

/* Requests past their deadline, per customer. */
struct expiry {
	int64_t now;
	int n, ts, node;
};

static bool expire_one(struct psl__customer *c, struct psl__req *r, void *ctx)
{
	struct expiry *e = ctx;
	if (!r->deadline || e->now < r->deadline)
		return false;
	r->deadline = 0; /* once */
	if (!e->n++) {
		e->ts = r->ts;
		e->node = psl__req_first_owing_locked(c, r);
	}
	return psl__req_fail_locked(c, r, -ETIMEDOUT);
}

static void expire_customer(struct psl__office *o, struct psl__customer *c, int64_t now,
			    struct lost_list *l)
{
	struct expiry e = {.now = now};
	char d[96];

	sweep_customer(c, expire_one, &e, l);
	if (!e.n)
		return;
	if (e.node)
		psl__node_desc(o, e.node, d, sizeof(d));
	else
		snprintf(d, sizeof(d), "the van (its buffers are still lent)");
	PSL_WARN("request %d of app %d customer %d%s got no answer from %s within %d ms: %s "
		 "with ETIMEDOUT; a slow handler needs a longer deadline "
		 "(psl_kv_worker_set_timeout, PS_REQUEST_TIMEOUT in seconds)",
		 e.ts, c->app_id, c->customer_id, e.n > 1 ? " (and others)" : "", d,
		 c->timeout_ms, e.n > 1 ? "they fail" : "it fails");
}

static void expire_requests(struct psl__office *o, int64_t now)
{
	struct lost_list l = {0};
	struct psl__customer *c;

	pthread_mutex_lock(&reg_mu);
	for (c = R.customers; c; c = c->next)
		expire_customer(o, c, now, &l);
	pthread_mutex_unlock(&reg_mu);
	list_finish(&l);
}

static bool cancel_given_up(struct psl__customer *c, struct psl__req *r, void *ctx)
{
	(void)ctx;
	return r->gave_up && psl__req_fail_locked(c, r, -ECANCELED);
}

/* With c->mu held: waits at most a second on c->cv (monotonic clock). */
static void wait_1s_locked(struct psl__customer *c)
{
	struct timespec dl;
	clock_gettime(CLOCK_MONOTONIC, &dl);
	dl.tv_sec += 1;
	pthread_cond_timedwait(&c->cv, &c->mu, &dl);
}

/* Waits for c's outstanding requests: those a caller gave up on are
 * cancelled, the others end by their answer or their deadline. */
static void drain(struct psl__office *o, struct psl__customer *c)
{
	bool told = false;

	for (;;) {
		struct lost_list l = {0};
		int pending;

		sweep_customer(c, cancel_given_up, NULL, &l);
		expire_customer(o, c, psl__now_ms(), &l);
		list_finish(&l);
		pthread_mutex_lock(&c->mu);
		if (c->pending > 0)
			wait_1s_locked(c);
		pending = c->pending;
		pthread_mutex_unlock(&c->mu);
		if (!pending)
			return;
		if (!told)
			PSL_WARN("freeing app %d customer %d: waiting for %d outstanding "
				 "request(s) (%s)",
				 c->app_id, c->customer_id, pending,
				 c->timeout_ms > 0 ? "at most until their deadline"
						   : "no deadline: set one with "
						     "psl_kv_worker_set_timeout or PS_REQUEST_TIMEOUT");
		told = true;
	}
}

/* ----------------------------------------- messages held too long -- */

/* With reg_mu held: the app ids of this node's customers, for messages. */
static void apps_locked(struct psl__office *o, char *buf, size_t len)
{
	struct psl__customer *c;
	size_t off = 0;

	buf[0] = 0;
	for (c = R.customers; c && off + 16 < len; c = c->next)
		off += (size_t)snprintf(buf + off, len - off, "%s%d", off ? ", " : "", c->app_id);
	if (!off)
		snprintf(buf, len, "none");
}

static const char *held_what(struct psl__office *o, const struct held *h)
{
	if (h->m.simple_app)
		return "SimpleApp";
	return o->role == PSL_SERVER ? "KV server" : "customer";
}

/* With reg_mu held: warns once of messages held for warn_ms or more. */
static void held_warn_locked(struct psl__office *o, int64_t now, int64_t warn_ms, int timeout_s)
{
	struct held *h, *first = NULL;
	char apps[128], d[96];
	int n = 0;

	for (h = R.held_head; h; h = h->next) {
		if (h->warned || now - h->since < warn_ms)
			continue;
		h->warned = true;
		if (!n++)
			first = h;
	}
	if (!first)
		return;
	apps_locked(o, apps, sizeof(apps));
	PSL_WARN("holding %d message(s) since %lld ms, the first from %s for app %d customer %d: "
		 "this node has no %s for app %d (its customers' apps: %s); create a KV server "
		 "for app %d on this node (psl_kv_server_new) or use the app id it has%s",
		 n, (long long)(now - first->since), psl__node_desc(o, first->m.sender, d, sizeof(d)),
		 first->m.app_id, first->m.customer_id, held_what(o, first), first->m.app_id, apps,
		 first->m.app_id, timeout_s > 0 ? "; requests held for PS_HELD_TIMEOUT fail back "
						  "to their sender" : "");
}

/* With reg_mu held: unlinks what was held for at least ms onto *out. */
static int held_expire_locked(struct psl__office *o, int64_t now, int64_t ms, struct held **out)
{
	struct held **pp = &R.held_head, *h, **tail = out;
	int n = 0;

	while ((h = *pp)) {
		if (now - h->since < ms) {
			pp = &h->next;
			continue;
		}
		*pp = h->next;
		R.nheld--;
		R.held_bytes -= h->bytes;
		h->next = NULL;
		*tail = h;
		tail = &h->next;
		n++;
	}
	R.held_tail = &R.held_head;
	for (h = R.held_head; h; h = h->next)
		R.held_tail = &h->next;
	return n;
}

/* Answers a KV request that found no customer with an error (docs/wire.md
 * §10.5): its sender's request fails with -ENXIO. */
static void held_fail_back(struct psl__office *o, const struct held *h)
{
	struct psl_kv_meta rm;
	struct psl__meta m;
	char d[96];

	psl__node_desc(o, h->m.sender, d, sizeof(d));
	if (!h->m.request || h->m.simple_app) {
		PSL_WARN("dropped a %s from %s for app %d customer %d: held %d s (PS_HELD_TIMEOUT) "
			 "and no such customer was created on this node",
			 h->m.simple_app ? "SimpleApp message" : "response", d, h->m.app_id,
			 h->m.customer_id, o->cfg.held_timeout_s);
		return;
	}
	PSL_WARN("request %d from %s for app %d fails with ENXIO: held %d s (PS_HELD_TIMEOUT) "
		 "and this node has no KV server for app %d; create a KV server for app %d on "
		 "this node (psl_kv_server_new) or use the app id it has",
		 h->m.timestamp, d, h->m.app_id, o->cfg.held_timeout_s, h->m.app_id,
		 h->m.app_id);
	rm = psl__kv_meta_of(&h->m);
	psl__kv_response_meta(&m, &rm, h->m.app_id, h->m.sid, h->m.sender);
	psl__kv_error_meta(&m, -ENXIO);
	psl__send(o, &m, NULL, 0, NULL);
}

static void held_tick(struct psl__office *o, int64_t now)
{
	int timeout_s = o->cfg.held_timeout_s;
	int64_t warn_ms = 5000;
	struct held *list = NULL, *h;

	if (timeout_s > 0 && timeout_s * 1000 / 2 < warn_ms)
		warn_ms = timeout_s * 1000 / 2;
	pthread_mutex_lock(&reg_mu);
	if (!R.held_head) {
		pthread_mutex_unlock(&reg_mu);
		return;
	}
	held_warn_locked(o, now, warn_ms, timeout_s);
	if (timeout_s > 0)
		held_expire_locked(o, now, (int64_t)timeout_s * 1000, &list);
	pthread_mutex_unlock(&reg_mu);
	while ((h = list)) {
		list = h->next;
		held_fail_back(o, h);
		psl__raw_release(h->raw);
		free(h);
	}
}

void psl__customers_tick(struct psl__office *o, int64_t now)
{
	expire_requests(o, now);
	held_tick(o, now);
}

int psl__customers_period_ms(struct psl__office *o, int period)
{
	struct psl__customer *c;
	pthread_mutex_lock(&reg_mu);
	for (c = R.customers; c; c = c->next) {
		int t;
		pthread_mutex_lock(&c->mu);
		t = c->timeout_ms / 4;
		pthread_mutex_unlock(&c->mu);
		if (c->timeout_ms > 0 && t < period)
			period = t > 10 ? t : 10;
	}
	pthread_mutex_unlock(&reg_mu);
	return period;
}
