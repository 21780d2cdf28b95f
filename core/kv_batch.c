/* KV worker batches (StepMesh's ZBatchPushPull): several tensors to one or
 * more servers as one tracked request, sent from and received into the
 * caller's buffers. The wire format is described at psl_kv_batch_pushpull in
 * pslite.h. */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda.h"
#include "customer.h"
#include "kv.h"
#include "kv_batch.h"
#include "kv_tensor.h"
#include "log.h"
#include "postoffice.h"
#include "van_host.h"

/* The rank whose key range holds key, or -1. */
static int rank_of(uint64_t key, int S)
{
	int r;
	for (r = 0; r < S; r++) {
		uint64_t b, e;
		psl_server_key_range(r, &b, &e);
		if (key >= b && (key < e || (r == S - 1 && e == UINT64_MAX && key == e)))
			return r;
	}
	return -1;
}

/* Which server each tensor of b goes to: calls add(rank, t) for each
 * message, in the order messages are numbered. */
static int route(const struct psl_kv_batch *b, int flags, int S,
		 void (*add)(void *ctx, int rank, size_t t), void *ctx)
{
	size_t i, per;
	int r;

	if (flags & PSL_KV_BATCH_BROADCAST) {
		if (b->npull % (size_t)S)
			return PSL_FAIL(-EINVAL, PSL_LOG_WARN,
					"batch rejected: %zu pull tensors do not split evenly over "
					"%d servers (PSL_KV_BATCH_BROADCAST pulls npull/num_servers "
					"from each)", b->npull, S);
		per = b->npull / (size_t)S;
		for (r = 0; r < S; r++)
			for (i = 0; i < b->npush; i++)
				add(ctx, r, i);
		for (i = 0; i < b->npull; i++)
			add(ctx, (int)(i / per), b->npush + i);
		return 0;
	}
	for (i = 0; i < b->npush + b->npull; i++) {
		uint64_t key = i < b->npush ? b->push[i].key : b->pull[i - b->npush].key;
		r = rank_of(key, S);
		if (r < 0)
			return PSL_FAIL(-EINVAL, PSL_LOG_WARN, "batch rejected: key %" PRIu64
					" is beyond the last server's range", key);
		add(ctx, r, i);
	}
	return 0;
}

struct fill {
	struct kvb *q;
	int *pos;
	bool count_only;
};

static void add_msg(void *ctx, int rank, size_t t)
{
	struct fill *f = ctx;
	struct kvb *q = f->q;
	if (f->count_only) {
		q->left[rank]++;
		q->nmsg++;
		return;
	}
	q->msg[f->pos[rank]++] = (struct bmsg){.t = t,
					       .key = t < q->b->npush
							      ? q->b->push[t].key
							      : q->b->pull[t - q->b->npush].key,
					       .rank = rank};
}

static int bad_tensor(const char *what, size_t i, const struct psl_kv_tensor *t)
{
	return PSL_FAIL(-EINVAL, PSL_LOG_WARN, "batch rejected: %s[%zu] (key %" PRIu64 ") %s",
			what, i, t->key,
			t->len > INT32_MAX ? "has more than 2^31-1 values: split it"
					   : "has len > 0 but vals NULL");
}

static int check_batch(const struct psl_kv_worker *w, const struct psl_kv_batch *b)
{
	size_t i;
	int rc;
	if ((b->npush && !b->push) || (b->npull && !b->pull))
		return PSL_FAIL(-EINVAL, PSL_LOG_WARN, "batch rejected: %s is NULL but %s is not 0",
				b->npush && !b->push ? "push" : "pull",
				b->npush && !b->push ? "npush" : "npull");
	for (i = 0; i < b->npush; i++) {
		if ((b->push[i].len && !b->push[i].vals) || b->push[i].len > INT32_MAX)
			return bad_tensor("push", i, &b->push[i]);
		if ((rc = psl__tdesc_check(&b->push[i], w->esz, "psl_kv_batch_pushpull: push")))
			return rc;
		if ((rc = psl__cuda_check("psl_kv_batch_pushpull: a push tensor's vals",
					  b->push[i].vals, b->push[i].len * w->esz, b->push[i].mem,
					  b->push[i].dev)))
			return rc;
	}
	for (i = 0; i < b->npull; i++) {
		if ((b->pull[i].len && !b->pull[i].vals) || b->pull[i].len > INT32_MAX)
			return bad_tensor("pull", i, &b->pull[i]);
		if ((rc = psl__cuda_check("psl_kv_batch_pushpull: a pull tensor's vals",
					  b->pull[i].vals, b->pull[i].len * w->esz, b->pull[i].mem,
					  b->pull[i].dev)))
			return rc;
	}
	return 0;
}

