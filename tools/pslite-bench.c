/*
 * pslite-bench: ps-lite's tests/test_benchmark, on pslite.
 *
 * The same binary runs as scheduler, server or worker (DMLC_ROLE), with the
 * same arguments:  pslite-bench [bytes per key] [repeat] [mode]
 *   mode 0 push then pull, 1 push-pull, 2 push only, 3 pull only,
 *   4 push-pull as one fused request (psl_kv_zpushpull)
 * and environment: NUM_KEY_PER_SERVER (40), LOG_DURATION (10 iterations per
 * line), TOTAL_DURATION (iterations in all), BENCHMARK_NTHREAD (1).
 * It prints ps-lite's "Application goodput: X Gbps" lines, with latency
 * percentiles, and checks the data it pulls back.
 *
 * PSLITE_BENCH_ACCEPT_ONES=1 also accepts the test data of ps-lite's C++
 * test_benchmark, for jobs that mix in C++ nodes (see explain()).
 * ENABLE_RECV_BUFFER=1 takes part in test_benchmark's worker+server barrier.
 *
 * Options (after or between the numbers):
 *   --seconds S   stop after S seconds of measuring (instead of TOTAL_DURATION)
 *   --json        print one machine-readable summary line at the end
 *   --quiet       print only the summary lines
 *   --idle S      start, stay idle for S seconds, finalize (to measure what
 *                 idle nodes cost)
 *   --mem M       where the data lives, as ps-lite's tests/test.sh names it:
 *                 cpu2cpu (default), cpu2gpu (the servers' store on a GPU),
 *                 gpu2gpu (workers' buffers and servers' store on GPUs),
 *                 gpu2cpu (workers' buffers on a GPU); ps-lite's
 *                 TEST_NUM_GPU_WORKER / TEST_NUM_GPU_SERVER > 0 say the same
 *   --gpu N       the CUDA device of the GPU side (default 0)
 *   --stream S    the CUDA stream GPU buffers are ordered with: legacy (the
 *                 default stream, pslite's default), per-thread, or none
 *                 (nothing waited for: StepMesh's need_event = false)
 */
#define _GNU_SOURCE 1
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include <pslite.h>

enum { PUSH_THEN_PULL = 0, PUSH_PULL = 1, PUSH_ONLY = 2, PULL_ONLY = 3, FUSED_PUSHPULL = 4 };
static const char *const mode_names[] = {"push_then_pull", "push_pull", "push_only",
					 "pull_only", "fused_pushpull"};

static size_t g_len = 1024000;
static int g_repeat = 10;
static int g_mode = PUSH_PULL;
static double g_seconds = 0;
static bool g_json, g_quiet;
static double g_idle;
static int g_keys_per_server = 40;
static long g_log_every = 10;
static long g_total = 2000000000;
static const char *g_mem_name = "cpu2cpu";
static bool g_wgpu, g_sgpu; /* the worker's, the server's data on a GPU */
static int g_gpu;	    /* its device */
static void *g_stream = PSL_CUDA_STREAM_LEGACY; /* --stream */

/* One line of /proc/self/status in KiB ("VmRSS", "VmHWM"), 0 if not there.
 * VmHWM is computed there as at least the VmRSS the kernel reads at the same
 * moment, so a peak never shows below a later current size (getrusage's
 * ru_maxrss and /proc/self/statm read the counters differently and could). */
static long status_kb(const char *field)
{
	char line[256];
	size_t n = strlen(field);
	long kb = 0;
	FILE *f = fopen("/proc/self/status", "r");
	if (!f)
		return 0;
	while (fgets(line, sizeof line, f))
		if (!strncmp(line, field, n) && line[n] == ':') {
			kb = strtol(line + n + 1, NULL, 10);
			break;
		}
	fclose(f);
	return kb;
}

/* resident set size of this process, KiB */
static long rss_kb(void)
{
	return status_kb("VmRSS");
}

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static long env_long(const char *name, long def)
{
	const char *v = getenv(name);
	char *end;
	long x;
	if (!v || !*v)
		return def;
	errno = 0;
	x = strtol(v, &end, 10);
	if (errno || *end || x <= 0) {
		fprintf(stderr, "pslite-bench: %s=%s: expected a positive integer\n", name, v);
		exit(2);
	}
	return x;
}

/* The byte every worker writes at offset i of key k: the server and the
 * worker both know it, so pushes and pulls can be checked. */
static inline unsigned char pattern(uint64_t k, size_t i)
{
	return (unsigned char)((k * 131u + i * 7u + (i >> 12)) & 0xff);
}

static void fill(unsigned char *p, uint64_t k, size_t len)
{
	size_t i;
	for (i = 0; i < len; i++)
		p[i] = pattern(k, i);
}

/* Compares p with the reference ref (what was pushed): fully, or (sampled)
 * the first and last 256 bytes and one 4 KiB window that moves with `turn`.
 * Returns the number of wrong bytes (an upper bound when sampled). */
static size_t check(const unsigned char *p, const unsigned char *ref, size_t len, bool full,
		    unsigned turn)
{
	size_t off;
	if (full || len <= 8192)
		return memcmp(p, ref, len) ? len : 0;
	off = ((size_t)turn * 4099u * 4096u) % (len - 4096);
	if (memcmp(p, ref, 256) || memcmp(p + len - 256, ref + len - 256, 256) ||
	    memcmp(p + off, ref + off, 4096))
		return 4608;
	return 0;
}

/* PSLITE_BENCH_ACCEPT_ONES=1, for jobs that mix in C++ ps-lite nodes running
 * its tests/test_benchmark. That program is no data source to check against:
 * its worker pushes buffers memset to 0x01, and its server memsets its store
 * to 0x01 and never stores pushes; its push-pull loop also hands ZPull the
 * address of a loop-local SArray, so a C++ worker copies a pull answer into
 * whichever key's buffer that stack slot holds when the answer arrives,
 * possibly while a zero-copy push of that very buffer is still being sent.
 * Data that differs from what check() expects is therefore also accepted
 * when it is all 0x01 bytes, another key's intact pattern, or long runs (16
 * bytes or more) each of which is 0x01 bytes or one key's pattern at the
 * right offsets. Anything else is wrong, and the first few such messages are
 * described. */
