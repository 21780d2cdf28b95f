/* KV server: ps-lite's KVServer<Val>: checks each request and hands it to the
 * application's handler (the answers: kv_respond.c). */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda.h"
#include "customer.h"
#include "kv.h"
#include "kv_request.h"
#include "kv_tensor.h"
#include "log.h"
#include "postoffice.h"
#include "pslite/van_util.h"
#include "van_host.h"

/* Receive buffers registered for the pushes of (worker rank, key)
 * (psl_kv_server_recv_buffer). Shared with the van's loans of them, so it
 * lives until the server and every loan let go. */
struct recv_reg {
	int rank;
	uint64_t key;
	void *buf;
	size_t len;
	int32_t mem, dev;
	bool lent; /* a van is receiving into it */
};

struct regtab {
	pthread_mutex_t mu;
	atomic_int refs;
	struct recv_reg *v;
	size_t n, cap;
};

struct reg_loan {
	struct psl__loan hdr;
	struct regtab *t;
	void *buf; /* which registration (by its buffer) */
};

struct psl_kv_server {
	struct psl__customer c;
	enum psl_dtype dt;
	size_t esz;
	psl_kv_handler handler;
	void *arg;
	void (*on_finalize)(struct psl_kv_server *s, void *arg);
	void *fin_arg;
	struct regtab *regs; /* NULL until a buffer is registered */
	_Atomic(void *) cuda_stream; /* the caller's stream of its GPU buffers */
};

atomic_int psl__kv_recv_regs;

/* The rank of the worker (group) that sent a message, -1 for another node. */
static int worker_rank_of(struct psl__office *o, int sender)
{
	return psl__is_worker_id(sender) ? psl__id_to_group_rank(o, sender) : -1;
}

static void regtab_put(struct regtab *t)
{
	if (t && atomic_fetch_sub(&t->refs, 1) == 1) {
		pthread_mutex_destroy(&t->mu);
		free(t->v);
		free(t);
	}
}

/* The registration for (rank, key), t->mu held. */
static struct recv_reg *reg_find_locked(struct regtab *t, int rank, uint64_t key)
{
	size_t i;
	for (i = 0; i < t->n; i++)
		if (t->v[i].rank == rank && t->v[i].key == key)
			return &t->v[i];
	return NULL;
}

int psl_kv_server_recv_buffer(struct psl_kv_server *s, int worker_rank, uint64_t key, void *buf,
			      size_t len, enum psl_mem_type mem, int dev)
{
	struct regtab *t;
	struct recv_reg *r;
	int rc;

	psl__clear_error();
	if (!s || worker_rank < 0 || (buf && !len))
		return PSL_FAIL(-EINVAL, PSL_LOG_WARN,
				"psl_kv_server_recv_buffer: %s", !s ? "s is NULL"
				: worker_rank < 0 ? "worker_rank is negative: pass a worker's rank"
						  : "buf is not NULL but len is 0");
	if (buf && (rc = psl__cuda_check("psl_kv_server_recv_buffer: buf", buf, len, mem, dev)))
		return rc;
	if (!s->regs) {
		if (!(t = calloc(1, sizeof(*t))))
			return PSL_FAIL(-ENOMEM, PSL_LOG_ERROR, "psl_kv_server_recv_buffer: out of memory");
		pthread_mutex_init(&t->mu, NULL);
		atomic_init(&t->refs, 1);
		s->regs = t;
	}
	t = s->regs;
	pthread_mutex_lock(&t->mu);
	r = reg_find_locked(t, worker_rank, key);
	if (!buf) { /* unregister */
		if (r) {
			*r = t->v[--t->n];
			atomic_fetch_sub(&psl__kv_recv_regs, 1);
		}
		pthread_mutex_unlock(&t->mu);
		return 0;
	}
	if (r && r->lent) {
		pthread_mutex_unlock(&t->mu);
		/* a van is writing into the old one */
		return PSL_FAIL(-EBUSY, PSL_LOG_DEBUG,
				"psl_kv_server_recv_buffer: a push from worker %d for key %" PRIu64
				" is being received into the buffer registered before: try again "
				"once it was handled", worker_rank, key);
	}
	if (!r) {
		if (t->n == t->cap) {
			size_t cap = t->cap ? 2 * t->cap : 16;
			struct recv_reg *v = realloc(t->v, cap * sizeof(*v));
			if (!v) {
				pthread_mutex_unlock(&t->mu);
				return PSL_FAIL(-ENOMEM, PSL_LOG_ERROR,
						"psl_kv_server_recv_buffer: out of memory");
			}
			t->v = v;
			t->cap = cap;
		}
		r = &t->v[t->n++];
		atomic_fetch_add(&psl__kv_recv_regs, 1);
	}
	*r = (struct recv_reg){worker_rank, key, buf, len, mem, mem == PSL_MEM_CUDA ? dev : -1,
			       false};
	pthread_mutex_unlock(&t->mu);
	return 0;
}

