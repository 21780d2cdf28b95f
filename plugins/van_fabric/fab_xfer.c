/* van_fabric: sending, receiving and completions. */

#define _GNU_SOURCE 1
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <rdma/fabric.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_tagged.h>

#include "fabric.h"

/* ---------------------------------------------------------------- send -- */

/* The peer's list of live ops, for fini (p->mu held). */
static void op_link(struct fab_peer *p, struct fab_txop *op)
{
	op->lprev = NULL;
	op->lnext = p->live;
	if (p->live)
		p->live->lprev = op;
	p->live = op;
}

void fab_op_unlink(struct fab_peer *p, struct fab_txop *op)
{
	if (op->lprev)
		op->lprev->lnext = op->lnext;
	else
		p->live = op->lnext;
	if (op->lnext)
		op->lnext->lprev = op->lprev;
}

/* Send and receive records of messages of up to CACHE_PARTS parts (a KV
 * message: meta, keys, values, lens) are kept for reuse, at most 256 of
 * each per process: steady traffic allocates none. */
#define CACHE_PARTS 5
#define OP_BYTES(n) (sizeof(struct fab_txop) + (size_t)(n) * sizeof(((struct fab_txop *)0)->part[0]))
#define RX_BYTES(n)                                                                        \
	(sizeof(struct fab_rx) + (size_t)(n) * sizeof(((struct fab_rx *)0)->part[0]) +     \
	 (size_t)((n) > 1 ? (n) - 1 : 1) * sizeof(struct psl_van_rseg))
static struct psl_van_cache op_cache = PSL_VAN_CACHE_INIT(256, OP_BYTES(CACHE_PARTS));
static struct psl_van_cache rx_cache = PSL_VAN_CACHE_INIT(256, RX_BYTES(CACHE_PARTS));

void fab_op_free(struct psl_van *v, struct fab_txop *op)
{
	uint32_t i;
	for (i = 0; i < op->nparts; i++)
		if (op->part[i].mre)
			fab_mrc_put(&v->mrc, op->part[i].mre);
	fab_pool_put(op->hdr);
	fab_pool_put(op->meta);
	psl_van_cache_put(&op_cache, op, OP_BYTES(op->nparts));
}

/* Every part of op is complete (or failed): tell the core. */
static void op_finish(struct psl_van *v, struct fab_txop *op)
{
	struct fab_peer *p = op->peer;
	void *cookie;
	pthread_mutex_lock(&p->mu);
	p->inflight--;
	fab_op_unlink(p, op);
	cookie = op->cookie; /* NULL once fab_fail_live told the core */
	op->cookie = NULL;
	pthread_mutex_unlock(&p->mu);
	if (cookie)
		v->host->send_done(v->host->ctx, cookie, atomic_load(&op->status));
	fab_op_free(v, op);
}

/* The first error of an op is the one send_done reports. */
static void op_set_status(struct fab_txop *op, int status)
{
	int zero = 0;
	if (status)
		atomic_compare_exchange_strong(&op->status, &zero, status);
}

static void op_done_one(struct psl_van *v, struct fab_txop *op, int status)
{
	op_set_status(op, status);
	if (atomic_fetch_sub(&op->pending, 1) == 1)
		op_finish(v, op);
}

/* Posts what is left of the ops queued on p, in order. p->mu held. Returns
 * 0 when the queue is empty, -EAGAIN when the provider is full. */
