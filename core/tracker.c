/* The request tracker of a customer: a ring of outstanding requests indexed
 * by timestamp, each with a bitmap of the nodes that still owe an answer,
 * holds and loans; completion, waiting, failing. Requests are recycled, so
 * the tracker stays bounded however many requests a job makes. */
#include "config.h"

#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "clock.h"
#include "customer.h"
#include "postoffice.h"

int psl__tracker_init(struct psl__customer *c, int nodes)
{
	c->cap = 64;
	c->nwords = (nodes + 63) / 64;
	c->ring = calloc(c->cap, sizeof(*c->ring));
	return c->ring ? 0 : -ENOMEM;
}

void psl__tracker_free(struct psl__customer *c)
{
	struct psl__req *r;
	uint32_t i;

	for (i = 0; i < c->cap; i++)
		free(c->ring[i]);
	while ((r = c->free_list)) {
		c->free_list = (struct psl__req *)r->priv;
		free(r);
	}
	free(c->ring);
	c->ring = NULL;
}

/* A send that held r (psl__req_hold_sends_locked): the van let go of its
 * buffers. Its status does not fail r: a send lost with its peer fails r
 * through the peer's loss (or r's deadline). */
static void req_sent(struct psl__sendref *ref, int status)
{
	struct psl__req *r = (struct psl__req *)((char *)ref - offsetof(struct psl__req, sent));
	struct psl__customer *c = r->owner;
	bool done;

	(void)status;
	pthread_mutex_lock(&c->mu);
	done = psl__req_unhold_locked(c, r, 0);
	pthread_mutex_unlock(&c->mu);
	if (done)
		psl__req_finish(c, r);
}

static struct psl__req *req_alloc(struct psl__customer *c)
{
	struct psl__req *r = c->free_list;
	if (r) {
		c->free_list = (struct psl__req *)r->priv;
	} else {
		r = malloc(sizeof(*r) + (size_t)c->nwords * sizeof(uint64_t));
		if (!r)
			return NULL;
		r->bits = (uint64_t *)(r + 1);
		r->sent.done = req_sent;
		r->owner = c;
	}
	return r;
}

static void req_recycle(struct psl__customer *c, struct psl__req *r)
{
	r->state = PSL__REQ_FREE;
	r->priv = c->free_list;
	c->free_list = r;
}

/* An entry that must keep its place in the ring: in flight, or finished but
 * with a thread still about to read its status. */
static bool live(const struct psl__req *r)
{
	return r && (r->state == PSL__REQ_PENDING || r->state == PSL__REQ_COMPLETING ||
		     r->waiters > 0);
}

static int grow(struct psl__customer *c)
{
	uint32_t ncap = c->cap * 2, i;
	struct psl__req **nring;

	for (;;) {
		bool clash = false;
		nring = calloc(ncap, sizeof(*nring));
		if (!nring)
			return -ENOMEM;
		for (i = 0; i < c->cap && !clash; i++) {
			struct psl__req *r = c->ring[i];
			uint32_t s;
			if (!live(r))
				continue;
			s = (uint32_t)r->ts & (ncap - 1);
			if (nring[s])
				clash = true;
			else
				nring[s] = r;
		}
		if (!clash)
			break;
		free(nring);
		ncap *= 2;
	}
	for (i = 0; i < c->cap; i++) {
		struct psl__req *r = c->ring[i];
		uint32_t s;
		if (!r || live(r))
			continue;
		s = (uint32_t)r->ts & (ncap - 1);
		if (!nring[s])
			nring[s] = r; /* keep finished ones for psl_kv_wait's status */
		else
			req_recycle(c, r);
	}
	free(c->ring);
	c->ring = nring;
	c->cap = ncap;
	return 0;
}

/* The next timestamp no request in flight has: after the 2^30 wrap, one
 * still pending (given up on, its answer may yet come) keeps its own, so
 * that its answer never completes a newer request. */
static int unused_ts(struct psl__customer *c)
{
	for (;;) {
		int ts = c->next_ts;
		const struct psl__req *r = c->ring[(uint32_t)ts & (c->cap - 1)];
		if (!live(r) || r->ts != ts)
			return ts;
		c->next_ts = (ts + 1) & 0x3fffffff;
	}
}

struct psl__req *psl__req_new_locked(struct psl__customer *c)
{
	int ts = unused_ts(c);
	uint32_t s = (uint32_t)ts & (c->cap - 1);
	struct psl__req *r;

	if (live(c->ring[s])) {
		if (grow(c))
			return NULL;
		s = (uint32_t)ts & (c->cap - 1);
	}
	r = req_alloc(c);
	if (!r)
		return NULL;
	if (c->ring[s])
		req_recycle(c, c->ring[s]);
	r->ts = ts;
	r->state = PSL__REQ_PENDING;
	r->status = 0;
	r->awaiting = 0;
	r->holds = 0;
	r->loans = 0;
	r->parent = -1;
	r->waiters = 0;
	r->gave_up = false;
	r->deadline = c->timeout_ms > 0 ? psl__now_ms() + c->timeout_ms : 0;
	r->cb = NULL;
	r->arg = NULL;
	r->priv = NULL;
	memset(r->bits, 0, (size_t)c->nwords * sizeof(uint64_t));
	c->ring[s] = r;
	c->next_ts = (ts + 1) & 0x3fffffff; /* keeps ps-lite's msg_sig sane */
	c->pending++;
	return r;
}

