/* van_ibverbs protocol logic without hardware (see ibv_logic.h). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ibv_logic.h"

/* ------------------------------------------------------------- credits -- */

void ibv_cr_init(struct ibv_credits *c, uint32_t my_depth, uint32_t peer_depth)
{
	c->avail = peer_depth;
	c->owed = 0;
	c->my_depth = my_depth;
	c->peer_depth = peer_depth;
}

bool ibv_cr_take(struct ibv_credits *c)
{
	if (!c->avail)
		return false;
	c->avail--;
	return true;
}

int ibv_cr_grant(struct ibv_credits *c, uint32_t n)
{
	if (n > c->peer_depth - c->avail)
		return -EPROTO;
	c->avail += n;
	return 0;
}

void ibv_cr_reposted(struct ibv_credits *c, bool credit_record)
{
	if (!credit_record)
		c->owed++;
}

uint16_t ibv_cr_piggyback(struct ibv_credits *c)
{
	uint32_t n = c->owed > 65535 ? 65535 : c->owed;
	c->owed -= n;
	return (uint16_t)n;
}

bool ibv_cr_need_update(const struct ibv_credits *c)
{
	uint32_t half = c->my_depth / 2;
	return c->owed > 0 && c->owed >= (half ? half : 1);
}

/* ------------------------------------------------ sender's rendezvous -- */

void ibv_sop_init(struct ibv_sop *s, bool need_fin)
{
	memset(s, 0, sizeof(*s));
	s->need_fin = need_fin;
}

bool ibv_sop_event(struct ibv_sop *s, int ev, int status, int *out_status)
{
	if (s->done)
		return false;
	switch (ev) {
	case IBV_SOP_SENT:
		if (s->sent)
			return false;
		s->sent = true;
		if (status)
			s->status = status;
		break;
	case IBV_SOP_FIN:
		if (!s->need_fin || s->fin)
			return false;
		s->fin = true;
		if (status)
			s->status = status;
		break;
	case IBV_SOP_FAIL:
		s->status = status ? status : -EIO;
		s->done = true;
		*out_status = s->status;
		return true;
	default:
		return false;
	}
	if (s->status || (s->sent && (!s->need_fin || s->fin))) {
		s->done = true;
		*out_status = s->status;
		return true;
	}
	return false;
}

/* ------------------------------------------------- in-order delivery -- */

int ibv_oq_insert(struct ibv_oq *q, struct ibv_oq_ent *e)
{
	struct ibv_oq_ent **pp = &q->head;
	if (e->seq < q->next)
		return -EPROTO;
	while (*pp && (*pp)->seq < e->seq)
		pp = &(*pp)->next;
	if (*pp && (*pp)->seq == e->seq)
		return -EPROTO;
	e->next = *pp;
	*pp = e;
	q->n++;
	return 0;
}

struct ibv_oq_ent *ibv_oq_pop(struct ibv_oq *q)
{
	struct ibv_oq_ent *e = q->head;
	if (!e || e->seq != q->next || !e->ready)
		return NULL;
	q->head = e->next;
	q->next++;
	q->n--;
	e->next = NULL;
	return e;
}

struct ibv_oq_ent *ibv_oq_take_any(struct ibv_oq *q)
{
	struct ibv_oq_ent *e = q->head;
	if (!e)
		return NULL;
	q->head = e->next;
	q->n--;
	e->next = NULL;
	return e;
}

/* ---------------------------------------------------- queue pair choice -- */

int ibv_pick_qp(const struct ibv_qchoice *q, int n, unsigned *rr)
{
	int i, best = -1;
	if (n <= 0)
		return -1;
	for (i = 0; i < n; i++) {
		int k = (int)((*rr + (unsigned)i) % (unsigned)n);
		if (q[k].up && !q[k].queued && q[k].credits && q[k].slots) {
			*rr = (unsigned)k + 1;
			return k;
		}
	}
	for (i = 0; i < n; i++) {
		int k = (int)((*rr + (unsigned)i) % (unsigned)n);
		if (q[k].up && (best < 0 || q[k].queued < q[best].queued))
			best = k;
	}
	if (best >= 0)
		*rr = (unsigned)best + 1;
	return best;
}

