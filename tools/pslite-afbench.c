/*
 * pslite-afbench: the Attention-FFN serving benchmark (StepMesh's
 * test_benchmark_af) on pslite's batch API.
 *
 * The same binary runs as scheduler, server or worker (DMLC_ROLE). Attention
 * workers (DMLC_NUM_WORKER) run decoding steps against FFN servers
 * (DMLC_NUM_SERVER): each step sends --micro-batches batches at once and
 * waits for all of them; each batch pushes one tensor of --push-bytes to
 * every server and pulls one tensor of --pull-bytes from each
 * (PSL_KV_BATCH_BROADCAST, StepMesh's routing). A server computes
 * out[j] = in[j % n] * 3 + j + rank + 1 (32-bit words) for each batch, in a
 * compute loop on psl_kv_batch_next (--serve loop, the default) or in the
 * batch callback (--serve callback); the worker checks every word.
 *
 * Options:
 *   --steps N           measured steps (default 1000)
 *   --warmup N          steps before measuring (default 50)
 *   --micro-batches N   batches per step (default 3)
 *   --push-bytes B      bytes pushed per micro-batch (default 458752)
 *   --pull-bytes B      bytes pulled per micro-batch and server (default 917504)
 *   --serve loop|callback
 *   --route broadcast|keys  StepMesh's routing (default), or by key range: the
 *                       input goes to each server under a key of its range
 *   --check-every N     check the data of every N-th step (default 1; 0: never)
 *   --mem host|gpu      where the worker's push and pull tensors live (default
 *                       host; gpu: on GPU 0, written and read back with
 *                       psl_mem_copy outside the timed part of a step)
 *   --checks            also run the failure checks (a batch over the server's
 *                       limit, an answer larger than the pull buffer, a server
 *                       answering twice, an unknown batch, a missing key)
 *   --json              one machine-readable summary line per worker
 *   --quiet             only the summary
 * Each node prints "afbench ROLE RANK: OK" (or FAILED) at the end.
 */
#define _GNU_SOURCE 1
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <pslite.h>

static long g_steps = 1000, g_warmup = 50, g_mb = 3, g_check_every = 1;
static size_t g_push_bytes = 458752, g_pull_bytes = 917504;
static bool g_loop = true, g_json, g_quiet, g_checks, g_route_keys, g_gpu;
static int g_fail;

/* the failure checks' commands */
enum { CMD_NORMAL = 0, CMD_TOO_BIG = 2, CMD_NO_KEY = 3 };
#define CHECK_MAX_TENSORS 8

#define FAIL(...)                                                                           \
	do {                                                                                \
		fprintf(stderr, "afbench: " __VA_ARGS__);                                   \
		fputc('\n', stderr);                                                        \
		g_fail = 1;                                                                 \
	} while (0)

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static inline uint32_t input_word(uint32_t seed, size_t i)
{
	return seed + (uint32_t)i * 40503u;
}


/* ---------------------------------------------------------------- server -- */

/* (the callback gets the server as an argument: batches can arrive before
 * psl_kv_batch_server_new returns) */
static struct psl_kv_batch_server *g_srv;
static atomic_long g_batches, g_compute_ns;

/* Output buffers, reused: answers are sent from them without a copy
 * (psl_kv_batch_zrespond) and they come back here when the van is done. */
struct obuf {
	struct obuf *next;
	size_t cap; /* words */
	uint32_t w[];
};
static struct obuf *g_pool;
static pthread_mutex_t g_pool_mu = PTHREAD_MUTEX_INITIALIZER;

static struct obuf *obuf_get(size_t words)
{
	struct obuf **pp, *o;
	pthread_mutex_lock(&g_pool_mu);
	for (pp = &g_pool; (o = *pp); pp = &o->next)
		if (o->cap >= words)
			break;
	if (o)
		*pp = o->next;
	pthread_mutex_unlock(&g_pool_mu);
	if (!o && (o = malloc(sizeof(*o) + words * 4 + 4)))
		o->cap = words;
	return o;
}

static void obuf_put(void *p)
{
	struct obuf *o = p;
	pthread_mutex_lock(&g_pool_mu);
	o->next = g_pool;
	g_pool = o;
	pthread_mutex_unlock(&g_pool_mu);
}

static void pool_free(void)
{
	struct obuf *o;
	while ((o = g_pool)) {
		g_pool = o->next;
		free(o);
	}
}

