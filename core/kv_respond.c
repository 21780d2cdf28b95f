/* KV server: the answers to requests (psl_kv_respond, psl_kv_zrespond,
 * psl_kv_respond_error), in host or GPU memory, and the request records. */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "cuda.h"
#include "cuda_after.h"
#include "customer.h"
#include "kv.h"
#include "kv_request.h"
#include "kv_tensor.h"
#include "log.h"
#include "postoffice.h"
#include "pslite/van_util.h"
#include "van_host.h"

/* Request records are kept for reuse (at most 256, process-wide): steady
 * traffic allocates none. */
static struct psl_van_cache req_pool = PSL_VAN_CACHE_INIT(256, sizeof(struct kv_req));

struct kv_req *psl__kv_req_new(void)
{
	struct kv_req *q = psl_van_cache_get(&req_pool, sizeof(*q));
	if (q)
		memset(q, 0, sizeof(*q));
	return q;
}

void psl__kv_req_free(struct kv_req *q)
{
	if (atomic_fetch_sub(&q->refs, 1) != 1)
		return; /* held: psl_kv_request_release frees it */
	psl__raw_release(q->raw);
	free(q->aligned);
	psl_van_cache_put(&req_pool, q, sizeof(*q));
}

void psl__kv_request_tdesc(const struct psl_kv_request *req, struct psl__tdesc *d)
{
	*d = ((const struct kv_req *)req)->in;
}

void psl__kv_request_answer_tdesc(struct psl_kv_request *req, const struct psl_kv_tensor *t)
{
	struct kv_req *q = (struct kv_req *)req;
	q->out.dtype = t->dtype;
	q->out.ndim = t->ndim;
	memcpy(q->out.shape, t->shape, sizeof(q->out.shape));
}

static void response_meta(const struct kv_req *q, struct psl__meta *m)
{
	psl__kv_response_meta(m, &q->pub.meta, q->app_id, q->sid, q->reply_to);
}

/* Fails request q back to its worker with err (psl_kv_respond_error). */
static int respond_error(struct kv_req *q, int err)
{
	struct psl__meta m;
	int rc;

	psl__enter(q->office);
	response_meta(q, &m);
	psl__kv_error_meta(&m, err); /* a pslite worker fails the request with it */
	rc = psl__send(q->office, &m, NULL, 0, NULL);
	psl__kv_req_free(q);
	return rc;
}

static int check_res(const struct kv_req *q, const struct psl_kv *res)
{
	if (!res || !res->num_keys)
		return 0;
	if (!res->keys || (res->num_vals && !res->vals))
		return PSL_FAIL(-EINVAL, PSL_LOG_WARN, "psl_kv_respond: res has %zu keys but its %s "
				"is NULL", res->num_keys, !res->keys ? "keys" : "vals");
	if (res->lens) {
		size_t i, sum = 0;
		for (i = 0; i < res->num_keys; i++) {
			if (res->lens[i] < 0)
				return PSL_FAIL(-EINVAL, PSL_LOG_WARN,
						"psl_kv_respond: res->lens[%zu]=%d is negative", i,
						res->lens[i]);
			sum += (size_t)res->lens[i];
		}
		if (sum != res->num_vals)
			return PSL_FAIL(-EINVAL, PSL_LOG_WARN, "psl_kv_respond: lens add up to %zu "
					"values but %zu were given", sum, res->num_vals);
	}
	return psl__cuda_check("psl_kv_respond: res->vals", res->vals, res->num_vals * q->esz,
			       res->mem, res->dev);
}

/* A response's data: its values staged in pinned memory or not (vmem). */
struct answer {
	const void *keys, *vals, *lens;
	size_t kb, vb, lb;
	int32_t mem, dev; /* of the caller's values */
	int32_t vmem;	  /* of vals */
	struct psl__kv_copy *cp;
};

/* Fails a response that could not be made: q's worker still gets an answer
 * (or its request waits for ever), done is called once. Returns rc. */
