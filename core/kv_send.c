/* A KV worker request's messages: each server's slice sent (its keys, and
 * a push's values and lens), a slice that cannot go failing its part of
 * the request, and a pull's record (kept for reuse) from which its slices
 * are sent and its answers assembled (kv_worker_answer.c). */
#include "config.h"

#include <errno.h>
#include <string.h>

#include "cuda.h"
#include "kv.h"
#include "kv_worker.h"
#include "log.h"
#include "postoffice.h"

/* Sends one slice to server rank r. Its data is cp's, or else the caller's,
 * which the request's completion waits for: zref (a hold of the request,
 * given back here if the slice is not sent). */
int psl__kvw_send_slice(struct psl_kv_worker *w, int ts, int r, bool push, int cmd,
			const uint64_t *keys, size_t nk, const void *vals, size_t nv,
		      const int *lens, void *out_ptr, size_t out_elems, struct psl__kv_copy *cp,
		      struct psl__sendref *zref, const struct mem_of *mo)
{
	struct psl__meta m;
	struct psl_van_seg segs[3];
	uint32_t n = 0;
	int id = psl__server_id(w->c.office, r);
	int rc = psl__send_check(w->c.office, id);

	if (rc) {
		if (zref)
			zref->done(zref, rc);
		return rc;
	}
	psl__kv_request_meta(w, &m, cmd, ts, push, id);
	m.key = 0;
	m.option = 0;
	if (push) {
		m.addr = (uint64_t)(uintptr_t)vals;
		m.val_len = (int)nv;
	} else {
		m.addr = (uint64_t)(uintptr_t)out_ptr;
		m.val_len = (int)out_elems;
	}
	psl__kv_meta_data(&m, w->dt, nk > 0, push && lens);
	psl__kv_meta_dev(&m, push, push ? mo->user_mem : mo->out_mem,
			 push ? mo->user_dev : mo->out_dev);
	if (nk) {
		segs[n++] = (struct psl_van_seg){keys, nk * 8, PSL_MEM_HOST, -1, NULL};
		segs[n++] = (struct psl_van_seg){push ? vals : NULL, push ? nv * w->esz : 0,
						 push && nv ? mo->send_mem : PSL_MEM_HOST,
						 push && nv && mo->send_mem ? mo->user_dev : -1, NULL};
		if (push && lens)
			segs[n++] = (struct psl_van_seg){lens, nk * 4, PSL_MEM_HOST, -1, NULL};
	}
	if (cp)
		atomic_fetch_add(&cp->refs, 1);
	return psl__send(w->c.office, &m, segs, n, cp ? &cp->ref : zref);
}

static void fail_target(struct psl__customer *c, int ts, int id, int err)
{
	struct psl__req *r;
	bool done = false;
	pthread_mutex_lock(&c->mu);
	r = psl__req_find_locked(c, ts);
	if (r)
		done = psl__req_answer_locked(c, r, id, err);
	pthread_mutex_unlock(&c->mu);
	if (done)
		psl__req_finish(c, r);
}

void psl__kvw_send_failed(struct psl_kv_worker *w, int ts, int r, int rc)
{
	char d[96];
	/* a node already known lost (or the scheduler) was reported once, when
	 * it was lost */
	PSL_LOG(rc == -EHOSTDOWN || rc == -ENOLINK ? PSL_LOG_DEBUG : PSL_LOG_WARN,
		"request %d of app %d: cannot send to %s: %s", ts, w->c.app_id,
		psl__node_desc(w->c.office, psl__server_id(w->c.office, r), d, sizeof(d)), psl_strerror(rc));
	fail_target(&w->c, ts, psl__server_id(w->c.office, r), rc);
}

/* The slices of a pull with keys (one per server that has some). */
int psl__kvw_pull_slices(const struct pull *p)
{
	int r, n = 0;
	for (r = 0; r < p->nservers; r++)
		n += p->part[r].k1 > p->part[r].k0;
	return n;
}

/* zref: the pull's hold for each slice (the caller's keys), or NULL. */
void psl__kvw_send_pulls(struct psl_kv_worker *w, struct pull *p, int ts, struct psl__sendref *zref)
{
	size_t per = p->out->cap && p->nkeys && p->out->cap % p->nkeys == 0
			     ? p->out->cap / p->nkeys
			     : 0;
	int r, last = -1;
	/* Once the last slice is sent (or failed), the request may complete on
	 * another thread, which frees p: find the last slice first, and do not
	 * touch p after it. */
	for (r = 0; r < p->nservers; r++)
		if (p->part[r].k1 > p->part[r].k0)
			last = r;
	for (r = 0; r <= last; r++) {
		size_t k0 = p->part[r].k0, nk = p->part[r].k1 - k0;
		int rc;
		if (!nk)
			continue;
		rc = psl__kvw_send_slice(w, ts, r, false, p->cmd, p->keys + k0, nk, NULL, 0, NULL,
				(char *)p->out->vals + k0 * per * w->esz, nk * per, p->keys_copy,
				zref, &p->mo);
		if (rc)
			psl__kvw_send_failed(w, ts, r, rc);
	}
}

/* Pull records for up to PULL_CACHE_S servers are kept for reuse (at most
 * 256, process-wide): steady traffic allocates none. */
#define PULL_CACHE_S 8
#define PULL_BYTES(S) (sizeof(struct pull) + (size_t)(S) * sizeof(((struct pull *)0)->part[0]))
static struct psl_van_cache pull_cache = PSL_VAN_CACHE_INIT(256, PULL_BYTES(PULL_CACHE_S));

struct pull *psl__kvw_pull_get(int S)
{
	struct pull *p = psl_van_cache_get(&pull_cache, PULL_BYTES(S));
	if (p)
		memset(p, 0, PULL_BYTES(S));
	return p;
}

void psl__kvw_pull_free(struct pull *p)
{
	int i;
	if (!p)
		return;
	for (i = 0; i < p->nservers; i++)
		psl__cuda_stage_put(p->part[i].stage);
	psl__cuda_mark_put(p->mo.out_dev, p->mo.mark);
	psl_van_cache_put(&pull_cache, p, PULL_BYTES(p->nservers));
}
