/*
 * van_ucx: the send path. A message becomes one or more UCP active messages
 * on the peer's endpoint, posted back to back under the connection's mutex
 * so that they carry consecutive parts of one sequence number:
 *   part 0: meta, the segment table and every small host segment (copied:
 *           at most PS_UCX_INLINE bytes each), in one buffer of ours;
 *   part k: one large (or device) segment, sent from the caller's memory:
 *           UCX picks eager zero-copy or rendezvous, no copy by the van.
 * send_done runs when UCX completed every part. Over tcp (the peer's
 * active messages go there) a message with a small head and one part of
 * data goes as one active message, the head in its header ("joined"), and
 * what the progress thread sends while it delivers leaves after the round,
 * consecutive single-part messages to one peer in batches (ucx_proto.h).
 *
 * send() checks and copies; then it posts itself if the worker is free (its
 * thread sleeps), or leaves the send in the inbox for the thread that owns
 * the worker: no sender ever waits for UCX.
 */

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "ucx_van.h"

/* Takes s off the list of unfinished sends; v->sends_mu held. */

/* Send records (their heads carry inline data: up to two segments of
 * PS_UCX_INLINE bytes, 8 KiB by default) are kept for reuse, at most 64 per
 * process: steady traffic allocates none. */
static struct psl_van_cache send_cache = PSL_VAN_CACHE_INIT(64, 2 * 8192 + 1024);

void psl__ucx_send_free(struct ucx_send *s)
{
	if (s)
		psl_van_cache_put(&send_cache, s, s->bytes);
}

static void unregister(struct psl_van *v, struct ucx_send *s)
{
	if (s->lprev)
		s->lprev->lnext = s->lnext;
	else
		v->sends = s->lnext;
	if (s->lnext)
		s->lnext->lprev = s->lprev;
	s->lprev = s->lnext = NULL;
}

/* Finishes a send whose last reference is gone: tells the core. */
void psl__ucx_send_finish(struct ucx_send *s)
{
	struct psl_van *v = s->v;
	void *cookie;

	pthread_mutex_lock(&v->sends_mu);
	unregister(v, s);
	cookie = s->cookie; /* NULL once fini failed it */
	s->cookie = NULL;
	pthread_mutex_unlock(&v->sends_mu);
	if (s->out)
		atomic_fetch_sub(&s->out->posted, 1);
	if (cookie)
		v->host->send_done(v->host->ctx, cookie, atomic_load(&s->status));
	atomic_fetch_sub(&v->inflight, 1);
	psl__ucx_send_free(s);
}

int psl__ucx_fail_unfinished(struct psl_van *v, int err)
{
	return psl__ucx_fail_posted(v, NULL, err);
}

int psl__ucx_fail_posted(struct psl_van *v, struct ucx_out *o, int err)
{
	int n = 0;
	for (;;) {
		struct ucx_send *s;
		void *cookie = NULL;
		pthread_mutex_lock(&v->sends_mu);
		for (s = v->sends; s && !cookie; s = s->lnext)
			if (!o || s->out == o) {
				cookie = s->cookie;
				s->cookie = NULL;
			}
		pthread_mutex_unlock(&v->sends_mu);
		if (!cookie)
			return n;
		v->host->send_done(v->host->ctx, cookie, err);
		n++;
	}
}

void psl__ucx_free_unfinished(struct psl_van *v)
{
	while (v->sends) {
		struct ucx_send *s = v->sends;
		unregister(v, s);
		psl__ucx_send_free(s);
	}
}

static void set_status(struct ucx_send *s, int status)
{
	int zero = 0;
	if (status)
		atomic_compare_exchange_strong(&s->status, &zero, status);
}

/* Drops one reference from a thread that may call the host: the progress
 * thread, or the sender's own. */
void psl__ucx_send_put(struct ucx_send *s, int status)
{
	set_status(s, status);
	if (atomic_fetch_sub(&s->refs, 1) == 1)
		psl__ucx_send_finish(s);
}

