/* The serving side of batches (StepMesh's AF server): gathers the messages of
 * one worker's batch (same sender, customer and timestamp; the option says
 * how many) into one psl_kv_batch_req, hands it to a callback or a queue,
 * and answers all its messages at once. Built on the KV server: each message
 * is a psl_kv_request held until the batch is answered. */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "kv.h"
#include "log.h"
#include "postoffice.h"
#include "pslite.h"
#include "kv_tensor.h"

struct bat {
	struct psl_kv_batch_req pub;
	int customer_id;
	int count, got;
	struct psl_kv_request **reqs; /* by message index */
	struct psl_kv_tensor *tensors; /* push ones, then pull ones */
	struct bat *next;	       /* in partial or held */
	struct bat *qnext;	       /* in the queue */
	bool queued;
};

struct psl_kv_batch_server {
	struct psl_kv_server *kv;
	struct psl__office *office; /* the server node kv belongs to */
	size_t max;
	size_t esz; /* bytes of one value of its dtype */
	psl_kv_batch_cb cb;
	void *arg;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	struct bat *partial; /* still gathering */
	struct bat *held;    /* complete, not answered */
	struct bat *qhead, *qtail;
	uint64_t next_id;
	bool closing;
};

static void bat_free(struct bat *b)
{
	free(b->reqs);
	free(b->tensors);
	free(b);
}

/* Answers every message of b with err and frees b. */
static void bat_fail(struct bat *b, int err)
{
	int i;
	for (i = 0; i < b->count; i++)
		if (b->reqs[i])
			psl_kv_respond_error(b->reqs[i], err);
	bat_free(b);
}

static void unlink_bat(struct bat **list, struct bat *b)
{
	for (; *list; list = &(*list)->next) {
		if (*list == b) {
			*list = b->next;
			return;
		}
	}
}

static void unqueue(struct psl_kv_batch_server *s, struct bat *b)
{
	struct bat **p, *prev = NULL;
	if (!b->queued)
		return;
	for (p = &s->qhead; *p; prev = *p, p = &(*p)->qnext) {
		if (*p == b) {
			*p = b->qnext;
			if (s->qtail == b)
				s->qtail = prev;
			break;
		}
	}
	b->queued = false;
}

/* b is complete: build its tensors. */
static int bat_build(struct bat *b, size_t esz)
{
	size_t np = 0, nq = 0;
	int i;
	b->tensors = calloc((size_t)b->count, sizeof(*b->tensors));
	if (!b->tensors)
		return -ENOMEM;
	for (i = 0; i < b->count; i++)
		np += b->reqs[i]->meta.push;
	/* nq counts the pushes before message i: a pull's place is i - nq */
	for (i = 0; i < b->count; i++) {
		const struct psl_kv_request *q = b->reqs[i];
		struct psl_kv_tensor *t;
		if (q->meta.push) {
			struct psl__tdesc d;
			t = &b->tensors[nq++];
			t->vals = q->kv.vals;
			t->len = q->kv.num_vals;
			t->mem = q->kv.mem; /* (a registered receive buffer's) */
			t->dev = q->kv.dev;
			psl__kv_request_tdesc(q, &d);
			psl__tdesc_apply(&d, t->len * esz, t);
		} else {
			t = &b->tensors[np + (size_t)i - nq];
			t->vals = NULL;
			t->len = q->meta.val_len > 0 ? (size_t)q->meta.val_len : 0;
		}
		t->key = q->kv.keys[0];
	}
	b->pub.push = b->tensors;
	b->pub.npush = np;
	b->pub.pull = b->tensors + np;
	b->pub.npull = (size_t)b->count - np;
	return 0;
}

