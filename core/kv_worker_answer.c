/* The KV worker's answer side: pull answers checked and put in place (or
 * lent to the van as receive buffers), completion, loans back. */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda.h"
#include "kv.h"
#include "kv_worker.h"
#include "log.h"
#include "postoffice.h"

/* (below: a loan handed to the van comes back here) */
static void worker_loan_put(struct psl__loan *hdr, int status);

static int accept_pull(struct psl_kv_worker *w, struct pull *p, const struct psl__meta *m,
		       struct psl_van_rmsg *raw, char *why, size_t whylen)
{
	int rank = psl__id_to_group_rank(w->c.office, m->sender);
	size_t nk, nv, i;
	const struct psl_van_rseg *s = raw->segs;
	long long sum = 0;

	if (rank < 0 || rank >= p->nservers)
		return -EPROTO;
	nk = p->part[rank].k1 - p->part[rank].k0;
	if (raw->nseg < 2 || raw->nseg > 3) {
		snprintf(why, whylen, "%u data frames, expected keys, values and optional lens",
			 raw->nseg);
		return -EPROTO;
	}
	if (s[0].len != nk * 8 ||
	    (nk && memcmp(s[0].data, p->keys + p->part[rank].k0, nk * 8) != 0)) {
		snprintf(why, whylen, "its keys (%zu bytes) are not the %zu keys requested",
			 s[0].len, nk);
		return -EPROTO;
	}
	if (s[1].len % w->esz) {
		snprintf(why, whylen, "%zu value bytes is not a multiple of the value size %zu",
			 s[1].len, w->esz);
		return -EPROTO;
	}
	nv = s[1].len / w->esz;
	if (raw->nseg == 3) {
		if (s[2].len != nk * 4) {
			snprintf(why, whylen, "%zu lens for %zu keys", s[2].len / 4, nk);
			return -EPROTO;
		}
		for (i = 0; i < nk; i++) {
			int32_t l = psl__load_i32((const char *)s[2].data + 4 * i);
			if (l < 0) {
				snprintf(why, whylen, "lens[%zu]=%d is negative", i, l);
				return -EPROTO;
			}
			sum += l;
		}
		if ((size_t)sum != nv) {
			snprintf(why, whylen, "lens add up to %lld values but %zu came", sum, nv);
			return -EPROTO;
		}
	} else if (p->out->lens && nk && nv % nk) {
		snprintf(why, whylen, "no lens, and %zu values do not split evenly over %zu keys",
			 nv, nk);
		return -EPROTO;
	}
	p->part[rank].raw = raw;
	return 0;
}

void psl__kvw_on_msg(struct psl__customer *c, struct psl__meta *m, struct psl_van_rmsg *raw)
{
	struct psl_kv_worker *w = (struct psl_kv_worker *)c;
	struct psl__req *r;
	char why[160] = "", d[96];
	int err = 0;
	bool done, kept = false;

	if (m->request || m->simple_app) {
		PSL_WARN("dropped a %s from %s for KV worker app %d: a worker takes only KV "
			 "responses",
			 m->simple_app ? "SimpleApp message" : "request",
			 psl__node_desc(c->office, m->sender, d, sizeof(d)), c->app_id);
		psl__raw_release(raw);
		return;
	}
	pthread_mutex_lock(&c->mu);
	r = psl__req_find_locked(c, m->timestamp);
	if (!r || !psl__req_awaits_locked(c, r, m->sender)) {
		pthread_mutex_unlock(&c->mu);
		/* (a late error answer is no news: a batch's server answers each
		 * of its messages, and the first error already failed it) */
		PSL_LOG(m->option < 0 && raw->nseg == 0 ? PSL_LOG_DEBUG : PSL_LOG_WARN,
			"dropped a response from %s for request %d of app %d customer %d: no "
			"such request is waiting for that node",
			psl__node_desc(c->office, m->sender, d, sizeof(d)), m->timestamp, c->app_id,
			c->customer_id);
		psl__raw_release(raw);
		return;
	}
	if (r->priv && ((struct pull *)r->priv)->kind == PSL__KV_BATCH) {
		done = psl__kvb_on_answer_locked(w, r, m, raw, &kept);
		pthread_mutex_unlock(&c->mu);
		if (!kept)
			psl__raw_release(raw);
		if (done)
			psl__req_finish(c, r);
		return;
	}
	if (m->option < 0 && m->option >= -4095 && raw->nseg == 0) {
		err = m->option; /* an error reply from a pslite server */
		if (err == -ENXIO)
			PSL_WARN("request %d of app %d fails with ENXIO: %s has no KV server for "
				 "app %d (it held the request for PS_HELD_TIMEOUT); create a KV "
				 "server for app %d on that node (psl_kv_server_new) or use the app "
				 "id it has",
				 m->timestamp, c->app_id, psl__node_desc(c->office, m->sender, d, sizeof(d)),
				 c->app_id, c->app_id);
	} else if (r->priv && ((struct pull *)r->priv)->kind == KIND_PULL) {
		err = accept_pull(w, r->priv, m, raw, why, sizeof(why));
		kept = err == 0;
	}
	done = psl__req_answer_locked(c, r, m->sender, err);
	pthread_mutex_unlock(&c->mu);
	if (err == -EPROTO)
		PSL_WARN("pull response from %s for request %d is inconsistent (%s): the request "
			 "fails with EPROTO",
			 psl__node_desc(c->office, m->sender, d, sizeof(d)), m->timestamp, why);
	if (!kept)
		psl__raw_release(raw);
	if (done)
		psl__req_finish(c, r);
}

