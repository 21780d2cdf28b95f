/*
 * van_ibverbs speaking C++ ps-lite's RDMA protocol on a connection whose peer
 * is a C++ node (recognised by its rdmacm record, ibv_conn.c). The records
 * and the meta rules are ibv_cxx.c's; this file moves them:
 *
 * Sending (a link to a C++ node, one queue pair): messages go in order. One
 * that has no remote buffer yet sends a START and waits for the REPLY
 * (address, remote key, pool index); KV messages keep that buffer per (kind,
 * key) and later ones of the same key write straight into it. A push
 * request's values are RDMA-written after the meta's page-rounded length, a
 * pull answer's to the address and key its meta echoes; then the meta goes
 * by RDMA WRITE_WITH_IMM, immediate = the pool index. The send is done when
 * that write completed.
 *
 * Receiving (an accepted queue pair from a C++ node): a START gets a buffer
 * registered for remote writes (a server's: meta, padding to a page, every
 * segment; other roles': the meta) and a pool index, answered with a REPLY; a WRITE_WITH_IMM names the index: the
 * meta is in its buffer, and the message is rebuilt from it (ibv_cxx_unpack).
 * A control message's buffer is used once and freed; a KV buffer stays for
 * the sender's later messages of that key, for the van's life, as C++ does:
 * a delivered push's values point into it until the next push of the key.
 *
 * C++ posts its receive buffers without credits and relies on "infinite"
 * receiver-not-ready retries, as both ends' queue pairs are set up here.
 * Under the van's lock, on the thread that polls (ibv_xfer.c).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ibv.h"

/* A remote buffer a C++ node lent to one of our links. */
struct ibv_cxx_tuple {
	int kind;
	uint64_t key;
	uint64_t meta_len, cap;
	struct ibv_cxx_reply r;
};

/* A buffer we lent to a C++ sender, by pool index. */
struct ibv_cxx_rbuf {
	uint8_t *data;
	uint64_t cap, meta_len;
	struct ibv_mr *mr;
	struct ibv_stream *stream;
	atomic_int refs; /* the table's, and one per delivered message */
	struct ibv_cxx_rbuf *next; /* on the free list of small ones */
};

/* Control messages take a buffer each, used once: small ones are kept
 * registered and used again, so that a START is answered at once (a C++ node
 * that sends its last message while stopping does not wait long for the
 * REPLY: it stops, and the message is lost, if the REPLY comes too late). */
#define CX_SMALL 4096
#define CX_SMALL_KEEP 64

/* A pull request's destination, registered for the C++ server's write. */
struct ibv_cxx_pull {
	uint64_t addr, len;
	struct ibv_mrc_ent *reg;
	struct ibv_cxx_pull *next;
};

/* A REPLY waiting for a control slot. */
struct ibv_cxx_pend {
	uint8_t rec[IBV_CXX_REPLY_LEN];
	struct ibv_cxx_pend *next;
};

/* A message from a C++ node, rebuilt. */
struct ibv_cxx_rmsg {
	struct psl_van_rmsg pub;
	struct psl_van_rseg segs[3];
	struct ibv_cxx_rbuf *rb;
	uint8_t key[8];
	uint8_t lens[4];
	uint8_t meta[];
};

/* ------------------------------------------------------ known C++ nodes -- */

bool ibv_cxx_known(struct psl_van *v, const char *where)
{
	size_t i;
	for (i = 0; i < sizeof(v->cx_known) / sizeof(v->cx_known[0]); i++)
		if (v->cx_known[i][0] && !strcmp(v->cx_known[i], where))
			return true;
	return false;
}

void ibv_cxx_remember(struct psl_van *v, const char *where)
{
	size_t i, n = sizeof(v->cx_known) / sizeof(v->cx_known[0]);
	if (ibv_cxx_known(v, where))
		return;
	for (i = 0; i < n; i++)
		if (!v->cx_known[i][0])
			break;
	if (i == n) /* forget the oldest */
		memmove(v->cx_known[0], v->cx_known[1], sizeof(v->cx_known[0]) * (--i));
	snprintf(v->cx_known[i], sizeof(v->cx_known[i]), "%s", where);
}

/* -------------------------------------------------------------- sending -- */