static void reg_loan_put(struct psl__loan *hdr, int status)
{
	struct reg_loan *l = (struct reg_loan *)hdr;
	size_t i;
	(void)status;
	pthread_mutex_lock(&l->t->mu);
	for (i = 0; i < l->t->n; i++)
		if (l->t->v[i].buf == l->buf)
			l->t->v[i].lent = false;
	pthread_mutex_unlock(&l->t->mu);
	regtab_put(l->t);
	free(l);
}

/* The van asks where a push's values should go: into the buffer registered
 * for its worker and key, when the meta names the key (batch messages do)
 * and the buffer is free and big enough, and the van can write its memory. */
static int kvs_recv_dest(struct psl__customer *c, const struct psl__meta *m, uint32_t seg,
			 size_t len, struct psl_van_dest *dest)
{
	struct psl_kv_server *s = (struct psl_kv_server *)c;
	struct regtab *t = s->regs;
	struct recv_reg *r;
	struct reg_loan *l;
	int rank = worker_rank_of(c->office, m->sender);

	if (!t || !m->request || !m->push || m->simple_app || seg != 1 || rank < 0 ||
	    m->option < 0 || !(m->option & 0x40000000))
		return -ENOENT;
	if (!(l = malloc(sizeof(*l))))
		return -ENOMEM;
	pthread_mutex_lock(&t->mu);
	r = reg_find_locked(t, rank, m->key);
	if (!r || r->lent || len > r->len ||
	    (r->mem == PSL_MEM_CUDA && !psl__cuda_direct(c->office))) {
		pthread_mutex_unlock(&t->mu);
		free(l);
		return -ENOENT;
	}
	r->lent = true;
	atomic_fetch_add(&t->refs, 1);
	l->hdr.put = reg_loan_put;
	l->t = t;
	l->buf = r->buf;
	dest->data = r->buf;
	dest->mem_type = r->mem;
	dest->dev_id = r->dev;
	dest->loan = l;
	pthread_mutex_unlock(&t->mu);
	return 0;
}

int psl_kv_server_set_cuda_stream(struct psl_kv_server *s, void *stream)
{
	psl__clear_error();
	if (!s)
		return PSL_FAIL(-EINVAL, PSL_LOG_WARN, "psl_kv_server_set_cuda_stream: s is NULL");
	atomic_store(&s->cuda_stream, stream);
	return 0;
}

/* Frame i of raw, as a pointer aligned for its element type (copied into
 * q->aligned if it was not). */
static const void *aligned_frame(struct kv_req *q, const struct psl_van_rseg *s, size_t align,
				 size_t *off)
{
	char *dst;
	if (((uintptr_t)s->data & (align - 1)) == 0 || s->len == 0)
		return s->data;
	dst = (char *)q->aligned + *off;
	memcpy(dst, s->data, s->len);
	*off += (s->len + 7) & ~(size_t)7;
	return dst;
}

/* A registered GPU buffer is written after the work queued so far on the
 * server's stream (which may still read the last push), and that stream
 * waits for the copy; from host memory nobody else does (the handler's
 * work on that stream comes after it), as a pull's copy into GPU memory
 * (psl__cuda_copy_answer: through a pinned buffer). */
static int copy_into_registered(struct kv_req *q, const struct recv_reg *reg,
				const struct psl_van_rseg *v)
{
	void *mark = NULL, *stage = NULL; /* (v is in the van's own buffer) */
	int rc = 0;
	if (reg->mem == PSL_MEM_CUDA && q->stream != PSL_CUDA_STREAM_PER_THREAD)
		rc = psl__cuda_mark(q->stream, reg->dev, &mark);
	if (!rc)
		rc = psl__cuda_copy_answer(reg->buf, reg->mem, reg->dev, v, mark, q->stream,
					   &stage);
	psl__cuda_mark_put(reg->dev, mark);
	return rc;
}

/* A push of one key from a worker that registered a buffer for it: its
 * values are put there (copied, unless the van received them in place) and
 * the request's kv points there. 0, 1 when there is no registration, or
 * -errno (why says it). */
