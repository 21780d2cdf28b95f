/* KV worker: ps-lite's KVWorker<Val>: slicing by server key range, push,
 * pull, push-pull, request tracking and pull assembly. */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "control.h"
#include "cuda.h"
#include "cuda_after.h"
#include "kv.h"
#include "kv_worker.h"
#include "log.h"
#include "postoffice.h"

/* What one server's slice of a request covers. */
struct slice {
	size_t k0, k1; /* keys [k0, k1) */
	size_t v0, v1; /* values [v0, v1) (elements) */
};

/* Splits keys by the servers' ranges, as ps-lite's DefaultSlicer does. */
static int slice_keys(const uint64_t *keys, size_t nkeys, size_t nvals, const int *lens,
		      struct slice *sl, int S)
{
	size_t i, k = 0, pos = 0, v = 0;
	int r;

	for (i = 1; i < nkeys; i++) {
		if (keys[i - 1] > keys[i]) {
			return PSL_FAIL(-EINVAL, PSL_LOG_WARN, "request rejected: keys must be sorted ascending, but key[%zu]=%" PRIu64
				 " > key[%zu]=%" PRIu64,
				 i - 1, keys[i - 1], i, keys[i]);
		}
	}
	if (nkeys && !lens) {
		k = nvals / nkeys;
		if (k * nkeys != nvals) {
			return PSL_FAIL(-EINVAL, PSL_LOG_WARN, "request rejected: %zu values for %zu keys is not a whole number per "
				 "key (pass lens for keys of different sizes)",
				 nvals, nkeys);
		}
	}
	if (lens) {
		size_t sum = 0;
		for (i = 0; i < nkeys; i++) {
			if (lens[i] < 0) {
				return PSL_FAIL(-EINVAL, PSL_LOG_WARN, "request rejected: lens[%zu]=%d is negative", i, lens[i]);
			}
			sum += (size_t)lens[i];
		}
		if (sum != nvals) {
			return PSL_FAIL(-EINVAL, PSL_LOG_WARN, "request rejected: lens add up to %zu values but %zu values were "
				 "given",
				 sum, nvals);
		}
	}
	for (r = 0; r < S; r++) {
		uint64_t begin, end;
		size_t lo, hi;
		psl_server_key_range(r, &begin, &end);
		/* lower_bound(keys + pos, end) */
		lo = pos;
		hi = nkeys;
		while (lo < hi) {
			size_t mid = lo + (hi - lo) / 2;
			if (keys[mid] < end)
				lo = mid + 1;
			else
				hi = mid;
		}
		sl[r].k0 = pos;
		sl[r].k1 = lo;
		sl[r].v0 = v;
		if (lens) {
			for (i = pos; i < lo; i++)
				v += (size_t)lens[i];
		} else {
			v += (lo - pos) * k;
		}
		sl[r].v1 = v;
		pos = lo;
	}
	if (pos != nkeys) {
		uint64_t b, e;
		psl_server_key_range(S - 1, &b, &e);
		return PSL_FAIL(-EINVAL, PSL_LOG_WARN, "request rejected: key %" PRIu64 " is beyond the last server's range "
			 "(keys must be below %" PRIu64 " with %d server(s))",
			 keys[pos], e, S);
	}
	return 0;
}

static int check_ready(struct psl_kv_worker *w)
{
	if (!w)
		return -EINVAL;
	psl__enter(w->c.office);
	if (w->c.office->state != PSL__READY)
		return -ESHUTDOWN;
	return 0;
}

/* ----------------------------------------------------------- requests -- */

enum { OP_PUSH = 1, OP_PULL = 2 };

struct job {
	struct psl_kv_worker *w;
	const uint64_t *keys;
	size_t nkeys;
	const void *vals;
	size_t nvals;
	const int *lens;
	struct psl_kv_out *out;
	int cmd;
	struct psl__kv_copy *cp; /* copy of keys/vals/lens, or NULL */
	struct mem_of mo;
	void *ev; /* what a z-form push from GPU waits for before it is sent (its
		   * staging copy, or the caller's work): queued, not waited for */
};

