/*
 * pslite-server: BytePS's summation server (byteps/server/server.cc, the
 * classic push/pull handler) on pslite's KV server.
 *
 * The receive path (the KV handler, on a van thread) never blocks and never
 * touches tensor data: it checks the request, updates the key's counters
 * under the key's lock, answers what can be answered at once, and hands the
 * data work (copy, sum) to the engine thread that owns the key, or runs it
 * inline with BYTEPS_SERVER_ENGINE_BLOCKING=1.
 *
 * A key (one tensor partition, as the worker encoded it) goes through:
 *   round 0 (init): the first push of every worker is held unanswered; when
 *     all W have come, the key is ready and they are all answered (async:
 *     after the last one's values were copied into the store, as BytePS
 *     does). The first push fixes the key's length and data type.
 *   sync, rounds 1, 2, ...: each push is acknowledged at once (its request is
 *     held so that its values can still be read), belongs to the round the
 *     worker has not pushed in yet (a second push of the same round waits
 *     unacknowledged for the next one), and is summed by the engine into the
 *     round's buffer. When all W pushes of a round are summed, that buffer is
 *     published as the result, and each worker's pull is answered once per
 *     completed round (a pull that comes early waits for it).
 *   async: each push is added into the store by the engine and acknowledged
 *     after that (so a worker's next pull sees its own push); pulls are
 *     answered at once with the store as it is.
 *
 * Pull replies are zero-copy from a buffer that is never written while a
 * reply from it is in flight: each buffer counts its replies, and a round (or
 * an async update) writes into a buffer that is neither the published one
 * nor still being sent, allocating one only when every spare is busy. The
 * first two pushes of a sync round are summed into that buffer in one pass
 * (d = a + b), so no pass copies.
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <sched.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bps_engine.h"
#include "bps_sum.h"
#include "log.h"
#include "postoffice.h"
#include "pslite/server.h"

enum { JOB_INIT = 1, JOB_SUM, JOB_APPLY };

#define NBUCKETS 4096

struct buf {
	struct buf *next;
	void *data;
	atomic_int refs; /* pull replies in flight */
};

struct key {
	struct key *hnext;
	uint64_t key; /* as on the wire */
	size_t len;   /* bytes */
	int lens;     /* len, for the lens frame of replies */
	int dtype;
	int tid;      /* engine thread */
	uint64_t sched_cnt; /* under the engine queue's lock */
	pthread_mutex_t exec; /* blocking mode: one job of the key at a time */
	struct psl__bps_job *iq_head, **iq_tail; /* jobs not yet handed on (mu) */
	bool flushing;	      /* a thread hands them to the engine (mu) */

	pthread_mutex_t mu; /* the rest, except where noted */
	int err;	    /* the store is lost (out of memory): pulls fail */
	bool ready;	    /* every worker's first push arrived */
	bool stored;	    /* the init job ran */
	uint64_t recv_round;	/* the round that pushes now join (0 = init) */
	int recv_count;		/* pushes of recv_round so far */
	uint64_t *pushed;	/* per worker: the round of its last push (or ~0) */
	uint64_t *pulled;	/* per worker: rounds_done at its last answered pull */
	uint64_t rounds_done;
	struct psl__bps_job *init_reqs, *deferred, *pulls; /* held requests */
	struct buf *result;	/* published: what pulls get */
	struct buf *bufs;	/* every buffer of the key */
	struct psl_kv_request *first; /* the round's first push, until the second
					 comes: both go to the engine as one job */

	/* engine side: only the key's jobs touch these, one at a time */
	int acc_count;
	struct buf *acc;
};

struct psl_byteps_server {
	struct psl_byteps_server_opts o;
	int W;
	uint64_t range_begin;
	struct psl_kv_server *kvs;
	struct psl__bps_engine *engine;
	const struct psl__bps_kernels *k;
	pthread_mutex_t table_mu;
	struct key *table[NBUCKETS];
	bool recovered; /* took a lost server's place: its store started empty */
	atomic_bool stopping;
	atomic_int inflight; /* handler calls running */
	atomic_uint_fast64_t nkeys, npushes, npulls, nrounds, nerrors, nbytes;
};

/* ------------------------------------------------------------ helpers -- */

static const char *request_name(int t)
{
	switch (t) {
	case PSL_BYTEPS_DEFAULT_PUSHPULL:
		return "kDefaultPushPull";
	case PSL_BYTEPS_ROW_SPARSE_PUSHPULL:
		return "kRowSparsePushPull";
	case PSL_BYTEPS_COMPRESSED_PUSHPULL:
		return "kCompressedPushPull";
	default:
		return "an unknown request type";
	}
}