/* Appends s to the list (*head, *tail) linked by next. */
static void append(struct ucx_send **head, struct ucx_send **tail, struct ucx_send *s)
{
	s->next = NULL;
	if (*tail)
		(*tail)->next = s;
	else
		*head = s;
	*tail = s;
}

/* One posted request of s completed: the last one queues s for the
 * progress thread. Returns whether it did. */
static bool part_done(struct ucx_send *s, ucs_status_t st)
{
	struct psl_van *v = s->v;

	if (st != UCS_OK)
		set_status(s, -psl__ucx_errno(st));
	if (atomic_fetch_sub(&s->refs, 1) != 1)
		return false;
	pthread_mutex_lock(&v->cq_mu);
	append(&v->done_head, &v->done_tail, s);
	pthread_mutex_unlock(&v->cq_mu);
	return true;
}

static void wake_owner(struct psl_van *v)
{
	if (v->running && !pthread_equal(pthread_self(), v->thread))
		psl__ucx_wake(v);
}

/* From UCX, inside ucp_worker_progress. */
static void send_cb(void *request, ucs_status_t st, void *user_data)
{
	struct ucx_send *s = user_data;
	struct psl_van *v = s->v;

	ucp_request_free(request);
	atomic_fetch_sub(&v->requests, 1);
	if (part_done(s, st))
		wake_owner(v);
}

/* A batch on its way: the header and payload UCX sends from, and the
 * messages it carries (each holds a reference until it completes). */
struct ucx_batch {
	struct psl_van *v;
	size_t size; /* the record's bytes */
	uint32_t n;
	uint8_t hdr[UCXP_AM_HDR_SIZE];
	struct ucx_send *m[UCXP_MAX_SEG];
	uint8_t payload[];
};

/* Batch records of up to 16 KiB of messages are kept for reuse too. */
static struct psl_van_cache batch_cache =
	PSL_VAN_CACHE_INIT(64, sizeof(struct ucx_batch) + 16384);

static void batch_cb(void *request, ucs_status_t st, void *user_data)
{
	struct ucx_batch *b = user_data;
	struct psl_van *v = b->v;
	bool queued = false;
	uint32_t i;

	ucp_request_free(request);
	atomic_fetch_sub(&v->requests, 1);
	for (i = 0; i < b->n; i++)
		queued |= part_done(b->m[i], st);
	psl_van_cache_put(&batch_cache, b, b->size);
	if (queued)
		wake_owner(v);
}

int psl__ucx_dispatch_done(struct psl_van *v)
{
	struct ucx_send *s;
	int n = 0;

	pthread_mutex_lock(&v->cq_mu);
	s = v->done_head;
	v->done_head = v->done_tail = NULL;
	pthread_mutex_unlock(&v->cq_mu);
	while (s) {
		struct ucx_send *next = s->next;
		psl__ucx_send_finish(s);
		s = next;
		n++;
	}
	return n;
}

/* One active message of s (header hdr of hlen bytes, then len bytes of
 * data); s holds a reference while UCX has it. 0, or -errno when UCX
 * refused it. */
static int am_send(struct ucx_out *o, struct ucx_send *s, unsigned id, const void *hdr,
		   size_t hlen, const void *buf, size_t len, bool cuda)
{
	ucp_request_param_t prm;
	ucs_status_ptr_t st;

	memset(&prm, 0, sizeof(prm));
	prm.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA |
			   UCP_OP_ATTR_FIELD_MEMORY_TYPE;
	prm.cb.send = send_cb;
	prm.user_data = s;
	prm.memory_type = cuda ? UCS_MEMORY_TYPE_CUDA : UCS_MEMORY_TYPE_HOST;
	atomic_fetch_add(&s->refs, 1);
	st = ucp_am_send_nbx(o->ep, id, hdr, hlen, buf, len, &prm);
	if (st != NULL && !UCS_PTR_IS_ERR(st)) {
		atomic_fetch_add(&o->v->requests, 1);
		return 0;
	}
	atomic_fetch_sub(&s->refs, 1); /* done already (the poster holds one), or refused */
	return st ? -psl__ucx_errno(UCS_PTR_STATUS(st)) : 0;
}