static int into_registered(struct psl_kv_server *s, struct kv_req *q,
			   const struct psl__meta *m, char *why, size_t whylen)
{
	struct psl_van_rseg *v = &q->raw->segs[1];
	struct regtab *t = s->regs;
	struct recv_reg *r, reg;
	int rank = worker_rank_of(s->c.office, m->sender);
	uint64_t key;
	int rc = 0;

	if (!t || rank < 0 || q->raw->nseg < 2 || q->raw->segs[0].len != 8)
		return 1;
	key = psl__load_u64(q->raw->segs[0].data);
	pthread_mutex_lock(&t->mu);
	r = reg_find_locked(t, rank, key);
	if (r)
		reg = *r;
	pthread_mutex_unlock(&t->mu);
	if (!r)
		return 1;
	if (v->len > reg.len) {
		snprintf(why, whylen, "%zu value bytes for key %llu, its registered receive buffer "
			 "holds %zu", v->len, (unsigned long long)key, reg.len);
		return -EMSGSIZE;
	}
	if (v->data != reg.buf)
		rc = copy_into_registered(q, &reg, v);
	if (rc) {
		snprintf(why, whylen, "its values could not be copied into the receive buffer "
			 "registered for key %llu (%s)", (unsigned long long)key, psl_strerror(rc));
		return rc;
	}
	q->pub.kv.vals = reg.buf;
	q->pub.kv.mem = reg.mem;
	q->pub.kv.dev = reg.mem == PSL_MEM_CUDA ? reg.dev : 0;
	return 0;
}

static void kvs_on_msg(struct psl__customer *c, struct psl__meta *m, struct psl_van_rmsg *raw)
{
	struct psl_kv_server *s = (struct psl_kv_server *)c;
	struct kv_req *q;
	char d[96], why[160] = "";
	size_t nk = 0, nv = 0, nl = 0, need = 0, off = 0;
	uint32_t i;

	if (m->simple_app || !m->request) {
		PSL_WARN("dropped a %s from %s for KV server app %d: a server takes only KV "
			 "requests",
			 m->simple_app ? "SimpleApp message" : "response",
			 psl__node_desc(c->office, m->sender, d, sizeof(d)), c->app_id);
		psl__raw_release(raw);
		return;
	}
	q = psl__kv_req_new();
	if (!q) {
		psl__raw_release(raw);
		return;
	}
	q->raw = raw;
	atomic_init(&q->refs, 1);
	q->app_id = c->app_id;
	q->dt = s->dt;
	q->esz = s->esz;
	q->stream = atomic_load(&s->cuda_stream);
	q->sid = m->sid;
	q->reply_to = m->sender;
	q->office = c->office;
	psl__tdesc_get(m, &q->in);
	q->pub.meta = psl__kv_meta_of(m);
	/* with instance groups, a worker's group's id, as ps-lite's KVMeta */
	if (psl_group_size() > 1 && psl__is_worker_id(m->sender))
		q->pub.meta.sender = psl_worker_rank_to_id(psl__id_to_group_rank(c->office, m->sender));
	/* frames: none, or keys + values (+ lens) */
	if (raw->nseg == 1 || raw->nseg > 3) {
		snprintf(why, sizeof(why), "%u data frames, expected 0, 2 or 3", raw->nseg);
		goto bad;
	}
	if (raw->nseg >= 2) {
		if (raw->segs[0].len % 8) {
			snprintf(why, sizeof(why), "keys frame of %zu bytes", raw->segs[0].len);
			goto bad;
		}
		nk = raw->segs[0].len / 8;
		if (raw->segs[1].len % s->esz) {
			snprintf(why, sizeof(why),
				 "%zu value bytes is not a multiple of the value size %zu",
				 raw->segs[1].len, s->esz);
			goto bad;
		}
		nv = raw->segs[1].len / s->esz;
	}
	if (raw->nseg == 3) {
		long long sum = 0;
		if (raw->segs[2].len != nk * 4) {
			snprintf(why, sizeof(why), "%zu lens for %zu keys", raw->segs[2].len / 4,
				 nk);
			goto bad;
		}
		nl = nk;
		for (i = 0; i < nl; i++) {
			int32_t l = psl__load_i32((const char *)raw->segs[2].data + 4 * i);
			if (l < 0) {
				snprintf(why, sizeof(why), "lens[%u]=%d is negative", i, l);
				goto bad;
			}
			sum += l;
		}
		if (m->push && (size_t)sum != nv) {
			snprintf(why, sizeof(why), "lens add up to %lld values but %zu came", sum,
				 nv);
			goto bad;
		}
	} else if (m->push && nk && nv % nk) {
		snprintf(why, sizeof(why), "%zu values do not split evenly over %zu keys", nv, nk);
		goto bad;
	}
	for (i = 0; i < raw->nseg; i++)
		if (((uintptr_t)raw->segs[i].data & 7) && raw->segs[i].mem_type == PSL_MEM_HOST)
			need += (raw->segs[i].len + 7) & ~(size_t)7;
	if (need && !(q->aligned = malloc(need))) {
		psl__kv_req_free(q);
		return;
	}
	if (raw->nseg >= 2) {
		int rc = m->push && nk == 1 ? into_registered(s, q, m, why, sizeof(why)) : 1;
		if (rc < 0) {
			PSL_WARN("push %d from %s for app %d: %s: answered with an error",
				 m->timestamp, psl__node_desc(c->office, m->sender, d, sizeof(d)), c->app_id,
				 why);
			psl_kv_respond_error(&q->pub, rc);
			return;
		}
		q->pub.kv.keys = aligned_frame(q, &raw->segs[0], 8, &off);
		q->pub.kv.num_keys = nk;
		if (rc) /* (else: in the registered buffer) */
			q->pub.kv.vals = (void *)aligned_frame(q, &raw->segs[1], 8, &off);
		q->pub.kv.num_vals = nv;
		if (nl)
			q->pub.kv.lens = (int *)aligned_frame(q, &raw->segs[2], 4, &off);
	}
	PSL__USER_CALL(s->handler(s, &q->pub, s->arg));
	return;
bad:
	PSL_WARN("request %d from %s for app %d is malformed (%s): answered with an error",
		 m->timestamp, psl__node_desc(c->office, m->sender, d, sizeof(d)), c->app_id, why);
	psl_kv_respond_error(&q->pub, -EBADMSG);
}

