/*
 * van_ibverbs data path: queue pair resources, posting under credits, the
 * eager and rendezvous send paths and completion handling (the receive side
 * is ibv_recv.c). Under the van's lock; completions are polled only by the
 * holder of rx_mu (the progress thread, or a caller: ibv_progress.c), which
 * is also the only thread that frees queue pairs, so a work request's wr_id
 * (always memory of its queue pair) stays valid while it can complete.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ibv.h"

/* ------------------------------------------------------------ resources -- */

static int reg_buf(struct psl_van *v, uint8_t **mem, struct ibv_mr **mr, size_t len, int acc)
{
	void *p = NULL;
	if (posix_memalign(&p, 4096, len ? len : 64))
		return -ENOMEM;
	memset(p, 0, len);
	*mr = ibv_reg_mr(v->pd, p, len ? len : 64, acc);
	if (!*mr) {
		int err = errno ? -errno : -ENOMEM;
		LOG(v, PSL_VAN_LOG_ERROR, "cannot register %zu bytes of queue buffers: %s%s", len,
		    strerror(-err), ibv_dev_reg_hint(err));
		free(p);
		return err;
	}
	*mem = p;
	return 0;
}

static int post_rx(struct ibv_q *q, uint32_t i)
{
	struct ibv_sge sge = {.addr = (uintptr_t)(q->rx_mem + (size_t)i * q->rx_buf),
			      .length = q->rx_buf,
			      .lkey = q->rx_mr->lkey};
	struct ibv_recv_wr wr = {.wr_id = (uintptr_t)&q->rx_wr[i], .sg_list = &sge, .num_sge = 1},
			   *bad;
	return ibv_post_recv(q->qp, &wr, &bad) ? -errno : 0;
}

int ibv_q_setup(struct psl_van *v, struct ibv_q *q, uint32_t rx_n, uint32_t rx_buf)
{
	struct ibv_qp_init_attr qa;
	struct ibv_device_attr da;
	static const uint32_t inl[] = {256, 64, 0};
	uint32_t i, sq;
	int rc = 0;
	size_t k;

	sq = (uint32_t)v->start_depth + IBV_CTL_SLOTS + IBV_READ_SLOTS + 4;
	if (!ibv_query_device(v->verbs, &da) && (int)sq > da.max_qp_wr)
		sq = (uint32_t)da.max_qp_wr;
	q->sq_max = sq;
	q->rx_n = rx_n + IBV_CR_RESERVE;
	q->rx_buf = rx_buf;
	q->cq = ibv_create_cq(v->verbs, (int)(sq + q->rx_n + 8), q, v->comp, 0);
	if (!q->cq)
		return errno ? -errno : -ENOMEM;
	for (k = 0; k < sizeof(inl) / sizeof(inl[0]); k++) {
		memset(&qa, 0, sizeof(qa));
		qa.send_cq = qa.recv_cq = q->cq;
		qa.qp_type = IBV_QPT_RC;
		qa.cap.max_send_wr = sq;
		qa.cap.max_recv_wr = q->rx_n;
		qa.cap.max_send_sge = 1;
		qa.cap.max_recv_sge = 1;
		qa.cap.max_inline_data = inl[k];
		if (!rdma_create_qp(q->cm, v->pd, &qa)) {
			rc = 0;
			break;
		}
		rc = errno ? -errno : -ENOMEM;
	}
	if (rc) {
		/* WARN: the caller says what follows (an acceptor refuses the
		 * connection and the connector tries again; a connector retries
		 * until PS_CONNECT_TIMEOUT, then fails with an ERROR) */
		LOG(v, PSL_VAN_LOG_WARN, "cannot create a queue pair (%u sends, %u receives): %s",
		    sq, q->rx_n, strerror(-rc));
		return rc;
	}
	q->qp = q->cm->qp;
	q->max_inline = qa.cap.max_inline_data;
	rc = reg_buf(v, &q->rx_mem, &q->rx_mr, (size_t)q->rx_n * rx_buf, IBV_ACCESS_LOCAL_WRITE);
	if (rc)
		return rc;
	q->rx_wr = calloc(q->rx_n, sizeof(*q->rx_wr));
	if (!q->rx_wr)
		return -ENOMEM;
	q->ctl_mr = ibv_reg_mr(v->pd, q->ctl_mem, sizeof(q->ctl_mem), IBV_ACCESS_LOCAL_WRITE);
	if (!q->ctl_mr)
		return errno ? -errno : -ENOMEM;
	for (i = 0; i < IBV_CTL_SLOTS; i++) {
		q->ctl_wr[i] = (struct ibv_wr){.kind = WR_CTL, .idx = i};
		q->ctl_free[i] = i;
	}
	q->ctl_free_n = IBV_CTL_SLOTS;
	for (i = 0; i < IBV_READ_SLOTS; i++) {
		q->rd_wr[i] = (struct ibv_wr){.kind = WR_READ};
		q->rd_free[i] = i;
	}
	q->rd_free_n = IBV_READ_SLOTS;
	for (i = 0; i < q->rx_n; i++) {
		q->rx_wr[i] = (struct ibv_wr){.kind = WR_RX, .idx = i};
		rc = post_rx(q, i);
		if (rc)
			return rc;
	}
	if (ibv_req_notify_cq(q->cq, 0))
		return -errno;
	return 0;
}