/* ---------------------------------------------------- eager or rendezvous -- */

long ibv_plan(const uint64_t *lens, uint32_t nseg, uint32_t meta_len, size_t cap,
	      uint64_t rndv_min, bool *remote, bool *meta_remote)
{
	uint64_t total = 32 + (uint64_t)nseg * 24 + meta_len;
	uint32_t i;

	*meta_remote = total > cap;
	if (*meta_remote)
		total = 32 + ((uint64_t)nseg + 1) * 24;
	if (total > cap)
		return -EMSGSIZE;
	for (i = 0; i < nseg; i++) {
		remote[i] = lens[i] && rndv_min && lens[i] >= rndv_min;
		if (!remote[i])
			total += lens[i];
	}
	while (total > cap) {
		int big = -1;
		for (i = 0; i < nseg; i++)
			if (!remote[i] && lens[i] && (big < 0 || lens[i] > lens[big]))
				big = (int)i;
		if (big < 0)
			return -EMSGSIZE;
		remote[big] = true;
		total -= lens[big];
	}
	return (long)total;
}

/* ---------------------------------------------------- registration cache -- */

int ibv_mrc_init(struct ibv_mrc *c, size_t max, bool enabled, ibv_mrc_reg_fn reg,
		 ibv_mrc_dereg_fn dereg, void *ctx)
{
	memset(c, 0, sizeof(*c));
	if (pthread_mutex_init(&c->mu, NULL))
		return -ENOMEM;
	c->max = max ? max : 1;
	c->enabled = enabled;
	c->reg = reg;
	c->dereg = dereg;
	c->ctx = ctx;
	return 0;
}

void ibv_mrc_fini(struct ibv_mrc *c)
{
	size_t i;
	for (i = 0; i < c->n; i++) {
		c->dereg(c->ctx, c->e[i]->mr);
		free(c->e[i]);
	}
	free(c->e);
	c->e = NULL;
	c->n = c->cap = 0;
	pthread_mutex_destroy(&c->mu);
}

static void remove_at(struct ibv_mrc *c, size_t i)
{
	memmove(&c->e[i], &c->e[i + 1], (c->n - i - 1) * sizeof(c->e[0]));
	c->n--;
}

/* Evicts unheld least recently used entries while over the limit. */
static void evict(struct ibv_mrc *c, struct ibv_mrc_ent **gone, size_t *ngone, size_t room)
{
	while (c->n > c->max && *ngone < room) {
		size_t i, lru = c->n;
		for (i = 0; i < c->n; i++)
			if (!c->e[i]->refs && (lru == c->n || c->e[i]->used < c->e[lru]->used))
				lru = i;
		if (lru == c->n)
			return;
		gone[(*ngone)++] = c->e[lru];
		remove_at(c, lru);
		c->evictions++;
	}
}

