/*
 * van_ucx: the receive path. Every active message names the inbound
 * connection it belongs to (conn, nonce), the message's sequence number and
 * which part it is. Eager data stays in UCX's buffer (we return
 * UCS_INPROGRESS and call ucp_am_data_release when the core releases the
 * message); rendezvous data is received into a buffer we allocate. A message
 * goes to the core once all its parts are in, and only after every earlier
 * message of the same connection: messages from one sender are delivered in
 * the order they were sent, whatever order UCX completes them in.
 *
 * Everything here but rx_release runs on the thread that owns the worker.
 */

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "ucx_van.h"

/* At most a few warnings a second about bad input. */
static bool warn_ok(void)
{
	static _Atomic int64_t window;
	static atomic_int count;
	int64_t now = psl_van_now_ms() / 1000;
	if (atomic_exchange(&window, now) != now)
		atomic_store(&count, 0);
	return atomic_fetch_add(&count, 1) < 5;
}

static void *rx_alloc(size_t len)
{
	void *p = NULL;
	if (posix_memalign(&p, 64, len ? len : 1))
		return NULL;
	return p;
}

/* ------------------------------------------------------ buffer cache -- */

static size_t class_size(unsigned c)
{
	return (size_t)((c & 1) ? 3u * (UCX_POOL_MIN / 2) : UCX_POOL_MIN) << (c / 2);
}

/* The smallest class that holds len, or -1 (too small or too large). */
static int class_of(size_t len)
{
	unsigned c;
	if (len < UCX_POOL_MIN)
		return -1;
	for (c = 0; c < UCX_POOL_CLASSES; c++)
		if (class_size(c) >= len)
			return (int)c;
	return -1;
}

void psl__ucx_pool_init(struct ucx_pool *pool, size_t max_bytes)
{
	memset(pool, 0, sizeof(*pool));
	pthread_mutex_init(&pool->mu, NULL);
	pool->max_bytes = max_bytes;
}

void psl__ucx_pool_fini(struct ucx_pool *pool)
{
	unsigned c;
	for (c = 0; c < UCX_POOL_CLASSES; c++)
		while (pool->head[c]) {
			void *b = pool->head[c];
			memcpy(&pool->head[c], b, sizeof(void *));
			free(b);
		}
	pthread_mutex_destroy(&pool->mu);
}

static void *pool_get(struct ucx_pool *pool, size_t len, uint8_t *cls)
{
	int c = class_of(len);
	void *b = NULL;
	if (c < 0)
		return NULL;
	*cls = (uint8_t)c;
	pthread_mutex_lock(&pool->mu);
	if (pool->head[c]) {
		b = pool->head[c];
		memcpy(&pool->head[c], b, sizeof(void *));
		pool->count[c]--;
		pool->bytes -= class_size((unsigned)c);
	}
	pthread_mutex_unlock(&pool->mu);
	return b ? b : rx_alloc(class_size((unsigned)c));
}

static void pool_put(struct ucx_pool *pool, void *b, uint8_t c)
{
	size_t sz = class_size(c);
	pthread_mutex_lock(&pool->mu);
	if (pool->bytes + sz <= pool->max_bytes && pool->count[c] < UCX_POOL_PER_CLASS) {
		memcpy(b, &pool->head[c], sizeof(void *));
		pool->head[c] = b;
		pool->count[c]++;
		pool->bytes += sz;
		b = NULL;
	}
	pthread_mutex_unlock(&pool->mu);
	free(b);
}

/* Gives UCX back its buffers; the caller owns the worker. */
static void parts_release_ucx(struct psl_van *v, struct ucx_rx *m)
{
	uint16_t i;
	for (i = 0; i < m->nparts; i++) {
		struct ucx_rpart *p = &m->parts[i];
		if (p->kind == PART_UCX) {
			ucp_am_data_release(v->worker, p->data);
			p->kind = PART_NONE;
			p->data = NULL;
		}
	}
}

static bool has_ucx_parts(const struct ucx_rx *m)
{
	uint16_t i;
	for (i = 0; i < m->nparts; i++)
		if (m->parts[i].kind == PART_UCX)
			return true;
	return false;
}

/* Hands the core's memory back: status 0 when the message goes to the core
 * next, else the data did not arrive. UCX must no longer write into it.
 * Returns how many loans went back. */