int ibv_q_start(struct psl_van *v, struct ibv_q *q, uint32_t peer_depth, uint32_t peer_buf)
{
	uint32_t i;
	ibv_cr_init(&q->cr, q->rx_n - IBV_CR_RESERVE, peer_depth);
	if (!q->outgoing)
		return 0;
	q->tx_n = (uint32_t)v->start_depth;
	q->tx_buf = peer_buf;
	if (reg_buf(v, &q->tx_mem, &q->tx_mr, (size_t)q->tx_n * peer_buf, IBV_ACCESS_LOCAL_WRITE))
		return -ENOMEM;
	q->tx_wr = calloc(q->tx_n, sizeof(*q->tx_wr));
	q->tx_free = calloc(q->tx_n, sizeof(*q->tx_free));
	if (!q->tx_wr || !q->tx_free)
		return -ENOMEM;
	for (i = 0; i < q->tx_n; i++) {
		q->tx_wr[i] = (struct ibv_wr){.kind = WR_TX, .idx = i};
		q->tx_free[i] = q->tx_n - 1 - i;
	}
	q->tx_free_n = q->tx_n;
	return 0;
}

void ibv_q_teardown_bufs(struct ibv_q *q)
{
	struct ibv_fin_wait *f;
	if (q->rx_mr)
		ibv_dereg_mr(q->rx_mr);
	if (q->tx_mr)
		ibv_dereg_mr(q->tx_mr);
	if (q->ctl_mr)
		ibv_dereg_mr(q->ctl_mr);
	free(q->rx_mem);
	free(q->tx_mem);
	free(q->rx_wr);
	free(q->tx_wr);
	free(q->tx_free);
	ibv_cxx_q_free(q);
	while ((f = q->fins)) {
		q->fins = f->next;
		free(f);
	}
}

/* --------------------------------------------------------------- events -- */

static void ev_send_done(struct psl_van *v, void *cookie, int status)
{
	struct ibv_event *e;
	if (!cookie)
		return;
	e = ibv_ev_new(v, 1);
	if (e) {
		e->cookie = cookie;
		e->status = status;
	}
}

/* ------------------------------------------------------------ send side -- */

void ibv_sendop_finish(struct psl_van *v, struct ibv_sendop *op, int status)
{
	struct ibv_link *l = op->link;
	uint32_t i;
	if (op->lprev)
		op->lprev->lnext = op->lnext;
	else if (l && l->live == op)
		l->live = op->lnext;
	if (op->lnext)
		op->lnext->lprev = op->lprev;
	if (op->slot >= 0 && op->q && op->q->tx_wr)
		op->q->tx_wr[op->slot].obj = NULL;
	for (i = 0; i < op->nreg; i++)
		ibv_mrc_put(&v->mrc, op->reg[i]);
	ibv_cxx_op_gone(op);
	ev_send_done(v, op->cookie, status);
	free(op->rec);
	free(op);
}