static struct kvb *plan(struct psl_kv_worker *w, struct psl_kv_batch *b, int flags, int S,
			int *err)
{
	struct kvb probe = {0}, *q = NULL;
	int *counts = calloc((size_t)S * 2 + 1, sizeof(int)), r, rc;
	struct fill f = {0};

	(void)w;
	if (!counts) {
		*err = -ENOMEM;
		return NULL;
	}
	probe.b = b;
	probe.left = counts;
	f.q = &probe;
	f.count_only = true;
	rc = route(b, flags, S, add_msg, &f);
	if (rc)
		goto fail;
	for (r = 0; r < S; r++) {
		if (counts[r] > PSL_KV_BATCH_MAX) {
			rc = PSL_FAIL(-E2BIG, PSL_LOG_WARN, "batch rejected: %d messages for server "
				      "%d, at most %d per server", counts[r], r, PSL_KV_BATCH_MAX);
			goto fail;
		}
	}
	q = calloc(1, sizeof(*q) + probe.nmsg * sizeof(q->msg[0]));
	if (!q || !(q->first = calloc((size_t)S + 1, sizeof(int))) ||
	    !(q->left = calloc((size_t)S, sizeof(int)))) {
		rc = -ENOMEM;
		goto fail;
	}
	q->kind = PSL__KV_BATCH;
	q->b = b;
	q->S = S;
	q->nmsg = probe.nmsg;
	for (r = 0; r < S; r++) {
		q->first[r + 1] = q->first[r] + counts[r];
		q->left[r] = counts[r];
		counts[S + r] = q->first[r]; /* fill positions */
	}
	f.q = q;
	f.pos = counts + S;
	f.count_only = false;
	route(b, flags, S, add_msg, &f);
	free(counts);
	return q;
fail:
	if (q) {
		free(q->first);
		free(q->left);
		free(q);
	}
	free(counts);
	*err = rc;
	return NULL;
}

static int batch_pushpull(struct psl_kv_worker *w, struct psl_kv_batch *b, int cmd, int flags,
			  psl_kv_cb cb, void *arg)
{
	struct psl__customer *c;
	struct psl__req *r;
	struct kvb *q;
	int S, rc = 0, ts, rank;
	size_t i;
	uint64_t t0 = psl__kvb_now_ns();

	if (!w || !b || (flags & ~PSL_KV_BATCH_BROADCAST))
		return PSL_FAIL(-EINVAL, PSL_LOG_WARN, "psl_kv_batch_pushpull: %s",
				!w ? "w is NULL" : !b ? "b is NULL"
				: "flags has bits other than PSL_KV_BATCH_BROADCAST");
	psl__enter(w->c.office);
	if (w->c.office->state != PSL__READY)
		return PSL_FAIL(-ESHUTDOWN, PSL_LOG_WARN, "psl_kv_batch_pushpull: pslite is not "
				"started on this node (or is finalizing)");
	rc = check_batch(w, b);
	if (rc)
		return rc;
	c = &w->c;
	S = c->office->cfg.server_groups;
	if (S <= 0)
		return PSL_FAIL(-EINVAL, PSL_LOG_WARN, "psl_kv_batch_pushpull: the job has no "
				"servers");
	q = plan(w, b, flags, S, &rc);
	if (!q)
		return rc;
	q->stream = atomic_load(&w->cuda_stream);
	if ((rc = psl__kvb_prepare(w, q))) {
		psl__kvb_free(q);
		return rc;
	}
	memset(&b->times, 0, sizeof(b->times));
	b->times.submit_ns = t0;
	for (i = 0; i < b->npull; i++)
		b->pull[i].received = 0;

	pthread_mutex_lock(&c->mu);
	r = psl__req_new_locked(c);
	if (!r) {
		pthread_mutex_unlock(&c->mu);
		psl__kvb_free(q);
		return -ENOMEM;
	}
	r->priv = q;
	r->cb = cb;
	r->arg = arg;
	ts = r->ts;
	for (rank = 0; rank < S; rank++)
		if (q->left[rank])
			psl__req_expect_locked(c, r, psl__server_id(w->c.office, rank));
	r->holds++; /* q is ours until every message is sent */
	pthread_mutex_unlock(&c->mu);
	psl__kvb_send(w, q, r, cmd);
	return ts;
}