/* Copies server rank's values (raw) to dst in out->vals. Into GPU memory
 * of a caller that named a stream, the copy is queued and not waited for
 * (from a pinned buffer: the stream's later work comes after it, and the
 * buffer goes back to the pool once the copy has read it). */
static int copy_part(struct pull *p, int rank, const struct psl_van_rmsg *raw, void *dst)
{
	return psl__cuda_copy_answer(dst, p->mo.out_mem, p->mo.out_dev, &raw->segs[1], p->mo.mark,
				     p->mo.stream, &p->part[rank].stage);
}

void psl__kvw_on_complete(struct psl__customer *c, struct psl__req *r)
{
	struct psl_kv_worker *w = (struct psl_kv_worker *)c;
	struct pull *p = r->priv;
	size_t total = 0, off = 0;
	int i;

	if (!p)
		return;
	if (p->kind == PSL__KV_BATCH) {
		psl__kvb_on_complete(w, r);
		return;
	}
	if (p->kind == KIND_TRIGGER) { /* the push half of a push-pull is done */
		struct trigger *t = r->priv;
		struct psl__sendref *zq = NULL;
		struct psl__req *rq;
		r->priv = NULL;
		pthread_mutex_lock(&c->mu);
		rq = psl__req_find_locked(c, t->ts); /* (held by this push) */
		if (rq && !t->p->keys_copy)
			zq = psl__req_hold_sends_locked(rq, psl__kvw_pull_slices(t->p));
		pthread_mutex_unlock(&c->mu);
		psl__kvw_send_pulls(w, t->p, t->ts, zq);
		free(t);
		return;
	}
	for (i = 0; i < p->nservers; i++)
		if (p->part[i].raw)
			total += p->part[i].raw->segs[1].len / w->esz;
	if (!r->status) {
		p->out->num_vals = total;
		if (total > p->out->cap)
			r->status = -EMSGSIZE;
	}
	for (i = 0; i < p->nservers; i++) {
		struct psl_van_rmsg *raw = p->part[i].raw;
		size_t nk = p->part[i].k1 - p->part[i].k0, bytes;
		if (!raw)
			continue;
		bytes = raw->segs[1].len;
		if (!r->status) {
			/* (the van may have received the values in place) */
			if (bytes && raw->segs[1].data != (char *)p->out->vals + off * w->esz) {
				int rc = copy_part(p, i, raw, (char *)p->out->vals + off * w->esz);
				if (rc)
					r->status = rc;
			}
			if (p->out->lens && nk) {
				if (raw->nseg == 3) {
					memcpy(p->out->lens + p->part[i].k0, raw->segs[2].data,
					       nk * 4);
				} else {
					size_t k;
					for (k = 0; k < nk; k++)
						p->out->lens[p->part[i].k0 + k] =
							(int)(bytes / w->esz / nk);
				}
			}
		}
		off += bytes / w->esz;
		psl__raw_release(raw);
	}
	psl__kv_copy_put(p->keys_copy);
	psl__kvw_pull_free(p);
	r->priv = NULL;
}

/* A pinned buffer of len bytes for server rank's answer (the pull's until
 * it is freed), as the van's destination. 0 or -errno. */