/* "key 65537 (tensor 1, partition 1)": the key as BytePS declared it. */
static const char *key_desc(const struct psl_byteps_server *s, uint64_t key, char *b, size_t n)
{
	uint64_t d = key - s->range_begin;
	snprintf(b, n, "key %" PRIu64 " (tensor %" PRIu64 ", partition %" PRIu64 ")", key,
		 d >> 16, d & 0xffff);
	return b;
}

/* Answers req with err and says why, naming the key and the sender. */
__attribute__((format(printf, 4, 5))) static void reject(struct psl_byteps_server *s,
							 struct psl_kv_request *req, int err,
							 const char *fmt, ...)
{
	char why[256], node[96];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(why, sizeof(why), fmt, ap);
	va_end(ap);
	PSL_WARN("pslite-server: %s from %s: %s; answered with an error (%s)",
		 req->meta.push ? "push" : "pull", psl__node_desc(psl__cur, req->meta.sender, node, sizeof(node)),
		 why, psl_strerror(err));
	atomic_fetch_add(&s->nerrors, 1);
	psl_kv_respond_error(req, err);
}

static void list_append(struct psl__bps_job **head, struct psl__bps_job *j)
{
	j->next = NULL;
	while (*head)
		head = &(*head)->next;
	*head = j;
}

static struct psl__bps_job *job_new(int type, struct key *k, struct psl_kv_request *req, int rank)
{
	struct psl__bps_job *j = calloc(1, sizeof(*j));
	if (j) {
		j->type = type;
		j->key = k;
		j->req = req;
		j->rank = rank;
	}
	return j;
}

static void buf_done(void *arg)
{
	struct buf *b = arg;
	atomic_fetch_sub(&b->refs, 1);
}

/* Sends b as the answer to pull req (zero-copy; b's count was raised). */
static void reply(struct psl_byteps_server *s, struct key *k, struct buf *b,
		  struct psl_kv_request *req)
{
	struct psl_kv res = {&k->key, 1, b->data, k->len, &k->lens, PSL_MEM_HOST, 0};
	atomic_fetch_add(&s->npulls, 1);
	psl_kv_zrespond(req, &res, buf_done, b);
}

/* A buffer of k that is neither published nor being sent (allocates one if
 * every buffer is busy). NULL if out of memory. */
static struct buf *spare_buf(struct key *k)
{
	struct buf *b;
	size_t size = (k->len + 63) & ~(size_t)63;

	pthread_mutex_lock(&k->mu);
	for (b = k->bufs; b; b = b->next)
		if (b != k->result && b != k->acc && atomic_load(&b->refs) == 0)
			break;
	if (!b && (b = calloc(1, sizeof(*b)))) {
		if (posix_memalign(&b->data, 4096, size)) {
			free(b);
			b = NULL;
		} else {
			atomic_init(&b->refs, 0);
			b->next = k->bufs;
			k->bufs = b;
		}
	}
	pthread_mutex_unlock(&k->mu);
	return b;
}

/* ----------------------------------------------------------- key table -- */

static struct key *key_find(struct psl_byteps_server *s, uint64_t key)
{
	struct key *k;
	pthread_mutex_lock(&s->table_mu);
	for (k = s->table[key % NBUCKETS]; k; k = k->hnext)
		if (k->key == key)
			break;
	pthread_mutex_unlock(&s->table_mu);
	return k;
}

/* The key, created from its first push (len bytes of dtype) if new. */
static struct key *key_get(struct psl_byteps_server *s, uint64_t key, size_t len, int dtype)
{
	struct key *k, **head = &s->table[key % NBUCKETS];
	int i;

	pthread_mutex_lock(&s->table_mu);
	for (k = *head; k; k = k->hnext)
		if (k->key == key)
			goto out;
	k = calloc(1, sizeof(*k));
	if (!k)
		goto out;
	k->pushed = calloc((size_t)s->W, sizeof(uint64_t));
	k->pulled = calloc((size_t)s->W, sizeof(uint64_t));
	if (!k->pushed || !k->pulled) {
		free(k->pushed);
		free(k->pulled);
		free(k);
		k = NULL;
		goto out;
	}
	for (i = 0; i < s->W; i++)
		k->pushed[i] = UINT64_MAX;
	k->key = key;
	k->len = len;
	k->lens = (int)len;
	k->dtype = dtype;
	k->tid = s->engine ? psl__bps_engine_pick(s->engine, len) : 0;
	k->iq_tail = &k->iq_head;
	pthread_mutex_init(&k->mu, NULL);
	pthread_mutex_init(&k->exec, NULL);
	k->hnext = *head;
	*head = k;
out:
	pthread_mutex_unlock(&s->table_mu);
	return k;
}