int fab_post_queue(struct psl_van *v, struct fab_peer *p)
{
	struct fab_txop *op;
	while ((op = p->qhead)) {
		while (op->posted < op->nposts) {
			ssize_t rc;
			uint32_t k = op->posted;
			/* counted before posting: the completion may come first */
			atomic_fetch_add(&op->pending, 1);
			if (k == 0) {
				EP_LOCK(v);
				rc = fi_tsend(v->ep, op->hdr->data, op->hdr_len, op->hdr->desc,
					      p->fa, fab_tag(FAB_KIND_HDR, p->stream, op->seq, 0),
					      &op->hctx);
				EP_UNLOCK(v);
			} else {
				/* the k-th part that is not inline */
				uint32_t i, n = 0;
				struct fab_txpart *tp = NULL;
				for (i = 0; i < op->nparts; i++)
					if (!op->part[i].inl && ++n == k) {
						tp = &op->part[i];
						break;
					}
				EP_LOCK(v);
				rc = fi_tsend(v->ep, tp->data, tp->len, tp->desc, p->fa,
					      fab_tag(FAB_KIND_DATA, p->stream, op->seq, i),
					      &tp->ctx);
				EP_UNLOCK(v);
			}
			LOG(v, PSL_VAN_LOG_TRACE, "node %d: posted part %u of message %u: %zd", p->id,
			    k, op->seq, rc);
			if (rc)
				atomic_fetch_sub(&op->pending, 1); /* the posting ref stays */
			if (rc == -FI_EAGAIN) {
				atomic_store(&v->retry, 1);
				return -EAGAIN;
			}
			if (rc) {
				LOG(v, PSL_VAN_LOG_ERROR, "fi_tsend to node %d (%s): %s", p->id,
				    p->where, fi_strerror((int)-rc));
				op_set_status(op, -EIO);
				op->nposts = op->posted; /* the rest is not sent */
				/* the receiver waits for the missing parts: give up the
				 * peer (the progress thread says so) */
				p->broken = true;
				fab_wake(v);
				break;
			}
			op->posted++;
		}
		p->qhead = op->qnext;
		if (!p->qhead)
			p->qtail = NULL;
		p->inflight++;
		/* drop the posting reference; completions may already be in */
		if (atomic_fetch_sub(&op->pending, 1) == 1) {
			pthread_mutex_unlock(&p->mu);
			op_finish(v, op);
			pthread_mutex_lock(&p->mu);
		}
	}
	return 0;
}

/* Fails every queued op of p with err (p->mu held; sends done unlocked). */
void fab_fail_queue(struct psl_van *v, struct fab_peer *p, int err)
{
	while (p->qhead) {
		struct fab_txop *op = p->qhead;
		p->qhead = op->qnext;
		if (!p->qhead)
			p->qtail = NULL;
		p->inflight++; /* op_finish takes it off again */
		op_set_status(op, err);
		/* parts already posted complete later and finish the op */
		if (atomic_fetch_sub(&op->pending, 1) == 1) {
			pthread_mutex_unlock(&p->mu);
			op_finish(v, op);
			pthread_mutex_lock(&p->mu);
		}
	}
}

/* The core is told now that every op of p posted to the provider failed
 * with err (p->mu held; sends done unlocked): to a peer that is down, the
 * provider may complete them only when its own timeouts run out (verbs: the
 * queue pair's retries, many seconds). The ops stay until the provider is
 * done with their buffers; their completions tell the core nothing more. */
static void fab_fail_live(struct psl_van *v, struct fab_peer *p, int err)
{
	struct fab_txop *op;
	for (;;) {
		void *cookie = NULL;
		for (op = p->live; op && !cookie; op = op->lnext) {
			cookie = op->cookie;
			op->cookie = NULL;
		}
		if (!cookie)
			return;
		pthread_mutex_unlock(&p->mu);
		v->host->send_done(v->host->ctx, cookie, err);
		pthread_mutex_lock(&p->mu);
	}
}

void fab_fail_pending(struct psl_van *v, struct fab_peer *p, int err)
{
	p->state = P_DOWN;
	fab_fail_queue(v, p, err);
	fab_fail_live(v, p, err);
}

