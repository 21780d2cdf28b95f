/*
 * kvtest: the integration test node. Runs as scheduler, server or worker
 * (DMLC_ROLE) and checks, with real data, what pslite promises:
 *
 *   KVTEST_SCENARIO=data    (default) push, pull, push-pull, copy and
 *                           zero-copy forms, keys of 0 bytes to 16 MiB spread
 *                           over every server, lens, many keys per request,
 *                           barriers, SimpleApp, and API errors
 *   KVTEST_SCENARIO=kill    server rank 1 kills itself in the middle of the
 *                           job: workers must see errors for it, keep working
 *                           with the others, and finish
 *   KVTEST_SCENARIO=hang    server rank 1 stops (SIGSTOP) without closing its
 *                           connections: with heartbeats on, the scheduler
 *                           declares it lost and the workers' requests to it
 *                           fail instead of hanging (KVTEST_DIR holds its pid
 *                           so that worker 0 can kill it at the end)
 *   KVTEST_SCENARIO=cut     as hang, but server 1 goes on running: it writes
 *                           KVTEST_DIR/cut after 200 requests, and the test
 *                           script takes its network link away (netns.sh)
 *   KVTEST_SCENARIO=soak    many rounds of mixed traffic (KVTEST_ROUNDS)
 *
 * KVTEST_SLOW_S=N: server 0's handler sleeps N s once, at its 20th request
 * (a handler that is slow, not dead: hb_alive.sh).
 * KVTEST_READY_BARRIER=1: the workers meet in a worker barrier once each has
 * its KV worker (rawzmq.sh's evil worker answers a request never made).
 *
 * Every worker prints "kvtest worker N: OK" when everything checked out and
 * exits 0; any failure prints what differed and exits 1.
 */
#define _GNU_SOURCE 1
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <pslite.h>

static int g_fail;
static const char *g_scenario = "data";
static int g_rank;

#define CHECK(cond, ...)                                                              \
	do {                                                                          \
		if (!(cond)) {                                                        \
			fprintf(stderr, "kvtest %s %d: FAILED at %s:%d: ",            \
				psl_is_server() ? "server" : "worker", g_rank, __FILE__, \
				__LINE__);                                            \
			fprintf(stderr, __VA_ARGS__);                                 \
			fprintf(stderr, "\n");                                        \
			g_fail++;                                                     \
		}                                                                     \
	} while (0)

static uint64_t rng_state = 88172645463325252ull;
static uint64_t rnd(void)
{
	rng_state ^= rng_state << 13;
	rng_state ^= rng_state >> 7;
	rng_state ^= rng_state << 17;
	return rng_state;
}

/* value byte i of key k at version v */
static inline uint8_t val_byte(uint64_t k, unsigned v, size_t i)
{
	uint64_t x = (k * 0x9E3779B97F4A7C15ull) ^ ((uint64_t)v << 32) ^ (i * 0x100000001b3ull);
	return (uint8_t)(x >> 29);
}

static void fill_vals(uint8_t *p, uint64_t k, unsigned v, size_t n)
{
	size_t i;
	for (i = 0; i < n; i++)
		p[i] = val_byte(k, v, i);
}

static uint64_t checksum(const uint8_t *p, size_t n)
{
	uint64_t h = 1469598103934665603ull;
	size_t i;
	for (i = 0; i < n; i++)
		h = (h ^ p[i]) * 1099511628211ull;
	return h;
}

/* ---------------------------------------------------------------- server -- */

struct entry {
	uint64_t key;
	uint8_t *vals;
	int len;
	struct entry *next;
};

#define NB 4096
static struct entry *g_tab[NB];
static pthread_mutex_t g_tab_mu = PTHREAD_MUTEX_INITIALIZER;
static atomic_long g_server_requests;

static struct entry *lookup(uint64_t key, bool create)
{
	struct entry *e;
	for (e = g_tab[key % NB]; e; e = e->next)
		if (e->key == key)
			return e;
	if (!create)
		return NULL;
	e = calloc(1, sizeof(*e));
	e->key = key;
	e->next = g_tab[key % NB];
	g_tab[key % NB] = e;
	return e;
}