/*
 * Posts every part of s on o's endpoint; o->mu held, o->state OUT_READY.
 * Returns 0 once part 0 is posted (later failures go into s->status and
 * mark the endpoint broken), or -errno when nothing was posted.
 */
int psl__ucx_post(struct ucx_out *o, struct ucx_send *s)
{
	struct psl_van *v = o->v;
	uint16_t p;
	int rc;

	if (s->joined) { /* the head in the data part's header */
		struct ucxp_am_hdr h = {.conn = o->conn, .nonce = o->nonce, .seq = o->seq,
					.part = 1, .nparts = 2, .nseg = s->nseg,
					.seg = s->src[0].seg};
		psl__ucxp_am_hdr_encode(&h, s->hdr[1]); /* (the head follows it) */
		rc = am_send(o, s, UCX_AM_JOINED_ID, s->hdr[1], UCXP_AM_HDR_SIZE + s->head_len,
			     s->src[0].data, s->src[0].len, false);
		if (rc)
			return rc;
		o->seq++;
		v->joined++;
		return 0;
	}
	for (p = 0; p < s->nparts; p++) {
		struct ucxp_am_hdr h = {
			.conn = o->conn,
			.nonce = o->nonce,
			.seq = o->seq,
			.part = p,
			.nparts = s->nparts,
			.nseg = s->nseg,
			.seg = p ? s->src[p - 1].seg : 0,
		};
		const void *buf = p ? s->src[p - 1].data : s->head;
		size_t len = p ? s->src[p - 1].len : s->head_len;
		bool cuda = p && s->src[p - 1].mem_type == PSL_MEM_CUDA;

		psl__ucxp_am_hdr_encode(&h, s->hdr[p]);
		rc = am_send(o, s, UCX_AM_ID, s->hdr[p], UCXP_AM_HDR_SIZE, buf, len, cuda);
		if (rc && p == 0)
			return rc;
		if (rc) { /* the peer has a cut message: this connection is done for */
			LOG(v, PSL_VAN_LOG_ERROR, "message to %s cut after part %u of %u: %s",
			    o->desc, p, s->nparts, strerror(-rc));
			set_status(s, rc);
			atomic_store(&o->ep_error, true);
			atomic_fetch_add(&v->ep_errors, 1);
			break;
		}
	}
	o->seq++;
	return 0;
}

static void post_one(struct ucx_send *s);

/*
 * Posts the k single-part messages m (payload bytes in all) as one batch
 * with consecutive sequence numbers; o->mu held, o->state OUT_READY. UCX is
 * told to send it eagerly: the receiver takes it whole, in its callback.
 * 0, or -errno when nothing was posted.
 */