static int check_segs(struct psl_van *v, const struct psl_van_seg *segs, uint32_t nseg)
{
	uint32_t i;
	if (nseg >= FAB_MAX_PARTS) {
		LOG(v, PSL_VAN_LOG_ERROR, "a message of %u segments: the fabric van carries at "
					  "most %d",
		    nseg, FAB_MAX_PARTS - 1);
		return -EMSGSIZE;
	}
	for (i = 0; i < nseg; i++) {
		if (segs[i].mem_type == PSL_MEM_HOST)
			continue;
		if (segs[i].mem_type == PSL_MEM_CUDA && v->hmem)
			continue;
		LOG(v, PSL_VAN_LOG_ERROR,
		    "segment %u is %s memory, which this van cannot send here: no CUDA device "
		    "was found, or provider %s has no FI_HMEM (EFA with GPUDirect RDMA has it); "
		    "copy it to host memory first",
		    i, segs[i].mem_type == PSL_MEM_CUDA ? "CUDA" : "unknown", v->prov);
		return -EINVAL;
	}
	return 0;
}

int fab_send(struct psl_van *v, int32_t id, const void *meta, size_t meta_len,
		 const struct psl_van_seg *segs, uint32_t nseg, void *cookie)
{
	uint32_t nparts = nseg + 1, i;
	uint64_t lens[FAB_MAX_PARTS];
	bool inl[FAB_MAX_PARTS];
	size_t off[FAB_MAX_PARTS], room;
	struct fab_txop *op;
	struct fab_peer *p;
	int rc;

	if (atomic_load(&v->closing) || !v->ep)
		return -ESHUTDOWN;
	rc = check_segs(v, segs, nseg);
	if (rc)
		return rc;
	pthread_rwlock_rdlock(&v->lock);
	p = (id >= 0 && id < v->npeers) ? v->peers[id] : NULL;
	pthread_rwlock_unlock(&v->lock);
	if (!p)
		return -EHOSTUNREACH;
	op = psl_van_cache_get(&op_cache, OP_BYTES(nparts));
	if (!op)
		return -ENOMEM;
	memset(op, 0, OP_BYTES(nparts));
	op->peer = p;
	op->cookie = cookie;
	op->nparts = nparts;
	atomic_init(&op->pending, 1);
	op->hctx.kind = CTX_TX_HDR;
	op->hctx.obj = op;
	op->part[0].data = meta;
	op->part[0].len = meta_len;
	for (i = 0; i < nseg; i++) {
		op->part[i + 1].data = segs[i].data;
		op->part[i + 1].len = segs[i].len;
	}
	/* inline what fits in the peer's header buffer, in order: the meta and
	 * small segments; anything past that goes on its own */
	pthread_mutex_lock(&p->mu);
	room = p->state == P_UP ? p->hdr_max : 1024; /* the least any node posts */
	pthread_mutex_unlock(&p->mu);
	if (room > v->hdr_buf)
		room = v->hdr_buf;
	for (i = 0; i < nparts; i++) {
		lens[i] = op->part[i].len;
		inl[i] = lens[i] == 0;
	}
	for (i = 0; i < nparts; i++) {
		inl[i] = true;
		if (fab_hdr_size(nparts, lens, inl) > room)
			inl[i] = lens[i] == 0;
	}
	op->nposts = 1;
	for (i = 0; i < nparts; i++) {
		struct fab_txpart *tp = &op->part[i];
		tp->inl = inl[i];
		tp->ctx.kind = CTX_TX_PART;
		tp->ctx.part = (uint8_t)i;
		tp->ctx.obj = op;
		if (tp->inl)
			continue;
		op->nposts++;
		if (i == 0) { /* the meta is copied: the caller may reuse it at once */
			rc = fab_pool_get(v->pool, meta_len, &op->meta);
			if (rc)
				goto fail;
			memcpy(op->meta->data, meta, meta_len);
			tp->data = op->meta->data;
			tp->desc = op->meta->desc;
		} else if (segs[i - 1].mr) {
			tp->desc = ((struct fab_mrc_ent *)segs[i - 1].mr)->desc;
		} else if (v->need_mr || segs[i - 1].mem_type != PSL_MEM_HOST) {
			rc = fab_mrc_get(&v->mrc, tp->data, tp->len, segs[i - 1].mem_type,
					 segs[i - 1].dev_id, v->cache_sends, &tp->mre);
			if (rc)
				goto fail;
			tp->desc = tp->mre->desc;
		}
	}
	rc = fab_pool_get(v->pool, fab_hdr_size(nparts, lens, inl), &op->hdr);
	if (rc)
		goto fail;

	pthread_mutex_lock(&p->mu);
	if (p->state == P_DOWN || atomic_load(&p->retiring)) {
		pthread_mutex_unlock(&p->mu);
		rc = p->state == P_DOWN ? -ECONNRESET : -EHOSTUNREACH;
		goto fail;
	}
	op_link(p, op);
	op->seq = p->next_seq++;
	op->hdr_len = fab_hdr_write(op->hdr->data, op->seq, nparts, lens, inl, off);
	for (i = 0; i < nparts; i++)
		if (inl[i] && lens[i])
			memcpy(op->hdr->data + off[i], op->part[i].data, lens[i]);
	if (p->qtail)
		p->qtail->qnext = op;
	else
		p->qhead = op;
	p->qtail = op;
	if (p->state == P_UP && fab_post_queue(v, p) == -EAGAIN)
		fab_wake(v);
	pthread_mutex_unlock(&p->mu);
	return 0;
fail:
	fab_op_free(v, op);
	return rc;
}