static int answer_fail(struct kv_req *q, struct answer *a, void (*done)(void *), void *done_arg,
		       int rc)
{
	if (done && (!a->cp || a->cp->user_done != done))
		PSL__USER_CALL(done(done_arg));
	psl__kv_copy_put(a->cp); /* (calls done if it holds it) */
	respond_error(q, rc);
	return rc;
}

/* The response's data from res: copied (copy), else the caller's, with a
 * reference that calls done once the van is done with it. 0 or -ENOMEM. */
static int answer_of(struct answer *a, const struct kv_req *q, const struct psl_kv *res,
		     bool copy, void (*done)(void *), void *done_arg)
{
	char *d;
	*a = (struct answer){res->keys, res->vals, res->lens, res->num_keys * 8,
			     res->num_vals * q->esz, res->lens ? res->num_keys * 4 : 0,
			     res->mem, res->dev, res->mem, NULL};
	if (!copy) {
		if (done && !(a->cp = psl__kv_copy_new(0, 1)))
			return -ENOMEM;
		if (done) {
			a->cp->user_done = done;
			a->cp->user_arg = done_arg;
		}
		return 0;
	}
	/* CUDA values: staged in pinned memory (answer_gpu), not here */
	a->cp = psl__kv_copy_new(a->kb + (a->mem == PSL_MEM_HOST ? a->vb : 0) + a->lb + 8, 1);
	if (!a->cp)
		return -ENOMEM;
	d = psl__kv_copy_data(a->cp);
	memcpy(d, a->keys, a->kb);
	a->keys = d;
	d += a->kb;
	if (a->mem == PSL_MEM_HOST) {
		memcpy(d, a->vals, a->vb);
		a->vals = d;
		d += a->vb;
	}
	if (a->lb) {
		d = (char *)(((uintptr_t)d + 3) & ~(uintptr_t)3);
		memcpy(d, a->lens, a->lb);
		a->lens = d;
	}
	return 0;
}

/* GPU values: staged in pinned memory when the van cannot take them or the
 * caller does not keep them (psl_kv_respond), else sent as they are. For
 * a z-form response (its caller keeps the buffer until done), *ev is what
 * to wait for before sending (the staging copy, or the caller's work the
 * van must not overtake), not waited for here. 0 or -errno. */
static int answer_gpu(struct answer *a, const struct kv_req *q, bool copy, void **ev)
{
	int rc;
	*ev = NULL;
	if (a->mem != PSL_MEM_CUDA || !a->vb) {
		a->vmem = PSL_MEM_HOST; /* nothing of the GPU's is sent */
		return 0;
	}
	if (!copy && psl__cuda_direct(q->office))
		return psl__cuda_mark(q->stream, a->dev, ev);
	rc = psl__kv_stage(&a->cp, a->vals, a->dev, a->vb, q->stream, &a->vals,
			   copy ? NULL : ev);
	/* (a zero-copy response's keys and lens still go as they are: its
	 * done waits for the van all the same) */
	a->vmem = PSL_MEM_HOST;
	return rc;
}

/* Sends q's response with a's data, and lets go of q. */
static int send_answer(struct kv_req *q, struct answer *a)
{
	struct psl__meta m;
	struct psl_van_seg segs[3];
	char shape[PSL__TDESC_BODY];
	uint32_t n = 0;
	int rc;

	response_meta(q, &m);
	if (a->kb) {
		psl__kv_meta_data(&m, q->dt, true, a->lb != 0);
		if (!a->lb)
			psl__tdesc_put(&m, q->dt, &q->out, shape);
		psl__kv_meta_dev(&m, true, a->mem, a->dev);
		segs[n++] = (struct psl_van_seg){a->keys, a->kb, PSL_MEM_HOST, -1, NULL};
		segs[n++] = (struct psl_van_seg){a->vals, a->vb, a->vmem,
						 a->vmem ? a->dev : -1, NULL};
		if (a->lb)
			segs[n++] = (struct psl_van_seg){a->lens, a->lb, PSL_MEM_HOST, -1, NULL};
	}
	rc = psl__send(q->office, &m, segs, n, a->cp ? &a->cp->ref : NULL);
	if (rc) {
		char d[96];
		rc = PSL_FAIL(rc, PSL_LOG_WARN, "cannot answer request %d of %s: %s",
			      q->pub.meta.timestamp,
			      psl__node_desc(q->office, q->pub.meta.sender, d, sizeof(d)), psl_strerror(rc));
	}
	psl__kv_req_free(q); /* (the send took a->cp's reference) */
	return rc;
}