static int post_batch(struct ucx_out *o, struct ucx_send **m, uint32_t k, size_t bytes)
{
	struct psl_van *v = o->v;
	struct ucx_batch *b = psl_van_cache_get(&batch_cache, sizeof(*b) + bytes);
	struct ucxp_am_hdr h = {.conn = o->conn, .nonce = o->nonce, .seq = o->seq,
				.part = 0, .nparts = 1, .nseg = k, .seg = 0};
	ucp_request_param_t prm;
	ucs_status_ptr_t st;
	size_t off = 0;
	uint32_t i;

	if (!b)
		return -ENOMEM;
	b->v = v;
	b->size = sizeof(*b) + bytes;
	b->n = k;
	for (i = 0; i < k; i++) {
		b->m[i] = m[i];
		off += psl__ucxp_batch_put(b->payload + off, m[i]->head, m[i]->head_len,
					   m[i]->nseg);
		atomic_fetch_add(&m[i]->refs, 1);
	}
	psl__ucxp_am_hdr_encode(&h, b->hdr);
	memset(&prm, 0, sizeof(prm));
	prm.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA |
			   UCP_OP_ATTR_FIELD_MEMORY_TYPE | UCP_OP_ATTR_FIELD_FLAGS;
	prm.cb.send = batch_cb;
	prm.user_data = b;
	prm.memory_type = UCS_MEMORY_TYPE_HOST;
	prm.flags = UCP_AM_SEND_FLAG_EAGER;
	st = ucp_am_send_nbx(o->ep, UCX_AM_BATCH_ID, b->hdr, UCXP_AM_HDR_SIZE, b->payload, off,
			     &prm);
	if (st != NULL && !UCS_PTR_IS_ERR(st)) {
		atomic_fetch_add(&v->requests, 1);
	} else {
		for (i = 0; i < k; i++) /* done already, or never posted */
			atomic_fetch_sub(&m[i]->refs, 1);
		psl_van_cache_put(&batch_cache, b, b->size);
		if (st != NULL)
			return -psl__ucx_errno(UCS_PTR_STATUS(st));
	}
	o->seq += k;
	v->batches++;
	v->batched += k;
	return 0;
}

/* Posts a run of k single-part messages: alone, or as a batch. */
static void post_run(struct ucx_out *o, struct ucx_send **m, uint32_t k, size_t bytes)
{
	int rc = k == 1 ? psl__ucx_post(o, m[0]) : post_batch(o, m, k, bytes);
	uint32_t i;
	for (i = 0; rc && i < k; i++)
		set_status(m[i], rc);
}

/* Posts the sends of one connection (linked by next, in call order),
 * consecutive single-part ones that fit in batches; the caller owns the
 * worker. */
static int post_group(struct ucx_out *o, struct ucx_send *grp)
{
	struct psl_van *v = o->v;
	struct ucx_send *m[UCXP_MAX_SEG], *s, *next;
	uint32_t k = 0;
	size_t bytes = 0;
	int n = 0;

	pthread_mutex_lock(&o->mu);
	if (o->state != OUT_READY) {
		pthread_mutex_unlock(&o->mu);
		for (s = grp; s; s = next, n++) {
			next = s->next;
			post_one(s);
		}
		return n;
	}
	for (s = grp; s; s = s->next, n++) {
		size_t rec = UCXP_BATCH_REC + s->head_len;
		bool fits = o->am_tcp && s->nparts == 1 && rec <= v->batch_max;
		if (k && (!fits || k == UCXP_MAX_SEG || bytes + rec > v->batch_max)) {
			post_run(o, m, k, bytes);
			k = 0;
			bytes = 0;
		}
		if (fits) {
			m[k++] = s;
			bytes += rec;
		} else {
			int rc = psl__ucx_post(o, s);
			if (rc)
				set_status(s, rc);
		}
	}
	if (k)
		post_run(o, m, k, bytes);
	pthread_mutex_unlock(&o->mu);
	/* the poster's references, with o->mu free: the last one calls the host */
	for (s = grp; s; s = next) {
		next = s->next;
		psl__ucx_send_put(s, 0);
	}
	return n;
}

/* Posts a list of sends (linked by next, in call order), each connection's
 * through post_group; the caller owns the worker. Returns how many. */
static int post_list(struct ucx_send *list)
{
	int n = 0;

	while (list) {
		/* every send to the first one's connection, in order */
		struct ucx_out *o = list->out;
		struct ucx_send *grp = NULL, **gt = &grp, **pp = &list;
		while (*pp) {
			struct ucx_send *s = *pp;
			if (s->out == o) {
				*pp = s->next;
				s->next = NULL;
				*gt = s;
				gt = &s->next;
			} else {
				pp = &s->next;
			}
		}
		n += post_group(o, grp);
	}
	return n;
}

int psl__ucx_post_deferred(struct psl_van *v)
{
	struct ucx_send *list = v->dq_head;

	v->dq_head = v->dq_tail = NULL;
	return post_list(list);
}