/* ------------------------------------------------------------- receive -- */

void fab_rx_free(struct fab_rx *r)
{
	uint32_t i;
	for (i = 0; i < r->nparts; i++)
		fab_pool_put(r->part[i].buf);
	fab_pool_put(r->hdr);
	psl_van_cache_put(&rx_cache, r, RX_BYTES(r->nparts));
}

static void rx_release(struct psl_van_rmsg *pub)
{
	fab_rx_free((struct fab_rx *)pub);
}

int fab_post_hdr(struct psl_van *v)
{
	struct fab_buf *b;
	ssize_t rc;
	int e = fab_pool_get(v->pool, v->hdr_buf, &b);
	if (e)
		return e;
	b->ctx.kind = CTX_RX_HDR;
	b->ctx.obj = b;
	b->posted = true;
	EP_LOCK(v);
	rc = fi_trecv(v->ep, b->data, v->hdr_buf, b->desc, FI_ADDR_UNSPEC, FAB_HDR_TAG,
		      FAB_HDR_IGNORE, &b->ctx);
	EP_UNLOCK(v);
	if (rc) {
		fab_pool_put(b);
		return rc == -FI_EAGAIN ? -EAGAIN : -EIO;
	}
	v->hdr_posted++;
	return 0;
}

static void refill_hdr(struct psl_van *v)
{
	while (v->hdr_posted < v->rx_depth)
		if (fab_post_hdr(v))
			break;
}

/* Hands over every message of s that is next in order and complete. */
static void deliver(struct psl_van *v, struct fab_stream *s)
{
	struct fab_oq_ent *e;
	while ((e = fab_oq_pop(&s->oq))) {
		struct fab_rx *r = (struct fab_rx *)((char *)e - offsetof(struct fab_rx, oq));
		if (r->failed) {
			fab_rx_free(r);
			continue;
		}
		v->host->recv(v->host->ctx, &r->pub);
	}
}

static void rx_part_done(struct psl_van *v, struct fab_rx *r, int err)
{
	struct fab_stream *s;
	if (err)
		r->failed = true;
	if (--r->pending > 0)
		return;
	if (r->orphan) {
		struct fab_rx **pp = &v->orphans;
		while (*pp && *pp != r)
			pp = &(*pp)->next_orphan;
		if (*pp)
			*pp = r->next_orphan;
		fab_rx_free(r);
		return;
	}
	r->oq.complete = true;
	s = fab_stream_get(v, r->stream);
	if (s)
		deliver(v, s);
}