enum { CMD_NORMAL = 0, CMD_FAIL = 42, CMD_SLOW = 43, CMD_HOLD = 44 };
/* joint: requests the server holds for this process's worker (g_tab_mu) */
static struct psl_kv_request *g_held[64];
static int g_nheld, g_nanswered;
static int g_srank = -1; /* this process's server rank (joint) */

static void server_handler(struct psl_kv_server *s, struct psl_kv_request *req, void *arg)
{
	size_t i, off = 0, nk = req->kv.num_keys;
	long n = atomic_fetch_add(&g_server_requests, 1);
	(void)s;
	(void)arg;

	if (!strcmp(g_scenario, "kill") && g_rank == 1 && n == 200) {
		fprintf(stderr, "kvtest server 1: killing myself (SIGKILL) as the test asks\n");
		kill(getpid(), SIGKILL);
	}
	if (!strcmp(g_scenario, "hang") && g_rank == 1 && n == 200) {
		char path[4096];
		FILE *f;
		snprintf(path, sizeof(path), "%s/server1.pid", getenv("KVTEST_DIR"));
		f = fopen(path, "w");
		if (f) {
			fprintf(f, "%d\n", (int)getpid());
			fclose(f);
		}
		fprintf(stderr, "kvtest server 1: stopping myself (SIGSTOP) as the test asks\n");
		kill(getpid(), SIGSTOP);
	}
	if (!strcmp(g_scenario, "cut") && g_rank == 1 && n == 200) {
		char path[4096];
		FILE *f;
		snprintf(path, sizeof(path), "%s/cut", getenv("KVTEST_DIR"));
		f = fopen(path, "w");
		if (f)
			fclose(f);
		fprintf(stderr, "kvtest server 1: asking for my link to be cut\n");
		/* and answer nothing until it is: a fast worker would otherwise
		 * finish its rounds before the test cuts the link */
		sleep(3);
	}
	if (g_srank == 0 && n == 20 && getenv("KVTEST_SLOW_S")) {
		fprintf(stderr, "kvtest server 0: my handler sleeps %s s as the test asks\n",
			getenv("KVTEST_SLOW_S"));
		sleep((unsigned)atoi(getenv("KVTEST_SLOW_S")));
	}
	if (req->meta.cmd == CMD_FAIL) {
		psl_kv_respond_error(req, -EINVAL);
		return;
	}
	if (req->meta.cmd == CMD_HOLD) { /* answered by this process's worker (joint) */
		pthread_mutex_lock(&g_tab_mu);
		if (g_nheld < (int)(sizeof(g_held) / sizeof(g_held[0])))
			g_held[g_nheld++] = req;
		else
			psl_kv_respond_error(req, -ENOSPC);
		pthread_mutex_unlock(&g_tab_mu);
		return;
	}
	pthread_mutex_lock(&g_tab_mu);
	if (req->meta.push) {
		size_t per = nk ? req->kv.num_vals / nk : 0;
		for (i = 0; i < nk; i++) {
			struct entry *e = lookup(req->kv.keys[i], true);
			size_t len = req->kv.lens ? (size_t)req->kv.lens[i] : per;
			uint8_t *nv = malloc(len ? len : 1);
			memcpy(nv, (uint8_t *)req->kv.vals + off, len);
			free(e->vals);
			e->vals = nv;
			e->len = (int)len;
			off += len;
		}
		pthread_mutex_unlock(&g_tab_mu);
		psl_kv_respond(req, NULL);
		return;
	}
	/* pull: answer keys, values and lens */
	{
		struct psl_kv res = {0};
		size_t total = 0;
		int *lens = calloc(nk ? nk : 1, sizeof(int));
		uint8_t *vals;
		for (i = 0; i < nk; i++) {
			struct entry *e = lookup(req->kv.keys[i], false);
			lens[i] = e ? e->len : 0;
			total += (size_t)lens[i];
		}
		vals = malloc(total ? total : 1);
		for (i = 0, off = 0; i < nk; i++) {
			struct entry *e = lookup(req->kv.keys[i], false);
			if (e && e->len)
				memcpy(vals + off, e->vals, (size_t)e->len);
			off += (size_t)lens[i];
		}
		pthread_mutex_unlock(&g_tab_mu);
		res.keys = req->kv.keys;
		res.num_keys = nk;
		res.vals = vals;
		res.num_vals = total;
		res.lens = lens;
		psl_kv_respond(req, &res);
		free(vals);
		free(lens);
	}
}

