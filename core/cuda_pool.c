/* The pinned pool: page-locked host buffers that stage GPU data for the
 * vans, kept by power-of-two size class for reuse. */
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
#define NCLASS (MAX_SHIFT - MIN_SHIFT + 1)
#define HDR 64 /* bytes before the buffer: its class */

struct stage_hdr {
	struct stage_hdr *next; /* in the free list */
	int cls;		/* -1: not kept */
	size_t bytes;
};

static struct {
	pthread_mutex_t mu;
	struct stage_hdr *free[NCLASS];
	size_t bytes, in_use;
} pool = {.mu = PTHREAD_MUTEX_INITIALIZER};

void *psl__cuda_stage_get(size_t len, int dev, int *err)
{
	struct stage_hdr *h = NULL;
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
	if (cls < NCLASS && pool.free[cls]) {
		h = pool.free[cls];
		pool.free[cls] = h->next;
		pool.in_use++;
	}
	pthread_mutex_unlock(&pool.mu);
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
	if (h->cls >= 0) {
		h->next = pool.free[h->cls];
		pool.free[h->cls] = h;
		h = NULL;
	} else {
		pool.bytes -= h->bytes;
	}
	pthread_mutex_unlock(&pool.mu);
	if (h)
		psl__cu.free_host(h);
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

static void pool_drain(void)
{
	int i;
	pthread_mutex_lock(&pool.mu);
	for (i = 0; i < NCLASS; i++) {
		while (pool.free[i]) {
			struct stage_hdr *h = pool.free[i];
			pool.free[i] = h->next;
			pool.bytes -= h->bytes;
			if (psl__cu.free_host)
				psl__cu.free_host(h);
		}
	}
	pthread_mutex_unlock(&pool.mu);
}

void psl__cuda_reset(void)
{
	pool_drain();
	psl__cu_streams_reset();
}