static struct ibv_cxx_tuple *tuple_find(struct ibv_link *l, int kind, uint64_t key)
{
	size_t i;
	for (i = 0; i < l->ntuples; i++)
		if (l->tuples[i].kind == kind && l->tuples[i].key == key)
			return &l->tuples[i];
	return NULL;
}

static int tuple_keep(struct ibv_link *l, const struct ibv_sendop *op)
{
	struct ibv_cxx_tuple *t = tuple_find(l, op->plan.kind, op->plan.key);
	if (!t) {
		if (l->ntuples == l->cap_tuples) {
			size_t n = l->cap_tuples ? l->cap_tuples * 2 : 16;
			void *p = realloc(l->tuples, n * sizeof(*l->tuples));
			if (!p)
				return -ENOMEM;
			l->tuples = p;
			l->cap_tuples = n;
		}
		t = &l->tuples[l->ntuples++];
	}
	t->kind = op->plan.kind;
	t->key = op->plan.key;
	t->meta_len = op->meta_len;
	t->cap = op->plan.need;
	t->r = op->cx_tuple;
	return 0;
}

static void cx_unqueue(struct ibv_link *l, struct ibv_sendop *op)
{
	struct ibv_sendop **pp, *prev = NULL;
	for (pp = &l->cx_head; *pp; prev = *pp, pp = &(*pp)->cnext)
		if (*pp == op) {
			*pp = op->cnext;
			if (l->cx_tail == op)
				l->cx_tail = prev;
			op->cnext = NULL;
			return;
		}
}

void ibv_cxx_op_gone(struct ibv_sendop *op)
{
	if (op->link && op->link->cxx)
		cx_unqueue(op->link, op);
	if (op->meta_mr)
		ibv_dereg_mr(op->meta_mr);
	op->meta_mr = NULL;
	free(op->meta);
	op->meta = NULL;
}

void ibv_cxx_link_free(struct ibv_link *l)
{
	free(l->tuples);
	l->tuples = NULL;
	l->ntuples = l->cap_tuples = 0;
}

static const char *kind_name(int kind)
{
	static const char *const n[] = {"control message", "push request", "pull request",
					"push answer", "pull answer"};
	return kind >= 0 && kind <= IBV_CXX_PULL_RESP ? n[kind] : "message";
}

int ibv_cxx_send(struct psl_van *v, struct ibv_link *l, struct ibv_sendop *op)
{
	uint64_t lens[IBV_MAX_SEGS];
	const char *why = "";
	uint32_t i;
	int rc;

	for (i = 0; i < op->nseg; i++)
		lens[i] = op->segs[i].len;
	rc = ibv_cxx_plan(op->meta, op->meta_len, lens, op->nseg ? op->segs[0].data : NULL,
			  op->nseg, &op->plan, &why);
	if (rc) {
		LOG(v, l->cx_warned ? PSL_VAN_LOG_DEBUG : PSL_VAN_LOG_ERROR,
		    "cannot send to node %d at %s, a C++ ps-lite RDMA node: %s", l->id, l->where,
		    why);
		l->cx_warned = true;
		return rc;
	}
	if (op->plan.data_seg >= 0 || op->plan.kind == IBV_CXX_PULL_REQ) {
		if (!v->mrc_ready)
			return -ENOTCONN;
	}
	if (op->plan.data_seg >= 0) {
		const struct psl_van_seg *sg = &op->segs[op->plan.data_seg];
		if (sg->mem_type != PSL_MEM_HOST)
			return -EOPNOTSUPP;
		rc = ibv_mrc_get(&v->mrc, sg->data, sg->len, &op->reg[op->nreg]);
		if (rc)
			return rc;
		op->nreg++;
	}
	if (op->plan.kind == IBV_CXX_PULL_REQ) {
		/* the C++ server writes the answer straight to the worker's
		 * buffer: register it and name its key in option */
		struct ibv_cxx_pull *p = calloc(1, sizeof(*p));
		if (!p)
			return -ENOMEM;
		rc = ibv_mrc_get(&v->mrc, (void *)(uintptr_t)op->plan.pull_addr,
				 (size_t)op->plan.pull_len, &p->reg);
		if (rc) {
			free(p);
			return rc;
		}
		p->addr = op->plan.pull_addr;
		p->len = op->plan.pull_len;
		p->next = v->cx_pulls;
		v->cx_pulls = p;
		ibv_cxx_meta_set_option(op->meta,
					(int32_t)((struct ibv_mr *)p->reg->mr)->rkey);
	}
	if (op->meta_len > IBV_CXX_SLOT) {
		op->meta_mr = ibv_reg_mr(v->pd, op->meta, op->meta_len, IBV_ACCESS_LOCAL_WRITE);
		if (!op->meta_mr)
			return errno ? -errno : -ENOMEM;
	}
	ibv_sop_init(&op->sm, false);
	op->cnext = NULL;
	if (l->cx_tail)
		l->cx_tail->cnext = op;
	else
		l->cx_head = op;
	l->cx_tail = op;
	LOG(v, PSL_VAN_LOG_TRACE, "node %d: %s of %zu bytes queued for C++ (key %llu)", l->id,
	    kind_name(op->plan.kind), op->meta_len, (unsigned long long)op->plan.key);
	ibv_cxx_pump(v, l);
	return 0;
}