int psl_kv_batch_pushpull(struct psl_kv_worker *w, struct psl_kv_batch *b, int cmd, int flags,
			  psl_kv_cb cb, void *arg)
{
	psl__clear_error();
	return psl__ret("psl_kv_batch_pushpull", batch_pushpull(w, b, cmd, flags, cb, arg));
}

/* The message an answer is for: from its sender's rank and the echoed
 * option. NULL if it is none of this batch's. */
static struct bmsg *msg_of(struct psl__office *o, struct kvb *q, const struct psl__meta *m)
{
	int rank = psl__id_to_group_rank(o, m->sender), count, idx;
	if (rank < 0 || rank >= q->S || m->option < 0 || !(m->option & 0x40000000))
		return NULL;
	count = (m->option >> 15) & 0x7fff;
	idx = m->option & 0x7fff;
	if (count != q->first[rank + 1] - q->first[rank] || idx >= count)
		return NULL;
	return &q->msg[q->first[rank] + idx];
}

/* A pull answer's dtype and shape onto its pull tensor. */
static void answer_tdesc(const struct psl__meta *m, size_t bytes, struct psl_kv_tensor *t)
{
	struct psl__tdesc d;
	psl__tdesc_get(m, &d);
	psl__tdesc_apply(&d, bytes, t);
}

bool psl__kvb_on_answer_locked(struct psl_kv_worker *w, struct psl__req *r,
			       const struct psl__meta *m, struct psl_van_rmsg *raw, bool *kept)
{
	struct psl__customer *c = &w->c;
	struct kvb *q = r->priv;
	struct bmsg *g;
	char d[96], why[160] = "";
	int rank = psl__id_to_group_rank(w->c.office, m->sender), err = 0;
	const struct psl_kv_tensor *t;
	bool push;

	*kept = false;
	q->b->times.answered_ns = psl__kvb_now_ns();
	if (m->option < 0 && m->option >= -4095 && raw->nseg == 0) {
		/* the server failed the batch: whatever else it owes is void */
		PSL_DBG("batch %d: %s answered %s", m->timestamp,
			  psl__node_desc(w->c.office, m->sender, d, sizeof(d)), psl_strerror(m->option));
		return psl__req_answer_locked(c, r, m->sender, m->option);
	}
	g = msg_of(w->c.office, q, m);
	if (!g) {
		snprintf(why, sizeof(why), "its option %#x names no message of the batch",
			 (unsigned)m->option);
		err = -EPROTO;
		goto fail_server;
	}
	if (g->answered) {
		PSL_WARN("dropped a second answer from %s to message %d of batch %d",
			 psl__node_desc(w->c.office, m->sender, d, sizeof(d)), (int)(g - q->msg), m->timestamp);
		return false;
	}
	t = psl__kvb_tensor(q, g->t, &push);
	if (push != m->push) {
		snprintf(why, sizeof(why), "a %s answer to a %s", m->push ? "push" : "pull",
			 push ? "push" : "pull");
		err = -EPROTO;
		goto fail_server;
	}
	if (!push) {
		size_t nv;
		if (raw->nseg < 2 || raw->nseg > 3 || raw->segs[0].len != 8 ||
		    psl__load_u64(raw->segs[0].data) != g->key) {
			snprintf(why, sizeof(why), "it is not key %" PRIu64 " with its values",
				 g->key);
			err = -EPROTO;
			goto fail_server;
		}
		if (raw->segs[1].len % w->esz) {
			snprintf(why, sizeof(why), "%zu value bytes for values of %zu bytes",
				 raw->segs[1].len, w->esz);
			err = -EPROTO;
			goto fail_server;
		}
		nv = raw->segs[1].len / w->esz;
		q->b->pull[g->t - q->b->npush].received = nv;
		answer_tdesc(m, raw->segs[1].len, &q->b->pull[g->t - q->b->npush]);
		if (nv > t->len) {
			PSL_WARN("batch %d: %s sent %zu values for key %" PRIu64
				 ", the pull buffer holds %zu: the batch fails with EMSGSIZE",
				 m->timestamp, psl__node_desc(w->c.office, m->sender, d, sizeof(d)), nv, g->key,
				 t->len);
			if (!r->status)
				r->status = -EMSGSIZE;
		} else {
			g->raw = raw;
			*kept = true;
		}
	}
	g->answered = true;
	if (--q->left[rank] == 0)
		return psl__req_answer_locked(c, r, m->sender, 0);
	return false;

fail_server:
	PSL_WARN("answer from %s for batch %d is inconsistent (%s): the batch fails with EPROTO",
		 psl__node_desc(w->c.office, m->sender, d, sizeof(d)), m->timestamp, why);
	return psl__req_answer_locked(c, r, m->sender, err);
}