static void key_free(struct key *k)
{
	struct buf *b;
	while ((b = k->bufs)) {
		k->bufs = b->next;
		free(b->data);
		free(b);
	}
	pthread_mutex_destroy(&k->mu);
	pthread_mutex_destroy(&k->exec);
	free(k->pushed);
	free(k->pulled);
	free(k);
}

/* -------------------------------------------------------------- engine -- */

/* The store of k is lost: the key answers pulls with err from now on. */
static void key_fail(struct psl_byteps_server *s, struct key *k, int err)
{
	struct psl__bps_job *pulls, *j;
	char kd[96];

	PSL_ERR("pslite-server: %s: cannot allocate %zu bytes for its store; its pulls fail "
		"from now on",
		key_desc(s, k->key, kd, sizeof(kd)), k->len);
	pthread_mutex_lock(&k->mu);
	k->err = err;
	pulls = k->pulls;
	k->pulls = NULL;
	pthread_mutex_unlock(&k->mu);
	while ((j = pulls)) {
		pulls = j->next;
		atomic_fetch_add(&s->nerrors, 1);
		psl_kv_respond_error(j->req, err);
		free(j);
	}
}

/* A round of k is summed into b: publish it, answer the pulls waiting. */
static void finish_round(struct psl_byteps_server *s, struct key *k, struct buf *b)
{
	struct psl__bps_job *ready = NULL, **pp, *j;

	pthread_mutex_lock(&k->mu);
	k->result = b;
	k->rounds_done++;
	for (pp = &k->pulls; (j = *pp);) {
		if (k->pulled[j->rank] < k->rounds_done) {
			k->pulled[j->rank] = k->rounds_done;
			atomic_fetch_add(&b->refs, 1);
			*pp = j->next;
			list_append(&ready, j);
		} else {
			pp = &j->next;
		}
	}
	pthread_mutex_unlock(&k->mu);
	k->acc = NULL;
	k->acc_count = 0;
	atomic_fetch_add(&s->nrounds, 1);
	while ((j = ready)) {
		ready = j->next;
		reply(s, k, b, j->req);
		free(j);
	}
}

static void handle_push(struct psl_byteps_server *s, struct psl_kv_request *req, int rank,
			int dtype);

static void do_init(struct psl_byteps_server *s, struct key *k, struct psl__bps_job *reqs)
{
	struct psl__bps_job *replay = NULL;
	struct psl__bps_job *pulls = NULL, *j, *last = reqs;
	struct buf *b = NULL;

	while (last && last->next)
		last = last->next;
	if (s->o.async && last) {
		/* the store starts as the last worker's tensor, as in BytePS */
		b = spare_buf(k);
		if (b)
			memcpy(b->data, last->req->kv.vals, k->len);
		else
			key_fail(s, k, -ENOMEM);
	}
	pthread_mutex_lock(&k->mu);
	k->stored = true;
	if (s->o.async) {
		replay = k->deferred; /* pushes that came before the store */
		k->deferred = NULL;
	}
	if (b) {
		k->result = b;
		pulls = k->pulls; /* async pulls that came before the store */
		k->pulls = NULL;
		for (j = pulls; j; j = j->next)
			atomic_fetch_add(&b->refs, 1);
	}
	pthread_mutex_unlock(&k->mu);
	atomic_fetch_add(&s->nkeys, 1);
	while ((j = reqs)) {
		reqs = j->next;
		psl_kv_respond(j->req, NULL);
		free(j);
	}
	while ((j = pulls)) {
		pulls = j->next;
		reply(s, k, b, j->req);
		free(j);
	}
	while ((j = replay)) {
		replay = j->next;
		handle_push(s, j->req, j->rank, k->dtype);
		free(j);
	}
}

/* One job of a sync round: the first two pushes together (first set: summed
 * into a spare buffer in one pass), or one more push. */
static void do_sum(struct psl_byteps_server *s, struct key *k, struct psl_kv_request *first,
		   struct psl_kv_request *req)
{
	int dt = k->dtype;
	size_t n = k->len / psl_byteps_dtype_size(dt);
	struct buf *b;

	if (k->acc_count == 0) {
		b = spare_buf(k);
		if (b && first)
			s->k->sum3[dt](b->data, first->kv.vals, req->kv.vals, n);
		else if (b) /* a job of one worker */
			memcpy(b->data, req->kv.vals, k->len);
		else
			key_fail(s, k, -ENOMEM);
		k->acc = b;
	} else if (k->acc) {
		s->k->sum[dt](k->acc->data, req->kv.vals, n);
	}
	if (first) {
		psl_kv_request_release(first);
		k->acc_count++;
		atomic_fetch_add(&s->nbytes, k->len);
	}
	psl_kv_request_release(req);
	atomic_fetch_add(&s->nbytes, k->len);
	if (++k->acc_count < s->W)
		return;
	if (k->acc)
		finish_round(s, k, k->acc);
	else
		k->acc_count = 0; /* lost (out of memory): the key fails its pulls */
}