/* zref: the push's hold for each slice (the caller's data), or NULL. */
static void send_pushes(struct job *j, int ts, const struct slice *sl, int S,
			struct psl__sendref *zref)
{
	int r;
	for (r = 0; r < S; r++) {
		size_t nk = sl[r].k1 - sl[r].k0;
		int rc;
		if (!nk)
			continue;
		rc = psl__kvw_send_slice(j->w, ts, r, true, j->cmd, j->keys + sl[r].k0, nk,
				(const char *)j->vals + sl[r].v0 * j->w->esz, sl[r].v1 - sl[r].v0,
				j->lens ? j->lens + sl[r].k0 : NULL, NULL, 0, j->cp, zref, &j->mo);
		if (rc)
			psl__kvw_send_failed(j->w, ts, r, rc);
	}
}

static struct pull *pull_new(const struct job *j, const struct slice *sl, int S)
{
	struct pull *p = psl__kvw_pull_get(S);
	int r;
	if (!p)
		return NULL;
	p->kind = KIND_PULL;
	p->out = j->out;
	p->keys = j->keys;
	p->nkeys = j->nkeys;
	p->cmd = j->cmd;
	p->keys_copy = j->cp;
	p->mo = j->mo;
	p->nservers = S;
	for (r = 0; r < S; r++) {
		p->part[r].k0 = sl[r].k0;
		p->part[r].k1 = sl[r].k1;
	}
	return p;
}

/* What submit sends once the request is registered. */
struct sends {
	bool push, pull;
	int push_ts, ts;
	struct pull *p;
	struct psl__req *rq; /* the pull, held open until its slices are sent */
	struct psl__sendref *zp, *zq;
};

/* Each slice of a request that was not sent: its copy failed (err). */
static void fail_slices(struct psl_kv_worker *w, int ts, const struct slice *sl, int S, int err)
{
	int r;
	for (r = 0; r < S; r++)
		if (sl[r].k1 > sl[r].k0)
			psl__kvw_send_failed(w, ts, r, err);
}

/* The sends (or, err != 0, the failures) of a registered request. zp and
 * zq are NULL when err can be set: a staged request's data is copied. */
static void run_sends(struct job *j, const struct sends *s, const struct slice *sl, int S,
		      int err)
{
	struct psl__customer *c = &j->w->c;
	bool done;
	if (s->push && err)
		fail_slices(j->w, s->push_ts, sl, S, err);
	else if (s->push)
		send_pushes(j, s->push_ts, sl, S, s->zp);
	if (!s->pull)
		return;
	if (err)
		fail_slices(j->w, s->ts, sl, S, err);
	else
		psl__kvw_send_pulls(j->w, s->p, s->ts, s->zq);
	pthread_mutex_lock(&c->mu);
	done = psl__req_unhold_locked(c, s->rq, 0);
	pthread_mutex_unlock(&c->mu);
	if (done)
		psl__req_finish(c, s->rq);
}

/* A worker's requests whose sends wait for a z-form push's GPU data
 * (the caller does not): sent in order on the core's CUDA thread
 * (cuda_after.c), and so are the worker's requests made meanwhile, so that
 * none overtakes another (a push, then a pull of its key). */
struct tail {
	struct psl__cuda_after a;
	struct job j;
	struct sends s;
	int S;
	struct slice sl[];
};

static void tail_run(struct psl__cuda_after *a, int err)
{
	struct tail *t = (struct tail *)(void *)a;
	struct psl_kv_worker *w = t->j.w;
	psl__enter(w->c.office);
	run_sends(&t->j, &t->s, t->sl, t->S, err);
	if (t->j.cp)
		psl__kv_copy_put(t->j.cp); /* (the submitter's reference) */
	free(t);
	psl__kv_deferred_done(w);
}