static int loans_put(struct psl_van *v, struct ucx_rx *m, int status)
{
	uint16_t i;
	int n = 0;
	for (i = 0; i < m->nparts; i++) {
		struct ucx_rpart *p = &m->parts[i];
		if (p->kind == PART_LOAN) {
			n++;
			v->host->recv_dest_put(v->host->ctx, p->loan, status);
			p->kind = status ? PART_NONE : PART_LENT;
			p->loan = NULL;
			if (status) {
				p->data = NULL;
				if (!m->err)
					m->err = status; /* never delivered now */
			}
			if (p->lent_writing) {
				p->lent_writing = false;
				v->lent_writing--;
			}
		}
	}
	return n;
}

/* Frees every part; UCX's parts need the caller to own the worker. */
static void parts_free(struct psl_van *v, struct ucx_rx *m)
{
	uint16_t i;
	parts_release_ucx(v, m);
	loans_put(v, m, -ECANCELED);
	for (i = 0; i < m->nparts; i++) {
		struct ucx_rpart *p = &m->parts[i];
		if (p->kind == PART_HEAP) {
			free(p->data);
		} else if (p->kind == PART_POOL) {
			pool_put(&v->pool, p->data, p->cls);
		}
		p->kind = PART_NONE;
		p->data = NULL;
	}
}

/* Records of received messages of up to RX_CACHE_PARTS parts and
 * RX_CACHE_SEGS segments (a KV message: meta, keys, values, lens) are kept
 * for reuse, at most 256 per process: steady traffic allocates none. */
#define RX_CACHE_PARTS 4
#define RX_CACHE_SEGS 4
#define RX_BYTES(nparts, nseg)                                                             \
	(((sizeof(struct ucx_rx) + (size_t)(nparts) * sizeof(struct ucx_rpart) + 7) & ~(size_t)7) + \
	 (size_t)(nseg) * sizeof(struct psl_van_rseg))
static struct psl_van_cache rx_cache =
	PSL_VAN_CACHE_INIT(256, RX_BYTES(RX_CACHE_PARTS, RX_CACHE_SEGS));

static void rx_put(struct ucx_rx *m)
{
	psl_van_cache_put(&rx_cache, m, RX_BYTES(m->nparts, m->nseg));
}

static void rx_free(struct psl_van *v, struct ucx_rx *m)
{
	parts_free(v, m);
	rx_put(m);
	psl__ucx_unref(v);
}

/* The core is done with a message (any thread). UCX's buffers go back
 * at once if the worker is free, else through the inbox of the thread that
 * owns it, or, once that thread ended, when fini lets go of the worker. */
static void rx_release(struct psl_van_rmsg *pub)
{
	struct ucx_rx *m = (struct ucx_rx *)pub;
	struct psl_van *v = m->v;

	if (!has_ucx_parts(m)) {
		rx_free(v, m);
		return;
	}
	if (pthread_mutex_trylock(&v->ucx_mu) == 0) { /* the worker is free, or ours */
		parts_release_ucx(v, m);
		pthread_mutex_unlock(&v->ucx_mu);
		rx_free(v, m);
		return;
	}
	pthread_mutex_lock(&v->inbox_mu);
	if (v->owner_active) {
		m->next = v->rq_head;
		v->rq_head = m;
		pthread_mutex_unlock(&v->inbox_mu);
		atomic_store(&v->inbox_full, true);
		psl__ucx_kick(v);
		return;
	}
	pthread_mutex_unlock(&v->inbox_mu);
	pthread_mutex_lock(&v->ucx_mu);
	parts_release_ucx(v, m);
	pthread_mutex_unlock(&v->ucx_mu);
	rx_free(v, m);
}

int psl__ucx_release_inbox(struct psl_van *v)
{
	struct ucx_rx *m;
	int n = 0;

	if (!atomic_load(&v->inbox_full))
		return 0;
	pthread_mutex_lock(&v->inbox_mu);
	atomic_store(&v->inbox_full, v->sq_head != NULL);
	m = v->rq_head;
	v->rq_head = NULL;
	pthread_mutex_unlock(&v->inbox_mu);
	while (m) {
		struct ucx_rx *next = m->next;
		rx_free(v, m);
		m = next;
		n++;
	}
	return n;
}

