/* A KV worker batch's state (the tracker request's priv), shared by
 * kv_batch.c (checks, plan, answers, completion) and kv_batch_send.c (its
 * GPU push tensors' staging and its messages' sends, which may run on the
 * core's CUDA thread once that data is ready). */
#ifndef PSL_CORE_KV_BATCH_H
#define PSL_CORE_KV_BATCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cuda_after.h"
#include "pslite.h"

struct psl__req;
struct psl_van_rmsg;

/* One message of a batch: one tensor to one server. */
struct bmsg {
	size_t t;    /* tensor: push index, or npush + pull index */
	uint64_t key; /* the keys frame (sent from here) */
	int rank;
	bool answered;
	bool lent; /* the van writes the answer into the pull buffer */
	struct psl_van_rmsg *raw; /* a pull's answer, kept until completion */
};

/* A GPU push tensor's readiness not waited for by the caller: its copy to
 * q->stage (psl__cuda_copy_out), or a mark for a van that reads GPU memory
 * itself; NULL when none or already waited for. */
struct kvb_ev {
	void *ev;
	int dev;
};

struct kvb {
	int kind; /* PSL__KV_BATCH */
	struct psl_kv_batch *b;
	int S;
	int *first; /* S + 1: server r's messages are msg[first[r] .. first[r+1]) */
	int *left;  /* S: answers still owed by server r */
	void **stage; /* NULL, or npush pinned copies of CUDA push tensors */
	struct kvb_ev *ev; /* NULL, or npush (see struct kvb_ev) */
	void *stream; /* the caller's CUDA stream */
	void *mark;   /* GPU pull tensors: the caller's work before the call */
	int mark_dev;
	/* the sends, when queued on the CUDA thread (kv_batch_send.c) */
	struct psl__cuda_after after;
	struct psl_kv_worker *w;
	struct psl__req *r;
	int cmd;
	size_t nmsg;
	struct bmsg msg[];
};

static inline const struct psl_kv_tensor *psl__kvb_tensor(const struct kvb *q, size_t t,
							   bool *push)
{
	*push = t < q->b->npush;
	return *push ? &q->b->push[t] : &q->b->pull[t - q->b->npush];
}

uint64_t psl__kvb_now_ns(void);
/* Queues the copies of q's GPU push tensors to pinned buffers (or marks
 * them, for a van that reads GPU memory), after the work queued so far on
 * q->stream, and marks that work for its GPU pull tensors; nothing waits.
 * 0 or -errno (psl__kvb_free then gives back what was queued). */
int psl__kvb_prepare(struct psl_kv_worker *w, struct kvb *q);
/* Sends request r's messages (r holds one hold for them, given back here):
 * at once, or, when a GPU push tensor is not ready yet or w has sends
 * queued, on the core's CUDA thread once it is, after w's queued ones. */
void psl__kvb_send(struct psl_kv_worker *w, struct kvb *q, struct psl__req *r, int cmd);
void psl__kvb_free(struct kvb *q);

#endif