/* Queues the sends behind the copy j->ev (and behind w's earlier queued
 * requests); 0, the tail owning j->cp's reference and j->ev. */
static int defer(struct job *j, const struct sends *s, const struct slice *sl, int S)
{
	struct tail *t = malloc(sizeof(*t) + (size_t)S * sizeof(*sl));
	if (!t)
		return -ENOMEM;
	t->a.dev = j->mo.user_dev;
	t->a.ev = j->ev;
	t->a.run = tail_run;
	t->j = *j;
	t->s = *s;
	t->S = S;
	memcpy(t->sl, sl, (size_t)S * sizeof(*sl));
	if (psl__kv_defer(j->w, &t->a) == 0)
		return 0;
	free(t);
	return -EAGAIN;
}

/* Waits for a job's queued staging copy, if any: 0 or -errno (logged). */
static int job_wait_ev(struct job *j)
{
	int err = psl__cuda_done_wait(j->mo.user_dev, j->ev);
	j->ev = NULL;
	return err;
}

/* The same before its buffer goes back (the request was not made). */
static void job_drop_ev(struct job *j)
{
	if (job_wait_ev(j))
		psl__clear_error();
}

/* Sends s now, or queues them (see struct tail). Returns true if queued. */
static bool send_or_defer(struct job *j, const struct sends *s, const struct slice *sl, int S)
{
	if (!s->push && !s->pull)
		return false;
	if (j->ev || atomic_load(&j->w->deferred)) {
		if (defer(j, s, sl, S) == 0)
			return true;
		/* (could not queue: sent here, after w's queued ones; on that
		 * thread itself, from a callback, they wait for this one) */
		psl__cuda_after_idle();
	}
	run_sends(j, s, sl, S, job_wait_ev(j));
	return false;
}