int ibv_mrc_get(struct ibv_mrc *c, const void *addr, size_t len, struct ibv_mrc_ent **out)
{
	uintptr_t a = (uintptr_t)addr, end = a + (len ? len : 1), start;
	long pg = sysconf(_SC_PAGESIZE);
	struct ibv_mrc_ent *e, *gone[8];
	size_t i, lo, hi, ngone = 0;
	void *mr;
	int rc;

	if (pg <= 0)
		pg = 4096;
	if (end < a)
		return -EINVAL;
	pthread_mutex_lock(&c->mu);
	if (c->enabled) {
		/* entries are sorted by start: look at those starting at or below a */
		for (i = 0; i < c->n && c->e[i]->start <= a; i++) {
			uint64_t st;
			e = c->e[i];
			if (e->dead || e->end < end)
				continue;
			if (e->stamped && c->stamp &&
			    (!c->stamp(c->ctx, e->start, e->end, &st) || st != e->stamp)) {
				/* other pages behind these addresses now: drop it */
				remove_at(c, i);
				c->stale++;
				if (e->refs) {
					e->dead = true;
				} else if (ngone < 8) {
					gone[ngone++] = e;
				} else {
					e->dead = true; /* dropped at the next put */
					e->refs++;
					pthread_mutex_unlock(&c->mu);
					ibv_mrc_put(c, e);
					pthread_mutex_lock(&c->mu);
				}
				i = (size_t)-1; /* restart: the array moved */
				continue;
			}
			e->refs++;
			e->used = ++c->clock;
			c->hits++;
			pthread_mutex_unlock(&c->mu);
			for (i = 0; i < ngone; i++) {
				c->dereg(c->ctx, gone[i]->mr);
				free(gone[i]);
			}
			*out = e;
			return 0;
		}
	}
	c->misses++;
	pthread_mutex_unlock(&c->mu);
	for (i = 0; i < ngone; i++) {
		c->dereg(c->ctx, gone[i]->mr);
		free(gone[i]);
	}
	ngone = 0;

	start = a & ~((uintptr_t)pg - 1);
	end = (end + (uintptr_t)pg - 1) & ~((uintptr_t)pg - 1);
	rc = c->reg(c->ctx, (void *)start, end - start, &mr);
	if (rc)
		return rc;
	e = calloc(1, sizeof(*e));
	if (!e) {
		c->dereg(c->ctx, mr);
		return -ENOMEM;
	}
	e->start = start;
	e->end = end;
	e->mr = mr;
	e->refs = 1;
	if (c->stamp)
		e->stamped = c->stamp(c->ctx, start, end, &e->stamp);
	pthread_mutex_lock(&c->mu);
	e->used = ++c->clock;
	if (!c->enabled) {
		e->dead = true; /* deregistered at its put */
		pthread_mutex_unlock(&c->mu);
		*out = e;
		return 0;
	}
	if (c->n == c->cap) {
		size_t ncap = c->cap ? c->cap * 2 : 16;
		struct ibv_mrc_ent **ne = realloc(c->e, ncap * sizeof(*ne));
		if (!ne) {
			e->dead = true;
			pthread_mutex_unlock(&c->mu);
			*out = e;
			return 0;
		}
		c->e = ne;
		c->cap = ncap;
	}
	lo = 0;
	hi = c->n;
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		if (c->e[mid]->start <= start)
			lo = mid + 1;
		else
			hi = mid;
	}
	memmove(&c->e[lo + 1], &c->e[lo], (c->n - lo) * sizeof(c->e[0]));
	c->e[lo] = e;
	c->n++;
	evict(c, gone, &ngone, 8);
	pthread_mutex_unlock(&c->mu);
	for (i = 0; i < ngone; i++) {
		c->dereg(c->ctx, gone[i]->mr);
		free(gone[i]);
	}
	*out = e;
	return 0;
}

void ibv_mrc_put(struct ibv_mrc *c, struct ibv_mrc_ent *e)
{
	bool drop;
	if (!e)
		return;
	pthread_mutex_lock(&c->mu);
	drop = --e->refs == 0 && e->dead;
	pthread_mutex_unlock(&c->mu);
	if (drop) {
		c->dereg(c->ctx, e->mr);
		free(e);
	}
}

void ibv_mrc_invalidate(struct ibv_mrc *c, const void *addr, size_t len)
{
	uintptr_t a = (uintptr_t)addr, end = a + len;
	struct ibv_mrc_ent *gone[16];
	size_t i, ngone;

	do {
		ngone = 0;
		pthread_mutex_lock(&c->mu);
		for (i = 0; i < c->n && ngone < 16;) {
			struct ibv_mrc_ent *e = c->e[i];
			if (e->start < end && a < e->end) {
				remove_at(c, i);
				if (e->refs)
					e->dead = true;
				else
					gone[ngone++] = e;
				continue;
			}
			i++;
		}
		pthread_mutex_unlock(&c->mu);
		for (i = 0; i < ngone; i++) {
			c->dereg(c->ctx, gone[i]->mr);
			free(gone[i]);
		}
	} while (ngone == 16);
}