static void simple_server(struct psl_simple_app *app, const struct psl_simple_msg *msg,
			  void *arg)
{
	char body[256];
	int n;
	(void)arg;
	n = snprintf(body, sizeof(body), "server %d got head %d body '%.*s'", psl_my_rank(),
		     msg->head, (int)msg->body_len, msg->body);
	psl_simple_respond(app, msg, body, (size_t)n);
}

/* ---------------------------------------------------------------- worker -- */

struct req {
	uint64_t *keys;
	size_t nkeys;
	int *lens;
	uint8_t *vals;
	size_t nvals;
	uint8_t *out;
	int *out_lens;
	struct psl_kv_out o;
	unsigned version;
};

/* nkeys keys with the given sizes, spread over all servers' ranges */
static void make_req(struct req *r, const size_t *sizes, size_t nkeys, unsigned salt)
{
	int S = psl_num_servers();
	size_t i, off = 0;
	r->nkeys = nkeys;
	r->keys = calloc(nkeys, sizeof(uint64_t));
	r->lens = calloc(nkeys, sizeof(int));
	r->out_lens = calloc(nkeys, sizeof(int));
	r->nvals = 0;
	for (i = 0; i < nkeys; i++) {
		uint64_t b, e;
		psl_server_key_range((int)(i % (size_t)S), &b, &e);
		/* distinct per worker and per request, ascending overall */
		r->keys[i] = b + ((uint64_t)salt << 32) + ((uint64_t)g_rank << 24) + i;
		r->lens[i] = (int)sizes[i];
		r->nvals += sizes[i];
	}
	/* keys of different servers interleave: sort them, keeping lens along */
	for (i = 1; i < nkeys; i++) {
		size_t j = i;
		while (j > 0 && r->keys[j - 1] > r->keys[j]) {
			uint64_t tk = r->keys[j];
			int tl = r->lens[j];
			r->keys[j] = r->keys[j - 1];
			r->lens[j] = r->lens[j - 1];
			r->keys[j - 1] = tk;
			r->lens[j - 1] = tl;
			j--;
		}
	}
	r->vals = malloc(r->nvals ? r->nvals : 1);
	r->out = malloc(r->nvals ? r->nvals : 1);
	for (i = 0; i < nkeys; i++) {
		fill_vals(r->vals + off, r->keys[i], r->version, (size_t)r->lens[i]);
		off += (size_t)r->lens[i];
	}
}

static void refill(struct req *r, unsigned version)
{
	size_t i, off = 0;
	r->version = version;
	for (i = 0; i < r->nkeys; i++) {
		fill_vals(r->vals + off, r->keys[i], version, (size_t)r->lens[i]);
		off += (size_t)r->lens[i];
	}
}

static void free_req(struct req *r)
{
	free(r->keys);
	free(r->lens);
	free(r->out_lens);
	free(r->vals);
	free(r->out);
}

static struct psl_kv_out *out_of(struct req *r)
{
	memset(r->out, 0xEE, r->nvals ? r->nvals : 1);
	memset(r->out_lens, 0xEE, r->nkeys * sizeof(int));
	r->o = (struct psl_kv_out){r->out, r->nvals, 0, r->out_lens, PSL_MEM_HOST, 0};
	return &r->o;
}

/* the pull result must be exactly what was pushed at this version */
static void check_out(struct req *r, const char *what)
{
	size_t i;
	CHECK(r->o.num_vals == r->nvals, "%s: pulled %zu values, expected %zu", what,
	      r->o.num_vals, r->nvals);
	for (i = 0; i < r->nkeys; i++)
		CHECK(r->out_lens[i] == r->lens[i], "%s: key %zu: lens %d, expected %d", what, i,
		      r->out_lens[i], r->lens[i]);
	CHECK(checksum(r->out, r->nvals) == checksum(r->vals, r->nvals) &&
		      memcmp(r->out, r->vals, r->nvals) == 0,
	      "%s: pulled data differs from what was pushed (%zu keys, %zu bytes)", what,
	      r->nkeys, r->nvals);
}

static atomic_int g_cb_count;
static void count_cb(int ts, int status, void *arg)
{
	(void)ts;
	(void)arg;
	if (status == 0)
		atomic_fetch_add(&g_cb_count, 1);
}