/* A z-form response from GPU memory, sent on the core's CUDA thread once
 * the GPU is done with what it waits for (cuda_after.c): the handler that
 * made it goes on meanwhile. Responses need no order among themselves. */
struct later {
	struct psl__cuda_after a;
	struct kv_req *q;
	struct answer ans;
};

static void later_run(struct psl__cuda_after *a, int err)
{
	struct later *l = (struct later *)(void *)a;
	psl__enter(l->q->office);
	if (err) {
		psl__kv_copy_put(l->ans.cp); /* (calls the caller's done) */
		respond_error(l->q, err);
	} else {
		send_answer(l->q, &l->ans);
	}
	free(l);
}

/* Queues q's response behind ev: 0, or -errno (nothing queued). */
static int answer_later(struct kv_req *q, const struct answer *ans, void *ev)
{
	struct later *l = malloc(sizeof(*l));
	if (!l)
		return -ENOMEM;
	*l = (struct later){.a = {.dev = ans->dev, .ev = ev, .run = later_run}, .q = q,
			    .ans = *ans};
	if (psl__cuda_after(&l->a) == 0)
		return 0;
	free(l);
	return -EAGAIN;
}

static int respond(struct kv_req *q, const struct psl_kv *res, bool copy,
		   void (*done)(void *), void *done_arg)
{
	struct answer a = {0};
	void *ev = NULL;
	int rc;

	psl__enter(q->office);
	rc = check_res(q, res);
	if (!rc && res && res->num_keys)
		rc = answer_of(&a, q, res, copy, done, done_arg);
	else if (!rc && done)
		PSL__USER_CALL(done(done_arg)); /* nothing of the caller's is sent */
	if (!rc)
		rc = answer_gpu(&a, q, copy, &ev);
	if (rc)
		return answer_fail(q, &a, done, done_arg, rc);
	if (ev && answer_later(q, &a, ev) == 0)
		return 0;
	/* (could not queue it: waited for here) */
	if (ev && (rc = psl__cuda_done_wait(a.dev, ev)))
		return answer_fail(q, &a, done, done_arg, rc);
	return send_answer(q, &a);
}

int psl_kv_respond(struct psl_kv_request *req, const struct psl_kv *res)
{
	psl__clear_error();
	if (!req)
		return PSL_FAIL(-EINVAL, PSL_LOG_WARN, "psl_kv_respond: req is NULL");
	return respond((struct kv_req *)req, res, true, NULL, NULL);
}

int psl_kv_zrespond(struct psl_kv_request *req, const struct psl_kv *res,
		    void (*done)(void *done_arg), void *done_arg)
{
	psl__clear_error();
	if (!req)
		return PSL_FAIL(-EINVAL, PSL_LOG_WARN, "psl_kv_zrespond: req is NULL");
	return respond((struct kv_req *)req, res, false, done, done_arg);
}

int psl_kv_request_hold(struct psl_kv_request *req)
{
	psl__clear_error();
	if (!req)
		return PSL_FAIL(-EINVAL, PSL_LOG_WARN, "psl_kv_request_hold: req is NULL");
	atomic_fetch_add(&((struct kv_req *)req)->refs, 1);
	return 0;
}

void psl_kv_request_release(struct psl_kv_request *req)
{
	if (req)
		psl__kv_req_free((struct kv_req *)req);
}

int psl_kv_respond_error(struct psl_kv_request *req, int err)
{
	psl__clear_error();
	if (!req)
		return PSL_FAIL(-EINVAL, PSL_LOG_WARN, "psl_kv_respond_error: req is NULL");
	return psl__ret("psl_kv_respond_error", respond_error((struct kv_req *)req, err));
}
