/*
 * pslite-check --restart-ok: sync rounds that go on across a server started
 * again in a lost one's place (docs/pslite-server.md, "A server started
 * again").
 *
 * The new server starts empty. A worker that sees a request of a server's
 * key fail with a loss error (or refused by the new server, which has not
 * seen its push) stops using that server's keys and, per server:
 *
 *   LOST    waits until the job is whole again, then pushes every key of the
 *           server once more: the first push of each worker initialises the
 *           key there (as at the job's start; answered when every worker's
 *           has come). A push that reached the new server already (its pull
 *           was refused with -ENODATA) is that first push, and is not sent
 *           again.
 *   INIT    when every first push is answered, the workers agree on the
 *           round from which they use the keys again: each pushes, on a key
 *           of that server kept for this, a vector with its own proposal
 *           (its round + 3) in its slot; the sum shows every proposal, and
 *           every worker takes the largest.
 *   AGREE   the sum is back: from that round on the server's keys are pushed,
 *           pulled and checked exactly, as before; the rounds between the
 *           failed one and it are lost (not checked).
 *
 * Nothing of this blocks while another worker may wait for this one's pushes
 * of a round (every step is polled at the start of a round), except the
 * agreement, one round before the proposed round, when every worker has
 * proposed or is about to; each wait is bounded.
 */
#define _GNU_SOURCE 1
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <pslite/server.h>

#include "pslite-check.h"
#include "pslite-check-restart.h"

enum srv_state { SRV_OK, SRV_LOST, SRV_INIT, SRV_AGREE, SRV_RESUME };

#define AGREE_MARGIN 3	 /* proposal: this round + 3 */
#define AGREE_WAIT_MS 30000

struct srv {
	enum srv_state st;
	long lost_round; /* the round whose requests failed */
	long resume;	 /* the round from which its keys are used again */
	long mine;	 /* this worker's proposal */
	int restarts;
	bool told;	 /* the first pushes still waited for were printed */
	double t_lost;	 /* when the failure was seen */
	struct part ctl; /* the agreement key on this server */
};

static struct srv *g_srv;
static int g_S;
static long g_lost_total;

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* The errors a request of a lost (or replaced) server's key fails with. */
static bool loss_error(int err)
{
	return err == -ECONNRESET || err == -ETIMEDOUT || err == -EHOSTDOWN || err == -ENOENT ||
	       err == -ENODATA;
}

static int ctl_setup(struct srv *v, int s)
{
	struct part *c = &v->ctl;
	uint32_t p;
	int where = -1;

	memset(c, 0, sizeof(*c));
	for (p = 0; p < 65536 && where != s; p++)
		c->key = check_encode_key(((uint64_t)0xfff2 << 16) + p, &where);
	if (where != s)
		return -ENOENT;
	c->t = 0xfff2;
	c->dt = PSL_BYTEPS_INT64;
	c->esz = 8;
	c->n = (size_t)g_W;
	c->len = 8 * g_W;
	c->server = s;
	c->push = calloc(c->n, 8);
	c->pull = calloc(c->n, 8);
	return c->push && c->pull ? 0 : -ENOMEM;
}

int restart_setup(void)
{
	int s, rc;
	g_S = psl_num_servers();
	g_srv = calloc((size_t)g_S, sizeof(*g_srv));
	if (!g_srv)
		return -ENOMEM;
	for (s = 0; s < g_S; s++)
		if ((rc = ctl_setup(&g_srv[s], s)))
			return rc;
	return 0;
}

void restart_free(void)
{
	int s;
	for (s = 0; g_srv && s < g_S; s++) {
		free(g_srv[s].ctl.push);
		free(g_srv[s].ctl.pull);
	}
	free(g_srv);
	g_srv = NULL;
}

bool restart_active(const struct part *q)
{
	return g_srv[q->server].st == SRV_OK;
}

static void srv_lost(int s, long r, int err)
{
	struct srv *v = &g_srv[s];
	if (v->st != SRV_OK)
		return;
	v->st = SRV_LOST;
	v->told = false;
	v->lost_round = r;
	v->t_lost = now();
	v->restarts++;
	printf("pslite-check worker %d: round %ld: a request of server %d's keys failed (%s): "
	       "its keys wait for it to come back (--restart-ok)\n",
	       g_me, r, s, psl_strerror(err));
}

/* Whether q's push of a round whose pull failed with pst is (or will be)
 * the worker's first push to the new server. -ENODATA: the new server has it
 * already. Otherwise it does if the push is still pending (PS_RESEND sends
 * it to the new server; one that fails instead is sent again, see
 * first_pushes_done) or was answered after the pull was refused (by the new
 * server: the lost one answers nothing after it). */