static bool sq_has(struct ibv_q *q, uint32_t n)
{
	return q->qp && !q->dead && q->sq_used + n <= q->sq_max;
}

static int post_imm(struct ibv_q *q, enum ibv_wr_opcode opc, void *addr, uint32_t len,
		    uint32_t lkey, uint32_t imm, uint64_t raddr, uint32_t rkey, struct ibv_wr *w)
{
	struct ibv_sge sge = {.addr = (uintptr_t)addr, .length = len, .lkey = lkey};
	struct ibv_send_wr wr, *bad;
	memset(&wr, 0, sizeof(wr));
	wr.wr_id = (uintptr_t)w;
	wr.sg_list = &sge;
	wr.num_sge = len ? 1 : 0;
	wr.opcode = opc;
	wr.send_flags = IBV_SEND_SIGNALED;
	/* C++ puts the number into the immediate as it is, without byte
	 * swapping: so do we, for its nodes (all little-endian) */
	wr.imm_data = imm;
	wr.wr.rdma.remote_addr = raddr;
	wr.wr.rdma.rkey = rkey;
	if (ibv_post_send(q->qp, &wr, &bad))
		return errno ? -errno : -EIO;
	q->sq_used++;
	q->msgs++;
	return 0;
}

static int post_start(struct ibv_link *l, struct ibv_q *q, struct ibv_sendop *op)
{
	struct ibv_cxx_start st = op->plan.start;
	uint32_t s = q->tx_free[--q->tx_free_n];
	uint8_t *slot = q->tx_mem + (size_t)s * q->tx_buf;
	int rc;

	op->cx_cookie = ++l->cx_next_cookie;
	st.cookie = op->cx_cookie;
	ibv_cxx_start_encode(slot, &st);
	q->tx_wr[s].obj = NULL;
	rc = post_imm(q, IBV_WR_SEND_WITH_IMM, slot, IBV_CXX_START_LEN, q->tx_mr->lkey,
		      IBV_CXX_IMM_START, 0, 0, &q->tx_wr[s]);
	if (rc)
		q->tx_free[q->tx_free_n++] = s;
	return rc;
}

static int post_writes(struct ibv_q *q, struct ibv_sendop *op)
{
	const struct ibv_cxx_reply *t = &op->cx_tuple;
	uint32_t s = q->tx_free[--q->tx_free_n];
	uint8_t *slot = q->tx_mem + (size_t)s * q->tx_buf;
	void *maddr = slot;
	uint32_t mkey = q->tx_mr->lkey;
	int rc;

	if (op->plan.data_seg >= 0) {
		const struct psl_van_seg *sg = &op->segs[op->plan.data_seg];
		struct ibv_mr *mr = op->reg[op->nreg - 1]->mr;
		uint64_t raddr;
		uint32_t rkey;
		if (op->plan.kind == IBV_CXX_PUSH_REQ) {
			raddr = t->addr + ibv_cxx_data_offset(op->meta_len);
			rkey = t->rkey;
		} else {
			struct ibv_cxx_meta m;
			const char *why;
			ibv_cxx_meta_peek(op->meta, op->meta_len, &m, &why);
			raddr = m.addr;
			rkey = (uint32_t)m.option;
		}
		rc = post_imm(q, IBV_WR_RDMA_WRITE, (void *)sg->data, (uint32_t)sg->len, mr->lkey,
			      0, raddr, rkey, &q->nop_wr);
		if (rc) {
			q->tx_free[q->tx_free_n++] = s;
			return rc;
		}
	}
	if (op->meta_mr) {
		maddr = op->meta;
		mkey = op->meta_mr->lkey;
	} else {
		memcpy(slot, op->meta, op->meta_len);
	}
	q->tx_wr[s].obj = op;
	op->slot = (int)s;
	op->q = q;
	rc = post_imm(q, IBV_WR_RDMA_WRITE_WITH_IMM, maddr, (uint32_t)op->meta_len, mkey, t->idx,
		      t->addr, t->rkey, &q->tx_wr[s]);
	if (rc) {
		q->tx_wr[s].obj = NULL;
		op->slot = -1;
		q->tx_free[q->tx_free_n++] = s;
	}
	return rc;
}