static void do_apply(struct psl_byteps_server *s, struct key *k, struct psl_kv_request *req)
{
	int dt = k->dtype;
	struct buf *b = k->err ? NULL : spare_buf(k);

	if (b) {
		/* a new version from the published one: replies in flight keep
		 * reading the old one */
		s->k->sum3[dt](b->data, k->result->data, req->kv.vals,
			       k->len / psl_byteps_dtype_size(dt));
		pthread_mutex_lock(&k->mu);
		k->result = b;
		pthread_mutex_unlock(&k->mu);
		atomic_fetch_add(&s->nbytes, k->len);
		psl_kv_respond(req, NULL);
	} else {
		if (!k->err)
			key_fail(s, k, -ENOMEM);
		atomic_fetch_add(&s->nerrors, 1);
		psl_kv_respond_error(req, -ENOMEM);
	}
}

static void run_job(struct psl__bps_job *j, void *arg)
{
	struct psl_byteps_server *s = arg;
	struct key *k = j->key;

	switch (j->type) {
	case JOB_INIT:
		do_init(s, k, j->list);
		break;
	case JOB_SUM:
		do_sum(s, k, j->first, j->req);
		break;
	case JOB_APPLY:
		do_apply(s, k, j->req);
		break;
	}
	free(j);
}

/*
 * A key's jobs must run in the order its pushes were counted, under its lock,
 * even when several receive threads deliver. submit_locked (k->mu held) puts
 * j on k's own queue; after releasing k->mu, run_queued hands the queue on:
 * to the key's engine thread, one thread at a time and in order (not under
 * k->mu, so that the engine thread it wakes does not wait for that lock), or
 * in blocking mode runs the jobs right there, one thread at a time.
 */
static void submit_locked(struct psl_byteps_server *s, struct key *k, struct psl__bps_job *j)
{
	(void)s;
	j->next = NULL;
	*k->iq_tail = j;
	k->iq_tail = &j->next;
}

/* Takes k's queued jobs (k->mu held). */
static struct psl__bps_job *take_queued(struct key *k)
{
	struct psl__bps_job *list = k->iq_head;
	k->iq_head = NULL;
	k->iq_tail = &k->iq_head;
	return list;
}

/* The key whose jobs this thread is running inline (a job that replays
 * pushes queues more: the running loop takes them). */
static __thread struct key *tl_running;

static void run_queued(struct psl_byteps_server *s, struct key *k)
{
	struct psl__bps_job *list, *j;
	struct key *prev = tl_running;

	if (s->engine) {
		pthread_mutex_lock(&k->mu);
		if (k->flushing) { /* that thread takes ours too, in order */
			pthread_mutex_unlock(&k->mu);
			return;
		}
		k->flushing = true;
		while ((list = take_queued(k))) {
			pthread_mutex_unlock(&k->mu);
			while ((j = list)) {
				list = j->next;
				j->cnt = &k->sched_cnt;
				psl__bps_engine_push(s->engine, k->tid, j);
			}
			pthread_mutex_lock(&k->mu);
		}
		k->flushing = false;
		pthread_mutex_unlock(&k->mu);
		return;
	}
	if (tl_running == k)
		return;
	pthread_mutex_lock(&k->exec);
	tl_running = k;
	for (;;) {
		pthread_mutex_lock(&k->mu);
		j = k->iq_head;
		if (j) {
			k->iq_head = j->next;
			if (!k->iq_head)
				k->iq_tail = &k->iq_head;
		}
		pthread_mutex_unlock(&k->mu);
		if (!j)
			break;
		run_job(j, s);
	}
	tl_running = prev;
	pthread_mutex_unlock(&k->exec);
}

/* ------------------------------------------------------------- handler -- */