/* A message the core never sees. */
/* A message the core never sees; the caller owns the worker. */
static void rx_drop(struct ucx_rx *m)
{
	struct psl_van *v = m->v;
	if (m->pending) { /* UCX still writes into a part: free with the worker */
		m->in = NULL;
		m->next = v->orphans;
		v->orphans = m;
		psl__ucx_unref(v); /* the van frees it itself, last */
		return;
	}
	rx_free(v, m);
}

static void unlink_rx(struct ucx_in *in, struct ucx_rx *m)
{
	if (m->prev)
		m->prev->next = m->next;
	else
		in->head = m->next;
	if (m->next)
		m->next->prev = m->prev;
	else
		in->tail = m->prev;
	m->next = m->prev = NULL;
}

/* Checks a complete message and fills pub; 0 or -EPROTO. */
static int rx_finalize(struct ucx_rx *m, char *why, size_t why_len)
{
	struct ucxp_seg_desc desc[UCXP_MAX_SEG];
	size_t inl[UCXP_MAX_SEG], meta_off, meta_len;
	struct ucx_rpart *head = &m->parts[0];
	uint32_t i, k = 1;
	int rc;

	rc = psl__ucxp_head_parse(head->data, head->len, m->nseg, desc, &meta_off, &meta_len,
				  inl, why, why_len);
	if (rc)
		return rc;
	for (i = 0; i < m->nseg; i++) {
		if (desc[i].flags & UCXP_SEG_INLINE) {
			m->segs[i] = (struct psl_van_rseg){(uint8_t *)head->data + inl[i],
							   (size_t)desc[i].len, PSL_MEM_HOST, -1};
			continue;
		}
		if (k >= m->nparts || m->parts[k].seg != i || m->parts[k].len != desc[i].len) {
			snprintf(why, why_len, "segment %u does not match part %u", i, k);
			return -EPROTO;
		}
		m->segs[i] = (struct psl_van_rseg){m->parts[k].data, m->parts[k].len,
						   PSL_MEM_HOST, -1};
		k++;
	}
	if (k != m->nparts) {
		snprintf(why, why_len, "%u parts for %u separate segments", m->nparts, k - 1);
		return -EPROTO;
	}
	m->pub.meta = (uint8_t *)head->data + meta_off;
	m->pub.meta_len = meta_len;
	m->pub.nseg = m->nseg;
	m->pub.segs = m->segs;
	m->pub.sender = m->in->node_id;
	m->pub.release = rx_release;
	return 0;
}

/* Moves every message that is complete and next in line to the ready list. */
static void rx_advance(struct ucx_in *in)
{
	struct psl_van *v = in->v;
	struct ucx_rx *m;

	while ((m = in->head) && m->seq == in->next_seq && m->arrived == m->nparts &&
	       !m->pending) {
		char why[160] = "";
		unlink_rx(in, m);
		in->next_seq++;
		if (m->err || rx_finalize(m, why, sizeof(why))) {
			if (warn_ok())
				LOG(v, PSL_VAN_LOG_WARN,
				    "dropped message %llu from %s (node %d): %s",
				    (unsigned long long)m->seq, in->desc, in->node_id,
				    m->err ? strerror(-m->err) : why);
			rx_drop(m);
			continue;
		}
		m->next = NULL;
		if (v->ready_tail)
			v->ready_tail->next = m;
		else
			v->ready_head = m;
		v->ready_tail = m;
	}
}

int psl__ucx_dispatch_ready(struct psl_van *v)
{
	struct ucx_rx *m = v->ready_head;
	int n = 0;
	v->ready_head = v->ready_tail = NULL;
	while (m) {
		struct ucx_rx *next = m->next;
		m->next = NULL;
		if (v->stopping) { /* fini: the core gets send_done only */
			rx_free(v, m);
		} else {
			loans_put(v, m, 0);
			v->host->recv(v->host->ctx, &m->pub);
		}
		m = next;
		n++;
	}
	return n;
}

void psl__ucx_rx_drop_ready(struct psl_van *v)
{
	struct ucx_rx *m = v->ready_head;
	v->ready_head = v->ready_tail = NULL;
	while (m) {
		struct ucx_rx *next = m->next;
		rx_free(v, m);
		m = next;
	}
}

