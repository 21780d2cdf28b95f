/* van_fabric registration cache (see fab_mrcache.h). */

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fab_mrcache.h"

/* how many entries to the left of the search point may still cover a range */
#define SCAN_LEFT 16

int fab_mrc_init(struct fab_mrc *c, size_t max_entries, int enabled, fab_mrc_reg_fn reg,
		 fab_mrc_dereg_fn dereg, void *ctx)
{
	long pg = sysconf(_SC_PAGESIZE);
	memset(c, 0, sizeof(*c));
	c->max = max_entries ? max_entries : 1;
	c->enabled = enabled;
	c->page = pg > 0 ? (size_t)pg : 4096;
	c->reg = reg;
	c->dereg = dereg;
	c->ctx = ctx;
	return -pthread_mutex_init(&c->mu, NULL);
}

void fab_mrc_fini(struct fab_mrc *c)
{
	size_t i;
	for (i = 0; i < c->n; i++) {
		c->dereg(c->ctx, c->ents[i]->mr);
		free(c->ents[i]);
	}
	free(c->ents);
	c->ents = NULL;
	c->n = c->cap = 0;
	pthread_mutex_destroy(&c->mu);
}

/* index of the first entry whose start is > addr */
static size_t upper(const struct fab_mrc *c, uintptr_t addr)
{
	size_t lo = 0, hi = c->n;
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		if (c->ents[mid]->start <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

static void remove_at(struct fab_mrc *c, size_t i)
{
	memmove(c->ents + i, c->ents + i + 1, (c->n - i - 1) * sizeof(*c->ents));
	c->n--;
}

static void drop(struct fab_mrc *c, struct fab_mrc_ent *e)
{
	c->dereg(c->ctx, e->mr);
	free(e);
}

/* Evicts the least recently used idle entry; 0 if one was evicted. */
static int evict_one(struct fab_mrc *c)
{
	size_t i, best = (size_t)-1;
	for (i = 0; i < c->n; i++)
		if (c->ents[i]->refs == 0 &&
		    (best == (size_t)-1 || c->ents[i]->used < c->ents[best]->used))
			best = i;
	if (best == (size_t)-1)
		return -ENOSPC;
	drop(c, c->ents[best]);
	remove_at(c, best);
	c->evictions++;
	return 0;
}

int fab_mrc_get(struct fab_mrc *c, const void *addr, size_t len, int32_t mem_type,
		int32_t dev_id, bool cache, struct fab_mrc_ent **out)
{
	uintptr_t a = (uintptr_t)addr, s, e;
	struct fab_mrc_ent *ent;
	size_t i, k;
	int rc;

	if (!len)
		len = 1;
	s = a & ~(uintptr_t)(c->page - 1);
	e = (a + len + c->page - 1) & ~(uintptr_t)(c->page - 1);
	cache = cache && c->enabled;
	pthread_mutex_lock(&c->mu);
	if (cache) {
		i = upper(c, a);
		for (k = 0; k < SCAN_LEFT && i > 0; k++, i--) {
			ent = c->ents[i - 1];
			if (ent->start <= a && ent->end >= a + len && ent->mem_type == mem_type &&
			    ent->dev_id == dev_id && !ent->dead) {
				ent->refs++;
				ent->used = ++c->clock;
				c->hits++;
				pthread_mutex_unlock(&c->mu);
				*out = ent;
				return 0;
			}
		}
	}
	c->misses++;
	ent = calloc(1, sizeof(*ent));
	if (!ent) {
		pthread_mutex_unlock(&c->mu);
		return -ENOMEM;
	}
	ent->start = s;
	ent->end = e;
	ent->mem_type = mem_type;
	ent->dev_id = dev_id;
	ent->refs = 1;
	ent->used = ++c->clock;
	rc = c->reg(c->ctx, (void *)s, e - s, mem_type, dev_id, &ent->mr, &ent->desc);
	if (rc) {
		pthread_mutex_unlock(&c->mu);
		free(ent);
		return rc;
	}
	if (!cache) {
		ent->dead = 1; /* not cached: deregistered at its put */
		pthread_mutex_unlock(&c->mu);
		*out = ent;
		return 0;
	}
	while (c->n >= c->max && evict_one(c) == 0)
		;
	if (c->n == c->cap) {
		size_t ncap = c->cap ? 2 * c->cap : 64;
		struct fab_mrc_ent **ne = realloc(c->ents, ncap * sizeof(*ne));
		if (!ne) {
			ent->dead = 1; /* works, but is not cached */
			pthread_mutex_unlock(&c->mu);
			*out = ent;
			return 0;
		}
		c->ents = ne;
		c->cap = ncap;
	}
	i = upper(c, s);
	memmove(c->ents + i + 1, c->ents + i, (c->n - i) * sizeof(*c->ents));
	c->ents[i] = ent;
	c->n++;
	pthread_mutex_unlock(&c->mu);
	*out = ent;
	return 0;
}

void fab_mrc_put(struct fab_mrc *c, struct fab_mrc_ent *e)
{
	bool gone;
	if (!e)
		return;
	pthread_mutex_lock(&c->mu);
	gone = --e->refs == 0 && e->dead;
	pthread_mutex_unlock(&c->mu);
	if (gone)
		drop(c, e);
}

void fab_mrc_invalidate(struct fab_mrc *c, const void *addr, size_t len)
{
	uintptr_t a = (uintptr_t)addr, b = a + (len ? len : 1);
	size_t i = 0;
	pthread_mutex_lock(&c->mu);
	while (i < c->n) {
		struct fab_mrc_ent *e = c->ents[i];
		if (e->start < b && e->end > a) {
			remove_at(c, i);
			if (e->refs == 0)
				drop(c, e);
			else
				e->dead = 1;
			continue;
		}
		i++;
	}
	pthread_mutex_unlock(&c->mu);
}