static void serve(struct psl_kv_batch_server *srv, const struct psl_kv_batch_req *req)
{
	int rank = psl_my_rank(), rc;
	const uint32_t *in = req->npush ? req->push[0].vals : NULL;
	size_t n = req->npush ? req->push[0].len : 0, i, off = 0, need = 0;
	struct psl_kv_tensor *out = calloc(req->npull + 1, sizeof(*out));
	uint64_t id = req->id;
	size_t npull = req->npull; /* (req is gone once answered) */
	struct obuf *ob = NULL;
	uint32_t *buf;
	uint64_t t0;

	for (i = 0; i < req->npull; i++)
		need += req->pull[i].len + (req->cmd == CMD_TOO_BIG);
	ob = obuf_get(need);
	if (!out || !ob) {
		psl_kv_batch_respond_error(srv, id, -ENOMEM);
		goto out;
	}
	buf = ob->w;
	t0 = now_ns();
	for (i = 0; i < req->npull; i++) {
		size_t len = req->pull[i].len + (req->cmd == CMD_TOO_BIG), base;
		uint32_t *o = buf + off, add = (uint32_t)rank + 1u;
		/* output_word without a division per word */
		for (base = 0; base < len; base += n ? n : len) {
			size_t k, m = n && len - base > n ? n : len - base;
			for (k = 0; k < m; k++)
				o[base + k] = (n ? in[k] * 3u : 0u) + (uint32_t)(base + k) + add;
		}
		out[i] = (struct psl_kv_tensor){.key = req->pull[i].key, .vals = buf + off,
						.len = len};
		if (req->cmd == CMD_NO_KEY)
			out[i].key ^= 1;
		off += len;
	}
	atomic_fetch_add(&g_compute_ns, (long)(now_ns() - t0));
	atomic_fetch_add(&g_batches, 1);
	if (req->cmd == CMD_NO_KEY) {
		/* a missing key is refused and the batch stays held */
		rc = psl_kv_batch_respond(srv, id, out, req->npull);
		if (rc != -EINVAL)
			FAIL("an answer without the pulled key gave %s, expected EINVAL",
			     psl_strerror(rc));
		rc = psl_kv_batch_respond_error(srv, id, -ENOTSUP);
		if (rc)
			FAIL("psl_kv_batch_respond_error: %s", psl_strerror(rc));
		goto out;
	}
	rc = psl_kv_batch_zrespond(srv, id, out, req->npull, obuf_put, ob);
	if (rc)
		FAIL("psl_kv_batch_zrespond: %s", psl_strerror(rc));
	else
		ob = NULL; /* comes back through obuf_put */
	if (g_checks && atomic_load(&g_batches) <= 3) {
		/* req is gone: its id must be refused now, as must an unknown one */
		rc = psl_kv_batch_respond(srv, id, out, npull);
		if (rc != -ENOENT)
			FAIL("answering batch %" PRIu64 " twice gave %s, expected ENOENT", id,
			     psl_strerror(rc));
		rc = psl_kv_batch_respond_error(srv, 0xdeadbeefull << 20, -EIO);
		if (rc != -ENOENT)
			FAIL("answering an unknown batch gave %s, expected ENOENT",
			     psl_strerror(rc));
	}
out:
	free(out);
	if (ob)
		obuf_put(ob);
}

static void on_batch(struct psl_kv_batch_server *s, const struct psl_kv_batch_req *req,
		     void *arg)
{
	(void)arg;
	serve(s, req);
}

static void *compute_loop(void *arg)
{
	(void)arg;
	for (;;) {
		const struct psl_kv_batch_req *req;
		int rc = psl_kv_batch_next(g_srv, -1, &req);
		if (rc == -ESHUTDOWN)
			break;
		if (rc) {
			FAIL("psl_kv_batch_next: %s", psl_strerror(rc));
			break;
		}
		serve(g_srv, req);
	}
	return NULL;
}

static int run_server(void)
{
	pthread_t th;
	int rc;
	size_t max = g_checks ? CHECK_MAX_TENSORS : 0;

	rc = psl_kv_batch_server_new(0, PSL_UINT32, max, g_loop ? NULL : on_batch, NULL, &g_srv);
	if (rc) {
		FAIL("psl_kv_batch_server_new: %s", psl_strerror(rc));
		return psl_finalize(0, true);
	}
	if (g_loop)
		pthread_create(&th, NULL, compute_loop, NULL);
	rc = psl_finalize(0, true); /* ends the compute loop (ESHUTDOWN) */
	if (g_loop)
		pthread_join(th, NULL);
	psl_kv_batch_server_free(g_srv);
	pool_free();
	if (!g_quiet)
		printf("afbench server: %ld batches served, computing took %.1f us per batch\n",
		       atomic_load(&g_batches),
		       atomic_load(&g_batches)
			       ? (double)atomic_load(&g_compute_ns) / 1e3 / (double)atomic_load(&g_batches)
			       : 0.0);
	return rc;
}

