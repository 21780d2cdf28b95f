/* A KV worker batch's sends (kv_batch.h): its GPU push tensors staged
 * through pinned buffers (or, for a van that reads GPU memory, marked)
 * after the caller's queued work, without waiting for it; its messages
 * sent at once, or by the core's CUDA thread (cuda_after.c) once that data
 * is ready, in order with the worker's other queued requests. */
#include "config.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdlib.h>
#include <time.h>

#include "cuda.h"
#include "customer.h"
#include "kv.h"
#include "kv_batch.h"
#include "kv_tensor.h"
#include "log.h"
#include "postoffice.h"
#include "van_host.h"

uint64_t psl__kvb_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Push tensors in CUDA memory that the van cannot take are copied once into
 * pinned buffers, which every server's message of the tensor is sent from;
 * a van that takes them as they are gets a mark per device. Either comes
 * after the caller's work queued on its stream; nobody waits here. */
static int stage_pushes(struct psl_kv_worker *w, struct kvb *q)
{
	size_t i;
	int rc, marked_dev = -1;
	bool direct = psl__cuda_direct(w->c.office);
	for (i = 0; i < q->b->npush; i++) {
		const struct psl_kv_tensor *t = &q->b->push[i];
		if (t->mem != PSL_MEM_CUDA || !t->len || (direct && t->dev == marked_dev))
			continue;
		if (!q->ev && !(q->ev = calloc(q->b->npush, sizeof(*q->ev))))
			return -ENOMEM;
		q->ev[i].dev = t->dev;
		if (direct) {
			marked_dev = t->dev;
			if ((rc = psl__cuda_mark(q->stream, t->dev, &q->ev[i].ev)))
				return rc;
			continue;
		}
		if (!q->stage && !(q->stage = calloc(q->b->npush, sizeof(void *))))
			return -ENOMEM;
		if (!(q->stage[i] = psl__cuda_stage_get(t->len * w->esz, t->dev, &rc)))
			return rc;
		rc = psl__cuda_copy_out(q->stage[i], t->vals, t->dev, t->len * w->esz, q->stream,
					&q->ev[i].ev);
		if (rc)
			return rc;
	}
	return 0;
}

/* GPU pull tensors are written after the caller's work queued so far. */
static int mark_pulls(struct kvb *q)
{
	size_t i;
	for (i = 0; i < q->b->npull; i++) {
		const struct psl_kv_tensor *t = &q->b->pull[i];
		if (t->mem == PSL_MEM_CUDA && t->len) {
			q->mark_dev = t->dev;
			return psl__cuda_mark(q->stream, t->dev, &q->mark);
		}
	}
	return 0;
}

int psl__kvb_prepare(struct psl_kv_worker *w, struct kvb *q)
{
	int rc = stage_pushes(w, q);
	return rc ? rc : mark_pulls(q);
}

/* Waits for every push tensor's readiness still pending (giving each
 * back): err, else the first failure's -errno (logged). */
static int wait_pushes(struct kvb *q, int err)
{
	size_t i;
	for (i = 0; q->ev && i < q->b->npush; i++) {
		int rc;
		if (!q->ev[i].ev)
			continue;
		rc = psl__cuda_done_wait(q->ev[i].dev, q->ev[i].ev);
		q->ev[i].ev = NULL;
		if (rc && !err)
			err = rc;
	}
	return err;
}

static bool pushes_pending(const struct kvb *q)
{
	size_t i;
	for (i = 0; q->ev && i < q->b->npush; i++)
		if (q->ev[i].ev)
			return true;
	return false;
}

void psl__kvb_free(struct kvb *q)
{
	size_t i;
	if (wait_pushes(q, 0)) /* (before the buffers go back) */
		psl__clear_error();
	for (i = 0; q->stage && i < q->b->npush; i++)
		psl__cuda_stage_put(q->stage[i]);
	free(q->stage);
	free(q->ev);
	psl__cuda_mark_put(q->mark_dev, q->mark);
	free(q->first);
	free(q->left);
	free(q);
}

/* ref: a hold of the batch (the caller's tensors and q's keys go out as
 * they are), given back here if the message is not sent. */
