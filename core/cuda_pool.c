/* The pinned pool: page-locked host buffers that stage GPU data for the
 * vans, kept by power-of-two size class for reuse. A buffer given back
 * while a queued copy still reads it (psl__cuda_stage_put_after) waits in
 * the pending list until the copy's event is done: the pool looks at that
 * list whenever it lends or takes back a buffer. */
#include "config.h"

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "cuda.h"
#include "cuda_lib.h"
#include "pslite.h"

/* Size classes 2^MIN_SHIFT .. 2^MAX_SHIFT; larger buffers are not kept. */
#define MIN_SHIFT 16
#define MAX_SHIFT 30
_Static_assert(PSL__CUDA_STAGE_KEPT == (size_t)1 << MAX_SHIFT, "cuda.h's PSL__CUDA_STAGE_KEPT");
#define NCLASS (MAX_SHIFT - MIN_SHIFT + 1)
#define HDR 64 /* bytes before the buffer: its class */

struct stage_hdr {
	struct stage_hdr *next; /* in the free or the pending list */
	int cls;		/* -1: not kept */
	size_t bytes;
	void *ev; /* pending: the event of the copy that reads it */
	int dev;  /* (the event's device) */
};

static struct {
	pthread_mutex_t mu;
	struct stage_hdr *free[NCLASS];
	struct stage_hdr *pending;
	size_t bytes, in_use;
} pool = {.mu = PTHREAD_MUTEX_INITIALIZER};

/* A buffer nobody uses any more back to its free list; else (not kept)
 * it is returned, to be freed without the lock. pool.mu held. */
static struct stage_hdr *keep_locked(struct stage_hdr *h)
{
	if (h->cls < 0) {
		pool.bytes -= h->bytes;
		return h;
	}
	h->next = pool.free[h->cls];
	pool.free[h->cls] = h;
	return NULL;
}

/* Pending buffers whose copy is done go back (their events to the core);
 * those not kept are chained on *gone, for the caller to free. pool.mu
 * held. */
static void reap_locked(struct stage_hdr **gone)
{
	struct stage_hdr **pp = &pool.pending, *h;
	int e;
	while ((h = *pp)) {
		if ((e = psl__cu.event_query(h->ev)) == CU_ERR_NOT_READY) {
			pp = &h->next;
			continue;
		}
		if (e) /* (the copy failed: its error is the stream's, not ours) */
			psl__cu_clear();
		*pp = h->next;
		psl__cuda_mark_put(h->dev, h->ev);
		h->ev = NULL;
		if (keep_locked(h)) {
			h->next = *gone;
			*gone = h;
		}
	}
}

static void free_chain(struct stage_hdr *h)
{
	while (h) {
		struct stage_hdr *n = h->next;
		psl__cu.free_host(h);
		h = n;
	}
}

void *psl__cuda_stage_get(size_t len, int dev, int *err)
{
	struct stage_hdr *h = NULL, *gone = NULL;
	int cls = 0, e, prev;
	size_t bytes;
	void *p;

	*err = psl__cu_load();
	if (*err)
		return NULL;
	while (cls < NCLASS && ((size_t)1 << (MIN_SHIFT + cls)) < len)
		cls++;
	bytes = cls < NCLASS ? (size_t)1 << (MIN_SHIFT + cls) : len;
	pthread_mutex_lock(&pool.mu);
	reap_locked(&gone);
	if (cls < NCLASS && pool.free[cls]) {
		h = pool.free[cls];
		pool.free[cls] = h->next;
		pool.in_use++;
	}
	pthread_mutex_unlock(&pool.mu);
	free_chain(gone);
	if (h)
		return (char *)h + HDR;
	/* on the buffer's device (a context there, not on the thread's
	 * default), pinned for every device (portable) */
	if (!psl__cu_dev_ok(dev))
		dev = 0;
	if ((*err = psl__cu_dev_enter(dev, &prev)))
		return NULL;
	e = psl__cu.host_alloc(&p, bytes + HDR, CU_HOST_ALLOC_PORTABLE);
	psl__cu_dev_leave(dev, prev);
	if (e) {
		*err = psl__cu_fail("cannot allocate a pinned staging buffer", e);
		return NULL;
	}
	h = p;
	h->next = NULL;
	h->cls = cls < NCLASS ? cls : -1;
	h->bytes = bytes + HDR;
	h->ev = NULL;
	pthread_mutex_lock(&pool.mu);
	pool.bytes += h->bytes;
	pool.in_use++;
	pthread_mutex_unlock(&pool.mu);
	return (char *)h + HDR;
}

void psl__cuda_stage_put(void *buf)
{
	struct stage_hdr *h;
	if (!buf)
		return;
	h = (struct stage_hdr *)(void *)((char *)buf - HDR);
	pthread_mutex_lock(&pool.mu);
	pool.in_use--;
	h = keep_locked(h);
	pthread_mutex_unlock(&pool.mu);
	if (h)
		psl__cu.free_host(h);
}

void psl__cuda_stage_put_after(void *buf, int dev, void *ev)
{
	struct stage_hdr *h, *gone = NULL;
	if (!buf)
		return;
	h = (struct stage_hdr *)(void *)((char *)buf - HDR);
	pthread_mutex_lock(&pool.mu);
	pool.in_use--;
	h->ev = ev;
	h->dev = dev;
	h->next = pool.pending;
	pool.pending = h;
	reap_locked(&gone);
	pthread_mutex_unlock(&pool.mu);
	free_chain(gone);
}

size_t psl__cuda_stage_bytes(size_t *in_use)
{
	size_t b;
	pthread_mutex_lock(&pool.mu);
	b = pool.bytes;
	if (in_use)
		*in_use = pool.in_use;
	pthread_mutex_unlock(&pool.mu);
	return b;
}

void psl__cuda_pool_drain(void)
{
	struct stage_hdr *h;
	int i;
	pthread_mutex_lock(&pool.mu);
	while ((h = pool.pending)) { /* (their copies done first) */
		pool.pending = h->next;
		if (psl__cu.event_sync(h->ev))
			psl__cu_clear();
		psl__cuda_mark_put(h->dev, h->ev);
		pool.bytes -= h->bytes;
		psl__cu.free_host(h);
	}
	for (i = 0; i < NCLASS; i++) {
		while ((h = pool.free[i])) {
			pool.free[i] = h->next;
			pool.bytes -= h->bytes;
			if (psl__cu.free_host)
				psl__cu.free_host(h);
		}
	}
	pthread_mutex_unlock(&pool.mu);
}