static void run_round(struct psl_kv_worker *w, struct req *r, unsigned version, bool zc)
{
	struct psl_kv kv = {0};
	int ts, rc;
	char what[64];

	refill(r, version);
	kv = (struct psl_kv){r->keys, r->nkeys, r->vals, r->nvals, r->lens, PSL_MEM_HOST, 0};
	snprintf(what, sizeof(what), "%s push v%u", zc ? "zero-copy" : "copy", version);
	ts = zc ? psl_kv_zpush(w, &kv, 0, count_cb, NULL) : psl_kv_push(w, &kv, 0, count_cb, NULL);
	CHECK(ts >= 0, "%s: %s", what, psl_strerror(ts));
	rc = psl_kv_wait(w, ts);
	CHECK(rc == 0, "%s: wait: %s", what, psl_strerror(rc));

	snprintf(what, sizeof(what), "%s pull v%u", zc ? "zero-copy" : "copy", version);
	ts = zc ? psl_kv_zpull(w, r->keys, r->nkeys, out_of(r), 0, count_cb, NULL)
		: psl_kv_pull(w, r->keys, r->nkeys, out_of(r), 0, count_cb, NULL);
	CHECK(ts >= 0, "%s: %s", what, psl_strerror(ts));
	rc = psl_kv_wait(w, ts);
	CHECK(rc == 0, "%s: wait: %s", what, psl_strerror(rc));
	check_out(r, what);

	refill(r, version + 1);
	kv = (struct psl_kv){r->keys, r->nkeys, r->vals, r->nvals, r->lens, PSL_MEM_HOST, 0};
	snprintf(what, sizeof(what), "%s push-pull v%u", zc ? "zero-copy" : "copy", version + 1);
	ts = zc ? psl_kv_zpushpull(w, &kv, out_of(r), 0, count_cb, NULL)
		: psl_kv_pushpull(w, &kv, out_of(r), 0, count_cb, NULL);
	CHECK(ts >= 0, "%s: %s", what, psl_strerror(ts));
	rc = psl_kv_wait(w, ts);
	CHECK(rc == 0, "%s: wait: %s", what, psl_strerror(rc));
	check_out(r, what);
}

/* The largest value, 16 MiB, alone in one zero-copy round: it moves 4 x 16
 * MiB per key, which was 80% of this scenario's bytes (and of its time under
 * the sanitizers and in the emulated RDMA VM) when every size took two rounds
 * and the request of all sizes carried it too. */
#define BIG_VALUE ((size_t)16 << 20)

static void test_sizes(struct psl_kv_worker *w)
{
	static const size_t sizes[] = {0, 1, 7, 8, 100, 4096, 4097, 65536, 1 << 20, 3 << 20};
	size_t n = sizeof(sizes) / sizeof(sizes[0]), i;
	size_t big[2] = {BIG_VALUE, BIG_VALUE};
	struct req all = {0}, r = {0};
	int before = atomic_load(&g_cb_count);

	/* every size alone, one key per request, each server in turn */
	for (i = 0; i < n; i++) {
		size_t one[2] = {sizes[i], sizes[i]};
		memset(&r, 0, sizeof(r));
		make_req(&r, one, 2, 100 + (unsigned)i); /* two keys: one per server (S=2) */
		run_round(w, &r, 1, i % 2);
		run_round(w, &r, 3, (i + 1) % 2);
		free_req(&r);
	}
	memset(&r, 0, sizeof(r));
	make_req(&r, big, 2, 100 + (unsigned)n);
	run_round(w, &r, 1, true);
	free_req(&r);
	/* all sizes but the largest in one request, with lens */
	make_req(&all, sizes, n, 7);
	run_round(w, &all, 10, true);
	run_round(w, &all, 20, false);
	free_req(&all);
	CHECK(atomic_load(&g_cb_count) - before == (int)(n * 2 * 3 + 3 + 2 * 3),
	      "callbacks: %d ran, expected %d", atomic_load(&g_cb_count) - before,
	      (int)(n * 2 * 3 + 3 + 2 * 3));
}