static int send_msg(struct kvb *q, size_t i, struct psl__sendref *ref)
{
	struct psl_kv_worker *w = q->w;
	struct bmsg *g = &q->msg[i];
	int id = psl__server_id(w->c.office, g->rank);
	int count = q->first[g->rank + 1] - q->first[g->rank], idx = (int)i - q->first[g->rank];
	bool push;
	const struct psl_kv_tensor *t = psl__kvb_tensor(q, g->t, &push);
	struct psl_van_seg segs[2];
	struct psl__meta m;
	char shape[PSL__TDESC_BODY];
	int rc = psl__send_check(w->c.office, id);

	if (rc) {
		ref->done(ref, rc);
		return rc;
	}
	psl__kv_request_meta(w, &m, q->cmd, q->r->ts, push, id);
	m.key = g->key;
	m.addr = (uint64_t)(uintptr_t)t->vals;
	m.val_len = (int)t->len;
	m.option = PSL_KV_BATCH_OPTION(count, idx);
	psl__kv_meta_data(&m, w->dt, true, false);
	if (push)
		psl__tdesc_put(&m, w->dt, t, shape);
	psl__kv_meta_dev(&m, push, t->mem, t->dev);
	segs[0] = (struct psl_van_seg){&g->key, 8, PSL_MEM_HOST, -1, NULL};
	if (push && q->stage && q->stage[g->t])
		segs[1] = (struct psl_van_seg){q->stage[g->t], t->len * w->esz, PSL_MEM_HOST, -1,
					       NULL};
	else
		segs[1] = (struct psl_van_seg){push ? t->vals : NULL, push ? t->len * w->esz : 0,
					       push && t->len ? t->mem : PSL_MEM_HOST,
					       push && t->len && t->mem ? t->dev : -1, NULL};
	return psl__send(w->c.office, &m, segs, 2, ref);
}

/* Message i of q (server rank's next), unless that server already failed
 * the request; err (not 0): that server fails it with err instead. */
static void send_one(struct kvb *q, int rank, size_t i, int err)
{
	struct psl__customer *c = &q->w->c;
	int id = psl__server_id(c->office, rank);
	struct psl__sendref *ref = NULL;
	bool done;
	char d[96];

	pthread_mutex_lock(&c->mu);
	if (psl__req_awaits_locked(c, q->r, id)) {
		if (err)
			(void)psl__req_answer_locked(c, q->r, id, err); /* (still held) */
		else
			ref = psl__req_hold_sends_locked(q->r, 1);
	}
	pthread_mutex_unlock(&c->mu);
	if (!ref || !(err = send_msg(q, i, ref)))
		return;
	PSL_LOG(err == -EHOSTDOWN || err == -ENOLINK ? PSL_LOG_DEBUG : PSL_LOG_WARN,
		"batch %d of app %d: cannot send to %s: %s", q->r->ts, c->app_id,
		psl__node_desc(c->office, id, d, sizeof(d)), psl_strerror(err));
	pthread_mutex_lock(&c->mu);
	done = psl__req_answer_locked(c, q->r, id, err);
	pthread_mutex_unlock(&c->mu);
	(void)done; /* (still held: completes at the unhold) */
}

/* Every message, one per server in turn, so that every server starts
 * early (or every server's failure with err); then the hold for them goes
 * back (q may be freed then). */
static void send_all(struct kvb *q, int err)
{
	struct psl__customer *c = &q->w->c;
	struct psl__req *r = q->r;
	int rank, maxn = 0;
	size_t i;
	bool done;

	for (rank = 0; rank < q->S; rank++)
		if (q->first[rank + 1] - q->first[rank] > maxn)
			maxn = q->first[rank + 1] - q->first[rank];
	for (i = 0; i < (size_t)maxn; i++)
		for (rank = 0; rank < q->S; rank++)
			if ((int)i < q->first[rank + 1] - q->first[rank])
				send_one(q, rank, (size_t)q->first[rank] + i, err);
	q->b->times.sent_ns = psl__kvb_now_ns();
	pthread_mutex_lock(&c->mu);
	done = psl__req_unhold_locked(c, r, 0);
	pthread_mutex_unlock(&c->mu);
	if (done)
		psl__req_finish(c, r);
}

/* The CUDA thread's turn of a queued batch. */
static void after_run(struct psl__cuda_after *a, int err)
{
	struct kvb *q = (struct kvb *)(void *)((char *)a - offsetof(struct kvb, after));
	struct psl_kv_worker *w = q->w;
	psl__enter(w->c.office);
	send_all(q, wait_pushes(q, err));
	psl__kv_deferred_done(w);
}

void psl__kvb_send(struct psl_kv_worker *w, struct kvb *q, struct psl__req *r, int cmd)
{
	q->w = w;
	q->r = r;
	q->cmd = cmd;
	if (pushes_pending(q) || atomic_load(&w->deferred)) {
		q->after = (struct psl__cuda_after){.dev = -1, .ev = NULL, .run = after_run};
		if (psl__kv_defer(w, &q->after) == 0)
			return;
		/* (could not queue: sent here, after w's queued ones) */
		psl__cuda_after_idle();
	}
	send_all(q, wait_pushes(q, 0));
}