/* Starts or writes what the link's queue allows, in order. */
void ibv_cxx_pump(struct psl_van *v, struct ibv_link *l)
{
	struct ibv_q *q = l->q[0];
	struct ibv_sendop *op;
	int rc;

	if (!q || !q->up || q->dead || !q->cxx || l->state != L_UP)
		return;
	while ((op = l->cx_head)) {
		if (!op->cx_have) {
			struct ibv_cxx_tuple *t = op->plan.kind == IBV_CXX_OTHER
							  ? NULL
							  : tuple_find(l, op->plan.kind,
								       op->plan.key);
			if (t && t->meta_len == op->meta_len && t->cap >= op->plan.need) {
				op->cx_tuple = t->r;
				op->cx_have = true;
			} else {
				if (op->cx_started || !q->tx_free_n || !sq_has(q, 1))
					return;
				rc = post_start(l, q, op);
				if (rc) {
					ibv_q_broken(v, q, rc, "posting a rendezvous start");
					return;
				}
				op->cx_started = true;
				return;
			}
		}
		if (!q->tx_free_n || !sq_has(q, 2))
			return;
		LOG(v, PSL_VAN_LOG_TRACE, "node %d (C++): writing a %s, key %llu, pool index %u",
		    l->id, kind_name(op->plan.kind), (unsigned long long)op->plan.key,
		    op->cx_tuple.idx);
		rc = post_writes(q, op);
		if (rc) {
			ibv_q_broken(v, q, rc, "an RDMA WRITE to a C++ node");
			return;
		}
		l->cx_head = op->cnext;
		if (!l->cx_head)
			l->cx_tail = NULL;
		op->cnext = NULL;
	}
}

static void on_reply(struct psl_van *v, struct ibv_q *q, const uint8_t *buf, size_t len)
{
	struct ibv_link *l = q->link;
	struct ibv_sendop *op = l ? l->cx_head : NULL;
	struct ibv_cxx_reply r;
	const char *why = "";

	if (ibv_cxx_reply_decode(buf, len, (uint32_t)v->cx_pool_max, &r, &why)) {
		/* why says it */
	} else if (!op || !op->cx_started || op->cx_have || r.cookie != op->cx_cookie) {
		why = "a rendezvous reply for no start of ours";
	} else {
		op->cx_tuple = r;
		op->cx_have = true;
		if (op->plan.kind != IBV_CXX_OTHER && tuple_keep(l, op)) {
			ibv_q_broken(v, q, -ENOMEM, "keeping a C++ node's buffer");
			return;
		}
		ibv_cxx_pump(v, l);
		return;
	}
	LOG(v, PSL_VAN_LOG_WARN, "node %d at %s (C++ ps-lite) answered oddly: %s", l ? l->id : -1,
	    l ? l->where : "?", why);
	ibv_q_broken(v, q, -EPROTO, "a C++ rendezvous");
}

/* ------------------------------------------------------------ receiving -- */

static void rbuf_unref(struct ibv_cxx_rbuf *b)
{
	if (atomic_fetch_sub(&b->refs, 1) != 1)
		return;
	if (b->mr)
		ibv_dereg_mr(b->mr);
	free(b->data);
	free(b);
}

static void rmsg_release(struct psl_van_rmsg *m)
{
	struct ibv_cxx_rmsg *r = (struct ibv_cxx_rmsg *)m;
	if (r->rb)
		rbuf_unref(r->rb);
	free(r);
}