/* A push that passed the checks; k->mu is held and is released here. */
static void push_locked(struct psl_byteps_server *s, struct key *k, struct psl_kv_request *req,
			int rank)
{
	struct psl__bps_job *j, *replay = NULL, *init = NULL;
	bool complete = false, was_init;

	if (s->o.async && k->ready) {
		j = job_new(JOB_APPLY, k, req, rank);
		if (j && !k->stored) {
			/* the store is being made (a worker that did not wait for
			 * its first push's answer): after that */
			list_append(&k->deferred, j);
		} else if (j) {
			atomic_fetch_add(&s->npushes, 1);
			submit_locked(s, k, j);
		}
		pthread_mutex_unlock(&k->mu);
		if (!j)
			reject(s, req, -ENOMEM, "out of memory");
		run_queued(s, k);
		return;
	}
	j = job_new(JOB_SUM, k, req, rank);
	if (!j) {
		pthread_mutex_unlock(&k->mu);
		reject(s, req, -ENOMEM, "out of memory");
		return;
	}
	if (k->pushed[rank] == k->recv_round) {
		/* this worker already pushed in this round: the push belongs to
		 * the next one, and is acknowledged when that starts */
		list_append(&k->deferred, j);
		pthread_mutex_unlock(&k->mu);
		return;
	}
	was_init = k->recv_round == 0;
	k->pushed[rank] = k->recv_round;
	if (was_init) {
		list_append(&k->init_reqs, j);
		j = NULL;
	} else {
		/* acknowledged below, its values kept for the engine; held before
		 * anyone else can see it (the next push may take it as first) */
		psl_kv_request_hold(req);
		if (s->W > 1 && k->recv_count == 0) {
			k->first = req; /* goes to the engine with the next push */
			free(j);
			j = NULL;
		} else if (s->W > 1 && k->recv_count == 1) {
			j->first = k->first;
			k->first = NULL;
		}
	}
	if (++k->recv_count == s->W) {
		complete = true;
		k->recv_count = 0;
		k->recv_round++;
		replay = k->deferred;
		k->deferred = NULL;
		if (was_init) {
			k->ready = true;
			init = k->init_reqs;
			k->init_reqs = NULL;
			/* the init job: the last init push's node carries the list */
			j = job_new(JOB_INIT, k, NULL, rank);
			if (j)
				j->list = init;
			else
				k->err = -ENOMEM; /* refused below; its pulls fail */
		}
	}
	if (j) {
		j->reset_cnt = complete && !was_init; /* BytePS's ClearCounter */
		submit_locked(s, k, j);
	}
	pthread_mutex_unlock(&k->mu);
	atomic_fetch_add(&s->npushes, 1);

	if (!was_init) {
		psl_kv_respond(req, NULL); /* acknowledged at once, the values held */
	} else if (init && !j) {
		PSL_ERR("pslite-server: out of memory initialising a key");
		while ((j = init)) {
			init = j->next;
			reject(s, j->req, -ENOMEM, "out of memory");
			free(j);
		}
	}
	run_queued(s, k);
	while ((j = replay)) {
		replay = j->next;
		handle_push(s, j->req, j->rank, k->dtype);
		free(j);
	}
}

static void handle_push(struct psl_byteps_server *s, struct psl_kv_request *req, int rank,
			int dtype)
{
	char kd[96];
	uint64_t key = req->kv.keys[0];
	size_t len = req->kv.num_vals, esz = psl_byteps_dtype_size(dtype);
	struct key *k;

	if (!esz) {
		reject(s, req, -EOPNOTSUPP, "%s: unknown data type %d (cmd %d)",
		       key_desc(s, key, kd, sizeof(kd)), dtype, req->meta.cmd);
		return;
	}
	if (len == 0 || len % esz || len > INT_MAX) {
		reject(s, req, -EINVAL, "%s: %zu bytes is not a whole, non-empty %s tensor",
		       key_desc(s, key, kd, sizeof(kd)), len, psl_byteps_dtype_name(dtype));
		return;
	}
	if (s->o.key_log)
		PSL_INFO("push %s sender=%d size=%zu dtype=%s", key_desc(s, key, kd, sizeof(kd)),
			 req->meta.sender, len, psl_byteps_dtype_name(dtype));
	k = key_get(s, key, len, dtype);
	if (!k) {
		reject(s, req, -ENOMEM, "out of memory");
		return;
	}
	pthread_mutex_lock(&k->mu);
	if (k->len != len || k->dtype != dtype) {
		size_t klen = k->len;
		int kdt = k->dtype;
		pthread_mutex_unlock(&k->mu);
		reject(s, req, -EINVAL,
		       "%s: %zu bytes of %s, but the key was initialised with %zu bytes of %s",
		       key_desc(s, key, kd, sizeof(kd)), len, psl_byteps_dtype_name(dtype), klen,
		       psl_byteps_dtype_name(kdt));
		return;
	}
	push_locked(s, k, req, rank);
}

/* On a server that took a lost one's place (docs/pslite-server.md, "A server
 * started again"): a worker's pull of a key is refused until that worker has
 * pushed it since its first push here. Such a pull belongs to a round that
 * died with the lost server (a request resent to this one, or sent before
 * the worker knew): it cannot be answered right, and answering it later
 * would take the worker's turn of the next round. -ENOENT: the worker has
 * not pushed the key here; -ENODATA: its last push here was its first, which
 * initialised the key. */