struct psl__req *psl__req_find_locked(struct psl__customer *c, int ts)
{
	struct psl__req *r;
	if (ts < 0)
		return NULL;
	r = c->ring[(uint32_t)ts & (c->cap - 1)];
	return (r && r->ts == ts && r->state == PSL__REQ_PENDING) ? r : NULL;
}

static bool bit_ok(struct psl__customer *c, int id)
{
	int idx = psl__node_index(id);
	return id > 0 && idx >= 0 && idx < c->nwords * 64;
}

void psl__req_expect_locked(struct psl__customer *c, struct psl__req *r, int id)
{
	int idx = psl__node_index(id);
	if (!bit_ok(c, id) || (r->bits[idx / 64] >> (idx % 64) & 1))
		return;
	r->bits[idx / 64] |= 1ull << (idx % 64);
	r->awaiting++;
}

bool psl__req_awaits_locked(struct psl__customer *c, struct psl__req *r, int id)
{
	int idx = psl__node_index(id);
	return bit_ok(c, id) && (r->bits[idx / 64] >> (idx % 64) & 1);
}

static bool settle(struct psl__req *r)
{
	if (r->state == PSL__REQ_PENDING && r->awaiting == 0 && r->holds == 0 && r->loans == 0) {
		r->state = PSL__REQ_COMPLETING;
		return true;
	}
	return false;
}

bool psl__req_answer_locked(struct psl__customer *c, struct psl__req *r, int id, int status)
{
	int idx = psl__node_index(id);
	if (!psl__req_awaits_locked(c, r, id))
		return false;
	r->bits[idx / 64] &= ~(1ull << (idx % 64));
	r->awaiting--;
	if (status && !r->status)
		r->status = status;
	return settle(r);
}

/* One of r's open conditions (*n counts them) is met. */
static bool release_one(struct psl__req *r, int *n, int status)
{
	if (*n > 0)
		(*n)--;
	if (status && !r->status)
		r->status = status;
	return settle(r);
}

bool psl__req_unhold_locked(struct psl__customer *c, struct psl__req *r, int status)
{
	(void)c;
	return release_one(r, &r->holds, status);
}

bool psl__req_loan_back_locked(struct psl__customer *c, struct psl__req *r, int status)
{
	(void)c;
	return release_one(r, &r->loans, status);
}

void psl__req_finish(struct psl__customer *c, struct psl__req *r)
{
	struct psl__req *p = NULL;
	int parent, status;

	if (c->ops->on_complete)
		c->ops->on_complete(c, r);
	if (r->cb)
		PSL__USER_CALL(r->cb(r->ts, r->status, r->arg));
	pthread_mutex_lock(&c->mu);
	r->state = PSL__REQ_DONE;
	r->priv = NULL;
	parent = r->parent;
	status = r->status;
	c->pending--;
	if (parent >= 0) {
		p = psl__req_find_locked(c, parent);
		if (p && !psl__req_unhold_locked(c, p, status))
			p = NULL;
	}
	/* wake only who waits for this one (or for the customer to drain):
	 * with many requests in flight, a waiter must not wake for each */
	if (r->waiters || c->pending == 0)
		pthread_cond_broadcast(&c->cv);
	pthread_mutex_unlock(&c->mu);
	if (p)
		psl__req_finish(c, p);
}

bool psl__req_fail_locked(struct psl__customer *c, struct psl__req *r, int err)
{
	/* its holds stay: a thread still sending it, or the push half of a
	 * push-pull, which fails too, releases them (clearing them let the
	 * request's state be freed under its sender) */
	memset(r->bits, 0, (size_t)c->nwords * sizeof(uint64_t));
	r->awaiting = 0;
	if (!r->status)
		r->status = err;
	return settle(r);
}

int psl__req_first_owing_locked(struct psl__customer *c, const struct psl__req *r)
{
	int i;
	for (i = 0; i < c->nwords * 64; i++)
		if (r->bits[i / 64] >> (i % 64) & 1)
			return i == 0 ? 1 : i + 7;
	return 0;
}

int psl__req_wait(struct psl__customer *c, int ts)
{
	return psl__req_wait_ms(c, ts, -1);
}

int psl__req_wait_ms(struct psl__customer *c, int ts, int timeout_ms)
{
	struct timespec dl;
	int st = 0;
	if (ts < 0)
		return -EINVAL;
	if (timeout_ms >= 0) {
		clock_gettime(CLOCK_MONOTONIC, &dl);
		dl.tv_sec += timeout_ms / 1000;
		dl.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
		if (dl.tv_nsec >= 1000000000L) {
			dl.tv_sec++;
			dl.tv_nsec -= 1000000000L;
		}
	}
	psl__drive(c, ts, timeout_ms >= 0 ? &dl : NULL);
	pthread_mutex_lock(&c->mu);
	for (;;) {
		struct psl__req *r = c->ring[(uint32_t)ts & (c->cap - 1)];
		int rc = 0;
		if (!r || r->ts != ts || r->state == PSL__REQ_FREE)
			break;
		if (r->state == PSL__REQ_DONE) {
			st = r->status;
			break;
		}
		r->waiters++; /* keeps r in the ring (see live()) */
		if (timeout_ms < 0)
			pthread_cond_wait(&c->cv, &c->mu);
		else
			rc = pthread_cond_timedwait(&c->cv, &c->mu, &dl);
		r->waiters--;
		if (rc == ETIMEDOUT && r->state != PSL__REQ_DONE) {
			r->gave_up = true;
			st = -ETIMEDOUT; /* still pending: the caller may wait again */
			break;
		}
	}
	pthread_mutex_unlock(&c->mu);
	return st;
}