static void sop_event(struct psl_van *v, struct ibv_sendop *op, int ev, int status)
{
	int st;
	if (ibv_sop_event(&op->sm, ev, status, &st))
		ibv_sendop_finish(v, op, st);
}

static bool sq_room(struct ibv_q *q)
{
	return q->qp && !q->dead && q->sq_used < q->sq_max;
}

static int post_send(struct ibv_q *q, void *addr, uint32_t len, uint32_t lkey, void *wr_id)
{
	struct ibv_sge sge = {.addr = (uintptr_t)addr, .length = len, .lkey = lkey};
	struct ibv_send_wr wr, *bad;
	memset(&wr, 0, sizeof(wr));
	wr.wr_id = (uintptr_t)wr_id;
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.opcode = IBV_WR_SEND;
	wr.send_flags = IBV_SEND_SIGNALED | (len <= q->max_inline ? IBV_SEND_INLINE : 0);
	if (ibv_post_send(q->qp, &wr, &bad))
		return errno ? -errno : -EIO;
	q->sq_used++;
	q->msgs++;
	return 0;
}

/* Posts a control record (FIN or CREDIT) from a control slot. */
static int post_ctl(struct ibv_q *q, const uint8_t *rec, size_t len)
{
	uint32_t s;
	int rc;
	if (!q->ctl_free_n || !sq_room(q))
		return -EAGAIN;
	s = q->ctl_free[--q->ctl_free_n];
	memcpy(q->ctl_mem[s], rec, len);
	rc = post_send(q, q->ctl_mem[s], (uint32_t)len, q->ctl_mr->lkey, &q->ctl_wr[s]);
	if (rc)
		q->ctl_free[q->ctl_free_n++] = s;
	return rc;
}

void ibv_q_broken(struct psl_van *v, struct ibv_q *q, int err, const char *what)
{
	char d[512];
	snprintf(d, sizeof(d), "%s failed on an RDMA queue pair: %s", what, strerror(-err));
	if (q->outgoing && q->link)
		ibv_link_down(v, q->link, err, d);
	else if (q->stream) {
		LOG(v, PSL_VAN_LOG_WARN, "node %d: %s", q->stream->sender, d);
		ibv_stream_fail(v, q->stream, err);
		q->dead = true;
		if (q->qp)
			rdma_disconnect(q->cm);
	}
}

static int post_read(struct ibv_q *q, struct ibv_readop *r)
{
	struct ibv_sge sge = {.addr = (uintptr_t)r->laddr, .length = (uint32_t)r->len,
			      .lkey = r->lkey};
	struct ibv_send_wr wr, *bad;
	uint32_t s = q->rd_free[--q->rd_free_n];
	q->rd_wr[s].obj = r->op;
	q->rd_wr[s].idx = r->seg;
	memset(&wr, 0, sizeof(wr));
	wr.wr_id = (uintptr_t)&q->rd_wr[s];
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.opcode = IBV_WR_RDMA_READ;
	wr.send_flags = IBV_SEND_SIGNALED;
	wr.wr.rdma.remote_addr = r->raddr;
	wr.wr.rdma.rkey = r->rkey;
	if (ibv_post_send(q->qp, &wr, &bad)) {
		q->rd_wr[s].obj = NULL;
		q->rd_free[q->rd_free_n++] = s;
		return errno ? -errno : -EIO;
	}
	q->sq_used++;
	return 0;
}