/* Posts s on its connection, or queues it there until the connection is
 * up; the caller owns the worker. */
static void post_one(struct ucx_send *s)
{
	struct ucx_out *o = s->out;
	int rc = 0;
	bool queued = false;

	s->next = NULL;
	pthread_mutex_lock(&o->mu);
	switch (o->state) {
	case OUT_READY:
		rc = psl__ucx_post(o, s);
		break;
	case OUT_FAILED:
		rc = o->err ? o->err : -ECONNRESET;
		break;
	default: /* still connecting: out_established posts it */
		*o->q_tail = s;
		o->q_tail = &s->next;
		o->qlen++;
		queued = true;
		break;
	}
	pthread_mutex_unlock(&o->mu);
	if (!queued)
		psl__ucx_send_put(s, rc); /* send() said 0: an error goes to send_done */
}

/* Posts what senders queued while another thread owned the worker, in
 * order; the caller owns the worker. */
int psl__ucx_post_inbox(struct psl_van *v)
{
	struct ucx_send *s;

	if (!atomic_load(&v->inbox_full))
		return 0;
	pthread_mutex_lock(&v->inbox_mu);
	atomic_store(&v->inbox_full, v->rq_head != NULL);
	s = v->sq_head;
	v->sq_head = v->sq_tail = NULL;
	pthread_mutex_unlock(&v->inbox_mu);
	return post_list(s); /* (in batches where the connection takes them) */
}