/* ---------------------------------------------------------------- worker -- */

struct mb {
	struct psl_kv_batch b;
	struct psl_kv_tensor push;
	struct psl_kv_tensor *pushes; /* --route keys: one per server */
	struct psl_kv_tensor *pull; /* one per server */
	uint32_t *in, *out;
	void *din, *dout; /* --mem gpu: the tensors, in GPU memory */
	uint32_t seed;
	int ts;
};

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

static size_t check_mb(const struct mb *m, int S, size_t pull_words)
{
	size_t bad = 0, j;
	int r;
	for (r = 0; r < S; r++) {
		const uint32_t *o = m->out + (size_t)r * pull_words;
		if (m->pull[r].received != pull_words) {
			bad += pull_words;
			continue;
		}
		for (j = 0; j < pull_words; j++) {
			size_t n = m->push.len, k = j < n ? j : j < 2 * n ? j - n : j % n;
			if (o[j] != (n ? m->in[k] * 3u : 0u) + (uint32_t)j + (uint32_t)r + 1u)
				bad++;
		}
	}
	return bad;
}

/* The failure checks a worker runs (with --checks, rank 0). */
static void worker_checks(struct psl_kv_worker *w, struct mb *m, int S)
{
	struct psl_kv_tensor push[CHECK_MAX_TENSORS + 1] = {{0}};
	struct psl_kv_batch big = {0};
	int ts, rc, i;

	/* more tensors than the servers take */
	for (i = 0; i <= CHECK_MAX_TENSORS; i++)
		push[i] = (struct psl_kv_tensor){.key = (uint64_t)i, .vals = m->in, .len = 4};
	big.push = push;
	big.npush = CHECK_MAX_TENSORS + 1;
	ts = psl_kv_batch_pushpull(w, &big, CMD_NORMAL, PSL_KV_BATCH_BROADCAST, NULL, NULL);
	rc = ts < 0 ? ts : psl_kv_wait(w, ts);
	if (rc != -E2BIG)
		FAIL("a batch over the servers' limit gave %s, expected E2BIG", psl_strerror(rc));
	/* an answer larger than the pull buffer */
	ts = psl_kv_batch_pushpull(w, &m->b, CMD_TOO_BIG, PSL_KV_BATCH_BROADCAST, NULL, NULL);
	rc = ts < 0 ? ts : psl_kv_wait(w, ts);
	if (rc != -EMSGSIZE)
		FAIL("an answer larger than the pull buffer gave %s, expected EMSGSIZE",
		     psl_strerror(rc));
	/* a server that cannot answer a key fails the batch with its error */
	ts = psl_kv_batch_pushpull(w, &m->b, CMD_NO_KEY, PSL_KV_BATCH_BROADCAST, NULL, NULL);
	rc = ts < 0 ? ts : psl_kv_wait(w, ts);
	if (rc != -ENOTSUP)
		FAIL("a batch the server failed with ENOTSUP gave %s", psl_strerror(rc));
	/* bad descriptors */
	rc = psl_kv_batch_pushpull(w, NULL, 0, 0, NULL, NULL);
	if (rc != -EINVAL)
		FAIL("a NULL batch gave %s, expected EINVAL", psl_strerror(rc));
	if (S > 1) {
		struct psl_kv_batch odd = m->b;
		odd.npull = (size_t)S - 1;
		rc = psl_kv_batch_pushpull(w, &odd, 0, PSL_KV_BATCH_BROADCAST, NULL, NULL);
		if (rc != -EINVAL)
			FAIL("%d pulls over %d servers gave %s, expected EINVAL", S - 1, S,
			     psl_strerror(rc));
	}
	/* an empty batch completes at once */
	{
		struct psl_kv_batch none = {0};
		ts = psl_kv_batch_pushpull(w, &none, 0, 0, NULL, NULL);
		rc = ts < 0 ? ts : psl_kv_wait(w, ts);
		if (rc || none.times.completed_ns < none.times.submit_ns)
			FAIL("an empty batch gave %s", psl_strerror(rc));
	}
	if (!g_quiet)
		printf("afbench worker %d: failure checks done\n", psl_my_rank());
}