static bool push_went_on(struct part *q, int pst)
{
	int st = atomic_load(&q->st_push);
	if (pst == -ENODATA || st == 0)
		return true;
	return st == 1 && atomic_load(&q->done_push) > atomic_load(&q->done_pull);
}

/* One part's requests of round r; returns 1 for a failure that is not a
 * loss. */
static int wait_part(struct part *q, long r)
{
	int st = psl_kv_wait(g_kv, q->ts_pull), pst = st ? st : atomic_load(&q->st_pull);

	q->reinit = true;
	q->went_on = false;
	if (pst == 1) {
		st = psl_kv_wait(g_kv, q->ts_push);
		if (st || atomic_load(&q->st_push) != 1) {
			failf("push of key %" PRIu64 " failed: %s", q->key,
			      psl_strerror(st ? st : atomic_load(&q->st_push)));
			return 1;
		}
		if (q->out.num_vals != (size_t)q->len || q->outlen != q->len) {
			failf("pull of key %" PRIu64 ": %zu bytes (lens %d), expected %d", q->key,
			      q->out.num_vals, q->outlen, q->len);
			return 1;
		}
		return 0;
	}
	if (!loss_error(pst)) {
		failf("pull of key %" PRIu64 " failed: %s", q->key, psl_strerror(pst));
		return 1;
	}
	q->skipped = true;
	srv_lost(q->server, r, pst);
	q->reinit = !push_went_on(q, pst);
	q->went_on = !q->reinit;
	if (q->reinit)
		psl_kv_wait(g_kv, q->ts_push); /* failed, or answered by the lost server */
	return 0;
}

int restart_wait_all(long r)
{
	size_t i;
	int bad = 0;
	for (i = 0; i < g_nparts; i++)
		if (!g_parts[i].skipped)
			bad += wait_part(&g_parts[i], r);
	return bad;
}

static int recovery_wait_s(void)
{
	const char *w = getenv("PS_RECOVERY_WAIT");
	int s = w && *w ? atoi(w) : 0;
	return s > 0 ? s : 60;
}

/* LOST: the job whole again, then every first push that is missing. */
static int srv_reinit(int s)
{
	struct srv *v = &g_srv[s];
	double t0 = now(), limit = recovery_wait_s();
	size_t i;
	int rc;
	char why[256];

	while ((rc = psl_job_lost(why, sizeof(why)))) {
		if (rc == -ENOLINK || now() - t0 > limit) {
			failf("server %d did not come back within %.0f s (PS_RECOVERY_WAIT): %s", s,
			      limit, why);
			return -1;
		}
		usleep(10000);
	}
	for (i = 0; i < g_nparts; i++) {
		struct part *q = &g_parts[i];
		if (q->server != s || !q->reinit)
			continue;
		q->reinit = false;
		if ((rc = check_push(q, q->dt, q->len, 0))) {
			failf("first push of key %" PRIu64 " to the new server %d: %s", q->key, s,
			      psl_strerror(rc));
			return -1;
		}
	}
	memset(v->ctl.push, 0, (size_t)v->ctl.len);
	if ((rc = check_push(&v->ctl, v->ctl.dt, v->ctl.len, 0))) {
		failf("first push of server %d's agreement key: %s", s, psl_strerror(rc));
		return -1;
	}
	v->st = SRV_INIT;
	return 0;
}

/* INIT: a first push to server s that failed with a loss error (one of
 * the lost round, sent to the lost server) is sent again. */
static int first_push_again(struct part *q)
{
	int st = atomic_load(&q->st_push), rc;
	if (st >= 0)
		return st;
	if (!loss_error(st) || (rc = check_push(q, q->dt, q->len, 0))) {
		failf("server %d: a first push since it came back failed: %s", q->server,
		      psl_strerror(st));
		return -1;
	}
	return 0;
}

#define INIT_TELL_S 5.0

/* INIT, waited for INIT_TELL_S or at the end: which first pushes are not
 * answered, once (what to look at when a restart does not go on). */
static void tell_pending(int s, bool now_anyway)
{
	struct srv *v = &g_srv[s];
	size_t i;
	int n = 0;
	if (v->told || (!now_anyway && now() - v->t_lost < INIT_TELL_S))
		return;
	v->told = true;
	printf("pslite-check worker %d: server %d: first pushes not answered %.1f s after the "
	       "failure:", g_me, s, now() - v->t_lost);
	for (i = 0; i < g_nparts; i++)
		if (g_parts[i].server == s && atomic_load(&g_parts[i].st_push) == 0)
			n += printf(" key %" PRIu64 " (ts %d, %s)", g_parts[i].key,
				    g_parts[i].ts_push,
				    g_parts[i].went_on ? "the lost round's push" : "pushed again");
	if (atomic_load(&v->ctl.st_push) == 0)
		n += printf(" the agreement key (ts %d)", v->ctl.ts_push);
	printf("%s\n", n ? "" : " none (all answered by now)");
}