/* 2000 small keys of random sizes in one request, both servers */
static void test_many_keys(struct psl_kv_worker *w)
{
	size_t n = 2000, i, *sizes = calloc(n, sizeof(size_t));
	struct req r = {0};
	for (i = 0; i < n; i++)
		sizes[i] = rnd() % 300;
	make_req(&r, sizes, n, 9);
	run_round(w, &r, 1, true);
	run_round(w, &r, 5, false);
	free_req(&r);
	free(sizes);
}

/* uniform values without lens: num_vals/num_keys each */
static void test_no_lens(struct psl_kv_worker *w)
{
	struct req r = {0};
	size_t sizes[64], i;
	struct psl_kv kv = {0};
	struct psl_kv_out o = {0};
	int ts;
	for (i = 0; i < 64; i++)
		sizes[i] = 24;
	make_req(&r, sizes, 64, 11);
	kv = (struct psl_kv){r.keys, r.nkeys, r.vals, r.nvals, NULL, PSL_MEM_HOST, 0};
	ts = psl_kv_push(w, &kv, 0, NULL, NULL);
	CHECK(psl_kv_wait(w, ts) == 0, "push without lens failed");
	memset(r.out, 0, r.nvals);
	o = (struct psl_kv_out){r.out, r.nvals, 0, NULL, PSL_MEM_HOST, 0};
	ts = psl_kv_pull(w, r.keys, r.nkeys, &o, 0, NULL, NULL);
	CHECK(psl_kv_wait(w, ts) == 0, "pull without lens failed");
	CHECK(o.num_vals == r.nvals && !memcmp(r.out, r.vals, r.nvals),
	      "pull without lens returned other data");
	free_req(&r);
}

static void test_api_errors(struct psl_kv_worker *w)
{
	uint64_t b0, e0, keys[2];
	uint8_t v[16] = {0};
	struct psl_kv kv = {0};
	struct psl_kv_out o = {0};
	int ts, rc, lens[2] = {8, 9};

	psl_server_key_range(0, &b0, &e0);
	keys[0] = b0 + 10;
	keys[1] = b0 + 5; /* not sorted */
	kv = (struct psl_kv){keys, 2, v, 16, NULL, PSL_MEM_HOST, 0};
	ts = psl_kv_push(w, &kv, 0, NULL, NULL);
	CHECK(ts == -EINVAL, "unsorted keys: got %d, expected -EINVAL", ts);
	keys[1] = UINT64_MAX; /* beyond every range */
	kv = (struct psl_kv){keys, 2, v, 16, NULL, PSL_MEM_HOST, 0};
	ts = psl_kv_push(w, &kv, 0, NULL, NULL);
	CHECK(ts == -EINVAL, "key beyond the ranges: got %d, expected -EINVAL", ts);
	keys[1] = b0 + 11;
	kv = (struct psl_kv){keys, 2, v, 15, NULL, PSL_MEM_HOST, 0}; /* 15 values for 2 keys */
	ts = psl_kv_push(w, &kv, 0, NULL, NULL);
	CHECK(ts == -EINVAL, "uneven values: got %d, expected -EINVAL", ts);
	kv = (struct psl_kv){keys, 2, v, 16, lens, PSL_MEM_HOST, 0}; /* lens add up to 17 */
	ts = psl_kv_push(w, &kv, 0, NULL, NULL);
	CHECK(ts == -EINVAL, "lens mismatch: got %d, expected -EINVAL", ts);

	/* the server answers cmd 42 with an error: the request fails with it */
	kv = (struct psl_kv){keys, 2, v, 16, NULL, PSL_MEM_HOST, 0};
	ts = psl_kv_push(w, &kv, CMD_FAIL, NULL, NULL);
	CHECK(ts >= 0, "push: %s", psl_strerror(ts));
	rc = psl_kv_wait(w, ts);
	CHECK(rc == -EINVAL, "server error reply: wait gave %d (%s), expected -EINVAL", rc,
	      psl_strerror(rc));

	/* a pull into a buffer that is too small */
	ts = psl_kv_push(w, &kv, 0, NULL, NULL);
	CHECK(psl_kv_wait(w, ts) == 0, "push failed");
	o = (struct psl_kv_out){v, 4, 0, NULL, PSL_MEM_HOST, 0};
	ts = psl_kv_pull(w, keys, 2, &o, 0, NULL, NULL);
	rc = psl_kv_wait(w, ts);
	CHECK(rc == -EMSGSIZE && o.num_vals == 16,
	      "pull into a small buffer: %d (%s), num_vals %zu; expected -EMSGSIZE and 16", rc,
	      psl_strerror(rc), o.num_vals);

	/* empty requests complete at once */
	kv = (struct psl_kv){keys, 0, v, 0, NULL, PSL_MEM_HOST, 0};
	ts = psl_kv_push(w, &kv, 0, NULL, NULL);
	CHECK(ts >= 0 && psl_kv_wait(w, ts) == 0, "empty push failed");
}