static void on_request(struct psl_kv_server *kv, struct psl_kv_request *req, void *arg)
{
	struct psl_kv_batch_server *s = arg;
	const struct psl_kv_meta *m = &req->meta;
	struct bat *b;
	int count, idx, rc;
	bool ready = false;

	(void)kv;
	if (m->option < 0 || !(m->option & 0x40000000) || req->kv.num_keys != 1) {
		PSL_WARN("batch server: request %d from node %d is not part of a batch (option "
			 "%#x, %zu keys): answered with EBADMSG",
			 m->timestamp, m->sender, (unsigned)m->option, req->kv.num_keys);
		psl_kv_respond_error(req, -EBADMSG);
		return;
	}
	count = (m->option >> 15) & 0x7fff;
	idx = m->option & 0x7fff;
	if (!count || idx >= count) {
		PSL_WARN("batch server: request %d from node %d: message %d of %d is no place in "
			 "a batch: answered with EBADMSG",
			 m->timestamp, m->sender, idx, count);
		psl_kv_respond_error(req, -EBADMSG);
		return;
	}
	if ((size_t)count > s->max) {
		PSL_WARN("batch server: batch %d from node %d has %d tensors, more than the limit "
			 "of %zu: refused with E2BIG",
			 m->timestamp, m->sender, count, s->max);
		psl_kv_respond_error(req, -E2BIG);
		return;
	}
	pthread_mutex_lock(&s->mu);
	if (s->closing) {
		pthread_mutex_unlock(&s->mu);
		psl_kv_respond_error(req, -ESHUTDOWN);
		return;
	}
	for (b = s->partial; b; b = b->next)
		if (b->pub.sender == m->sender && b->pub.timestamp == m->timestamp &&
		    b->customer_id == m->customer_id)
			break;
	if (!b) {
		b = calloc(1, sizeof(*b));
		if (b && !(b->reqs = calloc((size_t)count, sizeof(*b->reqs)))) {
			free(b);
			b = NULL;
		}
		if (!b) {
			pthread_mutex_unlock(&s->mu);
			psl_kv_respond_error(req, -ENOMEM);
			return;
		}
		b->pub.sender = m->sender;
		b->pub.timestamp = m->timestamp;
		b->pub.cmd = m->cmd;
		b->customer_id = m->customer_id;
		b->count = count;
		b->next = s->partial;
		s->partial = b;
	}
	if (b->count != count || b->reqs[idx]) {
		pthread_mutex_unlock(&s->mu);
		PSL_WARN("batch server: batch %d from node %d: message %d of %d %s: answered with "
			 "EBADMSG",
			 m->timestamp, m->sender, idx, count,
			 b->reqs[idx] ? "came twice" : "disagrees on the batch's size");
		psl_kv_respond_error(req, -EBADMSG);
		return;
	}
	b->reqs[idx] = req;
	if (++b->got == b->count) {
		unlink_bat(&s->partial, b);
		rc = bat_build(b, s->esz);
		if (rc) {
			pthread_mutex_unlock(&s->mu);
			bat_fail(b, rc);
			return;
		}
		b->pub.id = ++s->next_id;
		b->next = s->held;
		s->held = b;
		ready = true;
		if (!s->cb) {
			b->queued = true;
			if (s->qtail)
				s->qtail->qnext = b;
			else
				s->qhead = b;
			s->qtail = b;
			pthread_cond_signal(&s->cv);
		}
	}
	pthread_mutex_unlock(&s->mu);
	if (ready && s->cb)
		PSL__USER_CALL(s->cb(s, &b->pub, s->arg));
}

/* Answers and frees everything still gathering or held with err. */
static void fail_all(struct psl_kv_batch_server *s, int err)
{
	struct bat *list[2], *b;
	int i;

	pthread_mutex_lock(&s->mu);
	s->closing = true;
	list[0] = s->partial;
	list[1] = s->held;
	s->partial = s->held = s->qhead = s->qtail = NULL;
	pthread_cond_broadcast(&s->cv);
	pthread_mutex_unlock(&s->mu);
	for (i = 0; i < 2; i++) {
		while ((b = list[i])) {
			list[i] = b->next;
			bat_fail(b, err);
		}
	}
}

static void on_finalize(struct psl_kv_server *kv, void *arg)
{
	(void)kv;
	fail_all(arg, -ESHUTDOWN);
}

int psl_kv_batch_server_new(int app_id, enum psl_dtype dtype, size_t max_tensors,
			    psl_kv_batch_cb cb, void *arg, struct psl_kv_batch_server **out)
{
	struct psl_kv_batch_server *s;
	int rc;

	psl__clear_error();
	if (!out || max_tensors > PSL_KV_BATCH_MAX)
		return PSL_FAIL(-EINVAL, PSL_LOG_WARN, "psl_kv_batch_server_new: %s",
				!out ? "out is NULL"
				     : "max_tensors is above PSL_KV_BATCH_MAX: pass at most "
				       "PSL_KV_BATCH_MAX, or 0 for that");
	s = calloc(1, sizeof(*s));
	if (!s)
		return PSL_FAIL(-ENOMEM, PSL_LOG_ERROR, "psl_kv_batch_server_new: out of memory");
	s->max = max_tensors ? max_tensors : PSL_KV_BATCH_MAX;
	s->esz = psl_dtype_size(dtype);
	s->cb = cb;
	s->arg = arg;
	pthread_mutex_init(&s->mu, NULL);
	pthread_cond_init(&s->cv, NULL);
	rc = psl_kv_server_new(app_id, dtype, on_request, s, &s->kv);
	if (rc)
		goto fail;
	s->office = psl__cur; /* (psl_kv_server_new entered it) */
	rc = psl_kv_server_on_finalize(s->kv, on_finalize, s);
	if (rc)
		goto fail;
	*out = s;
	return 0;
fail:
	psl_kv_server_free(s->kv);
	pthread_cond_destroy(&s->cv);
	pthread_mutex_destroy(&s->mu);
	free(s);
	return rc;
}