static int lend_stage(struct pull *p, int rank, size_t len, struct psl_van_dest *dest)
{
	int rc = -ENOMEM;
	if (p->part[rank].stage && p->part[rank].stage_len < len) {
		psl__cuda_stage_put(p->part[rank].stage);
		p->part[rank].stage = NULL;
	}
	if (!p->part[rank].stage) {
		p->part[rank].stage = psl__cuda_stage_get(len, p->mo.out_dev, &rc);
		if (!p->part[rank].stage)
			return rc;
		p->part[rank].stage_len = len;
	}
	dest->data = p->part[rank].stage;
	dest->mem_type = PSL_MEM_HOST;
	dest->dev_id = -1;
	return 0;
}

/* The van asks where a pull answer's values should go: straight into the
 * caller's out->vals when this answer's place there is known before it
 * arrives (it comes first: no server before it has keys of the request)
 * and it fits; for out->vals in GPU memory that the van cannot write (or
 * not yet: the caller's earlier work still runs), a pinned buffer. The
 * request cannot complete until the loan comes back. */
int psl__kvw_recv_dest(struct psl__customer *c, const struct psl__meta *m, uint32_t seg,
			 size_t len, struct psl_van_dest *dest)
{
	struct psl_kv_worker *w = (struct psl_kv_worker *)c;
	int rank = psl__id_to_group_rank(c->office, m->sender), i, rc = -ENOENT;
	struct psl__req *r;
	struct pull *p;
	struct loan *l;

	if (m->request || m->simple_app || seg != 1 || !len || len % w->esz)
		return -EINVAL;
	if (!(l = malloc(sizeof(*l))))
		return -ENOMEM;
	pthread_mutex_lock(&c->mu);
	r = psl__req_find_locked(c, m->timestamp);
	p = r ? r->priv : NULL;
	if (p && p->kind == PSL__KV_BATCH) {
		rc = psl__kvb_recv_dest_locked(w, r, m, seg, len, dest);
		if (rc >= 0) {
			l->hdr.put = worker_loan_put;
			l->c = c;
			l->r = r;
			l->rank = rc;
			dest->loan = l;
			l = NULL;
			rc = 0;
		}
		goto out;
	}
	if (m->push)
		goto out;
	if (!p || p->kind != KIND_PULL || !psl__req_awaits_locked(c, r, m->sender) || rank < 0 ||
	    rank >= p->nservers || p->part[rank].raw || p->part[rank].lent ||
	    len > p->out->cap * w->esz || !p->out->vals)
		goto out;
	if (p->mo.out_mem == PSL_MEM_CUDA &&
	    (!psl__cuda_direct(c->office) || !psl__cuda_mark_ready(p->mo.mark))) {
		/* the GPU buffer cannot be lent (yet): a pinned one, from which
		 * the ordered copy on completion is a fast one */
		if ((rc = lend_stage(p, rank, len, dest)))
			goto out;
	} else {
		for (i = 0; i < rank; i++)
			if (p->part[i].k1 != p->part[i].k0)
				goto out;
		dest->data = p->out->vals;
		dest->mem_type = p->mo.out_mem;
		dest->dev_id = p->mo.out_dev;
	}
	p->part[rank].lent = true;
	r->loans++;
	l->hdr.put = worker_loan_put;
	l->c = c;
	l->r = r;
	l->rank = rank;
	dest->loan = l;
	l = NULL;
	rc = 0;
out:
	pthread_mutex_unlock(&c->mu);
	free(l);
	return rc;
}

void psl__kv_loan_put(void *loan, int status)
{
	struct psl__loan *l = loan;
	l->put(l, status);
}

static void worker_loan_put(struct psl__loan *hdr, int status)
{
	struct loan *l = (struct loan *)hdr;
	struct psl__customer *c = l->c;
	bool done;

	pthread_mutex_lock(&c->mu);
	if (((struct pull *)l->r->priv)->kind == PSL__KV_BATCH)
		psl__kvb_loan_back_locked(l->r, l->rank);
	else
		((struct pull *)l->r->priv)->part[l->rank].lent = false;
	/* the data did not come: the answer (if it comes again) is copied */
	done = psl__req_loan_back_locked(c, l->r, 0);
	pthread_mutex_unlock(&c->mu);
	(void)status;
	if (done)
		psl__req_finish(c, l->r);
	free(l);
}