/* INIT: 1 when every first push to server s is answered, 0 while some is
 * pending, -1 if one failed for good. */
static int first_pushes_done(int s)
{
	size_t i;
	int st = first_push_again(&g_srv[s].ctl), all = st;
	for (i = 0; i < g_nparts && st >= 0; i++)
		if (g_parts[i].server == s) {
			st = first_push_again(&g_parts[i]);
			all = st < all ? st : all;
		}
	return st < 0 ? -1 : all;
}

static int srv_propose(int s, long r)
{
	struct srv *v = &g_srv[s];
	int64_t mine = r + AGREE_MARGIN;
	size_t i;
	int rc = first_pushes_done(s);

	if (rc == 0)
		tell_pending(s, false);
	if (rc <= 0)
		return rc;
	for (i = 0; i < g_nparts; i++) /* answered: collect them */
		if (g_parts[i].server == s)
			psl_kv_wait(g_kv, g_parts[i].ts_push);
	psl_kv_wait(g_kv, v->ctl.ts_push);
	memset(v->ctl.push, 0, (size_t)v->ctl.len);
	memcpy(v->ctl.push + 8 * (size_t)g_me, &mine, 8);
	v->mine = mine;
	if ((rc = check_push(&v->ctl, v->ctl.dt, v->ctl.len, 0)) ||
	    (rc = check_pull(&v->ctl))) {
		failf("server %d: the agreement request: %s", s, psl_strerror(rc));
		return -1;
	}
	v->st = SRV_AGREE;
	return 0;
}

static int srv_agreed(int s, long r)
{
	struct srv *v = &g_srv[s];
	int64_t x, best = 0;
	int w, rc, st;

	if (!atomic_load(&v->ctl.st_pull) && r < v->mine - 1)
		return 0;
	rc = psl_kv_wait_timeout(g_kv, v->ctl.ts_pull, AGREE_WAIT_MS);
	st = rc ? rc : atomic_load(&v->ctl.st_pull);
	if (st != 1 || v->ctl.outlen != v->ctl.len) {
		failf("server %d: the workers did not agree on the round to start again from "
		      "within %d s: %s",
		      s, AGREE_WAIT_MS / 1000, psl_strerror(st == 1 ? -EPROTO : st));
		return -1;
	}
	psl_kv_wait(g_kv, v->ctl.ts_push);
	for (w = 0; w < g_W; w++) {
		memcpy(&x, v->ctl.pull + 8 * (size_t)w, 8);
		best = x > best ? x : best;
	}
	if (best < r) {
		failf("server %d: the agreed round %" PRId64 " passed before this worker knew it "
		      "(round %ld)",
		      s, best, r);
		return -1;
	}
	v->resume = best;
	v->st = SRV_RESUME;
	g_lost_total += v->resume - v->lost_round;
	printf("pslite-check worker %d: server %d is back; its keys are used again from round "
	       "%ld: rounds %ld to %ld of them lost (%ld); agreed %.0f ms after the failure\n",
	       g_me, s, v->resume, v->lost_round, v->resume - 1, v->resume - v->lost_round,
	       (now() - v->t_lost) * 1e3);
	return 0;
}

int restart_round_start(long r)
{
	int s, rc = 0;
	for (s = 0; s < g_S && !rc; s++) {
		struct srv *v = &g_srv[s];
		if (v->st == SRV_LOST)
			rc = srv_reinit(s);
		if (!rc && v->st == SRV_INIT)
			rc = srv_propose(s, r);
		if (!rc && v->st == SRV_AGREE)
			rc = srv_agreed(s, r);
		if (!rc && v->st == SRV_RESUME && r >= v->resume)
			v->st = SRV_OK;
	}
	return rc;
}

static const char *state_name(enum srv_state st)
{
	switch (st) {
	case SRV_LOST: return "still waiting for the job to be whole";
	case SRV_INIT: return "waiting for its first pushes' answers";
	case SRV_AGREE: return "waiting for the agreed round";
	default: return "using its keys again";
	}
}

void restart_finish(long last_round)
{
	int s, n = 0, gone = 0;
	for (s = 0; s < g_S; s++) {
		struct srv *v = &g_srv[s];
		n += v->restarts;
		if (v->st == SRV_OK)
			continue;
		gone++;
		failf("server %d was lost in round %ld, and its keys were not used again by the "
		      "last round (%ld): no sum after its restart was checked (%s)",
		      s, v->lost_round, last_round, state_name(v->st));
		if (v->st == SRV_INIT)
			tell_pending(s, true);
	}
	if (n && !gone)
		printf("pslite-check worker %d: %d server restart(s), %ld round(s) of their keys "
		       "lost, every later round checked\n",
		       g_me, n, g_lost_total);
}