int psl_kv_batch_server_set_cuda_stream(struct psl_kv_batch_server *s, void *stream)
{
	if (!s) {
		psl__clear_error();
		return PSL_FAIL(-EINVAL, PSL_LOG_WARN, "psl_kv_batch_server_set_cuda_stream: s is "
				"NULL");
	}
	return psl_kv_server_set_cuda_stream(s->kv, stream);
}

int psl_kv_batch_server_recv_buffer(struct psl_kv_batch_server *s, int worker_rank,
				    uint64_t key, void *buf, size_t len, enum psl_mem_type mem,
				    int dev)
{
	if (!s) {
		psl__clear_error();
		return PSL_FAIL(-EINVAL, PSL_LOG_WARN, "psl_kv_batch_server_recv_buffer: s is NULL");
	}
	return psl_kv_server_recv_buffer(s->kv, worker_rank, key, buf, len, mem, dev);
}

void psl_kv_batch_server_free(struct psl_kv_batch_server *s)
{
	if (!s || psl__kv_server_in_handler(s->kv, "psl_kv_batch_server_free"))
		return;
	psl_kv_server_free(s->kv); /* no request arrives after this */
	fail_all(s, -ESHUTDOWN);
	pthread_cond_destroy(&s->cv);
	pthread_mutex_destroy(&s->mu);
	free(s);
}

int psl_kv_batch_next(struct psl_kv_batch_server *s, int timeout_ms,
		      const struct psl_kv_batch_req **req)
{
	int64_t end = timeout_ms >= 0 ? psl__now_ms() + timeout_ms : 0;
	struct bat *b;
	int rc = 0;

	psl__clear_error();
	if (!s || !req || s->cb)
		return PSL_FAIL(-EINVAL, PSL_LOG_WARN, "psl_kv_batch_next: %s",
				!s ? "s is NULL" : !req ? "req is NULL"
				: "this batch server has a callback, which gets every batch: "
				  "create it with cb NULL to take batches with psl_kv_batch_next");
	pthread_mutex_lock(&s->mu);
	while (!s->qhead && !s->closing) {
		if (timeout_ms < 0) {
			pthread_cond_wait(&s->cv, &s->mu);
		} else {
			int64_t left = end - psl__now_ms();
			if (left <= 0) {
				psl__set_error("psl_kv_batch_next: no batch came within %d ms",
					       timeout_ms);
				rc = -ETIMEDOUT;
				break;
			}
			psl__cond_wait_ms(&s->cv, &s->mu, left);
		}
	}
	if (!rc && !s->qhead) {
		psl__set_error("psl_kv_batch_next: the batch server is closing (pslite "
			       "finalizes): no batch comes any more");
		rc = -ESHUTDOWN;
	}
	if (!rc) {
		b = s->qhead;
		unqueue(s, b);
		*req = &b->pub;
	}
	pthread_mutex_unlock(&s->mu);
	return rc;
}

/* Takes batch id out of the held list, or NULL. */
static struct bat *take(struct psl_kv_batch_server *s, uint64_t id)
{
	struct bat *b;
	for (b = s->held; b; b = b->next)
		if (b->pub.id == id)
			break;
	if (b) {
		unlink_bat(&s->held, b);
		unqueue(s, b);
	}
	return b;
}

/* A zero-copy answer's state: the caller's done, and the keys frames (the
 * van may send them after respond returns). */
struct zdone {
	atomic_int refs;
	void (*done)(void *);
	void *arg;
	uint64_t keys[];
};

static void zdone_put(void *p)
{
	struct zdone *z = p;
	if (atomic_fetch_sub(&z->refs, 1) == 1) {
		if (z->done)
			PSL__USER_CALL(z->done(z->arg));
		free(z);
	}
}

/* Answers every message of batch b, taken from the held ones: pushes with
 * an empty answer, pulls with out[match[n]] for the n-th pull message (in
 * message order); frees match and b. The first failure is the result, its
 * reason psl_last_error(). */
static int answer_all(struct bat *b, const struct psl_kv_tensor *out, size_t *match, bool copy,
		      struct zdone *z)
{
	char why[512] = "";
	size_t j = 0;
	int i, rc = 0, first_err = 0;