static bool g_accept_ones;
static int g_total_keys;
static atomic_ulong g_ones_seen, g_other_key_seen, g_torn_seen;
static atomic_int g_described;

#define MIN_RUN 16 /* shorter runs of a pattern happen by chance */
#define MAX_RUNS 64

/* Length of the run of p[from, to) that source src (-1: 0x01 bytes, else a
 * key's pattern) explains. */
static size_t run_of(const unsigned char *p, size_t from, size_t to, long src)
{
	size_t i;
	for (i = from; i < to; i++)
		if (p[i] != (src < 0 ? 1 : pattern((uint64_t)src, i)))
			break;
	return i - from;
}

/* Splits p[from, to) into the longest runs of single sources. Returns the
 * number of runs (> MAX_RUNS: not explained); *src0 is the source of every
 * run if they all have the same (set it to -2 first), else -3. */
static int segment(const unsigned char *p, size_t from, size_t to, long *src0, char *desc,
		   size_t dlen)
{
	size_t pos = from;
	int runs = 0, n;
	while (pos < to) {
		long s, best_src = -2;
		size_t best = 0;
		for (s = -1; s < g_total_keys; s++) {
			size_t r = run_of(p, pos, to, s);
			if (r > best) {
				best = r;
				best_src = s;
			}
		}
		if (desc && dlen > 1) {
			if (best_src == -2)
				n = snprintf(desc, dlen, " [%zu]=0x%02x", pos, p[pos]);
			else
				n = snprintf(desc, dlen, " [%zu,%zu)=%s%ld", pos, pos + best,
					     best_src < 0 ? "ones" : "key ", best_src < 0 ? 0 : best_src);
			if (n > 0 && (size_t)n < dlen) {
				desc += n;
				dlen -= (size_t)n;
			}
		}
		if (best_src == -2 || (best < MIN_RUN && pos + best < to))
			return MAX_RUNS + 1;
		if (*src0 == -2)
			*src0 = best_src;
		else if (*src0 != best_src)
			*src0 = -3;
		runs++;
		pos += best;
	}
	return runs;
}

/* For data of key k that check() rejected: 0 if PSLITE_BENCH_ACCEPT_ONES is
 * set and the data is explained as above (counted), else bad. Looks at the
 * same bytes check() did. */
static size_t explain(const unsigned char *p, uint64_t k, size_t len, bool full, unsigned turn,
		      size_t bad)
{
	size_t win[3][2];
	int nw, w, runs = 0;
	long s0 = -2;
	char desc[256] = "";

	if (!bad || !g_accept_ones)
		return bad;
	if (full || len <= 8192) {
		win[0][0] = 0, win[0][1] = len;
		nw = 1;
	} else {
		size_t off = ((size_t)turn * 4099u * 4096u) % (len - 4096);
		win[0][0] = 0, win[0][1] = 256;
		win[1][0] = off, win[1][1] = off + 4096;
		win[2][0] = len - 256, win[2][1] = len;
		nw = 3;
	}
	for (w = 0; w < nw && runs <= MAX_RUNS; w++) {
		int r = segment(p, win[w][0], win[w][1], &s0, NULL, 0);
		runs = r > MAX_RUNS ? r : runs + r;
	}
	if (runs <= MAX_RUNS) {
		if (s0 == -1)
			atomic_fetch_add(&g_ones_seen, 1);
		else if (s0 >= 0 && (uint64_t)s0 == k)
			; /* its own pattern: the reference it was compared with differed */
		else if (s0 >= 0)
			atomic_fetch_add(&g_other_key_seen, 1);
		else
			atomic_fetch_add(&g_torn_seen, 1);
		return 0;
	}
	if (atomic_fetch_add(&g_described, 1) < 3) {
		for (w = 0; w < nw; w++) {
			size_t used = strlen(desc);
			segment(p, win[w][0], win[w][1], &s0, desc + used, sizeof(desc) - used);
		}
		fprintf(stderr, "pslite-bench: data for key %" PRIu64 " (%zu bytes) is not explained:%s\n",
			k, len, desc);
	}
	return bad;
}

/* ---------------------------------------------------------------- server -- */

struct store {
	uint64_t key;
	unsigned char *vals; /* what the first push brought (the reference) */
	void *dvals;	     /* --mem *2gpu: the store itself, on the GPU */
	int len;
	int reading; /* z-form responses from dvals not yet done (g_store_mu) */
};

static struct store *g_store;
static int g_nstore;
static uint64_t g_range_begin;
static atomic_ulong g_server_bad;
/* a push rewrites dvals only once the responses that read it are done */
static pthread_mutex_t g_store_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_store_cv = PTHREAD_COND_INITIALIZER;

static void response_read(void *arg)
{
	struct store *st = arg;
	pthread_mutex_lock(&g_store_mu);
	if (--st->reading == 0)
		pthread_cond_broadcast(&g_store_cv);
	pthread_mutex_unlock(&g_store_mu);
}

/* --mem *2gpu: a push's values into the store on the GPU, once no
 * response reads it (the z-form's buffer is its own until done). */
static int store_rewrite(struct store *st, const void *vals, size_t len)
{
	pthread_mutex_lock(&g_store_mu);
	while (st->reading)
		pthread_cond_wait(&g_store_cv, &g_store_mu);
	pthread_mutex_unlock(&g_store_mu);
	return psl_mem_copy(st->dvals, PSL_MEM_CUDA, g_gpu, vals, PSL_MEM_HOST, -1, len);
}