static bool refuse_early_pull(struct psl_byteps_server *s, struct key *k,
			      struct psl_kv_request *req, int rank)
{
	char kd[96];
	uint64_t pushed;

	pthread_mutex_lock(&k->mu);
	pushed = k->pushed[rank];
	pthread_mutex_unlock(&k->mu);
	if (pushed == UINT64_MAX)
		reject(s, req, -ENOENT,
		       "%s: this worker has not pushed it since this server took a lost "
		       "one's place (its store started empty)",
		       key_desc(s, req->kv.keys[0], kd, sizeof(kd)));
	else if (pushed == 0)
		reject(s, req, -ENODATA,
		       "%s: this worker's only push since this server took a lost one's place "
		       "was its first, which initialised the key: push a round, then pull",
		       key_desc(s, req->kv.keys[0], kd, sizeof(kd)));
	return pushed == UINT64_MAX || pushed == 0;
}

static void handle_pull(struct psl_byteps_server *s, struct psl_kv_request *req, int rank,
			int dtype)
{
	char kd[96];
	uint64_t key = req->kv.keys[0];
	struct key *k = key_find(s, key);
	struct buf *b = NULL;
	struct psl__bps_job *j;
	int err;

	if (s->o.key_log)
		PSL_INFO("pull %s sender=%d", key_desc(s, key, kd, sizeof(kd)), req->meta.sender);
	if (!k) {
		reject(s, req, -ENOENT, "%s was never pushed", key_desc(s, key, kd, sizeof(kd)));
		return;
	}
	if (k->dtype != dtype) {
		/* set at the key's first push, never changed after */
		reject(s, req, -EINVAL, "%s: a pull of %s, but the key holds %s",
		       key_desc(s, key, kd, sizeof(kd)), psl_byteps_dtype_name(dtype),
		       psl_byteps_dtype_name(k->dtype));
		return;
	}
	if (s->recovered && !s->o.async && refuse_early_pull(s, k, req, rank))
		return;
	j = job_new(0, k, req, rank);
	pthread_mutex_lock(&k->mu);
	err = k->err;
	if (!err && (s->o.async ? k->stored : k->rounds_done > k->pulled[rank])) {
		b = k->result;
		k->pulled[rank] = k->rounds_done;
		atomic_fetch_add(&b->refs, 1);
	} else if (!err && j) {
		list_append(&k->pulls, j); /* answered when the round completes */
		j = NULL;
	}
	pthread_mutex_unlock(&k->mu);
	if (b)
		reply(s, k, b, req);
	else if (err || j)
		reject(s, req, err ? err : -ENOMEM, "%s: %s", key_desc(s, key, kd, sizeof(kd)),
		       err ? "its store was lost" : "out of memory");
	free(j);
}

static void handler(struct psl_kv_server *kvs, struct psl_kv_request *req, void *arg)
{
	struct psl_byteps_server *s = arg;
	int rtype, dtype, rank;
	(void)kvs;

	atomic_fetch_add(&s->inflight, 1);
	if (atomic_load(&s->stopping)) {
		reject(s, req, -ESHUTDOWN, "the server is shutting down");
		goto out;
	}
	rank = psl_id_to_rank(req->meta.sender);
	if (!psl__is_worker_id(req->meta.sender) || rank < 0 || rank >= s->W) {
		reject(s, req, -EPERM, "only workers push and pull");
		goto out;
	}
	if (psl_byteps_cmd_parse(req->meta.cmd, &rtype, &dtype)) {
		reject(s, req, -EOPNOTSUPP, "cmd %d is not a BytePS command", req->meta.cmd);
		goto out;
	}
	if (rtype != PSL_BYTEPS_DEFAULT_PUSHPULL) {
		reject(s, req, -EOPNOTSUPP,
		       "request type %d (%s, cmd %d): pslite-server serves only kDefaultPushPull",
		       rtype, request_name(rtype), req->meta.cmd);
		goto out;
	}
	if (!psl_byteps_dtype_size(dtype)) {
		/* pulls too: a pull of no known type must not take its sender's
		 * turn of a round (its real pull would wait for the next one) */
		char kd[96];
		reject(s, req, -EOPNOTSUPP, "%s: unknown data type %d (cmd %d)",
		       req->kv.num_keys ? key_desc(s, req->kv.keys[0], kd, sizeof(kd)) : "no key",
		       dtype, req->meta.cmd);
		goto out;
	}
	if (req->kv.num_keys != 1) {
		reject(s, req, -EINVAL, "%zu keys in one request, BytePS sends one",
		       req->kv.num_keys);
		goto out;
	}
	if (req->meta.push)
		handle_push(s, req, rank, dtype);
	else
		handle_pull(s, req, rank, dtype);
out:
	atomic_fetch_sub(&s->inflight, 1);
}