static void kvs_on_finalize(struct psl__customer *c)
{
	struct psl_kv_server *s = (struct psl_kv_server *)c;
	if (s->on_finalize)
		PSL__USER_CALL(s->on_finalize(s, s->fin_arg));
}

static const struct psl__customer_ops kvs_ops = {
	.on_msg = kvs_on_msg,
	.on_finalize = kvs_on_finalize,
	.recv_dest = kvs_recv_dest,
};

int psl_kv_server_on_finalize(struct psl_kv_server *s,
			      void (*cb)(struct psl_kv_server *s, void *arg), void *arg)
{
	psl__clear_error();
	if (!s)
		return PSL_FAIL(-EINVAL, PSL_LOG_WARN, "psl_kv_server_on_finalize: s is NULL");
	s->fin_arg = arg;
	s->on_finalize = cb;
	return 0;
}

int psl_kv_server_new(int app_id, enum psl_dtype dtype, psl_kv_handler handler, void *arg,
		      struct psl_kv_server **out)
{
	struct psl__office *o;
	struct psl_kv_server *s;
	int rc;

	psl__clear_error();
	if (!out || !handler || !psl_dtype_size(dtype))
		return PSL_FAIL(-EINVAL, PSL_LOG_WARN, "psl_kv_server_new: %s",
				!out ? "out is NULL" : !handler ? "handler is NULL"
				: "dtype is no enum psl_dtype value");
	o = psl__enter_role(PSL_SERVER);
	if (o->state != PSL__READY)
		return PSL_FAIL(-ESHUTDOWN, PSL_LOG_WARN, "psl_kv_server_new: pslite is not "
				"started on this node: call psl_start first");
	if (o->role == PSL_WORKER)
		return PSL_FAIL(-EPERM, PSL_LOG_WARN, "psl_kv_server_new: this node is a worker; "
				"KV servers run on servers");
	s = calloc(1, sizeof(*s));
	if (!s)
		return PSL_FAIL(-ENOMEM, PSL_LOG_ERROR, "psl_kv_server_new: out of memory");
	rc = psl__customer_init(o, &s->c, app_id, app_id, &kvs_ops);
	if (rc) {
		free(s);
		return psl__ret("psl_kv_server_new", rc);
	}
	s->dt = dtype;
	s->esz = psl_dtype_size(dtype);
	s->handler = handler;
	s->arg = arg;
	rc = psl__customer_add(&s->c);
	if (rc) {
		rc = PSL_FAIL(rc, PSL_LOG_WARN, "psl_kv_server_new: app %d already has a server "
			      "on this node: free it first or use another app_id", app_id);
		psl__customer_remove(s->c.office, &s->c);
		free(s);
		return rc;
	}
	*out = s;
	return 0;
}

bool psl__kv_server_in_handler(const struct psl_kv_server *s, const char *call)
{
	return psl__customer_in_own_callback(&s->c, false, call);
}

void psl_kv_server_free(struct psl_kv_server *s)
{
	if (!s || psl__kv_server_in_handler(s, "psl_kv_server_free"))
		return;
	psl__customer_remove(s->c.office, &s->c);
	if (s->regs) {
		pthread_mutex_lock(&s->regs->mu);
		atomic_fetch_sub(&psl__kv_recv_regs, (int)s->regs->n);
		s->regs->n = 0; /* (a loan still out finds nothing to mark) */
		pthread_mutex_unlock(&s->regs->mu);
	}
	regtab_put(s->regs);
	free(s);
}