static void server_handler(struct psl_kv_server *s, struct psl_kv_request *req, void *arg)
{
	struct psl_kv res = {0};
	uint64_t key;
	long idx;
	(void)s;
	(void)arg;

	if (req->kv.num_keys != 1) {
		psl_kv_respond_error(req, -EINVAL);
		return;
	}
	key = req->kv.keys[0];
	idx = (long)(key - g_range_begin);
	if (idx < 0 || idx >= g_nstore) {
		fprintf(stderr, "pslite-bench server: key %" PRIu64 " is not one of mine\n", key);
		psl_kv_respond_error(req, -EINVAL);
		return;
	}
	if (req->meta.push) {
		struct store *st = &g_store[idx];
		if (!st->vals) {
			st->key = key;
			st->len = (int)req->kv.num_vals;
			if (posix_memalign((void **)&st->vals, 4096, req->kv.num_vals + 1)) {
				psl_kv_respond_error(req, -ENOMEM);
				return;
			}
			memcpy(st->vals, req->kv.vals, req->kv.num_vals);
			if (g_sgpu && (psl_mem_alloc(PSL_MEM_CUDA, g_gpu, req->kv.num_vals,
						     &st->dvals) ||
				       psl_mem_copy(st->dvals, PSL_MEM_CUDA, g_gpu, st->vals,
						    PSL_MEM_HOST, -1, req->kv.num_vals))) {
				psl_kv_respond_error(req, -ENOMEM);
				return;
			}
			/* the first push must carry the pattern every worker pushes */
			{
				size_t i;
				for (i = 0; i < req->kv.num_vals; i++)
					if (st->vals[i] != pattern((uint64_t)idx, i))
						break;
				if (i < req->kv.num_vals &&
				    explain(st->vals, (uint64_t)idx, req->kv.num_vals, true, 0,
					    req->kv.num_vals))
					atomic_fetch_add(&g_server_bad, 1);
			}
		} else if ((size_t)st->len != req->kv.num_vals ||
			   explain(req->kv.vals, (uint64_t)idx, req->kv.num_vals, false,
				   (unsigned)req->meta.timestamp,
				   check(req->kv.vals, st->vals, req->kv.num_vals, false,
					 (unsigned)req->meta.timestamp))) {
			atomic_fetch_add(&g_server_bad, 1);
		} else if (g_sgpu) { /* a GPU server keeps what it received there */
			int rc = store_rewrite(st, req->kv.vals, req->kv.num_vals);
			if (rc) {
				psl_kv_respond_error(req, rc);
				return;
			}
		}
		psl_kv_respond(req, NULL);
		return;
	}
	if (!g_store[idx].vals) {
		psl_kv_respond_error(req, -ENOENT);
		return;
	}
	res.keys = &g_store[idx].key;
	res.num_keys = 1;
	res.vals = g_store[idx].vals;
	res.num_vals = (size_t)g_store[idx].len;
	res.lens = &g_store[idx].len;
	if (!g_sgpu) {
		psl_kv_zrespond(req, &res, NULL, NULL);
		return;
	}
	res.vals = g_store[idx].dvals;
	res.mem = PSL_MEM_CUDA;
	res.dev = g_gpu;
	pthread_mutex_lock(&g_store_mu);
	g_store[idx].reading++;
	pthread_mutex_unlock(&g_store_mu);
	psl_kv_zrespond(req, &res, response_read, &g_store[idx]); /* (done even if it fails) */
}

/* ---------------------------------------------------------------- worker -- */

/* --mem gpu2*: a worker thread's pull buffers are one GPU block, read back
 * with one copy a turn, when they take at most BATCH_MAX bytes */
#define STRIDE ((g_len + 255) & ~(size_t)255)
#define BATCH_MAX ((size_t)1 << 20)

/* Latency histogram: log-spaced buckets, 1% apart, from 100 ns to about
 * 1000 s, so that a run of any length keeps the same small footprint. */
#define LAT_MIN 1e-7
#define LAT_STEP 1.01
#define LAT_BUCKETS 2320
struct lat {
	uint64_t b[LAT_BUCKETS];
	uint64_t n;
};

static void lat_add(struct lat *l, double x)
{
	int i = x <= LAT_MIN ? 0 : (int)(log(x / LAT_MIN) / log(LAT_STEP));
	if (i >= LAT_BUCKETS)
		i = LAT_BUCKETS - 1;
	l->b[i]++;
	l->n++;
}

static void lat_merge(struct lat *dst, const struct lat *src)
{
	int i;
	for (i = 0; i < LAT_BUCKETS; i++)
		dst->b[i] += src->b[i];
	dst->n += src->n;
}

static double pct(const struct lat *l, double p)
{
	uint64_t want, seen = 0;
	int i;
	if (!l->n)
		return 0;
	want = (uint64_t)ceil(p * (double)l->n);
	if (want < 1)
		want = 1;
	for (i = 0; i < LAT_BUCKETS; i++) {
		seen += l->b[i];
		if (seen >= want) /* the bucket's middle */
			return LAT_MIN * pow(LAT_STEP, i + 0.5);
	}
	return LAT_MIN * pow(LAT_STEP, LAT_BUCKETS);
}

struct slot {
	double t0;
	atomic_int done;
	atomic_int status;
	double lat;
};

static void on_done(int ts, int status, void *arg)
{
	struct slot *s = arg;
	(void)ts;
	s->lat = now_s() - s->t0;
	atomic_store(&s->status, status);
	atomic_store(&s->done, 1);
}

struct wctx {
	int tid;
	struct psl_kv_worker *kv;
	int nkeys;
	uint64_t *keys;
	unsigned char **vals; /* pushed */
	unsigned char **outs; /* pulled into */
	void **dvals, **douts; /* --mem gpu2*: the same on the GPU (vals, outs:
				* the host reference and where pulls are read
				* back for checking) */
	/* --mem gpu2* with at most BATCH_MAX bytes of pull buffers: douts are
	 * one GPU block (dblock) and the pulls of one turn are read back with
	 * one copy into rb, then checked (checkme: the keys pulled this turn) */
	void *dblock;
	unsigned char *rb;
	bool *checkme;
	double check_s; /* time spent reading pulls back from the GPU and checking */
	double issue_s; /* time the thread spent in the calls that issue a turn */
	long turns;
	int *lens;
	int *outlens;
	struct psl_kv_out *out;
	struct slot *slots;
	int *ts;
	/* results */
	double goodput_sum;
	long intervals;
	long rss_first_kb; /* after the first interval */
	long rss_last_kb;
	double gbps_total;
	struct lat *all;
	size_t bad_bytes;
	long errors;
	long requests;
	bool cut_off; /* a request failed because a node is lost: measuring more
		       * would count requests that fail at once */
	int rc;
};