/* loans_put for every message of a list linked by next. */
static int list_loans_put(struct psl_van *v, struct ucx_rx *list, int status)
{
	int n = 0;
	for (; list; list = list->next)
		n += loans_put(v, list, status);
	return n;
}

int psl__ucx_rx_orphan_loans(struct psl_van *v)
{
	return list_loans_put(v, v->orphans, -ETIMEDOUT);
}

int psl__ucx_in_reclaim_loans(struct ucx_in *in)
{
	return list_loans_put(in->v, in->head, -ECONNRESET);
}

void psl__ucx_in_drop_all(struct ucx_in *in)
{
	while (in->head) {
		struct ucx_rx *m = in->head;
		unlink_rx(in, m);
		rx_drop(m);
	}
}

/* With the worker alive: give UCX its buffers back; after it was
 * destroyed (nothing writes into ours any more): free the rest. */
void psl__ucx_rx_free_orphans(struct psl_van *v, bool worker_alive)
{
	struct ucx_rx *m;
	if (worker_alive) {
		for (m = v->orphans; m; m = m->next)
			parts_release_ucx(v, m);
		return;
	}
	while (v->orphans) {
		m = v->orphans;
		v->orphans = m->next;
		parts_free(v, m);
		rx_put(m); /* its reference went when it became an orphan */
	}
}

/* The message (in, h->seq), created if this is its first part. */
static struct ucx_rx *rx_get(struct ucx_in *in, const struct ucxp_am_hdr *h)
{
	struct psl_van *v = in->v;
	struct ucx_rx *m, *after;
	size_t sz;

	if (h->seq < in->next_seq || h->seq - in->next_seq >= UCXP_SEQ_WINDOW)
		return NULL;
	for (after = in->tail; after && after->seq > h->seq; after = after->prev)
		;
	if (after && after->seq == h->seq)
		return (after->nparts == h->nparts && after->nseg == h->nseg) ? after : NULL;
	sz = ucxp_pad8(sizeof(*m) + h->nparts * sizeof(struct ucx_rpart));
	m = psl_van_cache_get(&rx_cache, RX_BYTES(h->nparts, h->nseg));
	if (!m)
		return NULL;
	memset(m, 0, RX_BYTES(h->nparts, h->nseg));
	m->v = v;
	m->in = in;
	m->seq = h->seq;
	m->nparts = h->nparts;
	m->nseg = h->nseg;
	m->segs = (struct psl_van_rseg *)(void *)((char *)m + sz);
	atomic_fetch_add(&v->refs, 1);
	m->prev = after;
	m->next = after ? after->next : in->head;
	if (m->next)
		m->next->prev = m;
	else
		in->tail = m;
	if (after)
		after->next = m;
	else
		in->head = m;
	return m;
}

static void rndv_cb(void *request, ucs_status_t st, size_t length, void *user_data)
{
	struct ucx_rpart *p = user_data;
	struct ucx_rx *m = p->m;

	ucp_request_free(request);
	if (st != UCS_OK || length != p->len)
		m->err = st != UCS_OK ? -psl__ucx_errno(st) : -EPROTO;
	p->rndv = false;
	if (p->lent_writing) {
		p->lent_writing = false;
		m->v->lent_writing--;
	}
	m->pending--;
	if (m->in)
		rx_advance(m->in);
	else if (!m->pending) /* an orphan: what the core lent goes back now */
		loans_put(m->v, m, m->err ? m->err : -ECONNRESET);
}

/* Segment seg of m straight into memory the core lends, if it wants to
 * (a pull answer into the caller's buffer): needs the message's head, with
 * the meta, to be here already. */
static bool rx_borrow(struct psl_van *v, struct ucx_rx *m, struct ucx_rpart *p, uint32_t seg,
		      size_t len)
{
	struct ucxp_seg_desc desc[UCXP_MAX_SEG];
	size_t inl[UCXP_MAX_SEG], meta_off, meta_len;
	struct ucx_rpart *head = &m->parts[0];
	struct psl_van_dest d;
	char why[8];

	if (!v->lend || !head->arrived || head->rndv || !head->data || p == head)
		return false;
	if (psl__ucxp_head_parse(head->data, head->len, m->nseg, desc, &meta_off, &meta_len, inl,
				 why, sizeof(why)))
		return false;
	memset(&d, 0, sizeof(d));
	if (v->host->recv_dest(v->host->ctx, m->in->node_id, (uint8_t *)head->data + meta_off,
			       meta_len, seg, len, &d))
		return false;
	if (d.mem_type != PSL_MEM_HOST || !d.data) { /* only host memory here */
		v->host->recv_dest_put(v->host->ctx, d.loan, -ENOTSUP);
		return false;
	}
	p->kind = PART_LOAN;
	p->data = d.data;
	p->loan = d.loan;
	return true;
}