/* Posts what is waiting on q, as far as credits, slots and room go. */
void ibv_q_kick(struct psl_van *v, struct ibv_q *q)
{
	uint8_t rec[32];
	int rc;

	if (!q || !q->up || q->dead || !q->qp)
		return;
	if (q->cxx) {
		if (q->outgoing && q->link)
			ibv_cxx_pump(v, q->link);
		else
			ibv_cxx_kick_replies(v, q);
		return;
	}
	while (q->fins && q->cr.avail && q->ctl_free_n && sq_room(q)) {
		struct ibv_fin_wait *f = q->fins;
		size_t n;
		ibv_cr_take(&q->cr);
		n = ibv_fin_encode(rec, ibv_cr_piggyback(&q->cr), f->status, f->token);
		rc = post_ctl(q, rec, n);
		if (rc) {
			ibv_q_broken(v, q, rc, "posting a completion record");
			return;
		}
		q->fins = f->next;
		free(f);
	}
	while (q->rq_head && q->rd_free_n && sq_room(q)) {
		struct ibv_readop *r = q->rq_head;
		q->rq_head = r->next;
		if (!q->rq_head)
			q->rq_tail = NULL;
		rc = post_read(q, r);
		free(r);
		if (rc) {
			ibv_q_broken(v, q, rc, "an RDMA READ");
			return;
		}
	}
	while (q->qhead && q->cr.avail && q->tx_free_n && sq_room(q)) {
		struct ibv_sendop *op = q->qhead;
		uint32_t s;
		uint8_t *slot;
		if (op->rec_len > q->tx_buf) {
			q->qhead = op->qnext;
			q->queued--;
			ibv_sendop_finish(v, op, -EMSGSIZE);
			continue;
		}
		q->qhead = op->qnext;
		if (!q->qhead)
			q->qtail = NULL;
		q->queued--;
		ibv_cr_take(&q->cr);
		s = q->tx_free[--q->tx_free_n];
		slot = q->tx_mem + (size_t)s * q->tx_buf;
		memcpy(slot, op->rec, op->rec_len);
		psl_van_put_le16(slot + 2, ibv_cr_piggyback(&q->cr));
		free(op->rec);
		op->rec = NULL;
		op->slot = (int)s;
		q->tx_wr[s].obj = op;
		rc = post_send(q, slot, (uint32_t)op->rec_len, q->tx_mr->lkey, &q->tx_wr[s]);
		if (rc) {
			ibv_q_broken(v, q, rc, "posting a message");
			return;
		}
	}
	if (ibv_cr_need_update(&q->cr) && q->ctl_free_n && sq_room(q)) {
		size_t n = ibv_credit_encode(rec, ibv_cr_piggyback(&q->cr));
		rc = post_ctl(q, rec, n);
		if (rc)
			ibv_q_broken(v, q, rc, "posting a credit record");
	}
}

static void q_enqueue(struct ibv_q *q, struct ibv_sendop *op)
{
	op->q = q;
	op->qnext = NULL;
	if (q->qtail)
		q->qtail->qnext = op;
	else
		q->qhead = op;
	q->qtail = op;
	q->queued++;
}

/* Gives a message of a link that is up a queue pair. */
static void link_dispatch(struct psl_van *v, struct ibv_link *l, struct ibv_sendop *op)
{
	struct ibv_qchoice ch[IBV_MAX_QPS];
	int i, k;
	for (i = 0; i < l->nqp; i++) {
		struct ibv_q *q = l->q[i];
		ch[i].up = q && q->up && !q->dead;
		ch[i].credits = q ? q->cr.avail : 0;
		ch[i].slots = q ? q->tx_free_n : 0;
		ch[i].queued = q ? q->queued : 0;
	}
	k = ibv_pick_qp(ch, l->nqp, &l->rr);
	if (k < 0) {
		ibv_sendop_finish(v, op, -ENOTCONN);
		return;
	}
	q_enqueue(l->q[k], op);
	ibv_q_kick(v, l->q[k]);
}

/* A registration of [data, data+len) for the peer to read, held by op. */
static int op_reg(struct psl_van *v, struct ibv_sendop *op, const void *data, size_t len,
		  uint32_t *rkey)
{
	struct ibv_mrc_ent *e;
	int rc;
	if (!v->mrc_ready) {
		/* no device yet (the bind address named none): only messages
		 * that need no registration can wait */
		return -ENOTCONN;
	}
	rc = ibv_mrc_get(&v->mrc, data, len, &e);
	if (rc)
		return rc;
	op->reg[op->nreg++] = e;
	*rkey = ((struct ibv_mr *)e->mr)->rkey;
	return 0;
}