/* psl_finalize, after the final barrier: answer what is still held. */
static void on_finalize(struct psl_kv_server *kvs, void *arg)
{
	struct psl_byteps_server *s = arg;
	struct psl__bps_job *j;
	size_t i, left = 0;
	(void)kvs;

	atomic_store(&s->stopping, true);
	while (atomic_load(&s->inflight) > 0)
		sched_yield();
	/* every handler has handed its jobs on before returning: run what the
	 * engine still has (nothing is left on the keys' own queues, normally) */
	for (i = 0; i < NBUCKETS; i++) {
		struct key *k;
		for (k = s->table[i]; k; k = k->hnext)
			run_queued(s, k);
	}
	if (s->engine)
		psl__bps_engine_drain(s->engine);
	for (i = 0; i < NBUCKETS; i++) {
		struct key *k;
		for (k = s->table[i]; k; k = k->hnext) {
			struct psl__bps_job *lists[3];
			int l;
			struct psl_kv_request *first;
			pthread_mutex_lock(&k->mu);
			lists[0] = k->init_reqs;
			lists[1] = k->deferred;
			lists[2] = k->pulls;
			k->init_reqs = k->deferred = k->pulls = NULL;
			first = k->first;
			k->first = NULL;
			pthread_mutex_unlock(&k->mu);
			if (first) /* acknowledged, only its values were kept */
				psl_kv_request_release(first);
			for (l = 0; l < 3; l++) {
				while ((j = lists[l])) {
					lists[l] = j->next;
					left++;
					atomic_fetch_add(&s->nerrors, 1);
					psl_kv_respond_error(j->req, -ESHUTDOWN);
					free(j);
				}
			}
		}
	}
	if (left)
		PSL_WARN("pslite-server: %zu request(s) still waited for other workers' pushes at "
			 "shutdown and were answered with an error",
			 left);
}

/* ------------------------------------------------------------- options -- */

static int env_int(const char *name, long min, long max, long def, long *out)
{
	const char *v = getenv(name);
	char *end;
	long x;

	*out = def;
	if (!v || !*v)
		return 0;
	errno = 0;
	x = strtol(v, &end, 10);
	if (errno || *end || x < min || x > max) {
		PSL_ERR("%s=%s: expected an integer from %ld to %ld", name, v, min, max);
		return -EINVAL;
	}
	*out = x;
	return 0;
}

int psl_byteps_server_opts_from_env(struct psl_byteps_server_opts *o)
{
	long threads, blocking, sched, async, klog;
	int rc = 0;

	if (!o)
		return -EINVAL;
	rc |= env_int("BYTEPS_SERVER_ENGINE_THREAD", 1, 1024, 4, &threads);
	rc |= env_int("BYTEPS_SERVER_ENGINE_BLOCKING", 0, INT_MAX, 0, &blocking);
	rc |= env_int("BYTEPS_SERVER_ENABLE_SCHEDULE", 0, INT_MAX, 0, &sched);
	rc |= env_int("BYTEPS_ENABLE_ASYNC", 0, INT_MAX, 0, &async);
	rc |= env_int("PS_KEY_LOG", 0, INT_MAX, 0, &klog);
	if (rc)
		return -EINVAL;
	memset(o, 0, sizeof(*o));
	o->engine_threads = (int)threads;
	o->engine_blocking = blocking != 0;
	o->enable_schedule = sched != 0;
	o->async = async != 0;
	o->key_log = klog != 0;
	o->app_id = 0;
	return 0;
}

/* ----------------------------------------------------------- lifecycle -- */

int psl_byteps_server_new(const struct psl_byteps_server_opts *opts,
			  struct psl_byteps_server **out)
{
	struct psl_byteps_server *s;
	uint64_t end;
	int rc;