static void reset_outs(struct wctx *w, int k)
{
	w->out[k].vals = w->outs[k];
	if (g_wgpu) {
		w->out[k].vals = w->douts[k];
		w->out[k].mem = PSL_MEM_CUDA;
		w->out[k].dev = g_gpu;
	}
	w->out[k].cap = g_len;
	w->out[k].num_vals = 0;
	w->out[k].lens = &w->outlens[k];
	w->outlens[k] = -1;
}

static int issue(struct wctx *w, int k, int op, int slot)
{
	struct psl_kv kv = {&w->keys[k],
			    1,
			    g_wgpu ? w->dvals[k] : w->vals[k],
			    g_len,
			    &w->lens[k],
			    g_wgpu ? PSL_MEM_CUDA : PSL_MEM_HOST,
			    g_gpu};
	struct slot *s = &w->slots[slot];
	s->t0 = now_s();
	atomic_store(&s->done, 0);
	switch (op) {
	case PUSH_ONLY:
		return psl_kv_zpush(w->kv, &kv, 0, on_done, s);
	case PULL_ONLY:
		reset_outs(w, k);
		return psl_kv_zpull(w->kv, &w->keys[k], 1, &w->out[k], 0, on_done, s);
	default:
		reset_outs(w, k);
		return psl_kv_zpushpull(w->kv, &kv, &w->out[k], 0, on_done, s);
	}
}

/* The errors of a lost node (its requests fail at once from then on). */
static bool node_gone(int err)
{
	return err == -ENOLINK || err == -EHOSTDOWN || err == -ECONNRESET || err == -ETIMEDOUT;
}

/* --mem gpu2*: copies what check() looks at of key k's pull buffer from the
 * GPU into outs[k] (all of it, or check's samples). */
static int read_back(struct wctx *w, int k, bool full, unsigned turn)
{
	size_t off, win[3][2];
	int i, n = 0, rc = 0;
	if (full || g_len <= 8192) {
		win[n][0] = 0;
		win[n++][1] = g_len;
	} else {
		off = ((size_t)turn * 4099u * 4096u) % (g_len - 4096);
		win[n][0] = 0, win[n++][1] = 256;
		win[n][0] = g_len - 256, win[n++][1] = 256;
		win[n][0] = off, win[n++][1] = 4096;
	}
	for (i = 0; i < n && !rc; i++)
		rc = psl_mem_copy(w->outs[k] + win[i][0], PSL_MEM_HOST, -1,
				  (char *)w->douts[k] + win[i][0], PSL_MEM_CUDA, g_gpu, win[i][1]);
	if (rc && w->errors < 5)
		fprintf(stderr, "[%d] key %d: cannot read the pull back from the GPU: %s\n", w->tid,
			k, psl_strerror(rc));
	return rc;
}

/* Where verify() finds a pulled key's data: the host buffer itself; outs[k]
 * holding check()'s samples read back from the GPU; the whole buffer read
 * back. */
enum from { FROM_HOST, FROM_GPU_SAMPLES, FROM_GPU_WHOLE };

/* Checks key k's pulled data, at got. */
static void verify(struct wctx *w, int k, const unsigned char *got, bool full, unsigned turn,
		   enum from from)
{
	size_t bad = w->out[k].num_vals != g_len || w->outlens[k] != (int)g_len
			     ? g_len
			     : check(got, w->vals[k], g_len, full, turn);
	/* the whole buffer, to say what is wrong */
	if (bad && from == FROM_GPU_SAMPLES && !full && read_back(w, k, true, turn) == 0)
		full = true;
	else if (bad && from == FROM_GPU_WHOLE)
		full = true;
	if (bad)
		bad = explain(got, (uint64_t)k, g_len, full, turn, bad);
	if (bad && w->bad_bytes == 0)
		fprintf(stderr, "[%d] key %d: pulled data differs from what was pushed\n", w->tid,
			k);
	w->bad_bytes += bad;
}

/* Waits for request ts in slot; records latency, checks pulled data. */
static void finish(struct wctx *w, int k, int ts, int slot, bool pulled, bool full,
		   unsigned turn, struct lat *interval)
{
	struct slot *s = &w->slots[slot];
	int st;
	if (ts < 0) {
		w->errors++;
		w->cut_off |= node_gone(ts);
		return;
	}
	st = psl_kv_wait(w->kv, ts);
	w->requests++;
	if (st || atomic_load(&s->status)) {
		w->cut_off |= node_gone(st) || node_gone(atomic_load(&s->status));
		if (w->errors++ < 5)
			fprintf(stderr, "[%d] request for key %d failed: %s\n", w->tid, k,
				psl_strerror(st ? st : atomic_load(&s->status)));
		return;
	}
	lat_add(interval, s->lat);
	lat_add(w->all, s->lat);
	if (pulled && w->rb && !full) {
		w->checkme[k] = true; /* read back with the turn's other pulls */
	} else if (pulled) {
		double t = now_s();
		if (g_wgpu && read_back(w, k, full, turn))
			w->errors++;
		else
			verify(w, k, w->outs[k], full, turn, g_wgpu ? FROM_GPU_SAMPLES : FROM_HOST);
		w->check_s += now_s() - t;
	}
}

/* --mem gpu2* with one block of pull buffers: the turn's pulls read back
 * from the GPU with one copy, then checked. */
static void verify_turn(struct wctx *w, unsigned turn)
{
	double t = now_s();
	bool any = false;
	int k, rc;
	for (k = 0; k < w->nkeys; k++)
		any |= w->checkme[k];
	if (!any)
		return;
	rc = psl_mem_copy(w->rb, PSL_MEM_HOST, -1, w->dblock, PSL_MEM_CUDA, g_gpu,
			  (size_t)w->nkeys * STRIDE);
	if (rc && w->errors < 5)
		fprintf(stderr, "[%d] cannot read the pulls back from the GPU: %s\n", w->tid,
			psl_strerror(rc));
	for (k = 0; k < w->nkeys; k++) {
		if (w->checkme[k] && rc)
			w->errors++;
		else if (w->checkme[k])
			verify(w, k, w->rb + (size_t)k * STRIDE, false, turn, FROM_GPU_WHOLE);
		w->checkme[k] = false;
	}
	w->check_s += now_s() - t;
}

