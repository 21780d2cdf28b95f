/* KV helpers shared by kv_worker.c and kv_server.c (kv.c). */
#ifndef PSL_CORE_KV_H
#define PSL_CORE_KV_H

#include <stdatomic.h>
#include <stdint.h>
#include <string.h>

#include "customer.h"
#include "message.h"
#include "pslite.h"
#include "van_host.h"

/* A block of copied request or response data shared by several sends. */
struct psl__kv_copy {
	struct psl__sendref ref;
	atomic_int refs;
	void (*user_done)(void *arg); /* zero-copy response: tell the user */
	void *user_arg;
	void *stage; /* a pinned buffer staging CUDA values, or NULL */
	/* data follows */
};

struct psl__kv_copy *psl__kv_copy_new(size_t bytes, int refs);
void psl__kv_copy_put(struct psl__kv_copy *cp);
/* What psl_van_host.recv_dest lends (dest->loan): a KV worker's pull buffer
 * or a KV server's registered receive buffer; put(l, status) takes it back. */
struct psl__loan {
	void (*put)(struct psl__loan *l, int status);
};
/* Receive buffers registered on this process's KV servers (kv_server.c):
 * while there are none, a server's van is told at once that it has no
 * place for what it receives (van_host.c), without decoding the meta. */
extern atomic_int psl__kv_recv_regs;
/* psl_kv_server_free (call) from the server's handler: logged, true
 * (kv_server.c). */
bool psl__kv_server_in_handler(const struct psl_kv_server *s, const char *call);
/* psl_van_host.recv_dest_put: hands the loan back to its owner. */
void psl__kv_loan_put(void *loan, int status);
static inline void *psl__kv_copy_data(struct psl__kv_copy *cp)
{
	return cp + 1;
}

/* A KV worker (kv_worker.c, its answers kv_worker_answer.c; batches: kv_batch.c). */
struct psl_kv_worker {
	struct psl__customer c;
	enum psl_dtype dt;
	size_t esz;
	_Atomic(void *) cuda_stream; /* the caller's stream of its GPU buffers */
	atomic_int deferred; /* requests whose sends wait for a copy (kv_worker.c) */
};

/* What a worker request's priv is (its first int). */
enum { PSL__KV_PULL = 1, PSL__KV_TRIGGER = 2, PSL__KV_BATCH = 3 };

/* kv_batch.c: a batch request's answer (c->mu held; returns true if the
 * request is complete), van destination, loan return and completion. */
bool psl__kvb_on_answer_locked(struct psl_kv_worker *w, struct psl__req *r,
			       const struct psl__meta *m, struct psl_van_rmsg *raw, bool *kept);
int psl__kvb_recv_dest_locked(struct psl_kv_worker *w, struct psl__req *r,
			      const struct psl__meta *m, uint32_t seg, size_t len,
			      struct psl_van_dest *dest);
void psl__kvb_loan_back_locked(struct psl__req *r, int idx);
void psl__kvb_on_complete(struct psl_kv_worker *w, struct psl__req *r);

/* Meta fields common to KV messages: CPU device, data types. */
void psl__kv_meta_data(struct psl__meta *m, enum psl_dtype dt, bool keys, bool lens);
/* The meta's device fields for data in (src) or wanted in (dst) memory mem
 * of device dev, as ps-lite's SArray carries them. */
void psl__kv_meta_dev(struct psl__meta *m, bool src, int mem, int dev);
/* Copies len bytes of CUDA memory (device dev) into a pinned buffer that
 * *cp (created if NULL: refs 1, no data) owns from then on, after the work
 * queued so far on the caller's stream; *out is where they now are. With
 * done NULL the copy is done on return; else it is queued and *done is its
 * completion (psl__cuda_copy_out). 0 or -errno (logged). */
int psl__kv_stage(struct psl__kv_copy **cp, const void *src, int dev, size_t len, void *stream,
		  const void **out,
		  void **done);
/* A request of w's whose sends run on the core's CUDA thread once its GPU
 * data is ready (struct tail in kv_worker.c; AF batches, kv_batch_send.c):
 * a queued, counted in w->deferred so that w's later requests queue behind
 * it: 0, or -EAGAIN (not queued: send it here, after psl__cuda_after_idle).
 * Its run ends with psl__kv_deferred_done. */
struct psl__cuda_after;
int psl__kv_defer(struct psl_kv_worker *w, struct psl__cuda_after *a);
void psl__kv_deferred_done(struct psl_kv_worker *w);

/* What a KV request's meta m says of it to a server (struct psl_kv_meta:
 * the fields its response echoes, docs/wire.md 10.3). */
struct psl_kv_meta psl__kv_meta_of(const struct psl__meta *m);
/* The response to request req (psl__kv_meta_of) of app app_id: meta
 * initialised, head, ids, timestamp, push, key, addr, val_len, option and
 * sid echoed, request 0, to recver. */
void psl__kv_response_meta(struct psl__meta *m, const struct psl_kv_meta *req, int app_id,
			   int sid, int recver);
/* Makes response m an error answer (wire.md 10.5, no data frames): option
 * err (-1 to -4095, else -EIO), val_len 0. */
void psl__kv_error_meta(struct psl__meta *m, int err);
/* A worker's request to node id: meta initialised, then head (cmd), app and
 * customer ids, timestamp, request, push, recver; sid 0. */
void psl__kv_request_meta(const struct psl_kv_worker *w, struct psl__meta *m, int cmd, int ts,
			  bool push, int id);

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