/* Fills the descriptors of op's segments, registering the rendezvous ones. */
static int op_describe(struct psl_van *v, struct ibv_sendop *op, const bool *remote,
		       struct ibv_wseg *ws)
{
	const struct psl_van_seg *segs = op->segs;
	uint32_t i;
	int rc;
	for (i = 0; i < op->nseg; i++) {
		ws[i] = (struct ibv_wseg){.len = segs[i].len, .remote = remote[i],
					  .data = segs[i].data};
		if (!remote[i])
			continue;
		if (segs[i].mr) {
			struct ibv_mrc_ent *e = segs[i].mr;
			ws[i].rkey = ((struct ibv_mr *)e->mr)->rkey;
		} else {
			rc = op_reg(v, op, segs[i].data, segs[i].len, &ws[i].rkey);
			if (rc)
				return rc;
		}
		ws[i].addr = (uintptr_t)segs[i].data;
	}
	return 0;
}

/* Encodes a message kept as given (op->meta, op->segs) into a record. A meta
 * read by rendezvous stays in op->meta, registered, until the FIN. */
static int op_encode(struct psl_van *v, struct ibv_link *l, struct ibv_sendop *op)
{
	struct ibv_wseg ws[IBV_MAX_SEGS];
	uint64_t lens[IBV_MAX_SEGS];
	bool remote[IBV_MAX_SEGS];
	struct ibv_msg_hdr h;
	long size;
	uint32_t i, nseg = op->nseg;
	int rc;

	memset(&h, 0, sizeof(h));
	for (i = 0; i < nseg; i++)
		lens[i] = op->segs[i].len;
	size = ibv_plan(lens, nseg, (uint32_t)op->meta_len, IBV_EAGER_BUF, 0, remote,
			&h.meta_remote);
	if (size < 0)
		return (int)size;
	if (h.meta_remote && op->meta_len > IBV_MAX_META_RDV) {
		LOG(v, PSL_VAN_LOG_ERROR, "a meta of %zu bytes is larger than the %u bytes "
		    "van_ibverbs carries", op->meta_len, IBV_MAX_META_RDV);
		return -EMSGSIZE;
	}
	op->rec = malloc((size_t)size);
	if (!op->rec)
		return -ENOMEM;
	rc = op_describe(v, op, remote, ws);
	if (!rc && h.meta_remote) {
		h.meta_addr = (uintptr_t)op->meta;
		rc = op_reg(v, op, op->meta, op->meta_len, &h.meta_rkey);
	}
	if (rc)
		return rc;
	if (h.meta_remote)
		h.token = ++l->next_token;
	for (i = 0; i < nseg && !h.token; i++)
		if (remote[i])
			h.token = ++l->next_token;
	op->token = h.token;
	ibv_sop_init(&op->sm, h.token != 0);
	h.nseg = nseg;
	h.seq = l->next_seq++;
	h.meta_len = (uint32_t)op->meta_len;
	op->rec_len = ibv_msg_encode(op->rec, (size_t)size, &h, op->meta, ws);
	if (op->rec_len != (size_t)size)
		return -EINVAL;
	if (!h.meta_remote) {
		free(op->meta);
		op->meta = NULL;
	}
	return 0;
}

/* Takes back a message that was never posted, without send_done. */
static void op_discard(struct psl_van *v, struct ibv_sendop *op)
{
	op->cookie = NULL;
	ibv_sendop_finish(v, op, 0);
}

