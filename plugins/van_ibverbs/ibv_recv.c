/*
 * van_ibverbs receive side: a MSG record becomes a received message; its
 * rendezvous segments are read with RDMA READ into the buffer the core lends
 * (recv_dest: a worker's pull buffer) or a pooled registered one, a FIN goes
 * back, and complete messages are delivered in their link's order. Runs
 * under the van's lock on the thread that holds rx_mu (the progress thread
 * or a caller that drives: see ibv_xfer.c, ibv_progress.c).
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
	ibv_pool_put(op->meta_pb);
	free(op->rws);
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

/* Queues an RDMA READ of len bytes at raddr/rkey into laddr for op. */
static int rx_queue_read(struct ibv_q *q, struct ibv_recvop *op, uint32_t seg, uint64_t raddr,
			 uint32_t rkey, uint64_t len, void *laddr, uint32_t lkey)
{
	struct ibv_readop *r = calloc(1, sizeof(*r));
	if (!r)
		return -ENOMEM;
	*r = (struct ibv_readop){.op = op, .seg = seg, .raddr = raddr, .rkey = rkey,
				 .len = len, .laddr = laddr, .lkey = lkey};
	if (q->rq_tail)
		q->rq_tail->next = r;
	else
		q->rq_head = r;
	q->rq_tail = r;
	op->reads_left++;
	return 0;
}

static void give_back_loan(struct psl_van *v, struct ibv_recvop *op, uint32_t i, int status)
{
	struct ibv_event *e = ibv_ev_new(v, 4);
	if (e) {
		e->cookie = op->dest[i].loan;
		e->status = status;
	}
	op->loan[i] = false;
}

/* The buffer the core lends for segment i (recv_dest: a worker's pull
 * buffer), registered: its address, or NULL when there is none to use. */
static void *rx_lent(struct psl_van *v, struct ibv_recvop *op, uint32_t i, uint64_t len,
		     uint32_t *lkey)
{
	struct psl_van_dest d;
	int rc;
	if (v->host->size < PSL_VAN_HOST_SIZE_1_1 || !v->host->recv_dest)
		return NULL;
	memset(&d, 0, sizeof(d));
	/* the core may take its own locks: call it unlocked (only the holder
	 * of rx_mu, this thread, frees queue pairs and streams) */
	pthread_mutex_unlock(&v->mu);
	rc = v->host->recv_dest(v->host->ctx, op->pub.sender, op->block, op->pub.meta_len, i,
				(size_t)len, &d);
	pthread_mutex_lock(&v->mu);
	if (rc)
		return NULL;
	op->dest[i] = d;
	op->loan[i] = true;
	if (d.mem_type != PSL_MEM_HOST || !d.data ||
	    ibv_mrc_get(&v->mrc, d.data, (size_t)len, &op->reg[i])) {
		give_back_loan(v, op, i, -EOPNOTSUPP); /* granted but unusable */
		return NULL;
	}
	*lkey = ((struct ibv_mr *)op->reg[i]->mr)->lkey;
	return d.data;
}

/* Where segment i is read to: a lent buffer, else a pooled one. */
static void *rx_dest(struct psl_van *v, struct ibv_recvop *op, uint32_t i, uint64_t len,
		     uint32_t *lkey)
{
	void *data = rx_lent(v, op, i, len, lkey);
	int rc;
	if (data)
		return data;
	rc = ibv_pool_get(v->pool, (size_t)len, &op->pb[i], &data, lkey);
	if (rc) {
		LOG(v, PSL_VAN_LOG_ERROR, "cannot get a registered buffer of %llu bytes: %s%s",
		    (unsigned long long)len, strerror(-rc), ibv_dev_reg_hint(rc));
		op->status = rc;
		return NULL;
	}
	return data;
}

/* Queues the reads of op's rendezvous segments (the meta is in op->block). */
static void rx_plan_reads(struct psl_van *v, struct ibv_q *q, struct ibv_recvop *op,
			  const struct ibv_wseg *ws)
{
	uint32_t i, lkey;
	for (i = 0; i < op->pub.nseg; i++) {
		void *data;
		if (!ws[i].remote)
			continue;
		lkey = 0;
		data = rx_dest(v, op, i, ws[i].len, &lkey);
		if (!data)
			continue;
		op->segs[i].data = data;
		if (rx_queue_read(q, op, i, ws[i].addr, ws[i].rkey, ws[i].len, data, lkey))
			op->status = -ENOMEM;
	}
}

/* A meta by rendezvous: read it into a pooled buffer first, keeping the
 * segments' descriptors for when it is here. */