/* Registers the request(s) and sends them. Returns the timestamp. */
static int submit(struct job *j, int ops, psl_kv_cb cb, void *arg)
{
	struct psl__customer *c = &j->w->c;
	int S = c->office->cfg.server_groups, r, ts, push_ts;
	struct slice sl_stack[16], *sl;
	struct pull *p = NULL;
	struct psl__req *rp = NULL, *rq = NULL, *fin[2] = {NULL, NULL};
	struct psl__sendref *zp = NULL, *zq = NULL; /* (sends of the caller's data) */
	struct trigger *trig = NULL;
	struct sends s;
	bool queued;
	int rc;

	/* (on the stack for the usual few servers: no allocation per request) */
	if (S <= (int)(sizeof(sl_stack) / sizeof(sl_stack[0]))) {
		sl = sl_stack;
		memset(sl, 0, (size_t)S * sizeof(*sl));
	} else if (!(sl = calloc((size_t)S, sizeof(*sl)))) {
		return -ENOMEM;
	}
	rc = slice_keys(j->keys, j->nkeys, (ops & OP_PUSH) ? j->nvals : 0,
			(ops & OP_PUSH) ? j->lens : NULL, sl, S);
	if (rc)
		goto out;
	if (ops & OP_PULL) {
		p = pull_new(j, sl, S);
		if (!p) {
			rc = -ENOMEM;
			goto out;
		}
		j->mo.mark = NULL; /* the pull's now */
		if (j->cp)
			atomic_fetch_add(&j->cp->refs, 1); /* held until completion */
		if ((ops & OP_PUSH) && c->office->cfg.resend) {
			trig = malloc(sizeof(*trig));
			if (!trig) {
				rc = -ENOMEM;
				goto out;
			}
			trig->kind = KIND_TRIGGER;
			trig->p = p;
		}
	}

	pthread_mutex_lock(&c->mu);
	if (ops & OP_PUSH) {
		rp = psl__req_new_locked(c);
		if (!rp)
			goto nomem;
	}
	if (ops & OP_PULL) {
		rq = psl__req_new_locked(c);
		if (!rq)
			goto nomem;
		rq->priv = p;
	}
	for (r = 0; r < S; r++) {
		if (sl[r].k1 == sl[r].k0)
			continue;
		if (rp)
			psl__req_expect_locked(c, rp, psl__server_id(c->office, r));
		if (rq)
			psl__req_expect_locked(c, rq, psl__server_id(c->office, r));
	}
	if (rp && rq) { /* push-pull: the pull completes after the push */
		rp->parent = rq->ts;
		if (rp->awaiting)
			rq->holds = 1;
		if (trig) { /* and is sent after it */
			trig->ts = rq->ts;
			rp->priv = trig;
		}
	}
	push_ts = rp ? rp->ts : -1;
	if (rq) {
		rq->cb = cb;
		rq->arg = arg;
		ts = rq->ts;
	} else {
		rp->cb = cb;
		rp->arg = arg;
		ts = rp->ts;
	}
	/* a request with no keys completes at once, as ps-lite's does */
	if (rp && !rp->awaiting) {
		rp->parent = -1;
		rp->state = PSL__REQ_COMPLETING;
		fin[0] = rp;
		if (trig) { /* nothing to push, nothing to pull: no trigger */
			rp->priv = NULL;
			free(trig);
			trig = NULL;
		}
	}
	if (rq && !rq->awaiting && !rq->holds) {
		rq->state = PSL__REQ_COMPLETING;
		fin[1] = rq;
	}
	/* the pull's state (p) belongs to rq, which its last reply completes on
	 * the receive thread: hold rq open until we are done sending */
	if (rq && !fin[1] && !trig)
		rq->holds++;
	/* and each send of the caller's buffers until the van lets go */
	if (rp && !fin[0] && !j->cp)
		zp = psl__req_hold_sends_locked(rp, rp->awaiting);
	if (rq && !fin[1] && !trig && !j->cp)
		zq = psl__req_hold_sends_locked(rq, psl__kvw_pull_slices(p));
	pthread_mutex_unlock(&c->mu);

	s = (struct sends){.push = rp && !fin[0], .pull = rq && !fin[1] && !trig,
			   .push_ts = push_ts, .ts = ts, .p = p, .rq = rq, .zp = zp, .zq = zq};
	queued = send_or_defer(j, &s, sl, S);
	if (fin[0])
		psl__req_finish(c, fin[0]);
	if (fin[1])
		psl__req_finish(c, fin[1]);
	if (sl != sl_stack)
		free(sl);
	if (!queued)
		job_drop_ev(j); /* (nothing to send: no slice) */
	if (j->cp && !queued)
		psl__kv_copy_put(j->cp); /* the submitter's own reference */
	return ts;

nomem:
	/* out of memory with the tracker half-updated: only the push half
	 * (rp) can exist here, and it has no targets yet */
	if (rp) {
		rp->state = PSL__REQ_COMPLETING;
		fin[0] = rp;
	}
	pthread_mutex_unlock(&c->mu);
	if (fin[0])
		psl__req_finish(c, fin[0]);
	if (p && j->cp)
		psl__kv_copy_put(j->cp);
	rc = -ENOMEM;
out:
	free(trig);
	psl__kvw_pull_free(p);
	if (sl != sl_stack)
		free(sl);
	job_drop_ev(j);
	if (j->cp)
		psl__kv_copy_put(j->cp);
	return rc;
}