int psl__ucx_send(struct psl_van *v, int32_t id, const void *meta, size_t meta_len,
		  const struct psl_van_seg *segs, uint32_t nseg, void *cookie)
{
	struct ucxp_seg_desc desc[UCXP_MAX_SEG];
	struct ucx_send *s;
	struct ucx_out *o = NULL;
	size_t inl = 0, head_len, off, sz;
	uint32_t i, nsep = 0, k;
	char why[320];
	bool batch;
	int rc;

	if (nseg > UCXP_MAX_SEG) {
		LOG(v, PSL_VAN_LOG_ERROR, "cannot send %u segments to node %d: at most %d", nseg,
		    id, UCXP_MAX_SEG);
		return -EINVAL;
	}
	if (meta_len > UCXP_MAX_META) {
		/* (a node list of about 30000 nodes: 552 bytes each) */
		LOG(v, PSL_VAN_LOG_ERROR,
		    "cannot send a meta of %zu bytes to node %d: the ucx van carries metas of at "
		    "most %u MiB (a node list of about 30000 nodes); use van zmq or fabric for "
		    "larger ones",
		    meta_len, id, UCXP_MAX_META >> 20);
		return -EMSGSIZE;
	}
	if ((meta_len && !meta) || (nseg && !segs))
		return -EINVAL;
	for (i = 0; i < nseg; i++) {
		rc = psl__ucxp_mem_check(segs[i].mem_type, segs[i].dev_id, v->mem_caps, why,
					 sizeof(why));
		if (rc) {
			LOG(v, PSL_VAN_LOG_ERROR, "send to node %d, segment %u: %s", id, i, why);
			return rc;
		}
		if (segs[i].len && !segs[i].data)
			return -EINVAL;
		desc[i].len = segs[i].len;
		desc[i].flags = 0;
		if (segs[i].mem_type == PSL_MEM_HOST && segs[i].len <= v->inline_max &&
		    inl + segs[i].len <= 2 * v->inline_max) {
			desc[i].flags = UCXP_SEG_INLINE;
			inl += segs[i].len;
		} else {
			nsep++;
		}
	}
	head_len = psl__ucxp_head_size(meta_len, desc, nseg);
	sz = ucxp_pad8(sizeof(*s)) + ucxp_pad8(nsep * sizeof(struct ucx_part_src)) +
	     (nsep + 1) * UCXP_AM_HDR_SIZE + head_len;
	s = psl_van_cache_get(&send_cache, sz);
	if (!s)
		return -ENOMEM;
	s->bytes = sz;
	s->v = v;
	s->out = NULL;
	s->cookie = cookie;
	s->lprev = s->lnext = NULL;
	atomic_init(&s->refs, 1);
	atomic_init(&s->status, 0);
	s->next = NULL;
	s->nparts = (uint16_t)(nsep + 1);
	s->nseg = nseg;
	s->joined = false;
	s->src = (struct ucx_part_src *)(void *)((char *)s + ucxp_pad8(sizeof(*s)));
	s->hdr = (uint8_t(*)[UCXP_AM_HDR_SIZE])(void *)((char *)s->src +
						       ucxp_pad8(nsep * sizeof(*s->src)));
	s->head = (uint8_t *)s->hdr + (nsep + 1) * UCXP_AM_HDR_SIZE;
	s->head_len = head_len;
	off = psl__ucxp_head_write(s->head, meta, meta_len, desc, nseg);
	for (i = 0, k = 0; i < nseg; i++) {
		if (desc[i].flags & UCXP_SEG_INLINE) {
			size_t pad = ucxp_pad8(segs[i].len);
			if (segs[i].len)
				memcpy(s->head + off, segs[i].data, segs[i].len);
			memset(s->head + off + segs[i].len, 0, pad - segs[i].len);
			off += pad;
		} else {
			s->src[k++] = (struct ucx_part_src){segs[i].data, segs[i].len, i,
							    segs[i].mem_type};
		}
	}

	pthread_rwlock_rdlock(&v->lock);
	if (id >= 0 && id < v->npeers)
		o = v->peers[id];
	if (!o) {
		pthread_rwlock_unlock(&v->lock);
		psl__ucx_send_free(s);
		LOG(v, PSL_VAN_LOG_DEBUG, "send to node %d: not connected", id);
		return -EHOSTUNREACH;
	}
	pthread_mutex_lock(&o->mu);
	rc = o->state == OUT_FAILED ? (o->err ? o->err : -ECONNRESET) : 0;
	batch = o->am_tcp && v->batch_max;
	/* over tcp, one part of host data and a small head: one active message
	 * (one send and one wake-up of the peer fewer: 64 KiB +12%; over shared
	 * memory it gained nothing) */
	s->joined = o->am_tcp && nsep == 1 && head_len <= v->joined_max &&
		    s->src[0].mem_type == PSL_MEM_HOST;
	if (!rc) { /* the connection stays until this send is finished */
		s->out = o;
		atomic_fetch_add(&o->posted, 1);
		atomic_fetch_add(&v->inflight, 1);
	}
	pthread_mutex_unlock(&o->mu);
	pthread_rwlock_unlock(&v->lock);
	if (rc) {
		psl__ucx_send_free(s);
		return rc;
	}
	pthread_mutex_lock(&v->sends_mu);
	s->lnext = v->sends;
	if (v->sends)
		v->sends->lprev = s;
	v->sends = s;
	pthread_mutex_unlock(&v->sends_mu);
	if (pthread_mutex_trylock(&v->ucx_mu) == 0) {
		if (v->deferring && batch) {
			/* the worker's owner, delivering messages: this goes out
			 * after the round, with what else it sends, in batches */
			append(&v->dq_head, &v->dq_tail, s);
			pthread_mutex_unlock(&v->ucx_mu);
			return 0;
		}
		/* the worker is free (its thread sleeps): post from here, after
		 * whatever was queued before */
		psl__ucx_post_inbox(v);
		post_one(s);
		pthread_mutex_unlock(&v->ucx_mu);
		if (atomic_load(&v->requests) > 0 || atomic_load(&v->ep_errors) > 0)
			psl__ucx_kick(v); /* something for the thread to watch */
		return 0;
	}
	pthread_mutex_lock(&v->inbox_mu);
	append(&v->sq_head, &v->sq_tail, s);
	pthread_mutex_unlock(&v->inbox_mu);
	atomic_store(&v->inbox_full, true);
	psl__ucx_kick(v);
	return 0;
}