static void rx_read_meta(struct psl_van *v, struct ibv_q *q, struct ibv_recvop *op,
			 const struct ibv_msg_hdr *h, const struct ibv_wseg *ws)
{
	uint32_t lkey = 0;
	int rc;
	op->rws = calloc(IBV_MAX_SEGS, sizeof(*op->rws));
	if (!op->rws) {
		op->status = -ENOMEM;
		return;
	}
	memcpy(op->rws, ws, h->nseg * sizeof(*ws));
	rc = ibv_pool_get(v->pool, h->meta_len, &op->meta_pb, &op->meta_tmp, &lkey);
	if (!rc)
		rc = rx_queue_read(q, op, IBV_META_SEG, h->meta_addr, h->meta_rkey, h->meta_len,
				   op->meta_tmp, lkey);
	if (rc) {
		LOG(v, PSL_VAN_LOG_ERROR, "cannot read a meta of %u bytes from node %d: %s%s",
		    h->meta_len, op->pub.sender, strerror(-rc), ibv_dev_reg_hint(rc));
		op->status = rc;
	}
}

/* A new receive of the record h (meta and inline segments copied), in its
 * stream's order queue; NULL (and the queue pair broken) when it cannot. */
static struct ibv_recvop *rx_new(struct psl_van *v, struct ibv_q *q, const struct ibv_msg_hdr *h,
				 const struct ibv_wseg *ws, const void *meta)
{
	struct ibv_recvop *op;
	size_t inl = 0, off;
	uint32_t i;

	for (i = 0; i < h->nseg; i++)
		if (!ws[i].remote)
			inl += ws[i].len;
	op = calloc(1, sizeof(*op));
	if (!op || !(op->block = malloc((size_t)h->meta_len + inl + 1))) {
		free(op);
		ibv_q_broken(v, q, -ENOMEM, "receiving");
		return NULL;
	}
	op->stream = q->stream;
	op->q = q;
	op->token = h->token;
	op->oq.seq = h->seq;
	op->pub = (struct psl_van_rmsg){.sender = q->stream->sender, .nseg = h->nseg,
					.meta = op->block, .meta_len = h->meta_len,
					.segs = op->segs, .release = recvop_release};
	if (meta)
		memcpy(op->block, meta, h->meta_len);
	off = h->meta_len;
	for (i = 0; i < h->nseg; i++) {
		op->segs[i] = (struct psl_van_rseg){.len = ws[i].len, .mem_type = PSL_MEM_HOST,
						    .dev_id = -1};
		if (ws[i].remote)
			continue;
		if (ws[i].len)
			memcpy(op->block + off, ws[i].data, ws[i].len);
		op->segs[i].data = op->block + off;
		off += ws[i].len;
	}
	if (ibv_oq_insert(&q->stream->oq, &op->oq)) {
		LOG(v, PSL_VAN_LOG_WARN, "node %d sent message %llu twice or out of order",
		    q->stream->sender, (unsigned long long)h->seq);
		recvop_release(&op->pub);
		ibv_q_broken(v, q, -EPROTO, "ordering");
		return NULL;
	}
	return op;
}

/* Every read of op is done (or failed): FIN to the sender, then deliver. */
static void rx_settled(struct psl_van *v, struct ibv_q *q, struct ibv_recvop *op)
{
	op->oq.ready = true;
	if (op->token)
		queue_fin(v, q, op->token, op->status);
	if (q->stream)
		deliver_ready(v, q->stream);
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

	if (!s || s->dead)
		return;
	if (ibv_msg_decode(buf, len, &h, ws, &meta, &why)) {
		LOG(v, PSL_VAN_LOG_WARN, "node %d sent a malformed record (%s): link dropped",
		    s->sender, why);
		ibv_q_broken(v, q, -EPROTO, "decoding a record");
		return;
	}
	op = rx_new(v, q, &h, ws, meta);
	if (!op)
		return;
	q->bytes += len;
	if (h.meta_remote)
		rx_read_meta(v, q, op, &h, ws);
	else
		rx_plan_reads(v, q, op, ws);
	if (!op->reads_left) {
		if (op->token && !op->status)
			op->status = -EIO;
		rx_settled(v, q, op);
		return;
	}
	ibv_q_kick(v, q);
}

/* The meta read by rendezvous is here: the segments' reads can be planned. */
static void rx_meta_arrived(struct psl_van *v, struct ibv_q *q, struct ibv_recvop *op)
{
	if (!op->status) {
		memcpy(op->block, op->meta_tmp, op->pub.meta_len);
		rx_plan_reads(v, q, op, op->rws);
	}
	ibv_pool_put(op->meta_pb);
	op->meta_pb = NULL;
	op->meta_tmp = NULL;
	free(op->rws);
	op->rws = NULL;
}

void ibv_read_done(struct psl_van *v, struct ibv_q *q, struct ibv_recvop *op, uint32_t seg,
		   int status)
{
	if (status && !op->status)
		op->status = status;
	if (seg == IBV_META_SEG)
		rx_meta_arrived(v, q, op);
	if (--op->reads_left > 0)
		return;
	rx_settled(v, q, op);
}