/* Copies keys (and for pushes, values and lens) into one block. */
static int copy_job(struct job *j, bool with_vals)
{
	size_t kb = j->nkeys * 8,
	       vb = with_vals && j->mo.send_mem == PSL_MEM_HOST ? j->nvals * j->w->esz : 0;
	size_t lb = with_vals && j->lens ? j->nkeys * 4 : 0;
	struct psl__kv_copy *cp = psl__kv_copy_new(kb + vb + lb + 16, 1);
	char *d;
	if (!cp)
		return -ENOMEM;
	d = psl__kv_copy_data(cp);
	memcpy(d, j->keys, kb);
	j->keys = (const uint64_t *)(void *)d;
	d += kb;
	if (vb) {
		memcpy(d, j->vals, vb);
		j->vals = d;
		d += vb;
	}
	if (lb) {
		d = (char *)(((uintptr_t)d + 3) & ~(uintptr_t)3);
		memcpy(d, j->lens, lb);
		j->lens = (const int *)(void *)d;
	}
	j->cp = cp;
	return 0;
}

static int do_request(struct psl_kv_worker *w, const struct psl_kv *kv, const uint64_t *keys,
		      size_t nkeys, struct psl_kv_out *out, int ops, bool copy, int cmd,
		      psl_kv_cb cb, void *arg)
{
	struct job j = {0};
	bool stage;
	int rc;

	psl__clear_error();
	if ((rc = check_ready(w)))
		return rc;
	if ((ops & OP_PUSH) && !kv)
		return PSL_FAIL(-EINVAL, PSL_LOG_WARN, "request rejected: kv is NULL");
	if ((ops & OP_PULL) && (!out || (out->cap && !out->vals)))
		return PSL_FAIL(-EINVAL, PSL_LOG_WARN, "request rejected: out is NULL, or has a "
				"capacity but no vals");
	j.w = w;
	j.cmd = cmd;
	j.out = out;
	if (kv) {
		j.keys = kv->keys;
		j.nkeys = kv->num_keys;
		j.vals = kv->vals;
		j.nvals = kv->num_vals;
		j.lens = kv->lens;
	} else {
		j.keys = keys;
		j.nkeys = nkeys;
	}
	if ((j.nkeys && !j.keys) || (j.nvals && !j.vals))
		return PSL_FAIL(-EINVAL, PSL_LOG_WARN, "request rejected: %zu keys and %zu values, "
				"but keys or vals is NULL", j.nkeys, j.nvals);
	j.mo.out_dev = j.mo.user_dev = -1;
	j.mo.stream = atomic_load(&w->cuda_stream);
	if ((kv && kv->mem != PSL_MEM_HOST) || (out && out->mem != PSL_MEM_HOST)) {
		/* the call's name, for the error */
		static const char *const name[2][4] = {
			{"", "psl_kv_zpush", "psl_kv_zpull", "psl_kv_zpushpull"},
			{"", "psl_kv_push", "psl_kv_pull", "psl_kv_pushpull"}};
		char what[48];
		if (kv && kv->mem != PSL_MEM_HOST) {
			snprintf(what, sizeof(what), "%s: kv->vals", name[copy][ops & 3]);
			if ((rc = psl__cuda_check(what, kv->vals, j.nvals * w->esz, kv->mem,
						  kv->dev)))
				return rc;
			j.mo.user_mem = j.mo.send_mem = kv->mem;
			j.mo.user_dev = kv->dev;
		}
		if (out && out->mem != PSL_MEM_HOST) {
			snprintf(what, sizeof(what), "%s: out->vals", name[copy][ops & 3]);
			if ((rc = psl__cuda_check(what, out->vals, out->cap * w->esz, out->mem,
						  out->dev)))
				return rc;
			j.mo.out_mem = out->mem;
			j.mo.out_dev = out->dev;
		}
	}
	/* CUDA values go to the van as they are where it takes them and the
	 * caller keeps them (z-forms); else they are staged in pinned memory:
	 * the one copy a push makes anyway (and then its keys are copied too:
	 * a request's data is all copied, or all the caller's) */
	stage = j.mo.send_mem == PSL_MEM_CUDA && j.nkeys && j.nvals &&
		(copy || !psl__cuda_direct(w->c.office));
	if ((copy || stage) && j.nkeys && (rc = copy_job(&j, (ops & OP_PUSH) != 0)))
		return rc;
	if (stage) {
		/* a z-form's caller keeps its buffer until completion: its
		 * copy is not waited for here (struct tail) */
		rc = psl__kv_stage(&j.cp, j.vals, j.mo.user_dev, j.nvals * w->esz, j.mo.stream,
				   &j.vals, copy ? NULL : &j.ev);
		j.mo.send_mem = PSL_MEM_HOST;
	} else if (j.mo.send_mem == PSL_MEM_CUDA && j.nkeys && j.nvals) {
		/* the van reads the GPU buffer itself, once the caller's work
		 * is done: sent then, not waited for here either */
		rc = psl__cuda_mark(j.mo.stream, j.mo.user_dev, &j.ev);
	}
	if (!rc && j.mo.out_mem == PSL_MEM_CUDA && j.nkeys)
		rc = psl__cuda_mark(j.mo.stream, j.mo.out_dev, &j.mo.mark);
	if (rc) {
		job_drop_ev(&j);
		psl__kv_copy_put(j.cp);
		return rc;
	}
	rc = submit(&j, ops, cb, arg);
	psl__cuda_mark_put(j.mo.out_dev, j.mo.mark); /* (if no pull took it) */
	return rc;
}