/* --mem gpu: m's tensors in GPU memory instead of in and out. 0 or -errno. */
static int mb_on_gpu(struct mb *m, int S, size_t push_words, size_t pull_words)
{
	int r, rc = psl_mem_alloc(PSL_MEM_CUDA, 0, push_words * 4 + 4, &m->din);
	if (!rc)
		rc = psl_mem_alloc(PSL_MEM_CUDA, 0, (size_t)S * pull_words * 4 + 4, &m->dout);
	if (rc)
		return rc;
	m->push.vals = m->din;
	m->push.mem = PSL_MEM_CUDA;
	for (r = 0; r < S; r++) {
		m->pull[r].vals = (char *)m->dout + (size_t)r * pull_words * 4;
		m->pull[r].mem = PSL_MEM_CUDA;
	}
	return 0;
}

/* A step's input (and, when checked, the poisoned output) to the GPU
 * (to_gpu), or the pulled output back: 0 or -errno. */
static int mb_copy(struct mb *m, int S, size_t push_words, size_t pull_words, bool to_gpu,
		   bool check)
{
	size_t out_len = (size_t)S * pull_words * 4;
	int rc = 0;
	if (!g_gpu)
		return 0;
	if (!to_gpu)
		return psl_mem_copy(m->out, PSL_MEM_HOST, -1, m->dout, PSL_MEM_CUDA, 0, out_len);
	rc = psl_mem_copy(m->din, PSL_MEM_CUDA, 0, m->in, PSL_MEM_HOST, -1, push_words * 4);
	if (!rc && check)
		rc = psl_mem_copy(m->dout, PSL_MEM_CUDA, 0, m->out, PSL_MEM_HOST, -1, out_len);
	return rc;
}

