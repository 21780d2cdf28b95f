/*
 * van_fabric registration cache: memory registrations keyed by address range
 * (and memory type and device), so that a buffer sent again is not registered
 * again. Bounded: past max_entries the least recently used entry that nobody
 * holds is deregistered. Thread-safe. Knows nothing of libfabric: it calls
 * the reg/dereg functions it is given (tests/unit drives it with fakes).
 *
 * A registration pins the pages it covered when it was made. If the
 * application frees a buffer and the same addresses are mapped again, a cached
 * entry would describe the old pages; fab_mrc_invalidate() drops the entries of
 * a range (dereg_mem calls it), and PS_FABRIC_MR_CACHE=0 turns caching off.
 */
#ifndef PSL_VAN_FABRIC_MRCACHE_H
#define PSL_VAN_FABRIC_MRCACHE_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct fab_mrc_ent {
	uintptr_t start, end; /* [start, end), page-aligned */
	int32_t mem_type, dev_id;
	void *mr;    /* the registration (reg's output) */
	void *desc;  /* its descriptor for data transfers */
	int refs;    /* holders (sends in flight, reg_mem handles) */
	uint64_t used; /* LRU clock */
	int dead;      /* invalidated while held: dereg at last put */
};

typedef int (*fab_mrc_reg_fn)(void *ctx, void *addr, size_t len, int32_t mem_type,
			      int32_t dev_id, void **mr, void **desc);
typedef void (*fab_mrc_dereg_fn)(void *ctx, void *mr);

struct fab_mrc {
	pthread_mutex_t mu;
	struct fab_mrc_ent **ents; /* sorted by start */
	size_t n, cap, max;
	uint64_t clock;
	size_t page;
	int enabled; /* 0: every get registers, every put deregisters */
	fab_mrc_reg_fn reg;
	fab_mrc_dereg_fn dereg;
	void *ctx;
	/* statistics */
	uint64_t hits, misses, evictions;
};

int fab_mrc_init(struct fab_mrc *c, size_t max_entries, int enabled, fab_mrc_reg_fn reg,
		 fab_mrc_dereg_fn dereg, void *ctx);
/* Deregisters everything (held entries too: call when nothing is in flight). */
void fab_mrc_fini(struct fab_mrc *c);
/* A registration covering [addr, addr+len), held until fab_mrc_put. With
 * cache false (or caching off) it is made for this holder alone and
 * deregistered at its put. */
int fab_mrc_get(struct fab_mrc *c, const void *addr, size_t len, int32_t mem_type,
		int32_t dev_id, bool cache, struct fab_mrc_ent **out);
void fab_mrc_put(struct fab_mrc *c, struct fab_mrc_ent *e);
/* Drops every entry overlapping [addr, addr+len) (held ones at their last put). */
void fab_mrc_invalidate(struct fab_mrc *c, const void *addr, size_t len);

#endif