static void report(struct wctx *w, double secs, long iters, struct lat *l)
{
	double gbps = 8.0 * (double)g_len * w->nkeys * (double)iters / (secs * 1e9);
	w->goodput_sum += gbps;
	if (!w->intervals++)
		w->rss_first_kb = rss_kb();
	w->rss_last_kb = rss_kb();
	if (!g_quiet)
		printf("[%d]\tApplication goodput: %.4f Gbps.\tAvg latency = %.1f ns per key\t"
		       "p50 = %.1f us\tp99 = %.1f us\tp999 = %.1f us\n",
		       w->tid, gbps, secs * 1e9 / (double)iters / w->nkeys, pct(l, 0.5) * 1e6,
		       pct(l, 0.99) * 1e6, pct(l, 0.999) * 1e6);
	fflush(stdout);
	memset(l, 0, sizeof(*l));
}

static void run_loop(struct wctx *w)
{
	struct lat *ip = calloc(1, sizeof(struct lat)), dummy, *interval = ip ? ip : &dummy;
	double start = now_s(), t0 = start;
	long cnt = 0, total = 0;
	unsigned turn = 0;
	int k;

	while (total < g_total) {
		double ti = now_s();
		for (k = 0; k < w->nkeys; k++) {
			switch (g_mode) {
			case PUSH_PULL: /* ZPush then ZPull, as test_benchmark does */
				w->ts[2 * k] = issue(w, k, PUSH_ONLY, 2 * k);
				w->ts[2 * k + 1] = issue(w, k, PULL_ONLY, 2 * k + 1);
				break;
			case PUSH_ONLY:
			case PULL_ONLY:
			case FUSED_PUSHPULL:
				w->ts[k] = issue(w, k, g_mode, k);
				break;
			}
		}
		w->issue_s += now_s() - ti;
		for (k = 0; k < w->nkeys; k++) {
			if (g_mode == PUSH_PULL) {
				finish(w, k, w->ts[2 * k], 2 * k, false, false, turn, interval);
				finish(w, k, w->ts[2 * k + 1], 2 * k + 1, true, false, turn,
				       interval);
			} else {
				finish(w, k, w->ts[k], k, g_mode != PUSH_ONLY, false, turn,
				       interval);
			}
		}
		if (w->rb)
			verify_turn(w, turn);
		if (w->cut_off) { /* the job cannot go on: no point in measuring */
			fprintf(stderr, "[%d] a node of the job is lost: stopping\n", w->tid);
			break;
		}
		turn++;
		cnt++;
		total++;
		if (cnt % g_log_every == 0 || (g_seconds > 0 && now_s() - start >= g_seconds)) {
			double t1 = now_s();
			report(w, t1 - t0, cnt, interval);
			w->gbps_total = 8.0 * (double)g_len * w->nkeys * (double)total /
					((t1 - start) * 1e9);
			cnt = 0;
			t0 = now_s();
			if (g_seconds > 0 && t1 - start >= g_seconds)
				break;
		}
	}
	w->turns = total;
	free(ip);
}

static void run_push_then_pull(struct wctx *w)
{
	int S = psl_num_servers(), i, s;
	double push_ns = 0, pull_ns = 0;
	struct lat *l = calloc(1, sizeof(*l));
	if (!l)
		return;
	for (i = 0; i < g_repeat && !w->cut_off; i++) {
		double t = now_s();
		for (s = 0; s < S && s < w->nkeys; s++)
			finish(w, s, issue(w, s, PUSH_ONLY, 0), 0, false, false, 0, l);
		push_ns += (now_s() - t) * 1e9;
	}
	printf("push %zu bytes to each server, repeat=%d, total_time=%.3fms\n", g_len, g_repeat,
	       push_ns / 1e6);
	for (i = 0; i < g_repeat && !w->cut_off; i++) {
		double t = now_s();
		for (s = 0; s < S && s < w->nkeys; s++)
			finish(w, s, issue(w, s, PULL_ONLY, 0), 0, true, true, 0, l);
		pull_ns += (now_s() - t) * 1e9;
	}
	printf("pull %zu bytes to each server, repeat=%d, total_time=%.3fms\n", g_len, g_repeat,
	       pull_ns / 1e6);
	free(l);
}

/* The buffers a worker thread lent the van (zero-copy): freed once its
 * requests completed (psl_kv_worker_free), when no van holds them. */
static void worker_free_buffers(struct wctx *w)
{
	int k;
	for (k = 0; w->vals && w->outs && k < w->nkeys; k++) {
		free(w->vals[k]);
		free(w->outs[k]);
		if (w->dvals)
			psl_mem_free(PSL_MEM_CUDA, g_gpu, w->dvals[k]);
		if (w->douts && !w->dblock)
			psl_mem_free(PSL_MEM_CUDA, g_gpu, w->douts[k]);
	}
	if (w->dblock)
		psl_mem_free(PSL_MEM_CUDA, g_gpu, w->dblock);
	free(w->rb);
	free(w->checkme);
	free(w->dvals);
	free(w->douts);
	free(w->keys);
	free(w->lens);
	free(w->vals);
	free(w->outs);
	free(w->outlens);
	free(w->out);
}

/* --mem gpu2*: key k's pull buffer on the GPU: in the thread's block of
 * them, allocated with the first, where they all fit in BATCH_MAX bytes */
static int alloc_dout(struct wctx *w, int k)
{
	size_t all = (size_t)w->nkeys * STRIDE;
	int rc;
	if (all > BATCH_MAX)
		return psl_mem_alloc(PSL_MEM_CUDA, g_gpu, g_len, &w->douts[k]);
	if (!w->dblock) {
		if ((rc = psl_mem_alloc(PSL_MEM_CUDA, g_gpu, all, &w->dblock)))
			return rc;
		w->rb = malloc(all);
		w->checkme = calloc((size_t)w->nkeys, sizeof(bool));
		if (!w->rb || !w->checkme)
			return -ENOMEM;
	}
	w->douts[k] = (char *)w->dblock + (size_t)k * STRIDE;
	return 0;
}