	for (i = 0; i < b->count; i++) {
		struct psl_kv_request *q = b->reqs[i];
		b->reqs[i] = NULL;
		if (q->meta.push) {
			rc = psl_kv_respond(q, NULL);
		} else {
			const struct psl_kv_tensor *t = &out[match[j]];
			struct psl_kv res = {.keys = &t->key, .num_keys = 1, .vals = t->vals,
					     .num_vals = t->len, .mem = t->mem, .dev = t->dev};
			psl__kv_request_answer_tdesc(q, t);
			if (copy) {
				rc = psl_kv_respond(q, &res);
			} else {
				z->keys[j] = t->key;
				res.keys = &z->keys[j];
				atomic_fetch_add(&z->refs, 1);
				rc = psl_kv_zrespond(q, &res, zdone_put, z);
			}
			j++;
		}
		if (rc && !first_err) {
			first_err = rc;
			snprintf(why, sizeof(why), "%s", psl_last_error());
		}
	}
	if (z)
		zdone_put(z);
	free(match);
	bat_free(b);
	if (first_err)
		psl__set_error("%s", why);
	return first_err;
}

static int respond(struct psl_kv_batch_server *s, uint64_t id, const struct psl_kv_tensor *out,
		   size_t nout, bool copy, void (*done)(void *), void *done_arg)
{
	struct bat *b;
	size_t *match = NULL, j;
	bool *used = NULL;
	struct zdone *z = NULL;
	int rc = 0;

	psl__clear_error();
	if (!s || (nout && !out))
		return PSL_FAIL(-EINVAL, PSL_LOG_WARN, "psl_kv_batch_respond: %s",
				!s ? "s is NULL" : "out is NULL but nout is not 0");
	psl__enter(s->office);
	pthread_mutex_lock(&s->mu);
	for (b = s->held; b; b = b->next)
		if (b->pub.id == id)
			break;
	if (!b) {
		pthread_mutex_unlock(&s->mu);
		return PSL_FAIL(-ENOENT, PSL_LOG_WARN, "batch server: answer to batch %" PRIu64
				", which is not held here (unknown, or already answered)", id);
	}
	for (j = 0; j < nout; j++)
		if ((rc = psl__tdesc_check(&out[j], s->esz, "psl_kv_batch_respond: "
					   "an answer")))
			goto unlock;
	match = calloc(b->pub.npull + 1, sizeof(*match));
	used = calloc(nout + 1, sizeof(*used));
	if (!match || !used) {
		rc = PSL_FAIL(-ENOMEM, PSL_LOG_ERROR, "psl_kv_batch_respond: out of memory");
		goto unlock;
	}
	for (j = 0; j < b->pub.npull; j++) {
		size_t k;
		for (k = 0; k < nout; k++)
			if (!used[k] && out[k].key == b->pub.pull[j].key &&
			    (!out[k].len || out[k].vals))
				break;
		if (k == nout) {
			rc = PSL_FAIL(-EINVAL, PSL_LOG_WARN, "batch server: batch %" PRIu64
				      " pulls key %" PRIu64 " and the answer has no (further) "
				      "tensor with that key", id, b->pub.pull[j].key);
			goto unlock;
		}
		used[k] = true;
		match[j] = k;
	}
	if (!copy) {
		z = malloc(sizeof(*z) + (b->pub.npull + 1) * sizeof(uint64_t));
		if (!z) {
			rc = PSL_FAIL(-ENOMEM, PSL_LOG_ERROR, "psl_kv_batch_respond: out of memory");
			goto unlock;
		}
		atomic_init(&z->refs, 1);
		z->done = done;
		z->arg = done_arg;
	}
	take(s, id);
	pthread_mutex_unlock(&s->mu);
	free(used);
	return answer_all(b, out, match, copy, z);
unlock:
	pthread_mutex_unlock(&s->mu);
	free(match);
	free(used);
	return rc;
}

int psl_kv_batch_respond(struct psl_kv_batch_server *s, uint64_t id,
			 const struct psl_kv_tensor *out, size_t nout)
{
	return respond(s, id, out, nout, true, NULL, NULL);
}

int psl_kv_batch_zrespond(struct psl_kv_batch_server *s, uint64_t id,
			  const struct psl_kv_tensor *out, size_t nout,
			  void (*done)(void *done_arg), void *done_arg)
{
	return respond(s, id, out, nout, false, done, done_arg);
}

int psl_kv_batch_respond_error(struct psl_kv_batch_server *s, uint64_t id, int err)
{
	struct bat *b;
	psl__clear_error();
	if (!s)
		return PSL_FAIL(-EINVAL, PSL_LOG_WARN, "psl_kv_batch_respond_error: s is NULL");
	pthread_mutex_lock(&s->mu);
	b = take(s, id);
	pthread_mutex_unlock(&s->mu);
	if (!b)
		return PSL_FAIL(-ENOENT, PSL_LOG_WARN, "batch server: error answer to batch %"
				PRIu64 ", which is not held here (unknown, or already answered)",
				id);
	bat_fail(b, err < 0 && err >= -4095 ? err : -EIO);
	return 0;
}