/* The inbound connection an active message's header names, or NULL (with
 * a warning). */
static struct ucx_in *am_in(struct psl_van *v, const void *header, size_t header_length,
			    struct ucxp_am_hdr *h)
{
	struct ucx_in *in = NULL;

	if (psl__ucxp_am_hdr_decode(header, header_length, h)) {
		if (warn_ok())
			LOG(v, PSL_VAN_LOG_WARN, "dropped an active message with a bad header "
						 "(%zu bytes)", header_length);
		return NULL;
	}
	if (h->conn < v->nins)
		in = v->ins[h->conn];
	if (!in || in->nonce != h->nonce) {
		if (warn_ok())
			LOG(v, PSL_VAN_LOG_WARN,
			    "dropped an active message for unknown connection %u", h->conn);
		return NULL;
	}
	return in;
}

/*
 * A batch (ucx_proto.h): each message gets a copy of its head, and the
 * batch's buffer goes back to UCX at once. A record that does not parse
 * fails its message and the rest of the batch (dropped with a warning when
 * their turn comes), so that the messages after them are not held up.
 */
ucs_status_t psl__ucx_am_batch_cb(void *arg, const void *header, size_t header_length,
				  void *data, size_t length, const ucp_am_recv_param_t *param)
{
	struct psl_van *v = arg;
	struct ucxp_am_hdr h, sh;
	struct ucx_in *in = am_in(v, header, header_length, &h);
	const uint8_t *head = NULL;
	size_t off = 0, hl = 0;
	uint32_t i, nseg = 0;
	int err = 0;

	if (!in)
		return UCS_OK;
	if (param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV)
		err = -EPROTO; /* sent eagerly, always: its data is not here */
	sh = h;
	for (i = 0; i < h.nseg; i++) {
		struct ucx_rx *m;
		struct ucx_rpart *p;
		if (!err && psl__ucxp_batch_next(data, length, &off, &head, &hl, &nseg) != 1)
			err = -EPROTO;
		sh.seq = h.seq + i;
		sh.nseg = err ? 0 : nseg;
		m = rx_get(in, &sh);
		if (!m || m->parts[0].arrived) {
			if (warn_ok())
				LOG(v, PSL_VAN_LOG_WARN,
				    "dropped message %llu from %s (node %d) of a batch: %s",
				    (unsigned long long)sh.seq, in->desc, in->node_id,
				    m ? "a duplicate" : "out of sequence, inconsistent, or no memory");
			continue;
		}
		p = &m->parts[0];
		p->m = m;
		p->arrived = true;
		m->arrived++;
		if (err) {
			m->err = err;
			continue;
		}
		p->len = hl;
		p->data = rx_alloc(hl);
		if (!p->data) {
			m->err = -ENOMEM;
			continue;
		}
		p->kind = PART_HEAP;
		memcpy(p->data, head, hl);
	}
	if (!err && off != length && warn_ok())
		LOG(v, PSL_VAN_LOG_WARN, "%zu bytes after the %u messages of a batch from %s",
		    length - off, h.nseg, in->desc);
	rx_advance(in);
	return UCS_OK;
}

/* Part h->part of message h->seq arrived: its data is kept where UCX has
 * it (recv_attr has UCP_AM_RECV_ATTR_FLAG_DATA), received (FLAG_RNDV) or
 * copied; returns what the active message callback returns. */