/* A joint process's worker callback (on the worker node's receive thread)
 * answers the requests its process's server holds: a call on the other
 * node's objects from inside a callback. */
static void answer_held(int ts, int status, void *arg)
{
	int i;
	(void)ts;
	(void)status;
	(void)arg;
	pthread_mutex_lock(&g_tab_mu);
	for (i = 0; i < g_nheld; i++)
		CHECK(psl_kv_respond(g_held[i], NULL) == 0, "answering a held request failed");
	g_nanswered += g_nheld;
	g_nheld = 0;
	pthread_mutex_unlock(&g_tab_mu);
}

/* joint only: the worker pushes a request its own process's server holds,
 * and answers it from a callback of its own (plain nodes in the job, if
 * any, take no part). */
static void test_cross(struct psl_kv_worker *w)
{
	int ts, rounds = 0, done = 0;
	uint64_t key, b, e;
	uint8_t v[8], one = 1;
	struct psl_kv kv = {0};
	time_t t0 = time(NULL);

	psl_server_key_range(g_srank, &b, &e);
	key = b + 0xC0000;
	memset(v, 7, sizeof(v));
	kv = (struct psl_kv){&key, 1, v, sizeof(v), NULL, PSL_MEM_HOST, 0};
	ts = psl_kv_push(w, &kv, CMD_HOLD, NULL, NULL);
	CHECK(ts >= 0, "held push: %s", psl_strerror(ts));
	while (!done && time(NULL) - t0 < 30) {
		struct psl_kv k1 = {&key, 1, &one, 1, NULL, PSL_MEM_HOST, 0};
		int t = psl_kv_push(w, &k1, 0, answer_held, NULL);
		CHECK(psl_kv_wait(w, t) == 0, "push with a callback failed");
		pthread_mutex_lock(&g_tab_mu);
		done = g_nanswered >= 1;
		pthread_mutex_unlock(&g_tab_mu);
		rounds++;
	}
	CHECK(done, "cross: the held request was not answered in 30 s");
	CHECK(ts < 0 || psl_kv_wait(w, ts) == 0, "the held push was not answered");
	printf("kvtest worker %d: cross-node callbacks OK (%d rounds)\n", psl_my_rank(), rounds);
}

/* worker 0 pushes, barrier, worker 1 pulls what worker 0 pushed */
static void test_barrier(struct psl_kv_worker *w)
{
	uint64_t b, e, key;
	uint8_t v[64], out[64];
	struct psl_kv kv = {0};
	struct psl_kv_out o = {0};
	int round, ts;

	psl_server_key_range(psl_num_servers() - 1, &b, &e);
	key = b + 0xB0000;
	for (round = 0; round < 5; round++) {
		int writer = round % psl_num_workers();
		if (psl_my_rank() == writer) {
			fill_vals(v, key, (unsigned)round, sizeof(v));
			kv = (struct psl_kv){&key, 1, v, sizeof(v), NULL, PSL_MEM_HOST, 0};
			ts = psl_kv_push(w, &kv, 0, NULL, NULL);
			CHECK(psl_kv_wait(w, ts) == 0, "barrier round %d: push failed", round);
		}
		CHECK(psl_barrier(0, PSL_GROUP_WORKERS) == 0, "barrier failed");
		o = (struct psl_kv_out){out, sizeof(out), 0, NULL, PSL_MEM_HOST, 0};
		ts = psl_kv_pull(w, &key, 1, &o, 0, NULL, NULL);
		CHECK(psl_kv_wait(w, ts) == 0, "barrier round %d: pull failed", round);
		fill_vals(v, key, (unsigned)round, sizeof(v));
		CHECK(o.num_vals == sizeof(v) && !memcmp(out, v, sizeof(v)),
		      "barrier round %d: worker %d did not see worker %d's push", round,
		      psl_my_rank(), writer);
		CHECK(psl_barrier(0, PSL_GROUP_WORKERS) == 0, "barrier failed");
	}
	CHECK(psl_barrier(0, PSL_GROUP_ALL) == 0, "barrier over all nodes failed");
}