int psl_kv_push(struct psl_kv_worker *w, const struct psl_kv *kv, int cmd, psl_kv_cb cb,
		void *arg)
{
	return do_request(w, kv, NULL, 0, NULL, OP_PUSH, true, cmd, cb, arg);
}

int psl_kv_zpush(struct psl_kv_worker *w, const struct psl_kv *kv, int cmd, psl_kv_cb cb,
		 void *arg)
{
	return do_request(w, kv, NULL, 0, NULL, OP_PUSH, false, cmd, cb, arg);
}

int psl_kv_pull(struct psl_kv_worker *w, const uint64_t *keys, size_t num_keys,
		struct psl_kv_out *out, int cmd, psl_kv_cb cb, void *arg)
{
	return do_request(w, NULL, keys, num_keys, out, OP_PULL, true, cmd, cb, arg);
}

int psl_kv_zpull(struct psl_kv_worker *w, const uint64_t *keys, size_t num_keys,
		 struct psl_kv_out *out, int cmd, psl_kv_cb cb, void *arg)
{
	return do_request(w, NULL, keys, num_keys, out, OP_PULL, false, cmd, cb, arg);
}

int psl_kv_worker_set_cuda_stream(struct psl_kv_worker *w, void *stream)
{
	if (!w)
		return -EINVAL;
	atomic_store(&w->cuda_stream, stream);
	return 0;
}

int psl_kv_pushpull(struct psl_kv_worker *w, const struct psl_kv *kv, struct psl_kv_out *out,
		    int cmd, psl_kv_cb cb, void *arg)
{
	return do_request(w, kv, NULL, 0, out, OP_PUSH | OP_PULL, true, cmd, cb, arg);
}

int psl_kv_zpushpull(struct psl_kv_worker *w, const struct psl_kv *kv, struct psl_kv_out *out,
		     int cmd, psl_kv_cb cb, void *arg)
{
	return do_request(w, kv, NULL, 0, out, OP_PUSH | OP_PULL, false, cmd, cb, arg);
}

/* A wait's result, with psl_last_error saying that a request failed and
 * what is known here (the reason was logged on the thread that failed it):
 * the job's loss (without recovery the job cannot go on), or what the
 * errno means for a request. */
