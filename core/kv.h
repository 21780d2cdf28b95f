/* KV helpers shared by kv_worker.c and kv_server.c (kv.c). */
#ifndef PSL_CORE_KV_H
#define PSL_CORE_KV_H

#include <stdatomic.h>
#include <stdint.h>
#include <string.h>

#include "message.h"
#include "pslite.h"
#include "van_host.h"

/* A block of copied request or response data shared by several sends. */
struct psl__kv_copy {
	struct psl__sendref ref;
	atomic_int refs;
	void (*user_done)(void *arg); /* zero-copy response: tell the user */
	void *user_arg;
	/* data follows */
};

struct psl__kv_copy *psl__kv_copy_new(size_t bytes, int refs);
void psl__kv_copy_put(struct psl__kv_copy *cp);
/* psl_van_host.recv_dest_put for a loan of a KV worker's pull buffer. */
void psl__kv_loan_put(void *loan, int status);
static inline void *psl__kv_copy_data(struct psl__kv_copy *cp)
{
	return cp + 1;
}

/* Meta fields common to KV messages: CPU device, data types. */
void psl__kv_meta_data(struct psl__meta *m, enum psl_dtype dt, bool keys, bool lens);

static inline uint64_t psl__load_u64(const void *p)
{
	uint64_t v;
	memcpy(&v, p, 8);
	return v;
}
static inline int32_t psl__load_i32(const void *p)
{
	int32_t v;
	memcpy(&v, p, 4);
	return v;
}

#endif