int ibv_send_msg(struct psl_van *v, struct ibv_link *l, const void *meta, size_t meta_len,
		 const struct psl_van_seg *segs, uint32_t nseg, void *cookie)
{
	struct ibv_sendop *op;
	uint32_t i;
	int rc;

	if (nseg > IBV_MAX_SEGS)
		return -EMSGSIZE;
	if (meta_len > UINT32_MAX)
		return -EMSGSIZE;
	for (i = 0; i < nseg; i++)
		if (segs[i].mem_type != PSL_MEM_HOST && segs[i].len)
			return -EOPNOTSUPP;
	op = calloc(1, sizeof(*op));
	if (!op)
		return -ENOMEM;
	op->meta = malloc(meta_len ? meta_len : 1);
	if (!op->meta) {
		free(op);
		return -ENOMEM;
	}
	memcpy(op->meta, meta, meta_len);
	op->meta_len = meta_len;
	op->nseg = nseg;
	if (nseg)
		memcpy(op->segs, segs, nseg * sizeof(*segs));
	op->slot = -1;
	op->link = l;
	op->cookie = cookie;
	op->lnext = l->live;
	if (l->live)
		l->live->lprev = op;
	l->live = op;
	if (l->state != L_UP) {
		/* kept as given: the link's protocol is known once it is up */
		op->raw = true;
		op->qnext = NULL;
		if (l->wq_tail)
			l->wq_tail->qnext = op;
		else
			l->wq_head = op;
		l->wq_tail = op;
		return 0;
	}
	rc = l->cxx ? ibv_cxx_send(v, l, op) : op_encode(v, l, op);
	if (rc) {
		op_discard(v, op);
		return rc;
	}
	if (!l->cxx)
		link_dispatch(v, l, op);
	return 0;
}

/* The link came up: its waiting messages get queue pairs, in order. */
void ibv_link_flush_wait(struct psl_van *v, struct ibv_link *l)
{
	struct ibv_sendop *op;
	while ((op = l->wq_head)) {
		l->wq_head = op->qnext;
		if (!l->wq_head)
			l->wq_tail = NULL;
		if (op->raw) {
			int rc;
			op->raw = false;
			rc = l->cxx ? ibv_cxx_send(v, l, op) : op_encode(v, l, op);
			if (rc) {
				ibv_sendop_finish(v, op, rc);
				continue;
			}
		}
		if (!l->cxx)
			link_dispatch(v, l, op);
	}
}

void ibv_q_fail(struct psl_van *v, struct ibv_q *q, int status)
{
	struct ibv_sendop *op;
	struct ibv_readop *r;
	struct ibv_fin_wait *f;
	uint32_t i;

	q->dead = true;
	q->up = false;
	for (i = 0; q->tx_wr && i < q->tx_n; i++)
		q->tx_wr[i].obj = NULL;
	for (i = 0; i < IBV_READ_SLOTS; i++)
		q->rd_wr[i].obj = NULL;
	while ((op = q->qhead)) {
		q->qhead = op->qnext;
		q->queued--;
		op->q = NULL;
		ibv_sendop_finish(v, op, status);
	}
	q->qtail = NULL;
	while ((r = q->rq_head)) {
		q->rq_head = r->next;
		free(r);
	}
	q->rq_tail = NULL;
	while ((f = q->fins)) {
		q->fins = f->next;
		free(f);
	}
}

/* ------------------------------------------------------------ completions -- */

static struct ibv_sendop *find_token(struct ibv_link *l, uint64_t token)
{
	struct ibv_sendop *op;
	for (op = l->live; op; op = op->lnext)
		if (op->token == token)
			return op;
	return NULL;
}

static void rx_done(struct psl_van *v, struct ibv_q *q, struct ibv_wr *w, uint32_t len)
{
	const uint8_t *buf = q->rx_mem + (size_t)w->idx * q->rx_buf;
	const char *why = "";
	int type = 0, rc;
	uint16_t credits = 0;
	int32_t status = 0;
	uint64_t token = 0;

	rc = ibv_rec_peek(buf, len, &type, &credits, &status, &token, &why);
	if (rc == 0 && ibv_cr_grant(&q->cr, credits))
		rc = -EPROTO, why = "more credits than the peer could owe";
	if (rc) {
		LOG(v, PSL_VAN_LOG_WARN, "malformed record on an RDMA connection (%s)", why);
		ibv_q_broken(v, q, -EPROTO, "decoding a record");
		return;
	}
	if (type == IBV_REC_MSG) {
		if (q->outgoing) {
			ibv_q_broken(v, q, -EPROTO, "a message on a reply direction");
			return;
		}
		ibv_rx_msg(v, q, buf, len);
	} else if (type == IBV_REC_FIN) {
		struct ibv_sendop *op = q->link ? find_token(q->link, token) : NULL;
		if (op)
			sop_event(v, op, IBV_SOP_FIN, status);
	}
	if (q->dead)
		return;
	if (post_rx(q, w->idx)) {
		ibv_q_broken(v, q, -EIO, "reposting a receive buffer");
		return;
	}
	ibv_cr_reposted(&q->cr, type == IBV_REC_CREDIT);
	ibv_q_kick(v, q);
}