static void on_hdr(struct psl_van *v, struct fab_buf *b, uint64_t tag, size_t len)
{
	struct fab_hdr_view h;
	struct fab_stream *s = fab_stream_get(v, fab_tag_stream(tag));
	struct fab_rx *r;
	char why[160];
	uint32_t i, nseg;
	int rc;

	if (!s || !s->open) {
		LOG(v, PSL_VAN_LOG_WARN, "dropped a message on unknown stream %u",
		    fab_tag_stream(tag));
		fab_pool_put(b);
		return;
	}
	rc = fab_hdr_parse(b->data, len, &h, why, sizeof(why));
	if (!rc && h.seq != fab_tag_seq(tag)) {
		snprintf(why, sizeof(why), "sequence number %u in a header tagged %u", h.seq,
			 fab_tag_seq(tag));
		rc = -EPROTO;
	}
	if (rc) {
		LOG(v, PSL_VAN_LOG_WARN, "dropped a malformed message from node %d (%s): %s",
		    s->sender, s->where, why);
		/* its number is passed over, so that later messages are not held */
		memset(&h, 0, sizeof(h));
		h.seq = fab_tag_seq(tag);
		h.nparts = 1;
		h.inl[0] = true;
	}
	nseg = h.nparts - 1;
	r = psl_van_cache_get(&rx_cache, RX_BYTES(h.nparts));
	if (r)
		memset(r, 0, RX_BYTES(h.nparts));
	if (!r) {
		fab_pool_put(b);
		return;
	}
	r->segs = (struct psl_van_rseg *)&r->part[h.nparts];
	r->hdr = b;
	r->stream = s->id;
	r->nparts = h.nparts;
	r->pending = 1;
	r->oq.seq = h.seq;
	r->pub.sender = s->sender;
	r->pub.nseg = nseg;
	r->pub.segs = r->segs;
	r->pub.release = rx_release;
	r->failed = rc != 0;
	for (i = 0; i < h.nparts && !r->failed; i++) {
		void *data;
		if (h.inl[i]) {
			data = b->data + h.off[i];
		} else {
			ssize_t prc;
			rc = fab_pool_get(v->pool, (size_t)h.len[i], &r->part[i].buf);
			if (rc) {
				LOG(v, PSL_VAN_LOG_ERROR,
				    "no memory for a %llu-byte part from node %d: message dropped",
				    (unsigned long long)h.len[i], s->sender);
				r->failed = true;
				break;
			}
			data = r->part[i].buf->data;
			r->part[i].ctx.kind = CTX_RX_PART;
			r->part[i].ctx.part = (uint8_t)i;
			r->part[i].ctx.obj = r;
			for (int tries = 0;; tries++) {
				EP_LOCK(v);
				prc = fi_trecv(v->ep, data, (size_t)h.len[i], r->part[i].buf->desc,
					       FI_ADDR_UNSPEC,
					       fab_tag(FAB_KIND_DATA, s->id, h.seq, i), 0,
					       &r->part[i].ctx);
				EP_UNLOCK(v);
				if (prc != -FI_EAGAIN || tries == 100000)
					break;
				EP_LOCK(v);
				fi_cq_read(v->cq, NULL, 0); /* progress, then again */
				EP_UNLOCK(v);
			}
			if (prc) {
				LOG(v, PSL_VAN_LOG_ERROR, "fi_trecv: %s: message from node %d dropped",
				    fi_strerror((int)-prc), s->sender);
				r->failed = true;
				break;
			}
			r->pending++;
		}
		if (i == 0) {
			r->pub.meta = data;
			r->pub.meta_len = (size_t)h.len[0];
		} else {
			r->segs[i - 1] = (struct psl_van_rseg){data, (size_t)h.len[i], PSL_MEM_HOST,
							       -1};
		}
	}
	rc = fab_oq_add(&s->oq, &r->oq, OQ_WINDOW);
	if (rc) {
		LOG(v, PSL_VAN_LOG_WARN, "dropped message %u from node %d: %s", h.seq, s->sender,
		    rc == -EEXIST ? "a duplicate" : "too far ahead");
		r->orphan = true;
		r->next_orphan = v->orphans;
		v->orphans = r;
	}
	rx_part_done(v, r, 0); /* the header's own reference */
}