static ucs_status_t rx_part(struct ucx_in *in, const struct ucxp_am_hdr *h, void *data,
			    size_t length, uint64_t recv_attr)
{
	struct psl_van *v = in->v;
	struct ucx_rx *m = rx_get(in, h);
	struct ucx_rpart *p;
	ucs_status_t ret = UCS_OK;

	if (!m || m->parts[h->part].arrived) {
		if (warn_ok())
			LOG(v, PSL_VAN_LOG_WARN,
			    "dropped part %u of message %llu from %s (node %d): %s", h->part,
			    (unsigned long long)h->seq, in->desc, in->node_id,
			    m ? "a duplicate" : "out of sequence, inconsistent, or no memory");
		return UCS_OK;
	}
	p = &m->parts[h->part];
	p->m = m;
	p->arrived = true;
	p->len = length;
	p->seg = h->seg;
	m->arrived++;
	if (recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV) {
		ucp_request_param_t prm;
		ucs_status_ptr_t st;
		p->rndv = true;
		if (!rx_borrow(v, m, p, h->seg, length)) {
			p->kind = PART_POOL;
			p->data = v->pool.max_bytes ? pool_get(&v->pool, length, &p->cls) : NULL;
		}
		if (!p->data) {
			p->kind = PART_HEAP;
			p->data = rx_alloc(length);
		}
		if (!p->data) {
			p->kind = PART_NONE;
			m->err = -ENOMEM; /* returning UCS_OK drops the data */
		} else {
			memset(&prm, 0, sizeof(prm));
			prm.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA |
					   UCP_OP_ATTR_FIELD_MEMORY_TYPE;
			prm.cb.recv_am = rndv_cb;
			prm.user_data = p;
			prm.memory_type = UCS_MEMORY_TYPE_HOST;
			m->pending++;
			st = ucp_am_recv_data_nbx(v->worker, data, p->data, length, &prm);
			if (st == NULL) {
				m->pending--;
				p->rndv = false;
			} else if (UCS_PTR_IS_ERR(st)) {
				m->pending--;
				p->rndv = false;
				m->err = -psl__ucx_errno(UCS_PTR_STATUS(st));
			} else if (p->kind == PART_LOAN) {
				p->lent_writing = true;
				v->lent_writing++;
			}
			ret = UCS_INPROGRESS;
		}
	} else if (recv_attr & UCP_AM_RECV_ATTR_FLAG_DATA) {
		p->data = data;
		p->kind = PART_UCX;
		ret = UCS_INPROGRESS;
	} else {
		p->data = rx_alloc(length);
		if (p->data) {
			p->kind = PART_HEAP;
			if (length)
				memcpy(p->data, data, length);
		} else {
			m->err = -ENOMEM;
		}
	}
	return ret;
}

ucs_status_t psl__ucx_am_cb(void *arg, const void *header, size_t header_length, void *data,
			    size_t length, const ucp_am_recv_param_t *param)
{
	struct psl_van *v = arg;
	struct ucxp_am_hdr h;
	struct ucx_in *in = am_in(v, header, header_length, &h);
	ucs_status_t ret;

	if (!in)
		return UCS_OK;
	ret = rx_part(in, &h, data, length, param->recv_attr);
	rx_advance(in);
	return ret;
}

/*
 * A message of two parts in one active message (ucx_proto.h, "joined"):
 * the header is the data part's header followed by the head part, which is
 * taken first (copied: UCX keeps no header), so that the data may go
 * straight into memory the core lends.
 */
ucs_status_t psl__ucx_am_joined_cb(void *arg, const void *header, size_t header_length,
				   void *data, size_t length, const ucp_am_recv_param_t *param)
{
	struct psl_van *v = arg;
	struct ucxp_am_hdr h, h0;
	struct ucx_in *in = NULL;
	ucs_status_t ret;

	if (header_length > UCXP_AM_HDR_SIZE)
		in = am_in(v, header, UCXP_AM_HDR_SIZE, &h);
	else if (warn_ok())
		LOG(v, PSL_VAN_LOG_WARN, "dropped a joined message without its head (%zu bytes "
					 "of header)", header_length);
	if (!in)
		return UCS_OK;
	if (h.part != 1 || h.nparts != 2) {
		if (warn_ok())
			LOG(v, PSL_VAN_LOG_WARN,
			    "dropped joined message %llu from %s (node %d): part %u of %u",
			    (unsigned long long)h.seq, in->desc, in->node_id, h.part, h.nparts);
		return UCS_OK;
	}
	h0 = h;
	h0.part = 0;
	h0.seg = 0;
	rx_part(in, &h0, (uint8_t *)header + UCXP_AM_HDR_SIZE, header_length - UCXP_AM_HDR_SIZE,
		0);
	ret = rx_part(in, &h, data, length, param->recv_attr);
	rx_advance(in);
	return ret;
}