int psl__kvb_recv_dest_locked(struct psl_kv_worker *w, struct psl__req *r,
			      const struct psl__meta *m, uint32_t seg, size_t len,
			      struct psl_van_dest *dest)
{
	struct kvb *q = r->priv;
	struct bmsg *g;
	const struct psl_kv_tensor *t;
	bool push;

	if (m->push || seg != 1 || !psl__req_awaits_locked(&w->c, r, m->sender))
		return -EINVAL;
	g = msg_of(w->c.office, q, m);
	if (!g || g->answered || g->lent)
		return -ENOENT;
	t = psl__kvb_tensor(q, g->t, &push);
	if (push || !t->vals || len > t->len * w->esz ||
	    (t->mem == PSL_MEM_CUDA && (!psl__cuda_direct(w->c.office) || !psl__cuda_mark_ready(q->mark))))
		return -ENOENT;
	g->lent = true;
	r->loans++;
	dest->data = t->vals;
	dest->mem_type = t->mem;
	dest->dev_id = t->mem ? t->dev : -1;
	return (int)(g - q->msg);
}

void psl__kvb_loan_back_locked(struct psl__req *r, int idx)
{
	struct kvb *q = r->priv;
	q->msg[idx].lent = false;
}

void psl__kvb_on_complete(struct psl_kv_worker *w, struct psl__req *r)
{
	struct kvb *q = r->priv;
	size_t i;

	for (i = 0; i < q->nmsg; i++) {
		struct bmsg *g = &q->msg[i];
		struct psl_kv_tensor *t;
		if (!g->raw)
			continue;
		t = &q->b->pull[g->t - q->b->npush];
		/* (the van may have received the values in place) */
		if (!r->status && g->raw->segs[1].len && g->raw->segs[1].data != t->vals) {
			void *stage = NULL; /* (in the van's own buffer) */
			int rc = psl__cuda_copy_answer(t->vals, t->mem, t->dev, &g->raw->segs[1],
						       q->mark, q->stream, &stage);
			if (rc)
				r->status = rc;
		}
		psl__raw_release(g->raw);
	}
	q->b->times.completed_ns = psl__kvb_now_ns();
	if (!q->b->times.answered_ns)
		q->b->times.answered_ns = q->b->times.sent_ns ? q->b->times.sent_ns
							      : q->b->times.completed_ns;
	if (!q->b->times.sent_ns)
		q->b->times.sent_ns = q->b->times.answered_ns;
	(void)w;
	psl__kvb_free(q);
	r->priv = NULL;
}