/* A completion error that means the peer went away (its process ended,
 * its NIC or the path is gone) is a lost connection, as a reset TCP socket
 * is; the others (a local protection or length error) are this side's. */
static int wc_errno(enum ibv_wc_status s)
{
	switch (s) {
	case IBV_WC_SUCCESS:
		return 0;
	case IBV_WC_RETRY_EXC_ERR:
	case IBV_WC_RNR_RETRY_EXC_ERR:
	case IBV_WC_REM_OP_ERR:
	case IBV_WC_REM_ABORT_ERR:
	case IBV_WC_WR_FLUSH_ERR:
		return -ECONNRESET;
	default:
		return -EIO;
	}
}

static void wc_one(struct psl_van *v, struct ibv_q *q, struct ibv_wc *wc)
{
	struct ibv_wr *w = (struct ibv_wr *)(uintptr_t)wc->wr_id;
	int st = wc_errno(wc->status);

	if (w->kind != WR_RX && q->sq_used)
		q->sq_used--;
	switch (w->kind) {
	case WR_RX:
		if (!st && !q->dead && q->cxx) {
			ibv_cxx_rx(v, q, wc, q->rx_mem + (size_t)w->idx * q->rx_buf);
			if (!q->dead && post_rx(q, w->idx))
				ibv_q_broken(v, q, -EIO, "reposting a receive buffer");
		} else if (!st && !q->dead) {
			rx_done(v, q, w, wc->byte_len);
		}
		break;
	case WR_NOP:
		break;
	case WR_TX:
		q->tx_free[q->tx_free_n++] = w->idx;
		if (w->obj) {
			struct ibv_sendop *op = w->obj;
			w->obj = NULL;
			op->slot = -1;
			sop_event(v, op, IBV_SOP_SENT, st);
		}
		break;
	case WR_CTL:
		q->ctl_free[q->ctl_free_n++] = w->idx;
		break;
	case WR_READ:
		q->rd_free[q->rd_free_n++] = (uint32_t)(w - q->rd_wr);
		if (w->obj) {
			struct ibv_recvop *op = w->obj;
			w->obj = NULL;
			ibv_read_done(v, q, op, w->idx, st);
		}
		break;
	}
	if (st && wc->status != IBV_WC_WR_FLUSH_ERR && !q->dead) {
		char what[96];
		snprintf(what, sizeof(what), "a work request (%s)",
			 ibv_wc_status_str(wc->status));
		LOG(v, PSL_VAN_LOG_WARN, "RDMA %s", what);
		ibv_q_broken(v, q, st, what);
	} else if (!st && !q->dead) {
		ibv_q_kick(v, q);
	}
}

int ibv_poll_all(struct psl_van *v)
{
	struct ibv_wc wc[32];
	struct ibv_q *q;
	int n, i, total = 0;

	for (q = v->qs; q; q = q->next_all) {
		if (!q->cq)
			continue;
		while ((n = ibv_poll_cq(q->cq, 32, wc)) > 0) {
			for (i = 0; i < n; i++)
				wc_one(v, q, &wc[i]);
			total += n;
		}
	}
	return total;
}

void ibv_arm_all(struct psl_van *v)
{
	struct ibv_q *q;
	for (q = v->qs; q; q = q->next_all)
		if (q->cq)
			ibv_req_notify_cq(q->cq, 0);
}