static atomic_int g_simple_resp;
static void simple_worker_resp(struct psl_simple_app *app, const struct psl_simple_msg *msg,
			       void *arg)
{
	char want[64];
	(void)app;
	(void)arg;
	snprintf(want, sizeof(want), "head 7 body 'hello from %d'", g_rank);
	if (msg->head == 7 && msg->body_len > 0 && memmem(msg->body, msg->body_len, want, strlen(want)))
		atomic_fetch_add(&g_simple_resp, 1);
}

static void test_simple(void)
{
	struct psl_simple_app *app;
	char body[64];
	int ts, rc, n;
	rc = psl_simple_app_new(1, 1, NULL, simple_worker_resp, NULL, &app);
	CHECK(rc == 0, "simple app: %s", psl_strerror(rc));
	if (rc)
		return;
	n = snprintf(body, sizeof(body), "hello from %d", g_rank);
	ts = psl_simple_request(app, 7, body, (size_t)n, PSL_GROUP_SERVERS);
	CHECK(ts >= 0, "simple request: %s", psl_strerror(ts));
	rc = psl_simple_wait(app, ts);
	CHECK(rc == 0, "simple wait: %s", psl_strerror(rc));
	CHECK(atomic_load(&g_simple_resp) == psl_num_servers(),
	      "simple app: %d good responses, expected %d", atomic_load(&g_simple_resp),
	      psl_num_servers());
	psl_simple_app_free(app);
}

/* Server 1 dies during this: requests to it must fail, the others not. */
static void test_kill(struct psl_kv_worker *w)
{
	int S = psl_num_servers(), round, failed = 0, ok_after = 0, s;
	time_t t0 = time(NULL);
	for (round = 0; round < 400 && time(NULL) - t0 < 60; round++) {
		for (s = 0; s < S; s++) {
			uint64_t b, e, key;
			uint8_t v[256], out[256];
			struct psl_kv kv = {0};
			struct psl_kv_out o = {0};
			int ts, rc;
			psl_server_key_range(s, &b, &e);
			key = b + (uint64_t)g_rank * 1000 + (uint64_t)round;
			fill_vals(v, key, 1, sizeof(v));
			kv = (struct psl_kv){&key, 1, v, sizeof(v), NULL, PSL_MEM_HOST, 0};
			ts = psl_kv_push(w, &kv, 0, NULL, NULL);
			rc = ts < 0 ? ts : psl_kv_wait(w, ts);
			if (rc == 0) {
				o = (struct psl_kv_out){out, sizeof(out), 0, NULL, PSL_MEM_HOST, 0};
				ts = psl_kv_pull(w, &key, 1, &o, 0, NULL, NULL);
				rc = ts < 0 ? ts : psl_kv_wait(w, ts);
			}
			if (s == 1) {
				if (rc) {
					if (!failed)
						fprintf(stderr,
							"kvtest worker %d: requests to server 1 fail now: "
							"%s\n",
							g_rank, psl_strerror(rc));
					failed++;
					CHECK(rc == -ECONNRESET || rc == -EHOSTDOWN ||
						      rc == -ETIMEDOUT,
					      "request to the dead server failed with %d (%s)", rc,
					      psl_strerror(rc));
				}
			} else {
				CHECK(rc == 0, "request to live server %d failed: %s", s,
				      psl_strerror(rc));
				if (rc == 0 && failed) {
					ok_after++;
					CHECK(!memcmp(out, v, sizeof(v)),
					      "live server %d returned wrong data", s);
				}
			}
		}
	}
	CHECK(failed > 0, "server 1 never failed: the test did not kill it");
	CHECK(ok_after > 0, "no request to server 0 succeeded after server 1 died");
}