static int post_reply(struct ibv_q *q, const uint8_t *rec)
{
	uint32_t s;
	int rc;
	if (!q->ctl_free_n || !sq_has(q, 1))
		return -EAGAIN;
	s = q->ctl_free[--q->ctl_free_n];
	memcpy(q->ctl_mem[s], rec, IBV_CXX_REPLY_LEN);
	rc = post_imm(q, IBV_WR_SEND_WITH_IMM, q->ctl_mem[s], IBV_CXX_REPLY_LEN, q->ctl_mr->lkey,
		      IBV_CXX_IMM_REPLY, 0, 0, &q->ctl_wr[s]);
	if (rc)
		q->ctl_free[q->ctl_free_n++] = s;
	return rc;
}

void ibv_cxx_kick_replies(struct psl_van *v, struct ibv_q *q)
{
	struct ibv_cxx_pend *p;
	int rc;
	if (!q->up || q->dead)
		return;
	while ((p = q->cx_replies)) {
		rc = post_reply(q, p->rec);
		if (rc == -EAGAIN)
			return;
		if (rc) {
			ibv_q_broken(v, q, rc, "posting a rendezvous reply");
			return;
		}
		q->cx_replies = p->next;
		free(p);
	}
}

void ibv_cxx_q_free(struct ibv_q *q)
{
	struct ibv_cxx_pend *p;
	while ((p = q->cx_replies)) {
		q->cx_replies = p->next;
		free(p);
	}
}

/* A free pool index, or -1. */
static int64_t rb_slot(struct psl_van *v)
{
	uint32_t i, n;
	for (i = 0; i < v->cx_rb_n; i++) {
		uint32_t k = (v->cx_rb_hint + i) % v->cx_rb_n;
		if (!v->cx_rb[k]) {
			v->cx_rb_hint = k + 1;
			return k;
		}
	}
	if (v->cx_rb_n >= (uint32_t)v->cx_pool_max)
		return -1;
	n = v->cx_rb_n ? v->cx_rb_n * 2 : 256;
	if (n > (uint32_t)v->cx_pool_max)
		n = (uint32_t)v->cx_pool_max;
	{
		void *p = realloc(v->cx_rb, n * sizeof(*v->cx_rb));
		if (!p)
			return -1;
		v->cx_rb = p;
	}
	memset(v->cx_rb + v->cx_rb_n, 0, (n - v->cx_rb_n) * sizeof(*v->cx_rb));
	i = v->cx_rb_n;
	v->cx_rb_n = n;
	v->cx_rb_hint = i + 1;
	return i;
}