static void *worker_main(void *arg)
{
	struct wctx *w = arg;
	int S = psl_num_servers(), k, rc;
	struct lat *warm = calloc(1, sizeof(*warm));

	rc = psl_kv_worker_new(0, w->tid, PSL_BYTES, &w->kv);
	if (rc) {
		fprintf(stderr, "pslite-bench: cannot create the KV worker: %s\n", psl_strerror(rc));
		w->rc = 2;
		return NULL;
	}
	psl_kv_worker_set_cuda_stream(w->kv, g_stream);
	w->nkeys = S * g_keys_per_server;
	w->keys = calloc((size_t)w->nkeys, sizeof(uint64_t));
	w->vals = calloc((size_t)w->nkeys, sizeof(void *));
	w->outs = calloc((size_t)w->nkeys, sizeof(void *));
	w->lens = calloc((size_t)w->nkeys, sizeof(int));
	w->outlens = calloc((size_t)w->nkeys, sizeof(int));
	w->out = calloc((size_t)w->nkeys, sizeof(*w->out));
	w->slots = calloc(2 * (size_t)w->nkeys, sizeof(*w->slots));
	w->ts = calloc(2 * (size_t)w->nkeys, sizeof(int));
	w->all = calloc(1, sizeof(*w->all));
	if (!w->keys || !w->vals || !w->outs || !w->lens || !w->outlens || !w->out || !w->slots ||
	    !w->ts || !warm || !w->all) {
		w->rc = 2;
		goto out;
	}
	for (k = 0; k < w->nkeys; k++) {
		uint64_t b, e;
		/* key k lives on server k % S, as test_benchmark places it */
		psl_server_key_range(k % S, &b, &e);
		w->keys[k] = b + (uint64_t)k;
		w->lens[k] = (int)g_len;
		if (posix_memalign((void **)&w->vals[k], 4096, g_len + 1) ||
		    posix_memalign((void **)&w->outs[k], 4096, g_len + 1)) {
			w->rc = 2;
			goto out;
		}
		fill(w->vals[k], (uint64_t)k, g_len);
		if (g_wgpu) {
			if ((!w->dvals && !(w->dvals = calloc((size_t)w->nkeys, sizeof(void *)))) ||
			    (!w->douts && !(w->douts = calloc((size_t)w->nkeys, sizeof(void *))))) {
				w->rc = 2;
				goto out;
			}
			rc = psl_mem_alloc(PSL_MEM_CUDA, g_gpu, g_len, &w->dvals[k]);
			if (!rc)
				rc = alloc_dout(w, k);
			if (!rc)
				rc = psl_mem_copy(w->dvals[k], PSL_MEM_CUDA, g_gpu, w->vals[k],
						  PSL_MEM_HOST, -1, g_len);
			if (rc) {
				char why[512];
				psl_cuda_describe(why, sizeof(why));
				fprintf(stderr, "pslite-bench: --mem %s: cannot set up GPU %d's "
						"buffers: %s (%s)\n",
					g_mem_name, g_gpu, psl_strerror(rc), why);
				w->rc = 2;
				goto out;
			}
		}
	}
	/* initial push (not timed), then one fully checked pull of every key */
	for (k = 0; k < w->nkeys; k++)
		finish(w, k, issue(w, k, PUSH_ONLY, 0), 0, false, false, 0, warm);
	for (k = 0; k < w->nkeys; k++)
		finish(w, k, issue(w, k, PULL_ONLY, 0), 0, true, true, 0, warm);
	memset(w->all, 0, sizeof(*w->all));
	w->requests = 0;

	if (g_mode == PUSH_THEN_PULL)
		run_push_then_pull(w);
	else
		run_loop(w);
out:
	psl_kv_worker_free(w->kv); /* (waits for what is still in flight) */
	free(warm);
	worker_free_buffers(w);
	free(w->slots);
	free(w->ts);
	return NULL;
}

/* With --json every node reports what it cost: CPU seconds, wall seconds,
 * resident size. */