/* ------------------------------------------------------------ completions -- */

void fab_report_down(struct psl_van *v, struct fab_peer *p, int err, const char *detail)
{
	bool tell;
	pthread_mutex_lock(&p->mu);
	tell = p->state == P_UP && !atomic_load(&p->retiring) && !p->told;
	p->told = p->told || tell;
	fab_fail_pending(v, p, err);
	pthread_mutex_unlock(&p->mu);
	if (tell && !atomic_load(&v->closing))
		v->host->peer_event(v->host->ctx, p->id, PSL_VAN_PEER_DOWN, err, detail);
}

static void on_error(struct psl_van *v, struct fi_cq_err_entry *e)
{
	struct fab_ctx *c = e->op_context;
	int err = e->err == FI_ECANCELED ? -ECANCELED : -EIO;
	char detail[256];

	if (!c)
		return;
	switch (c->kind) {
	case CTX_TX_HDR:
	case CTX_TX_PART: {
		struct fab_txop *op = c->obj;
		struct fab_peer *p = op->peer;
		if (e->err != FI_ECANCELED) {
			snprintf(detail, sizeof(detail), "sending to %s failed: %s", p->where,
				 fi_cq_strerror(v->cq, e->prov_errno, e->err_data, NULL, 0));
			LOG(v, PSL_VAN_LOG_DEBUG, "node %d: %s", p->id, detail);
			if (e->err != FI_ETRUNC)
				fab_report_down(v, p, -ECONNRESET, detail);
		}
		op_done_one(v, op, err);
		break;
	}
	case CTX_RX_HDR:
		v->hdr_posted--;
		((struct fab_buf *)c->obj)->posted = false;
		if (e->err != FI_ECANCELED)
			LOG(v, PSL_VAN_LOG_WARN, "a receive failed: %s",
			    fi_cq_strerror(v->cq, e->prov_errno, e->err_data, NULL, 0));
		fab_pool_put(c->obj);
		break;
	case CTX_RX_PART:
		if (e->err != FI_ECANCELED)
			LOG(v, PSL_VAN_LOG_WARN, "receiving part %u failed: %s", c->part,
			    fi_cq_strerror(v->cq, e->prov_errno, e->err_data, NULL, 0));
		rx_part_done(v, c->obj, err);
		break;
	}
}

static void on_completion(struct psl_van *v, struct fi_cq_tagged_entry *e)
{
	struct fab_ctx *c = e->op_context;
	switch (c->kind) {
	case CTX_TX_HDR:
	case CTX_TX_PART:
		op_done_one(v, c->obj, 0);
		break;
	case CTX_RX_HDR:
		v->hdr_posted--;
		((struct fab_buf *)c->obj)->posted = false;
		on_hdr(v, c->obj, e->tag, e->len);
		break;
	case CTX_RX_PART:
		rx_part_done(v, c->obj, 0);
		break;
	}
}

/* Reads the CQ until it is empty; returns how many entries were handled.
 * The caller holds cq_mu. */
int fab_drain_cq(struct psl_van *v)
{
	struct fi_cq_tagged_entry ent[32];
	int total = 0;
	for (;;) {
		ssize_t n, i;
		EP_LOCK(v);
		n = fi_cq_read(v->cq, ent, 32);
		EP_UNLOCK(v);
		if (n == -FI_EAGAIN)
			break;
		if (n == -FI_EAVAIL) {
			struct fi_cq_err_entry err;
			memset(&err, 0, sizeof(err));
			EP_LOCK(v);
			n = fi_cq_readerr(v->cq, &err, 0);
			EP_UNLOCK(v);
			if (n == 1)
				on_error(v, &err);
			total++;
			continue;
		}
		if (n < 0) {
			LOG(v, PSL_VAN_LOG_ERROR, "fi_cq_read: %s", fi_strerror((int)-n));
			break;
		}
		for (i = 0; i < n; i++)
			on_completion(v, &ent[i]);
		total += (int)n;
	}
	if (total)
		refill_hdr(v);
	return total;
}