static int wait_ret(struct psl_kv_worker *w, int ts, int rc, int timeout_ms)
{
	char lost[320];

	if (rc >= 0) {
		psl__clear_error();
		return rc;
	}
	if (rc == -ETIMEDOUT && timeout_ms >= 0) {
		psl__set_error("request %d of app %d is still pending after %d ms (it goes on: "
			       "wait for it again)", ts, w->c.app_id, timeout_ms);
	} else if (!w->c.office->cfg.recovery && psl_job_lost(lost, sizeof(lost))) {
		psl__set_error("request %d of app %d failed (%s); the job lost a node: %s", ts,
			       w->c.app_id, psl_strerror(rc), lost);
	} else if (rc == -ETIMEDOUT) {
		psl__set_error("request %d of app %d failed: no answer within this worker's deadline "
			       "(%d ms: psl_kv_worker_set_timeout, PS_REQUEST_TIMEOUT in seconds)",
			       ts, w->c.app_id, w->c.timeout_ms);
	} else {
		psl__set_error("request %d of app %d failed: %s (the log says more)", ts,
			       w->c.app_id, psl_strerror(rc));
	}
	return rc;
}

int psl_kv_wait(struct psl_kv_worker *w, int ts)
{
	if (!w)
		return -EINVAL;
	psl__enter(w->c.office);
	return wait_ret(w, ts, psl__req_wait(&w->c, ts), -1);
}

int psl_kv_wait_timeout(struct psl_kv_worker *w, int ts, int timeout_ms)
{
	if (!w)
		return -EINVAL;
	psl__enter(w->c.office);
	return wait_ret(w, ts, psl__req_wait_ms(&w->c, ts, timeout_ms), timeout_ms);
}

static const struct psl__customer_ops kvw_ops = {
	.on_msg = psl__kvw_on_msg,
	.on_complete = psl__kvw_on_complete,
	.recv_dest = psl__kvw_recv_dest,
};

int psl_kv_worker_new(int app_id, int customer_id, enum psl_dtype dtype,
		      struct psl_kv_worker **out)
{
	struct psl__office *o;
	struct psl_kv_worker *w;
	int rc;

	if (!out || !psl_dtype_size(dtype))
		return -EINVAL;
	o = psl__enter_role(PSL_WORKER);
	if (o->state != PSL__READY)
		return -ESHUTDOWN;
	if (o->role != PSL_WORKER)
		return PSL_FAIL(-EPERM, PSL_LOG_WARN, "psl_kv_worker_new: this node is a %s; KV "
				"workers run on workers", psl__role_name(o->role));
	w = calloc(1, sizeof(*w));
	if (!w)
		return -ENOMEM;
	rc = psl__customer_init(o, &w->c, app_id, customer_id, &kvw_ops);
	if (rc) {
		free(w);
		return rc;
	}
	w->dt = dtype;
	w->esz = psl_dtype_size(dtype);
	w->c.timeout_ms = o->cfg.request_timeout_s * 1000;
	rc = psl__customer_add(&w->c);
	if (rc) {
		PSL_FAIL(rc, PSL_LOG_WARN, "psl_kv_worker_new: app %d customer %d already "
			 "exists on this node", app_id, customer_id);
		psl__customer_remove(w->c.office, &w->c);
		free(w);
		return rc;
	}
	*out = w;
	return 0;
}

int psl_kv_worker_set_timeout(struct psl_kv_worker *w, int timeout_ms)
{
	int rc = 0;

	if (!w || timeout_ms < 0)
		return -EINVAL;
	psl__enter(w->c.office);
	pthread_mutex_lock(&w->c.mu);
	w->c.timeout_ms = timeout_ms;
	pthread_mutex_unlock(&w->c.mu);
	/* (after the store: the timer takes its period from the deadlines) */
	if (timeout_ms > 0)
		rc = psl__timer_need(w->c.office);
	return rc;
}

void psl_kv_worker_free(struct psl_kv_worker *w)
{
	if (!w ||
	    psl__customer_in_own_callback(&w->c, psl__cuda_after_here(), "psl_kv_worker_free"))
		return;
	psl__cuda_after_idle(); /* (its queued sends use it) */
	psl__customer_remove(w->c.office, &w->c);
	free(w);
}