static double g_t_start, g_start_s;
static void node_report(const char *role, int rank)
{
	struct rusage ru;
	long rss, peak;
	if (!g_json)
		return;
	getrusage(RUSAGE_SELF, &ru);
	rss = rss_kb();
	peak = status_kb("VmHWM");
	printf("{\"tool\":\"pslite-bench-node\",\"role\":\"%s\",\"rank\":%d,\"cpu_s\":%.3f,"
	       "\"wall_s\":%.3f,\"start_s\":%.3f,\"rss_kb\":%ld,\"max_rss_kb\":%ld}\n",
	       role, rank,
	       (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec * 1e-6 +
		       (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec * 1e-6,
	       now_s() - g_t_start, g_start_s, rss, peak > rss ? peak : rss);
}

static int usage(void)
{
	fprintf(stderr,
		"usage: pslite-bench [bytes_per_key] [repeat] [mode] [--seconds S] [--json] "
		"[--quiet] [--idle S] [--mem cpu2cpu|cpu2gpu|gpu2gpu|gpu2cpu] [--gpu N]\n"
		"       [--stream legacy|per-thread|none]\n"
		"  mode: 0 push then pull, 1 push-pull, 2 push only, 3 pull only, 4 fused "
		"push-pull\n"
		"  environment: DMLC_ROLE and the other ps-lite variables; NUM_KEY_PER_SERVER, "
		"LOG_DURATION, TOTAL_DURATION, BENCHMARK_NTHREAD; PSLITE_BENCH_ACCEPT_ONES=1 "
		"to accept ps-lite test_benchmark's data; ENABLE_RECV_BUFFER\n");
	return 2;
}

static int parse_args(int argc, char **argv)
{
	int i, pos = 0;
	for (i = 1; i < argc; i++) {
		char *end;
		long v;
		if (!strcmp(argv[i], "--json")) {
			g_json = true;
		} else if (!strcmp(argv[i], "--quiet")) {
			g_quiet = true;
		} else if (!strcmp(argv[i], "--seconds") && i + 1 < argc) {
			g_seconds = strtod(argv[++i], &end);
			if (*end || g_seconds <= 0) {
				fprintf(stderr, "pslite-bench: --seconds %s: expected a positive "
						"number\n",
					argv[i]);
				return -1;
			}
		} else if (!strcmp(argv[i], "--idle") && i + 1 < argc) {
			g_idle = strtod(argv[++i], &end);
			if (*end || g_idle <= 0) {
				fprintf(stderr, "pslite-bench: --idle %s: expected a positive number\n",
					argv[i]);
				return -1;
			}
		} else if (!strcmp(argv[i], "--mem") && i + 1 < argc) {
			const char *m = argv[++i];
			if (strcmp(m, "cpu2cpu") && strcmp(m, "cpu2gpu") && strcmp(m, "gpu2gpu") &&
			    strcmp(m, "gpu2cpu")) {
				fprintf(stderr, "pslite-bench: --mem %s: expected cpu2cpu, cpu2gpu, "
						"gpu2gpu or gpu2cpu (where the worker's and the "
						"server's data live)\n",
					m);
				return -1;
			}
			g_mem_name = m;
			g_wgpu = !strncmp(m, "gpu", 3);
			g_sgpu = !strcmp(m + 4, "gpu");
		} else if (!strcmp(argv[i], "--gpu") && i + 1 < argc) {
			errno = 0;
			v = strtol(argv[++i], &end, 10);
			if (errno || *end || v < 0 || v > 1024) {
				fprintf(stderr, "pslite-bench: --gpu %s: expected a CUDA device "
						"ordinal\n",
					argv[i]);
				return -1;
			}
			g_gpu = (int)v;
		} else if (!strcmp(argv[i], "--stream") && i + 1 < argc) {
			const char *m = argv[++i];
			if (!strcmp(m, "legacy")) {
				g_stream = PSL_CUDA_STREAM_LEGACY;
			} else if (!strcmp(m, "per-thread")) {
				g_stream = PSL_CUDA_STREAM_PER_THREAD;
			} else if (!strcmp(m, "none")) {
				g_stream = PSL_CUDA_STREAM_NONE;
			} else {
				fprintf(stderr, "pslite-bench: --stream %s: expected legacy, "
						"per-thread or none\n",
					m);
				return -1;
			}
		} else if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
			return -1;
		} else {
			errno = 0;
			v = strtol(argv[i], &end, 10);
			if (errno || *end || v < 0 || pos > 2 ||
			    (pos == 0 && (v <= 0 || v > 0x7fffffff)) ||
			    (pos == 1 && v <= 0) || (pos == 2 && v > 4)) {
				fprintf(stderr,
					"pslite-bench: argument '%s': expected bytes per key (> 0), "
					"repeat (> 0), mode (0-4)\n",
					argv[i]);
				return -1;
			}
			if (pos == 0)
				g_len = (size_t)v;
			else if (pos == 1)
				g_repeat = (int)v;
			else
				g_mode = (int)v;
			pos++;
		}
	}
	return 0;
}

/* ENABLE_RECV_BUFFER=1: test_benchmark's servers register receive buffers
 * and then every server and worker meets in Postoffice::Barrier(0,
 * kWorkerGroup + kServerGroup); take part in it, so that pslite nodes can
 * join such a job. pslite needs no registered buffers itself. */
static int recv_buffer_barrier(void)
{
	const char *v = getenv("ENABLE_RECV_BUFFER");
	int rc;
	if (!v || !*v || !atoi(v))
		return 0;
	rc = psl_barrier(0, PSL_GROUP_WORKERS | PSL_GROUP_SERVERS);
	if (rc)
		fprintf(stderr, "pslite-bench: the ENABLE_RECV_BUFFER barrier failed: %s\n",
			psl_strerror(rc));
	return rc;
}

/* The job lost a node (or this node the scheduler): one line, and the exit
 * code 3, even when finalize went well without it. */
static int job_lost(const char *role, int exit_code)
{
	char why[400];
	int rc = psl_job_lost(why, sizeof(why));
	if (!rc)
		return exit_code;
	exit_code = exit_code ? exit_code : 3;
	fprintf(stderr, "pslite-bench (%s): exits with %d: the job lost a node (%s): %s\n",
		role ? role : "?", exit_code, psl_strerror(rc), why);
	return exit_code;
}

int main(int argc, char **argv)
{
	int rc, i, nthread, exit_code = 0, my_rank;
	struct wctx *workers = NULL;
	const char *role = getenv("DMLC_ROLE");

	setvbuf(stdout, NULL, _IOLBF, 0);
	if (parse_args(argc, argv))
		return usage();
	g_keys_per_server = (int)env_long("NUM_KEY_PER_SERVER", 40);
	g_log_every = env_long("LOG_DURATION", 10);
	g_total = env_long("TOTAL_DURATION", 2000000000);
	nthread = (int)env_long("BENCHMARK_NTHREAD", 1);
	if (!strcmp(g_mem_name, "cpu2cpu")) { /* ps-lite's tests/test.sh says it so */
		const char *gw = getenv("TEST_NUM_GPU_WORKER"), *gs = getenv("TEST_NUM_GPU_SERVER");
		g_wgpu = gw && atoi(gw) > 0;
		g_sgpu = gs && atoi(gs) > 0;
		g_mem_name = g_wgpu ? (g_sgpu ? "gpu2gpu" : "gpu2cpu")
				    : (g_sgpu ? "cpu2gpu" : "cpu2cpu");
	}
	{
		const char *v = getenv("PSLITE_BENCH_ACCEPT_ONES");
		g_accept_ones = v && *v && strcmp(v, "0");
	}

	g_t_start = now_s();
	rc = psl_start(0, true);
	g_start_s = now_s() - g_t_start;
	if (rc) {
		fprintf(stderr, "pslite-bench (%s): cannot start: %s\n", role ? role : "?",
			psl_strerror(rc));
		psl_finalize(0, false);
		return 2;
	}
	my_rank = psl_my_rank();
	g_total_keys = psl_num_servers() * g_keys_per_server;
	if (g_idle > 0) {
		struct timespec ts = {(time_t)g_idle,
				      (long)((g_idle - (double)(time_t)g_idle) * 1e9)};
		if (psl_is_worker())
			nanosleep(&ts, NULL);
		rc = psl_finalize(0, true);
		node_report(role, my_rank);
		return job_lost(role, rc ? 1 : 0);
	}
	if (psl_is_server()) {
		struct psl_kv_server *srv;
		uint64_t e;
		g_nstore = psl_num_servers() * g_keys_per_server;
		g_store = calloc((size_t)g_nstore, sizeof(*g_store));
		psl_server_key_range(psl_my_rank(), &g_range_begin, &e);
		rc = psl_kv_server_new(0, PSL_BYTES, server_handler, NULL, &srv);
		if (rc) {
			fprintf(stderr, "pslite-bench: cannot create the KV server: %s\n",
				psl_strerror(rc));
			exit_code = 2;
		} else {
			psl_kv_server_set_cuda_stream(srv, g_stream);
		}
		if (psl_my_role() == PSL_JOINT) {
			/* this process's worker runs the benchmark below and finalizes;
			 * the one barrier takes both nodes */
			psl_use_role(PSL_WORKER);
			my_rank = psl_my_rank();
			goto worker;
		}
		if (recv_buffer_barrier())
			exit_code = 2;
		rc = psl_finalize(0, true);
		if (g_accept_ones)
			printf("pslite-bench server: of the pushes, %lu held ps-lite's all-ones test "
			       "data, %lu another key's data and %lu runs of both "
			       "(PSLITE_BENCH_ACCEPT_ONES)\n",
			       atomic_load(&g_ones_seen), atomic_load(&g_other_key_seen),
			       atomic_load(&g_torn_seen));
		if (atomic_load(&g_server_bad)) {
			fprintf(stderr, "pslite-bench server: %lu pushes carried wrong data\n",
				atomic_load(&g_server_bad));
			exit_code = 1;
		}
		if (!exit_code && rc)
			exit_code = 1;
		node_report(role, my_rank);
		return job_lost(role, exit_code);
	}
worker:
	if (psl_is_worker()) {
		struct wctx *w = calloc((size_t)nthread, sizeof(*w));
		pthread_t *th = calloc((size_t)nthread, sizeof(*th));
		double gp = 0, p50 = 0, p99 = 0, p999 = 0;
		long errors = 0, reqs = 0, rss_first = 0, rss_last = 0;
		size_t bad = 0, nlat = 0;
		double check_s = 0, issue_s = 0;
		long turns = 0;
		struct lat *all = calloc(1, sizeof(*all));

		if (recv_buffer_barrier())
			exit_code = 2;
		if (!g_quiet)
			printf("pslite-bench: %s, %zu bytes per key, %d keys per server, %d "
			       "server(s), van %s, %s\n",
			       mode_names[g_mode], g_len, g_keys_per_server, psl_num_servers(),
			       psl_van_name(), g_mem_name);
		for (i = 0; i < nthread; i++) {
			w[i].tid = i;
			pthread_create(&th[i], NULL, worker_main, &w[i]);
		}
		for (i = 0; i < nthread; i++) {
			pthread_join(th[i], NULL);
			if (w[i].rc)
				exit_code = w[i].rc;
			gp += w[i].gbps_total;
			errors += w[i].errors;
			bad += w[i].bad_bytes;
			reqs += w[i].requests;
			nlat += w[i].all ? w[i].all->n : 0;
			check_s += w[i].check_s;
			issue_s += w[i].issue_s;
			turns += w[i].turns;
			if (!rss_first)
				rss_first = w[i].rss_first_kb;
			rss_last = w[i].rss_last_kb;
		}
		for (i = 0; i < nthread; i++) {
			if (all && w[i].all)
				lat_merge(all, w[i].all);
			free(w[i].all);
		}
		if (all) {
			p50 = pct(all, 0.5) * 1e6;
			p99 = pct(all, 0.99) * 1e6;
			p999 = pct(all, 0.999) * 1e6;
		}
		if (errors || bad) {
			fprintf(stderr,
				"pslite-bench: %ld request(s) failed, %zu byte(s) pulled back "
				"wrong\n",
				errors, bad);
			exit_code = 1;
		}
		if (g_mode != PUSH_THEN_PULL)
			printf("pslite-bench summary: %s %zu bytes x %d keys%s%s: goodput %.4f "
			       "Gbps, p50 %.1f us, p99 %.1f us, p999 %.1f us, %ld requests, %ld "
			       "errors, %s\n",
			       mode_names[g_mode], g_len, w[0].nkeys, g_wgpu || g_sgpu ? ", " : "",
			       g_wgpu || g_sgpu ? g_mem_name : "", gp, p50, p99, p999, reqs, errors,
			       bad ? "DATA WRONG" : "data checked");
		if (g_accept_ones)
			printf("pslite-bench: of the pulls, %lu held ps-lite's all-ones test data, "
			       "%lu another key's data and %lu runs of both "
			       "(PSLITE_BENCH_ACCEPT_ONES)\n",
			       atomic_load(&g_ones_seen), atomic_load(&g_other_key_seen),
			       atomic_load(&g_torn_seen));
		if (g_json)
			printf("{\"tool\":\"pslite-bench\",\"van\":\"%s\",\"mem\":\"%s\",\"mode\":\"%s\","
			       "\"bytes_per_key\":%zu,\"keys\":%d,\"servers\":%d,\"workers\":%d,"
			       "\"threads\":%d,\"goodput_gbps\":%.4f,\"p50_us\":%.2f,\"p99_us\":%.2f,"
			       "\"p999_us\":%.2f,\"latency_samples\":%zu,\"requests\":%ld,"
			       "\"errors\":%ld,\"bad_bytes\":%zu,\"rss_first_kb\":%ld,"
			       "\"rss_end_kb\":%ld,\"check_us_per_turn\":%.2f,"
			       "\"issue_us_per_turn\":%.2f}\n",
			       psl_van_name(), g_mem_name, mode_names[g_mode], g_len, w[0].nkeys,
			       psl_num_servers(), psl_num_workers(), nthread, gp, p50, p99, p999,
			       nlat, reqs, errors, bad, rss_first, rss_last,
			       turns ? check_s * 1e6 / (double)turns : 0.0,
			       turns ? issue_s * 1e6 / (double)turns : 0.0);
		free(all);
		free(th);
		workers = w;
	}
	rc = psl_finalize(0, true);
	if (rc && !exit_code)
		exit_code = 1;
	if (atomic_load(&g_server_bad)) { /* (a joint process's server) */
		fprintf(stderr, "pslite-bench server: %lu pushes carried wrong data\n",
			atomic_load(&g_server_bad));
		exit_code = 1;
	}
	free(workers);
	node_report(role, my_rank);
	return job_lost(role, exit_code);
}