static void test_soak(struct psl_kv_worker *w)
{
	long rounds = getenv("KVTEST_ROUNDS") ? atol(getenv("KVTEST_ROUNDS")) : 200, i;
	size_t sizes[16];
	struct req r = {0};
	for (i = 0; i < 16; i++)
		sizes[i] = (size_t)(rnd() % 20000);
	make_req(&r, sizes, 16, 13);
	for (i = 0; i < rounds && !g_fail; i++)
		run_round(w, &r, (unsigned)(i * 2), i % 2);
	free_req(&r);
}

static int run_worker(void)
{
	struct psl_kv_worker *w;
	int rc;
	if (psl_my_role() == PSL_JOINT) { /* this thread works for the worker node */
		rc = psl_use_role(PSL_WORKER);
		CHECK(rc == 0, "psl_use_role(PSL_WORKER): %s", psl_strerror(rc));
		g_rank = psl_my_rank();
	}
	rc = psl_kv_worker_new(0, 0, PSL_UINT8, &w);
	CHECK(rc == 0, "psl_kv_worker_new: %s", psl_strerror(rc));
	if (rc)
		return 1;
	if (getenv("KVTEST_READY_BARRIER")) /* (every worker has its KV worker) */
		CHECK(psl_barrier(0, PSL_GROUP_WORKERS) == 0, "workers-ready barrier failed");
	rng_state ^= (uint64_t)g_rank * 7919u;
	if (!strcmp(g_scenario, "kill") || !strcmp(g_scenario, "hang") ||
	    !strcmp(g_scenario, "cut")) {
		test_kill(w);
		if (!strcmp(g_scenario, "hang") && g_rank == 0) {
			/* server 1 is stopped, not dead: end it so that the job ends */
			char path[4096];
			FILE *f;
			int pid = 0;
			snprintf(path, sizeof(path), "%s/server1.pid", getenv("KVTEST_DIR"));
			f = fopen(path, "r");
			CHECK(f && fscanf(f, "%d", &pid) == 1 && pid > 0, "no pid of server 1 in %s",
			      path);
			if (f)
				fclose(f);
			if (pid > 0)
				kill(pid, SIGKILL);
		}
	} else if (!strcmp(g_scenario, "soak")) {
		test_soak(w);
	} else {
		test_sizes(w);
		test_many_keys(w);
		test_no_lens(w);
		test_api_errors(w);
		test_barrier(w);
		test_simple();
		if (psl_my_role() == PSL_JOINT)
			test_cross(w);
	}
	psl_kv_worker_free(w);
	return g_fail ? 1 : 0;
}

int main(void)
{
	int rc, code = 0, srank = -1;
	enum psl_role role;
	const char *s = getenv("KVTEST_SCENARIO");
	if (s && *s)
		g_scenario = s;
	setvbuf(stdout, NULL, _IOLBF, 0);
	rc = psl_start(0, true);
	if (rc) {
		fprintf(stderr, "kvtest: psl_start: %s\n", psl_strerror(rc));
		return 2;
	}
	g_rank = psl_my_rank();
	role = psl_my_role();
	if (psl_is_server()) { /* (a joint process is a server and a worker) */
		struct psl_kv_server *srv;
		struct psl_simple_app *app;
		srank = g_srank = g_rank;
		rc = psl_kv_server_new(0, PSL_UINT8, server_handler, NULL, &srv);
		CHECK(rc == 0, "psl_kv_server_new: %s", psl_strerror(rc));
		rc = psl_simple_app_new(1, 1, simple_server, NULL, NULL, &app);
		CHECK(rc == 0, "psl_simple_app_new: %s", psl_strerror(rc));
	}
	if (psl_is_worker())
		code = run_worker();
	else if (!strcmp(g_scenario, "data"))
		CHECK(psl_barrier(0, PSL_GROUP_ALL) == 0, "barrier over all nodes failed");
	rc = psl_finalize(0, true);
	CHECK(rc == 0, "finalize: %s", psl_strerror(rc));
	if (g_fail)
		code = 1;
	if (srank >= 0)
		printf("kvtest server %d: %s (%ld requests)\n", srank, code ? "FAILED" : "OK",
		       atomic_load(&g_server_requests));
	if (role == PSL_SERVER)
		return code;
	printf("kvtest %s %d: %s\n", role == PSL_JOINT ? "worker" : getenv("DMLC_ROLE"),
	       g_rank, code ? "FAILED" : "OK");
	return code;
}