static int run_worker(void)
{
	struct psl_kv_worker *w;
	int S = psl_num_servers(), rank = psl_my_rank(), rc, r;
	size_t push_words = g_push_bytes / 4, pull_words = g_pull_bytes / 4, bad = 0;
	struct mb *mbs = calloc((size_t)g_mb, sizeof(*mbs));
	uint64_t *lat = calloc((size_t)g_steps + 1, sizeof(*lat)), t_start = 0, t_end;
	double send_sum = 0, call_sum = 0;
	long step, i, failed = 0, checked = 0;

	rc = psl_kv_worker_new(0, 0, PSL_UINT32, &w);
	if (rc || !mbs || !lat) {
		FAIL("psl_kv_worker_new: %s", psl_strerror(rc ? rc : -ENOMEM));
		free(mbs);
		free(lat);
		return 1;
	}
	for (i = 0; i < g_mb; i++) {
		struct mb *m = &mbs[i];
		m->in = malloc(push_words * 4 + 4);
		m->out = malloc((size_t)S * pull_words * 4 + 4);
		m->pull = calloc((size_t)S, sizeof(*m->pull));
		if (!m->in || !m->out || !m->pull) {
			FAIL("out of memory");
			goto done;
		}
		/* every worker uses the same keys (its data differs): a server
		 * that mixed two workers' batches would answer with the wrong
		 * worker's data */
		m->push = (struct psl_kv_tensor){.key = (uint64_t)i,
						 .vals = m->in, .len = push_words};
		for (r = 0; r < S; r++)
			m->pull[r] = (struct psl_kv_tensor){
				.key = (uint64_t)i,
				.vals = m->out + (size_t)r * pull_words, .len = pull_words};
		m->b.push = &m->push;
		m->b.npush = 1;
		m->b.pull = m->pull;
		m->b.npull = (size_t)S;
		if (g_gpu && (rc = mb_on_gpu(m, S, push_words, pull_words))) {
			FAIL("--mem gpu: the tensors: %s", psl_strerror(rc));
			goto done;
		}
		if (g_route_keys) {
			/* each server gets the input and is asked for its output
			 * under a key of its own range */
			m->pushes = calloc((size_t)S, sizeof(*m->pushes));
			if (!m->pushes) {
				FAIL("out of memory");
				goto done;
			}
			for (r = 0; r < S; r++) {
				uint64_t b, e;
				psl_server_key_range(r, &b, &e);
				m->pushes[r] = m->push;
				m->pushes[r].key = b + m->push.key;
				m->pull[r].key = b + m->push.key;
			}
			m->b.push = m->pushes;
			m->b.npush = (size_t)S;
		}
	}
	if (g_checks && rank == 0)
		worker_checks(w, &mbs[0], S);

	for (step = -g_warmup; step < g_steps; step++) {
		bool check = g_check_every > 0 && (step + g_warmup) % g_check_every == 0;
		uint64_t t0, t1;
		for (i = 0; i < g_mb; i++) {
			struct mb *m = &mbs[i];
			size_t j;
			m->seed = (uint32_t)((rank * 7919 + (step + g_warmup) * 131 + i) *
					     2654435761u);
			for (j = 0; j < push_words; j++)
				m->in[j] = input_word(m->seed, j);
			if (check)
				memset(m->out, 0xee, (size_t)S * pull_words * 4);
			if ((rc = mb_copy(m, S, push_words, pull_words, true, check))) {
				FAIL("step %ld: a copy to the GPU: %s", step, psl_strerror(rc));
				goto done;
			}
		}
		if (step == 0)
			t_start = now_ns();
		t0 = now_ns();
		for (i = 0; i < g_mb; i++) {
			mbs[i].ts = psl_kv_batch_pushpull(w, &mbs[i].b, CMD_NORMAL,
							  g_route_keys ? 0 : PSL_KV_BATCH_BROADCAST,
							  NULL, NULL);
			if (mbs[i].ts < 0) {
				FAIL("step %ld: psl_kv_batch_pushpull: %s", step,
				     psl_strerror(mbs[i].ts));
				goto done;
			}
			if (step >= 0)
				call_sum += (double)(now_ns() - mbs[i].b.times.submit_ns);
		}
		for (i = 0; i < g_mb; i++) {
			rc = psl_kv_wait(w, mbs[i].ts);
			if (rc) {
				failed++;
				FAIL("step %ld micro-batch %ld: %s", step, i, psl_strerror(rc));
				goto done;
			}
		}
		t1 = now_ns();
		if (step >= 0) {
			lat[step] = t1 - t0;
			for (i = 0; i < g_mb; i++)
				send_sum += (double)(mbs[i].b.times.sent_ns -
						     mbs[i].b.times.submit_ns);
		}
		if (check) {
			checked++;
			for (i = 0; i < g_mb; i++) {
				if ((rc = mb_copy(&mbs[i], S, push_words, pull_words, false, true))) {
					FAIL("step %ld: a copy from the GPU: %s", step,
					     psl_strerror(rc));
					goto done;
				}
				bad += check_mb(&mbs[i], S, pull_words);
			}
		}
	}
	t_end = now_ns();
	qsort(lat, (size_t)g_steps, sizeof(*lat), cmp_u64);
	{
		double secs = (double)(t_end - t_start) / 1e9;
		double p50 = lat[g_steps / 2] / 1e3, p90 = lat[g_steps * 90 / 100] / 1e3;
		double p99 = lat[g_steps * 99 / 100] / 1e3, mx = lat[g_steps - 1] / 1e3;
		double sps = secs > 0 ? (double)g_steps / secs : 0;
		if (bad)
			FAIL("%zu words pulled back wrong", bad);
		printf("afbench worker %d: van %s, %d server(s), %ld micro-batches x (%zu B push, "
		       "%zu B pull per server) in %s memory, %ld steps: step latency p50 %.1f us, "
		       "p90 %.1f us, p99 %.1f us, max %.1f us; %.1f steps/s; data %s (%ld steps "
		       "checked)\n",
		       rank, psl_van_name(), S, g_mb, g_push_bytes, g_pull_bytes,
		       g_gpu ? "GPU" : "host", g_steps, p50, p90,
		       p99, mx, sps, bad ? "WRONG" : "OK", checked);
		if (g_json)
			printf("{\"tool\":\"pslite-afbench\",\"van\":\"%s\",\"mem\":\"%s\","
			       "\"worker\":%d,"
			       "\"workers\":%d,\"servers\":%d,\"micro_batches\":%ld,"
			       "\"push_bytes\":%zu,\"pull_bytes\":%zu,\"steps\":%ld,"
			       "\"p50_us\":%.2f,\"p90_us\":%.2f,\"p99_us\":%.2f,\"max_us\":%.2f,"
			       "\"steps_per_s\":%.2f,\"mean_call_us\":%.2f,\"mean_send_us\":%.2f,"
			       "\"steps_checked\":%ld,"
			       "\"bad_words\":%zu,\"failed\":%ld}\n",
			       psl_van_name(), g_gpu ? "gpu" : "host", rank, psl_num_workers(), S,
			       g_mb, g_push_bytes,
			       g_pull_bytes, g_steps, p50, p90, p99, mx, sps,
			       call_sum / (double)g_steps / (double)g_mb / 1e3,
			       send_sum / (double)g_steps / (double)g_mb / 1e3, checked, bad,
			       failed);
	}
done:
	psl_kv_worker_free(w);
	for (i = 0; i < g_mb; i++) {
		free(mbs[i].in);
		free(mbs[i].out);
		free(mbs[i].pull);
		free(mbs[i].pushes);
		psl_mem_free(PSL_MEM_CUDA, 0, mbs[i].din);
		psl_mem_free(PSL_MEM_CUDA, 0, mbs[i].dout);
	}
	free(mbs);
	free(lat);
	return g_fail;
}