static void on_start(struct psl_van *v, struct ibv_q *q, const uint8_t *buf, size_t len)
{
	struct ibv_stream *s = q->stream;
	struct ibv_cxx_start st;
	struct ibv_cxx_reply r;
	struct ibv_cxx_rbuf *b;
	struct ibv_cxx_pend *p;
	const char *why = "";
	uint64_t need;
	int64_t idx;

	if (ibv_cxx_start_decode(buf, len, &st, &why)) {
		LOG(v, PSL_VAN_LOG_WARN, "node %d (C++ ps-lite) sent a malformed record: %s",
		    s->sender, why);
		ibv_q_broken(v, q, -EPROTO, "a C++ rendezvous start");
		return;
	}
	/* as C++: only a server's buffers take values (push requests); the
	 * others hold the meta alone */
	need = v->role == 0 ? ibv_cxx_buf_len(&st) : st.meta_len;
	idx = rb_slot(v);
	if (idx >= 0 && need <= CX_SMALL && v->cx_small) {
		b = v->cx_small;
		v->cx_small = b->next;
		b->next = NULL;
		b->meta_len = st.meta_len;
		b->stream = s;
		v->cx_rb[idx] = b;
		goto reply;
	}
	if (need <= CX_SMALL)
		need = CX_SMALL;
	b = idx >= 0 ? calloc(1, sizeof(*b)) : NULL;
	if (!b || need > (1ull << 40) || posix_memalign((void **)&b->data, 4096, need)) {
		LOG(v, PSL_VAN_LOG_ERROR,
		    "cannot take a rendezvous of %llu bytes from node %d (C++ ps-lite): %s",
		    (unsigned long long)need, s->sender,
		    idx < 0 ? "every index of the address pool is taken (raise "
			      "BYTEPS_ADDRESS_POOL_SIZE on every node)"
			    : "out of memory");
		free(b);
		ibv_q_broken(v, q, -ENOMEM, "a C++ rendezvous");
		return;
	}
	b->mr = ibv_reg_mr(v->pd, b->data, need, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	if (!b->mr) {
		int err = errno ? -errno : -ENOMEM;
		LOG(v, PSL_VAN_LOG_ERROR, "cannot register %llu bytes for node %d: %s%s",
		    (unsigned long long)need, s->sender, strerror(-err), ibv_dev_reg_hint(err));
		free(b->data);
		free(b);
		ibv_q_broken(v, q, err, "a C++ rendezvous");
		return;
	}
	b->cap = need;
	b->meta_len = st.meta_len;
	b->stream = s;
	atomic_init(&b->refs, 1);
	v->cx_rb[idx] = b;
reply:
	r.addr = (uintptr_t)b->data;
	r.cookie = st.cookie;
	r.rkey = b->mr->rkey;
	r.idx = (uint32_t)idx;
	p = calloc(1, sizeof(*p));
	if (!p) {
		ibv_q_broken(v, q, -ENOMEM, "a C++ rendezvous");
		return;
	}
	ibv_cxx_reply_encode(p->rec, &r);
	{
		struct ibv_cxx_pend **pp;
		for (pp = &q->cx_replies; *pp; pp = &(*pp)->next)
			;
		*pp = p;
	}
	ibv_cxx_kick_replies(v, q);
}

static int cx_small_n(struct psl_van *v)
{
	struct ibv_cxx_rbuf *b;
	int n = 0;
	for (b = v->cx_small; b; b = b->next)
		n++;
	return n;
}

/* Registers a few small buffers ahead, at the first C++ stream. */
void ibv_cxx_prepare(struct psl_van *v)
{
	int i;
	if (v->cx_small)
		return;
	for (i = 0; i < 16; i++) {
		struct ibv_cxx_rbuf *b = calloc(1, sizeof(*b));
		if (!b || posix_memalign((void **)&b->data, 4096, CX_SMALL)) {
			free(b);
			return;
		}
		b->mr = ibv_reg_mr(v->pd, b->data, CX_SMALL,
				   IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
		if (!b->mr) {
			free(b->data);
			free(b);
			return;
		}
		b->cap = CX_SMALL;
		atomic_init(&b->refs, 1);
		b->next = v->cx_small;
		v->cx_small = b;
	}
}

static struct ibv_cxx_pull *pull_take(struct psl_van *v, uint64_t addr, uint64_t len)
{
	struct ibv_cxx_pull **pp, *p;
	for (pp = &v->cx_pulls; (p = *pp); pp = &p->next)
		if (addr >= p->addr && addr - p->addr <= p->len && len <= p->len - (addr - p->addr)) {
			*pp = p->next;
			return p;
		}
	return NULL;
}

static void on_message(struct psl_van *v, struct ibv_q *q, uint32_t idx)
{
	struct ibv_stream *s = q->stream;
	struct ibv_cxx_rbuf *b = idx < v->cx_rb_n ? v->cx_rb[idx] : NULL;
	struct ibv_cxx_rmsg *m;
	struct ibv_cxx_in in;
	struct ibv_event *ev;
	const char *why = "";

	if (!b || b->stream != s) {
		LOG(v, PSL_VAN_LOG_WARN,
		    "node %d (C++ ps-lite) wrote a message to pool index %u, which is not its",
		    s->sender, idx);
		ibv_q_broken(v, q, -EPROTO, "a C++ message");
		return;
	}
	if (ibv_cxx_unpack(b->data, b->meta_len, b->cap, &in, &why)) {
		LOG(v, PSL_VAN_LOG_WARN, "node %d (C++ ps-lite) sent a message that cannot be read "
		    "(%s): dropped", s->sender, why);
		return;
	}
	m = calloc(1, sizeof(*m) + b->meta_len);
	if (!m) {
		ibv_q_broken(v, q, -ENOMEM, "receiving");
		return;
	}
	memcpy(m->meta, b->data, b->meta_len);
	m->pub.sender = s->sender;
	m->pub.meta = m->meta;
	m->pub.meta_len = b->meta_len;
	m->pub.segs = m->segs;
	m->pub.nseg = in.nseg;
	m->pub.release = rmsg_release;
	psl_van_put_le64(m->key, in.key);
	psl_van_put_le32(m->lens, (uint32_t)in.val_len);
	if (in.nseg) {
		uint32_t i;
		for (i = 0; i < in.nseg; i++) {
			m->segs[i].mem_type = PSL_MEM_HOST;
			m->segs[i].dev_id = -1;
		}
		m->segs[0].data = m->key;
		m->segs[0].len = 8;
		m->segs[1].data = m->key + 8; /* empty */
		if (in.nseg == 3) {
			m->segs[2].data = m->lens;
			m->segs[2].len = 4;
			m->segs[1].len = (size_t)in.val_len;
		}
	}
	if (in.kind == IBV_CXX_PUSH_REQ) {
		/* values stay in the buffer: the sender's next push of this
		 * key overwrites them, as on C++ */
		m->segs[1].data = b->data + in.vals_off;
		m->rb = b;
		atomic_fetch_add(&b->refs, 1);
	} else if (in.kind == IBV_CXX_PULL_RESP) {
		struct ibv_cxx_pull *p = pull_take(v, in.vals_addr, (uint64_t)in.val_len);
		if (!p) {
			LOG(v, PSL_VAN_LOG_WARN,
			    "node %d (C++ ps-lite) answered a pull at an address no pull of this "
			    "node named: dropped", s->sender);
			free(m);
			return;
		}
		m->segs[1].data = (void *)(uintptr_t)in.vals_addr;
		ibv_mrc_put(&v->mrc, p->reg);
		free(p);
	}
	if (in.kind == IBV_CXX_OTHER) {
		/* C++ never writes to a control message's buffer again: a small
		 * one is kept for the next START */
		v->cx_rb[idx] = NULL;
		if (b->cap == CX_SMALL && cx_small_n(v) < CX_SMALL_KEEP) {
			b->next = v->cx_small;
			v->cx_small = b;
		} else {
			rbuf_unref(b);
		}
	}
	q->bytes += b->meta_len;
	LOG(v, PSL_VAN_LOG_TRACE, "node %d (C++): %s, key %llu, %d bytes of values, pool index %u",
	    s->sender, kind_name(in.kind), (unsigned long long)in.key,
	    in.nseg == 3 ? in.val_len : 0, idx);
	ev = ibv_ev_new(v, 2);
	if (ev)
		ev->msg = &m->pub;
	else
		rmsg_release(&m->pub);
}

void ibv_cxx_rx(struct psl_van *v, struct ibv_q *q, const struct ibv_wc *wc, const uint8_t *buf)
{
	uint32_t imm = wc->imm_data;

	if (wc->opcode == IBV_WC_RECV_RDMA_WITH_IMM && !q->outgoing && q->stream) {
		on_message(v, q, imm);
		return;
	}
	if (wc->opcode == IBV_WC_RECV && (wc->wc_flags & IBV_WC_WITH_IMM)) {
		if (imm == IBV_CXX_IMM_START && !q->outgoing && q->stream) {
			on_start(v, q, buf, wc->byte_len);
			return;
		}
		if (imm == IBV_CXX_IMM_REPLY && q->outgoing) {
			on_reply(v, q, buf, wc->byte_len);
			return;
		}
	}
	LOG(v, PSL_VAN_LOG_WARN, "unexpected record from a C++ ps-lite node (opcode %d, "
	    "immediate %u, %u bytes)", (int)wc->opcode, imm, wc->byte_len);
	ibv_q_broken(v, q, -EPROTO, "a C++ record");
}

void ibv_cxx_fini(struct psl_van *v)
{
	struct ibv_cxx_rbuf *b;
	struct ibv_cxx_pull *p;
	uint32_t i;
	for (i = 0; i < v->cx_rb_n; i++) {
		b = v->cx_rb[i];
		if (!b)
			continue;
		/* deregistered now (the protection domain goes); the memory
		 * stays while a delivered message points into it */
		ibv_dereg_mr(b->mr);
		b->mr = NULL;
		rbuf_unref(b);
	}
	free(v->cx_rb);
	v->cx_rb = NULL;
	v->cx_rb_n = 0;
	while ((b = v->cx_small)) {
		v->cx_small = b->next;
		rbuf_unref(b);
	}
	while ((p = v->cx_pulls)) {
		v->cx_pulls = p->next;
		ibv_mrc_put(&v->mrc, p->reg);
		free(p);
	}
}
