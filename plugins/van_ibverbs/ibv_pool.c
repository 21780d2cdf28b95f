/*
 * van_ibverbs buffer pool: registered buffers for segments read by
 * rendezvous when the core lends no destination. Pooled by power-of-two size
 * class so that the steady state registers nothing. A buffer handed to the
 * core inside a received message may come back after fini: the pool then
 * deregisters what is out (the data stays readable) and frees each buffer at
 * its put; the pool itself goes with its last buffer.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "ibv.h"

#define POOL_MIN_SHIFT 14
#define POOL_CLASSES 20 /* 16 KiB .. 8 GiB */
#define POOL_KEEP_BYTES (256u << 20)

struct ibv_pbuf {
	struct ibv_pool *pool;
	struct ibv_pbuf *next, *all_prev, *all_next;
	int cls;
	size_t cap;
	struct ibv_mr *mr;
	void *data;
};

struct ibv_pool {
	pthread_mutex_t mu;
	struct ibv_pd *pd;
	bool dead;
	int refs; /* the van + each buffer out */
	size_t kept;
	struct ibv_pbuf *free[POOL_CLASSES];
	struct ibv_pbuf all; /* every buffer out of the pool */
};

int ibv_pool_new(struct ibv_pd *pd, struct ibv_pool **out)
{
	struct ibv_pool *p = calloc(1, sizeof(*p));
	if (!p)
		return -ENOMEM;
	pthread_mutex_init(&p->mu, NULL);
	p->pd = pd;
	p->refs = 1;
	p->all.all_next = p->all.all_prev = &p->all;
	*out = p;
	return 0;
}

static void buf_free(struct ibv_pbuf *b)
{
	if (b->mr)
		ibv_dereg_mr(b->mr);
	free(b->data);
	free(b);
}

static void pool_unref(struct ibv_pool *p)
{
	bool last;
	pthread_mutex_lock(&p->mu);
	last = --p->refs == 0;
	pthread_mutex_unlock(&p->mu);
	if (last) {
		pthread_mutex_destroy(&p->mu);
		free(p);
	}
}

int ibv_pool_get(struct ibv_pool *p, size_t len, struct ibv_pbuf **out, void **data,
		 uint32_t *lkey)
{
	struct ibv_pbuf *b = NULL;
	int cls = 0;

	while (cls < POOL_CLASSES && ((size_t)1 << (POOL_MIN_SHIFT + cls)) < len)
		cls++;
	if (cls == POOL_CLASSES)
		return -EMSGSIZE;
	pthread_mutex_lock(&p->mu);
	if (p->dead) {
		pthread_mutex_unlock(&p->mu);
		return -ESHUTDOWN;
	}
	b = p->free[cls];
	if (b) {
		p->free[cls] = b->next;
		p->kept -= b->cap;
	}
	p->refs++;
	pthread_mutex_unlock(&p->mu);
	if (!b) {
		size_t cap = (size_t)1 << (POOL_MIN_SHIFT + cls);
		b = calloc(1, sizeof(*b));
		if (!b || posix_memalign(&b->data, 4096, cap)) {
			free(b);
			pool_unref(p);
			return -ENOMEM;
		}
		b->pool = p;
		b->cls = cls;
		b->cap = cap;
		b->mr = ibv_reg_mr(p->pd, b->data, cap, IBV_ACCESS_LOCAL_WRITE);
		if (!b->mr) {
			int err = errno ? -errno : -ENOMEM;
			free(b->data);
			free(b);
			pool_unref(p);
			return err;
		}
	}
	pthread_mutex_lock(&p->mu);
	b->all_next = p->all.all_next;
	b->all_prev = &p->all;
	p->all.all_next->all_prev = b;
	p->all.all_next = b;
	pthread_mutex_unlock(&p->mu);
	*out = b;
	*data = b->data;
	*lkey = b->mr->lkey;
	return 0;
}

void ibv_pool_put(struct ibv_pbuf *b)
{
	struct ibv_pool *p;
	bool keep;
	if (!b)
		return;
	p = b->pool;
	pthread_mutex_lock(&p->mu);
	b->all_prev->all_next = b->all_next;
	b->all_next->all_prev = b->all_prev;
	keep = !p->dead && b->mr && p->kept + b->cap <= POOL_KEEP_BYTES;
	if (keep) {
		b->next = p->free[b->cls];
		p->free[b->cls] = b;
		p->kept += b->cap;
	}
	pthread_mutex_unlock(&p->mu);
	if (!keep)
		buf_free(b);
	pool_unref(p);
}

void ibv_pool_kill(struct ibv_pool *p)
{
	struct ibv_pbuf *b, *n;
	int c;
	if (!p)
		return;
	pthread_mutex_lock(&p->mu);
	p->dead = true;
	for (c = 0; c < POOL_CLASSES; c++) {
		for (b = p->free[c]; b; b = n) {
			n = b->next;
			buf_free(b);
		}
		p->free[c] = NULL;
	}
	/* buffers still out hold delivered data: keep the memory, drop the
	 * registration so that the protection domain can go */
	for (b = p->all.all_next; b != &p->all; b = b->all_next) {
		if (b->mr) {
			ibv_dereg_mr(b->mr);
			b->mr = NULL;
		}
	}
	pthread_mutex_unlock(&p->mu);
	pool_unref(p);
}