/* ------------------------------------------------------------------ main -- */

static int usage(void)
{
	fprintf(stderr,
		"usage: pslite-afbench [--steps N] [--warmup N] [--micro-batches N] "
		"[--push-bytes B] [--pull-bytes B] [--serve loop|callback] [--route broadcast|keys] "
		"[--check-every N] [--mem host|gpu] "
		"[--checks] [--json] [--quiet]\n"
		"(run under pslite-run or with ps-lite's DMLC_* environment)\n");
	return 2;
}

static int num_arg(const char *s, long min, long *out)
{
	char *end;
	long v;
	errno = 0;
	v = strtol(s, &end, 10);
	if (errno || *end || end == s || v < min)
		return -1;
	*out = v;
	return 0;
}

int main(int argc, char **argv)
{
	int i, rc, my_rank;
	long v;
	const char *role;

	setvbuf(stdout, NULL, _IOLBF, 0);
	for (i = 1; i < argc; i++) {
		const char *a = argv[i], *n = i + 1 < argc ? argv[i + 1] : NULL;
		if (!strcmp(a, "--json")) {
			g_json = true;
		} else if (!strcmp(a, "--quiet")) {
			g_quiet = true;
		} else if (!strcmp(a, "--checks")) {
			g_checks = true;
		} else if (!n) {
			return usage();
		} else if (!strcmp(a, "--route")) {
			if (strcmp(n, "keys") && strcmp(n, "broadcast"))
				return usage();
			g_route_keys = !strcmp(n, "keys");
			i++;
		} else if (!strcmp(a, "--mem")) {
			if (strcmp(n, "host") && strcmp(n, "gpu"))
				return usage();
			g_gpu = !strcmp(n, "gpu");
			i++;
		} else if (!strcmp(a, "--serve")) {
			if (strcmp(n, "loop") && strcmp(n, "callback"))
				return usage();
			g_loop = !strcmp(n, "loop");
			i++;
		} else if (!strcmp(a, "--steps") && !num_arg(n, 1, &v)) {
			g_steps = v, i++;
		} else if (!strcmp(a, "--warmup") && !num_arg(n, 0, &v)) {
			g_warmup = v, i++;
		} else if (!strcmp(a, "--micro-batches") && !num_arg(n, 1, &v)) {
			g_mb = v, i++;
		} else if (!strcmp(a, "--check-every") && !num_arg(n, 0, &v)) {
			g_check_every = v, i++;
		} else if (!strcmp(a, "--push-bytes") && !num_arg(n, 4, &v) && v % 4 == 0) {
			g_push_bytes = (size_t)v, i++;
		} else if (!strcmp(a, "--pull-bytes") && !num_arg(n, 4, &v) && v % 4 == 0) {
			g_pull_bytes = (size_t)v, i++;
		} else {
			fprintf(stderr, "pslite-afbench: bad option %s %s (byte counts are "
					"multiples of 4)\n",
				a, n);
			return usage();
		}
	}
	role = getenv("DMLC_ROLE");
	rc = psl_start(0, true);
	my_rank = psl_my_rank();
	if (rc) {
		fprintf(stderr, "pslite-afbench (%s): cannot start: %s\n", role ? role : "?",
			psl_strerror(rc));
		psl_finalize(0, false);
		return 2;
	}
	if (psl_is_server()) {
		rc = run_server();
	} else {
		if (psl_is_worker())
			run_worker();
		rc = psl_finalize(0, true);
	}
	if (rc)
		FAIL("psl_finalize: %s", psl_strerror(rc));
	printf("afbench %s %d: %s\n", role ? role : "?", my_rank < 0 ? 0 : my_rank,
	       g_fail ? "FAILED" : "OK");
	return g_fail ? 1 : 0;
}