	if (!out)
		return -EINVAL;
	if (!psl_is_server()) {
		PSL_ERR("pslite-server: this node is not a server (DMLC_ROLE=server), or has "
			"not started");
		return -EPERM;
	}
	s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	if (opts) {
		s->o = *opts;
	} else if ((rc = psl_byteps_server_opts_from_env(&s->o))) {
		free(s);
		return rc;
	}
	if (s->o.engine_threads < 1 || s->o.app_id < 0) {
		PSL_ERR("pslite-server: engine_threads %d and app_id %d: expected at least 1 "
			"and 0",
			s->o.engine_threads, s->o.app_id);
		free(s);
		return -EINVAL;
	}
	s->W = psl_num_workers();
	s->recovered = psl_is_recovery();
	s->k = psl__bps_kernels_best();
	psl_server_key_range(psl_my_rank(), &s->range_begin, &end);
	pthread_mutex_init(&s->table_mu, NULL);
	if (!s->o.engine_blocking) {
		/* BytePS's order is defined by rounds: async mode is FIFO */
		rc = psl__bps_engine_new(s->o.engine_threads,
					 s->o.enable_schedule && !s->o.async, run_job, s,
					 &s->engine);
		if (rc)
			goto out_free;
	}
	rc = psl_kv_server_new(s->o.app_id, PSL_BYTES, handler, s, &s->kvs);
	if (rc) {
		PSL_ERR("pslite-server: cannot create the KV server (app %d): %s", s->o.app_id,
			psl_strerror(rc));
		goto out_engine;
	}
	psl_kv_server_on_finalize(s->kvs, on_finalize, s);
	PSL_INFO("pslite-server: %s mode, %d worker(s), %s, kernels %s%s",
		 s->o.async ? "async" : "sync", s->W,
		 s->o.engine_blocking ? "summing on the receive path (blocking)" : "engine threads",
		 s->k->name,
		 s->o.enable_schedule && !s->o.engine_blocking && !s->o.async ? ", scheduling"
									       : "");
	if (!s->o.engine_blocking)
		PSL_INFO("pslite-server: %d engine thread(s) (BYTEPS_SERVER_ENGINE_THREAD)",
			 s->o.engine_threads);
	if (s->recovered)
		PSL_INFO("pslite-server: this server took a lost one's place: its store starts "
			 "empty, and each key is initialised again by every worker's first push");
	*out = s;
	return 0;

out_engine:
	psl__bps_engine_free(s->engine);
out_free:
	pthread_mutex_destroy(&s->table_mu);
	free(s);
	return rc;
}

void psl_byteps_server_free(struct psl_byteps_server *s)
{
	size_t i;
	if (!s)
		return;
	psl_kv_server_free(s->kvs);
	psl__bps_engine_free(s->engine);
	for (i = 0; i < NBUCKETS; i++) {
		struct key *k;
		while ((k = s->table[i])) {
			s->table[i] = k->hnext;
			key_free(k);
		}
	}
	pthread_mutex_destroy(&s->table_mu);
	free(s);
}

void psl_byteps_server_get_stats(struct psl_byteps_server *s, struct psl_byteps_server_stats *st)
{
	if (!s || !st)
		return;
	st->keys = atomic_load(&s->nkeys);
	st->pushes = atomic_load(&s->npushes);
	st->pulls = atomic_load(&s->npulls);
	st->rounds = atomic_load(&s->nrounds);
	st->errors = atomic_load(&s->nerrors);
	st->bytes_summed = atomic_load(&s->nbytes);
}

int psl_byteps_server_run(const struct psl_byteps_server_opts *opts)
{
	struct psl_byteps_server_opts o;
	struct psl_byteps_server *s = NULL;
	const char *role = getenv("DMLC_ROLE");
	int rc, rc2;

	if (role && !strcmp(role, "worker")) {
		PSL_ERR("pslite-server: DMLC_ROLE=worker: this runs BytePS's servers and "
			"scheduler; workers are the training processes (or pslite-check)");
		return -EINVAL;
	}
	if (!opts) {
		rc = psl_byteps_server_opts_from_env(&o);
		if (rc)
			return rc;
		opts = &o;
	}
	rc = psl_start(0, true);
	if (rc) {
		psl_finalize(0, false);
		return rc;
	}
	if (psl_is_server()) {
		rc = psl_byteps_server_new(opts, &s);
		if (rc) {
			psl_finalize(0, false);
			return rc;
		}
	}
	/* BytePS's servers and workers both pass this barrier after starting;
	 * a server that takes a lost one's place skips it, as BytePS's does
	 * (the others passed it long ago) */
	rc = psl_is_recovery() ? 0 : psl_barrier(0, PSL_GROUP_ALL);
	if (rc)
		PSL_ERR("pslite-server: the barrier after start failed: %s", psl_strerror(rc));
	rc2 = psl_finalize(0, true);
	if (s) {
		struct psl_byteps_server_stats st;
		psl_byteps_server_get_stats(s, &st);
		PSL_INFO("pslite-server: %" PRIu64 " keys, %" PRIu64 " pushes, %" PRIu64
			 " pulls, %" PRIu64 " rounds, %" PRIu64 " errors, %.1f MB summed",
			 st.keys, st.pushes, st.pulls, st.rounds, st.errors,
			 (double)st.bytes_summed / 1e6);
		psl_byteps_server_free(s);
	}
	return rc ? rc : rc2;
}
