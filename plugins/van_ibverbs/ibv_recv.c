/*
 * van_ibverbs receive side: a MSG record becomes a received message; its
 * rendezvous segments are read with RDMA READ into the buffer the core lends
 * (recv_dest: a worker's pull buffer) or a pooled registered one, a FIN goes
 * back, and complete messages are delivered in their link's order. Runs on
 * the progress thread under the van's lock (see ibv_xfer.c).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ibv.h"

static void recvop_release(struct psl_van_rmsg *m)
{
	struct ibv_recvop *op = (struct ibv_recvop *)m;
	uint32_t i;
	for (i = 0; i < IBV_MAX_SEGS; i++)
		ibv_pool_put(op->pb[i]);
	free(op->block);
	free(op);
}

static void recvop_drop_regs(struct psl_van *v, struct ibv_recvop *op)
{
	uint32_t i;
	for (i = 0; i < IBV_MAX_SEGS; i++)
		if (op->reg[i]) {
			ibv_mrc_put(&v->mrc, op->reg[i]);
			op->reg[i] = NULL;
		}
}

void ibv_recvop_fail(struct psl_van *v, struct ibv_recvop *op, int status)
{
	uint32_t i;
	if (op->q)
		for (i = 0; i < IBV_READ_SLOTS; i++)
			if (op->q->rd_wr[i].obj == op)
				op->q->rd_wr[i].obj = NULL;
	recvop_drop_regs(v, op);
	for (i = 0; i < op->pub.nseg; i++)
		if (op->loan[i]) {
			struct ibv_event *e = ibv_ev_new(v, 4);
			if (e) {
				e->cookie = op->dest[i].loan;
				e->status = status;
			}
		}
	recvop_release(&op->pub);
}

void ibv_stream_fail(struct psl_van *v, struct ibv_stream *s, int status)
{
	struct ibv_oq_ent *e;
	while ((e = ibv_oq_take_any(&s->oq))) {
		struct ibv_recvop *op =
			(struct ibv_recvop *)((char *)e - offsetof(struct ibv_recvop, oq));
		ibv_recvop_fail(v, op, status);
	}
}

static void deliver_ready(struct psl_van *v, struct ibv_stream *s)
{
	struct ibv_oq_ent *e;
	while ((e = ibv_oq_pop(&s->oq))) {
		struct ibv_recvop *op =
			(struct ibv_recvop *)((char *)e - offsetof(struct ibv_recvop, oq));
		struct ibv_event *ev;
		uint32_t i;
		recvop_drop_regs(v, op);
		if (op->status) {
			ibv_recvop_fail(v, op, op->status);
			continue;
		}
		for (i = 0; i < op->pub.nseg; i++)
			if (op->loan[i] && (ev = ibv_ev_new(v, 4))) {
				ev->cookie = op->dest[i].loan;
				ev->status = 0;
			}
		ev = ibv_ev_new(v, 2);
		if (ev)
			ev->msg = &op->pub;
		else
			recvop_release(&op->pub);
	}
}

static void queue_fin(struct psl_van *v, struct ibv_q *q, uint64_t token, int status)
{
	struct ibv_fin_wait *f = calloc(1, sizeof(*f)), **pp;
	if (!f)
		return;
	f->token = token;
	f->status = status;
	for (pp = &q->fins; *pp; pp = &(*pp)->next)
		;
	*pp = f;
	ibv_q_kick(v, q);
}

/* A MSG record arrived on q (an accepted queue pair). */
void ibv_rx_msg(struct psl_van *v, struct ibv_q *q, const uint8_t *buf, size_t len)
{
	struct ibv_stream *s = q->stream;
	struct ibv_wseg ws[IBV_MAX_SEGS];
	struct ibv_msg_hdr h;
	struct ibv_recvop *op;
	const void *meta;
	const char *why = "";
	size_t inl = 0, off;
	uint32_t i;
	int rc;

	if (!s || s->dead)
		return;
	rc = ibv_msg_decode(buf, len, &h, ws, &meta, &why);
	if (rc) {
		LOG(v, PSL_VAN_LOG_WARN, "node %d sent a malformed record (%s): link dropped",
		    s->sender, why);
		ibv_q_broken(v, q, -EPROTO, "decoding a record");
		return;
	}
	for (i = 0; i < h.nseg; i++)
		if (!ws[i].remote)
			inl += ws[i].len;
	op = calloc(1, sizeof(*op));
	if (!op || !(op->block = malloc(h.meta_len + inl + 1))) {
		free(op);
		ibv_q_broken(v, q, -ENOMEM, "receiving");
		return;
	}
	op->stream = s;
	op->q = q;
	op->token = h.token;
	op->oq.seq = h.seq;
	op->pub.sender = s->sender;
	op->pub.nseg = h.nseg;
	op->pub.meta = op->block;
	op->pub.meta_len = h.meta_len;
	op->pub.segs = op->segs;
	op->pub.release = recvop_release;
	memcpy(op->block, meta, h.meta_len);
	off = h.meta_len;
	for (i = 0; i < h.nseg; i++) {
		op->segs[i].len = ws[i].len;
		op->segs[i].mem_type = PSL_MEM_HOST;
		op->segs[i].dev_id = -1;
		if (ws[i].remote)
			continue;
		if (ws[i].len)
			memcpy(op->block + off, ws[i].data, ws[i].len);
		op->segs[i].data = op->block + off;
		off += ws[i].len;
	}
	if (ibv_oq_insert(&s->oq, &op->oq)) {
		LOG(v, PSL_VAN_LOG_WARN, "node %d sent message %llu twice or out of order",
		    s->sender, (unsigned long long)h.seq);
		recvop_release(&op->pub);
		ibv_q_broken(v, q, -EPROTO, "ordering");
		return;
	}
	for (i = 0; i < h.nseg; i++) {
		struct ibv_readop *r;
		void *data = NULL;
		uint32_t lkey = 0;
		if (!ws[i].remote)
			continue;
		if (v->host->size >= PSL_VAN_HOST_SIZE_1_1 && v->host->recv_dest) {
			struct psl_van_dest d;
			memset(&d, 0, sizeof(d));
			/* the core may take its own locks: call it unlocked (only this
			 * thread frees queue pairs and streams) */
			pthread_mutex_unlock(&v->mu);
			rc = v->host->recv_dest(v->host->ctx, s->sender, op->block, h.meta_len, i,
						(size_t)ws[i].len, &d);
			pthread_mutex_lock(&v->mu);
			if (rc == 0 && d.mem_type == PSL_MEM_HOST && d.data) {
				op->dest[i] = d;
				op->loan[i] = true;
				rc = ibv_mrc_get(&v->mrc, d.data, (size_t)ws[i].len, &op->reg[i]);
				if (rc == 0) {
					data = d.data;
					lkey = ((struct ibv_mr *)op->reg[i]->mr)->lkey;
				}
			} else if (rc == 0) {
				op->dest[i] = d;
				op->loan[i] = true; /* handed back with an error below */
				rc = -EOPNOTSUPP;
			}
		}
		if (!data) {
			rc = ibv_pool_get(v->pool, (size_t)ws[i].len, &op->pb[i], &data, &lkey);
			if (rc) {
				LOG(v, PSL_VAN_LOG_ERROR,
				    "cannot get a registered buffer of %llu bytes: %s%s",
				    (unsigned long long)ws[i].len, strerror(-rc),
				    ibv_dev_reg_hint(rc));
				op->status = rc;
				continue;
			}
			if (op->loan[i]) {
				/* granted but unusable: give it back now */
				struct ibv_event *e = ibv_ev_new(v, 4);
				if (e) {
					e->cookie = op->dest[i].loan;
					e->status = -EOPNOTSUPP;
				}
				op->loan[i] = false;
			}
		}
		op->segs[i].data = data;
		r = calloc(1, sizeof(*r));
		if (!r) {
			op->status = -ENOMEM;
			continue;
		}
		r->op = op;
		r->seg = i;
		r->raddr = ws[i].addr;
		r->rkey = ws[i].rkey;
		r->len = ws[i].len;
		r->laddr = data;
		r->lkey = lkey;
		if (q->rq_tail)
			q->rq_tail->next = r;
		else
			q->rq_head = r;
		q->rq_tail = r;
		op->reads_left++;
	}
	q->bytes += len;
	if (!op->reads_left) {
		op->oq.ready = true;
		if (h.token)
			queue_fin(v, q, h.token, op->status ? op->status : -EIO);
		deliver_ready(v, s);
		return;
	}
	ibv_q_kick(v, q);
}

void ibv_read_done(struct psl_van *v, struct ibv_q *q, struct ibv_recvop *op, int status)
{
	if (status && !op->status)
		op->status = status;
	if (--op->reads_left > 0)
		return;
	op->oq.ready = true;
	queue_fin(v, q, op->token, op->status);
	if (q->stream)
		deliver_ready(v, q->stream);
}
