/* The KV worker's private parts, shared by its request side (kv_worker.c)
 * and its answer side (kv_worker_answer.c). */
#ifndef PSL_CORE_KV_WORKER_H
#define PSL_CORE_KV_WORKER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "customer.h"
#include "kv.h"

enum { KIND_PULL = PSL__KV_PULL, KIND_TRIGGER = PSL__KV_TRIGGER };

/* Where a request's buffers are: the caller's values (user_*), what is sent
 * (send_mem: host once staged) and the pull destination (out_*); the
 * caller's CUDA stream and, for a pull into GPU memory, the mark of the
 * work queued there before the call (written only after it). */
struct mem_of {
	int user_mem, user_dev, send_mem, out_mem, out_dev;
	void *stream, *mark;
};

/* Per-request state of a pull: where the answers go. */
struct pull {
	int kind; /* KIND_PULL */
	struct psl_kv_out *out;
	const uint64_t *keys;
	size_t nkeys;
	int cmd;
	struct psl__kv_copy *keys_copy;
	struct mem_of mo;
	int nservers;
	struct {
		size_t k0, k1;
		struct psl_van_rmsg *raw;
		bool lent; /* the van writes this server's values into out->vals */
		void *stage; /* or into this pinned buffer (out->vals is on a GPU) */
		size_t stage_len;
	} part[];
};

/* A part of out->vals lent to the van (psl_van_host.recv_dest). */
struct loan {
	struct psl__loan hdr; /* put: worker_loan_put */
	struct psl__customer *c;
	struct psl__req *r; /* stays PENDING while lent */
	int rank;	     /* pull: the server's rank; batch: the message */
};

/* The push half of a push-pull, when the pull half must wait for it (with
 * PS_RESEND a lost push is resent later, and the pull must not overtake it):
 * its completion sends the pull. */
struct trigger {
	int kind; /* KIND_TRIGGER */
	struct pull *p;
	int ts; /* the pull's */
};

/* Sending (kv_send.c): one slice to server rank r (its data is cp's, or
 * else the caller's, which the request's completion waits for: zref, a
 * hold of the request given back if the slice is not sent); a slice that
 * could not be sent fails the request's part for that server; how many
 * servers a pull asks, its sends (zref: the held sends of a zero-copy
 * request, or NULL); a pull record for S servers (zeroed), and its end. */
int psl__kvw_send_slice(struct psl_kv_worker *w, int ts, int r, bool push, int cmd,
			const uint64_t *keys, size_t nk, const void *vals, size_t nv,
			const int *lens, void *out_ptr, size_t out_elems, struct psl__kv_copy *cp,
			struct psl__sendref *zref, const struct mem_of *mo);
void psl__kvw_send_failed(struct psl_kv_worker *w, int ts, int r, int rc);
int psl__kvw_pull_slices(const struct pull *p);
void psl__kvw_send_pulls(struct psl_kv_worker *w, struct pull *p, int ts,
			 struct psl__sendref *zref);
struct pull *psl__kvw_pull_get(int S);
void psl__kvw_pull_free(struct pull *p);

/* Answer side (kv_worker_answer.c): the customer's callbacks. */
void psl__kvw_on_msg(struct psl__customer *c, struct psl__meta *m, struct psl_van_rmsg *raw);
void psl__kvw_on_complete(struct psl__customer *c, struct psl__req *r);
int psl__kvw_recv_dest(struct psl__customer *c, const struct psl__meta *m, uint32_t seg,
		       size_t len, struct psl_van_dest *dest);

#endif
