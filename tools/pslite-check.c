/*
 * pslite-check: a BytePS worker that checks a BytePS server's sums.
 *
 * It does what a BytePS worker does with its tensors (byteps/common/
 * operations.cc InitTensor, core_loops.cc push and pull): tensor t is split
 * into partitions of BYTEPS_PARTITION_BYTES (rounded up to the page size),
 * partition p has the key (t << 16) + p, placed on server
 * djb2(key) % DMLC_NUM_SERVER (BYTEPS_KEY_HASH_FN: djb2, sdbm or naive) at
 * that server's key range begin; each request carries one key, lens = {bytes}
 * and cmd = the pairing of (kDefaultPushPull, dtype). Every worker first
 * pushes each partition once (the init push, answered when all have), then
 * pushes and pulls every partition for many rounds, and checks what it
 * pulls: exactly for integers, within the type's rounding for floats.
 *
 *   sync (default): round r's pull must be the sum of every worker's round-r
 *     push. Values are random (integers over their whole range, so sums wrap;
 *     floats in +-[1/8, 1) with every mantissa bit used).
 *   async (BYTEPS_ENABLE_ASYNC=1): values are small multiples of 1/8 that
 *     every type holds exactly; worker w pushes +a_w and -a_w in turn, so any
 *     pull is init + (its own a if its last push was +a) + the a of some set
 *     of other workers, and after the last round and a barrier of the
 *     workers, every pull is exactly init + the sum of all a.
 *
 * In the server's roles (DMLC_ROLE=scheduler or server) it runs
 * pslite-server's library call, so that one pslite-run line is a whole job.
 *
 *   pslite-check [--dtypes LIST] [--tensors N] [--size BYTES] [--rounds R]
 *                [--seconds S] [--bad] [--bench] [--json] [--quiet]
 *                [--restart-ok] [--progress]
 *
 * --restart-ok (pslite-check-restart.c): a server lost and started again
 * in its place is no failure; its keys are checked again from a round the
 * workers agree on.
 *
 * Prints "pslite-check worker R: PASS ..." or "... FAIL ..." (exit 1).
 */
#define _GNU_SOURCE 1
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <pslite.h>
#include <pslite/server.h>

#include "bps_half.h"
#include "pslite-check.h"
#include "pslite-check-restart.h"

/* ------------------------------------------------------------- options -- */

static int g_dtypes[16] = {PSL_BYTEPS_FLOAT32};
static int g_ndtypes = 1;
static int g_tensors = 2;	 /* per data type */
static size_t g_size = 300000;	 /* bytes of the first tensor, about */
static long g_rounds = 20;
static double g_seconds;
static bool g_bad, g_bench, g_json, g_quiet, g_async, g_leave_pull, g_one_barrier, g_restart_ok,
	g_progress;
static size_t g_part;	   /* partition bound */
static const char *g_hash = "djb2";

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* ---------------------------------------------------------- the values -- */

static uint64_t mix(uint64_t x)
{
	x += 0x9e3779b97f4a7c15ull;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

static uint64_t h4(uint64_t a, uint64_t b, uint64_t c, uint64_t d)
{
	return mix(mix(mix(mix(a) ^ b) ^ c) ^ d);
}

static bool is_float(int dt)
{
	return dt == PSL_BYTEPS_FLOAT32 || dt == PSL_BYTEPS_FLOAT64 ||
	       dt == PSL_BYTEPS_FLOAT16 || dt == PSL_BYTEPS_BFLOAT16;
}

/* Stores x (exactly representable, or rounded) as one element of dt. */
static void put_float(int dt, void *p, double x)
{
	float f = (float)x;
	uint16_t h;
	switch (dt) {
	case PSL_BYTEPS_FLOAT32:
		memcpy(p, &f, 4);
		break;
	case PSL_BYTEPS_FLOAT64:
		memcpy(p, &x, 8);
		break;
	case PSL_BYTEPS_FLOAT16:
		h = psl__f32_to_f16(f);
		memcpy(p, &h, 2);
		break;
	case PSL_BYTEPS_BFLOAT16:
		h = psl__f32_to_bf16(f);
		memcpy(p, &h, 2);
		break;
	}
}

static double get_float(int dt, const void *p)
{
	float f;
	double d;
	uint16_t h;
	switch (dt) {
	case PSL_BYTEPS_FLOAT32:
		memcpy(&f, p, 4);
		return f;
	case PSL_BYTEPS_FLOAT64:
		memcpy(&d, p, 8);
		return d;
	case PSL_BYTEPS_FLOAT16:
		memcpy(&h, p, 2);
		return psl__f16_to_f32(h);
	default:
		memcpy(&h, p, 2);
		return psl__bf16_to_f32(h);
	}
}

static void put_int(size_t esz, void *p, uint64_t v)
{
	uint8_t b8 = (uint8_t)v;
	uint32_t b32 = (uint32_t)v;
	switch (esz) {
	case 1:
		memcpy(p, &b8, 1);
		break;
	case 4:
		memcpy(p, &b32, 4);
		break;
	default:
		memcpy(p, &v, 8);
		break;
	}
}

static uint64_t get_int(size_t esz, const void *p)
{
	uint8_t b8;
	uint32_t b32;
	uint64_t v;
	switch (esz) {
	case 1:
		memcpy(&b8, p, 1);
		return b8;
	case 4:
		memcpy(&b32, p, 4);
		return b32;
	default:
		memcpy(&v, p, 8);
		return v;
	}
}

/* Unit roundoff of a float type. */
static double unit_roundoff(int dt)
{
	switch (dt) {
	case PSL_BYTEPS_FLOAT64:
		return 0x1p-53;
	case PSL_BYTEPS_FLOAT32:
		return 0x1p-24;
	case PSL_BYTEPS_FLOAT16:
		return 0x1p-11;
	default:
		return 0x1p-8;
	}
}

/* Sync: element i of tensor t that worker w pushes in round r (written
 * to p as the type stores it). */
static void sync_value(int dt, size_t esz, int t, size_t i, int w, long r, void *p)
{
	uint64_t h = h4((uint64_t)t, i, (uint64_t)w, (uint64_t)r);
	if (is_float(dt)) {
		double u = (double)(h >> 11) * 0x1p-53;
		put_float(dt, p, (h & 1 ? -1.0 : 1.0) * (0.125 + 0.875 * u));
	} else {
		put_int(esz, p, h);
	}
}

/* Async: the init value of element i of tensor t, and worker w's a. Small
 * multiples of 1/8 (integers for integer types). */
static int64_t async_init(int t, size_t i)
{
	return (int64_t)(h4((uint64_t)t, i, 1000, 7) % 33) - 16;
}

static int64_t async_a(int t, size_t i, int w)
{
	return (int64_t)(h4((uint64_t)t, i, (uint64_t)w, 9) % 17) - 8;
}

static void put_small(int dt, size_t esz, void *p, int64_t v)
{
	if (is_float(dt))
		put_float(dt, p, (double)v / 8.0);
	else
		put_int(esz, p, (uint64_t)v);
}

/* Element p as a small value (eighths for floats, the integer read back
 * with its sign for integers), and whether it is one exactly. */
static bool get_small(int dt, size_t esz, const void *p, int64_t *v)
{
	if (is_float(dt)) {
		double x = get_float(dt, p) * 8.0;
		if (!(x == x) || fabs(x) > 1e15 || x != floor(x))
			return false;
		*v = (int64_t)x;
		return true;
	}
	switch (esz) {
	case 1: {
		uint64_t b = get_int(1, p);
		*v = dt == PSL_BYTEPS_INT8 ? (int8_t)(uint8_t)b : (int64_t)b;
		/* uint8 wraps: compare modulo 256 by the caller */
		return true;
	}
	case 4:
		*v = (int32_t)(uint32_t)get_int(4, p);
		return true;
	default:
		*v = (int64_t)get_int(8, p);
		return true;
	}
}

/* ------------------------------------------------------ keys and tensors -- */

static uint64_t hash_djb2(uint64_t key)
{
	char s[32];
	uint64_t h = 5381;
	const char *c;
	snprintf(s, sizeof(s), "%" PRIu64, key);
	for (c = s; *c; c++)
		h = ((h << 5) + h) + (uint64_t)(unsigned char)*c;
	return h;
}

static uint64_t hash_sdbm(uint64_t key)
{
	char s[32];
	uint64_t h = 0;
	const char *c;
	snprintf(s, sizeof(s), "%" PRIu64, key);
	for (c = s; *c; c++)
		h = (uint64_t)(unsigned char)*c + (h << 6) + (h << 16) - h;
	return h;
}

/* BytePS's EncodeDefaultKey: the server for a declared key, and the key on
 * the wire. */
uint64_t check_encode_key(uint64_t key, int *server_out)
{
	int S = psl_num_servers(), server;
	uint64_t b, e;
	if (!strcmp(g_hash, "sdbm"))
		server = (int)(hash_sdbm(key) % (uint64_t)S);
	else if (!strcmp(g_hash, "naive"))
		server = (int)((((key >> 16) + (key % 65536)) * 9973) % (uint64_t)S);
	else
		server = (int)(hash_djb2(key) % (uint64_t)S);
	psl_server_key_range(server, &b, &e);
	if (server_out)
		*server_out = server;
	return b + key;
}

struct part *g_parts;
size_t g_nparts;
struct psl_kv_worker *g_kv;
int g_me, g_W;

static int add_tensor(int t, int dt, size_t bytes)
{
	size_t esz = psl_byteps_dtype_size(dt), acc = 0, p = 0;
	while (acc < bytes) {
		size_t len = bytes - acc > g_part ? g_part : bytes - acc;
		struct part *np = realloc(g_parts, (g_nparts + 1) * sizeof(*g_parts));
		struct part *q;
		if (!np)
			return -ENOMEM;
		g_parts = np;
		q = &g_parts[g_nparts++];
		memset(q, 0, sizeof(*q));
		q->t = t;
		q->dt = dt;
		q->esz = esz;
		q->off = acc / esz;
		q->n = len / esz;
		q->len = (int)len;
		q->key = check_encode_key(((uint64_t)t << 16) + p, &q->server);
		if (posix_memalign((void **)&q->push, 64, len) ||
		    posix_memalign((void **)&q->pull, 64, len))
			return -ENOMEM;
		acc += len;
		p++;
	}
	return 0;
}

/* ------------------------------------------------------------ requests -- */

static atomic_long g_done; /* requests completed */

static void on_push(int ts, int status, void *arg)
{
	struct part *q = arg;
	(void)ts;
	atomic_store(&q->done_push, atomic_fetch_add(&g_done, 1) + 1);
	atomic_store(&q->st_push, status ? status : 1);
}

static void on_pull(int ts, int status, void *arg)
{
	struct part *q = arg;
	(void)ts;
	atomic_store(&q->done_pull, atomic_fetch_add(&g_done, 1) + 1);
	atomic_store(&q->st_pull, status ? status : 1);
}

int check_push(struct part *q, int dt_on_wire, int len, int rtype)
{
	struct psl_kv kv = {&q->key, 1, q->push, (size_t)len, &q->len, PSL_MEM_HOST, 0};
	int cmd = psl_byteps_cmd(rtype, dt_on_wire);
	int lens = len;
	if (len != q->len) { /* a bad push: its own lens */
		kv.lens = &lens;
		atomic_store(&q->st_push, 0);
		return psl_kv_wait(g_kv, psl_kv_push(g_kv, &kv, cmd, NULL, NULL));
	}
	atomic_store(&q->st_push, 0);
	q->ts_push = psl_kv_zpush(g_kv, &kv, cmd, on_push, q);
	return q->ts_push < 0 ? q->ts_push : 0;
}

int check_pull(struct part *q)
{
	q->out = (struct psl_kv_out){q->pull, (size_t)q->len, 0, &q->outlen, PSL_MEM_HOST, 0};
	q->outlen = -1;
	atomic_store(&q->st_pull, 0);
	q->ts_pull = psl_kv_zpull(g_kv, &q->key, 1, &q->out, psl_byteps_cmd(0, q->dt), on_pull,
				  q);
	return q->ts_pull < 0 ? q->ts_pull : 0;
}

long g_fail;

void failf(const char *fmt, ...)
{
	va_list ap;
	if (g_fail++ >= 10)
		return;
	va_start(ap, fmt);
	fprintf(stderr, "pslite-check worker %d: ", g_me);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
}

static int wait_all(bool pushes, bool pulls)
{
	size_t i;
	int bad = 0;
	for (i = 0; i < g_nparts; i++) {
		struct part *q = &g_parts[i];
		int st;
		if (pushes) {
			st = psl_kv_wait(g_kv, q->ts_push);
			if (st || atomic_load(&q->st_push) != 1) {
				failf("push of key %" PRIu64 " failed: %s", q->key,
				      psl_strerror(st ? st : atomic_load(&q->st_push)));
				bad++;
			}
		}
		if (pulls) {
			st = psl_kv_wait(g_kv, q->ts_pull);
			if (st || atomic_load(&q->st_pull) != 1) {
				failf("pull of key %" PRIu64 " failed: %s", q->key,
				      psl_strerror(st ? st : atomic_load(&q->st_pull)));
				bad++;
			} else if (q->out.num_vals != (size_t)q->len || q->outlen != q->len) {
				failf("pull of key %" PRIu64 ": %zu bytes (lens %d), expected %d",
				      q->key, q->out.num_vals, q->outlen, q->len);
				bad++;
			}
		}
	}
	return bad;
}

/* ------------------------------------------------------------- filling -- */

/* --bench: the same values every round, small multiples of 1/8 that every
 * type sums exactly, from a pattern as cheap to check as pslite-bench's. */
static int64_t bench_value(int t, size_t i, int w)
{
	return (int64_t)((i * 7 + (size_t)t * 13 + (size_t)w * 5) % 17) - 8;
}

static void fill_sync(struct part *q, long r)
{
	size_t i;
	if (q->ctl) {
		put_int(4, q->push, 0);
		return;
	}
	for (i = 0; i < q->n; i++) {
		if (g_bench)
			put_small(q->dt, q->esz, q->push + i * q->esz,
				  bench_value(q->t, q->off + i, g_me));
		else
			sync_value(q->dt, q->esz, q->t, q->off + i, g_me, r, q->push + i * q->esz);
	}
}

static void fill_async(struct part *q, long r)
{
	size_t i;
	if (q->ctl) {
		put_int(4, q->push, 0);
		return;
	}
	for (i = 0; i < q->n; i++) {
		int64_t v = r == 0 ? async_init(q->t, q->off + i)
				   : (r % 2 ? 1 : -1) * async_a(q->t, q->off + i, g_me);
		put_small(q->dt, q->esz, q->push + i * q->esz, v);
	}
}

/* The elements of q checked in this round: all, or (bench) its first and
 * last 256 and a window of 1024 that moves with the round. Returns the first
 * one at or after i (q->n when none is left). */
static size_t next_checked(const struct part *q, size_t i, long r)
{
	size_t win;
	if (!g_bench || q->n <= 4096 || i < 256 || i >= q->n - 256)
		return i;
	win = ((size_t)r * 4099u * 1024u) % (q->n - 1024);
	if (win < 256)
		win = 256;
	if (i < win)
		return win;
	if (i < win + 1024)
		return i;
	return q->n - 256 > i ? q->n - 256 : i;
}

static size_t g_checked;

/* Sync: q->pull must be the sum of every worker's round-r push. */
static void check_sync(struct part *q, long r)
{
	unsigned char tmp[8];
	size_t i;
	int w;

	if (q->ctl) { /* worker 0's flag: 0 or 1 */
		if (get_int(4, q->pull) > 1)
			failf("round %ld: the stop flag summed to %" PRIu64 ", expected 0 or 1", r,
			      get_int(4, q->pull));
		return;
	}
	for (i = next_checked(q, 0, r); i < q->n; i = next_checked(q, i + 1, r)) {
		const unsigned char *got = q->pull + i * q->esz;
		g_checked++;
		if (g_bench) {
			int64_t want = 0, v;
			uint64_t mask = q->esz == 8 || is_float(q->dt) ? ~0ull
								     : (1ull << (8 * q->esz)) - 1;
			for (w = 0; w < g_W; w++)
				want += bench_value(q->t, q->off + i, w);
			if (!get_small(q->dt, q->esz, got, &v) ||
			    ((uint64_t)v & mask) != ((uint64_t)want & mask))
				failf("round %ld, key %" PRIu64 " (tensor %d, %s), element %zu: "
				      "got %.9g, expected %" PRId64 "%s",
				      r, q->key, q->t, psl_byteps_dtype_name(q->dt), q->off + i,
				      is_float(q->dt) ? get_float(q->dt, got) * 8
						      : (double)get_int(q->esz, got),
				      want, is_float(q->dt) ? " (both in eighths)" : "");
			continue;
		}
		if (is_float(q->dt)) {
			double exact = 0, mag = 0, x, err, tol;
			for (w = 0; w < g_W; w++) {
				sync_value(q->dt, q->esz, q->t, q->off + i, w, r, tmp);
				x = get_float(q->dt, tmp);
				exact += x;
				mag += fabs(x);
			}
			x = get_float(q->dt, got);
			err = fabs(x - exact);
			/* W-1 roundings of the type, and those of the reference */
			tol = (g_W - 1) * (unit_roundoff(q->dt) + 0x1p-52) * mag * 1.0001;
			if (!(err <= tol))
				failf("round %ld, key %" PRIu64 " (tensor %d, %s), element %zu: "
				      "got %.9g, expected %.9g (+- %.3g)",
				      r, q->key, q->t, psl_byteps_dtype_name(q->dt), q->off + i, x,
				      exact, tol);
		} else {
			uint64_t sum = 0, mask = q->esz == 8 ? ~0ull : (1ull << (8 * q->esz)) - 1;
			for (w = 0; w < g_W; w++) {
				sync_value(q->dt, q->esz, q->t, q->off + i, w, r, tmp);
				sum += get_int(q->esz, tmp);
			}
			if ((get_int(q->esz, got) & mask) != (sum & mask))
				failf("round %ld, key %" PRIu64 " (tensor %d, %s), element %zu: "
				      "got %#" PRIx64 ", expected %#" PRIx64,
				      r, q->key, q->t, psl_byteps_dtype_name(q->dt), q->off + i,
				      get_int(q->esz, got) & mask, sum & mask);
		}
	}
}

/* Async: q->pull after this worker's round-r push. final: every push of
 * every worker is in. */
static void check_async(struct part *q, long r, bool final)
{
	size_t i;
	int w;
	/* integers wrap at their width; floats hold these sums exactly */
	uint64_t mask = q->esz == 8 || is_float(q->dt) ? ~0ull : (1ull << (8 * q->esz)) - 1;

	for (i = next_checked(q, 0, r); i < q->n; i = next_checked(q, i + 1, r)) {
		size_t e = q->off + i;
		int64_t got, base = async_init(q->t, e), all = 0;
		bool ok = false;
		uint32_t set;

		g_checked++;
		if (!get_small(q->dt, q->esz, q->pull + i * q->esz, &got)) {
			failf("key %" PRIu64 " element %zu: %.9g is not a sum of pushed values",
			      q->key, e, get_float(q->dt, q->pull + i * q->esz));
			continue;
		}
		for (w = 0; w < g_W; w++)
			all += async_a(q->t, e, w);
		if (final) {
			ok = ((uint64_t)got & mask) == ((uint64_t)(base + all) & mask);
		} else if (g_W <= 12) {
			/* init + my own (if my last push was +a) + some others */
			int64_t mine = r % 2 ? async_a(q->t, e, g_me) : 0;
			for (set = 0; set < (1u << g_W) && !ok; set++) {
				int64_t s = base + mine;
				if (set & (1u << g_me))
					continue;
				for (w = 0; w < g_W; w++)
					if (set & (1u << w))
						s += async_a(q->t, e, w);
				ok = ((uint64_t)got & mask) == ((uint64_t)s & mask);
			}
		} else {
			ok = true;
		}
		if (!ok)
			failf("%s pull after round %ld, key %" PRIu64 " (tensor %d, %s), element "
			      "%zu: got %" PRId64 "%s, which is %s",
			      final ? "final" : "async", r, q->key, q->t,
			      psl_byteps_dtype_name(q->dt), e, got, is_float(q->dt) ? "/8" : "",
			      final ? "not init + every push" :
				      "not init + this worker's pushes + some of the others'");
	}
}

/* ------------------------------------------------------------ bad input -- */

static int other_type(int dt)
{
	switch (dt) {
	case PSL_BYTEPS_FLOAT32:
		return PSL_BYTEPS_INT32;
	case PSL_BYTEPS_INT32:
		return PSL_BYTEPS_FLOAT32;
	case PSL_BYTEPS_FLOAT64:
		return PSL_BYTEPS_INT64;
	case PSL_BYTEPS_INT64:
		return PSL_BYTEPS_FLOAT64;
	case PSL_BYTEPS_FLOAT16:
		return PSL_BYTEPS_BFLOAT16;
	case PSL_BYTEPS_BFLOAT16:
		return PSL_BYTEPS_FLOAT16;
	case PSL_BYTEPS_INT8:
		return PSL_BYTEPS_UINT8;
	default:
		return PSL_BYTEPS_INT8;
	}
}

/* Requests the server must refuse, each with an error to this worker only. */
static void send_bad(void)
{
	struct part *q = &g_parts[0];
	struct {
		const char *what;
		int rc;
	} r[14];
	char pw[7][80];
	int i, j, n = 0;
	uint64_t unknown = check_encode_key((uint64_t)0xfff0 << 16, NULL);
	struct psl_kv_out out = {q->pull, (size_t)q->len, 0, NULL, PSL_MEM_HOST, 0};

	r[n].what = "a push of the wrong length";
	r[n++].rc = check_push(q, q->dt, q->len - (int)q->esz, 0);
	r[n].what = "a push of another data type of the same size";
	{
		int len = q->len;
		struct psl_kv kv = {&q->key, 1, q->push, (size_t)len, &len, PSL_MEM_HOST, 0};
		r[n++].rc = psl_kv_wait(
			g_kv, psl_kv_push(g_kv, &kv, psl_byteps_cmd(0, other_type(q->dt)), NULL,
					  NULL));
	}
	r[n].what = "a push of an unknown data type (7)";
	{
		int len = q->len;
		struct psl_kv kv = {&q->key, 1, q->push, (size_t)len, &len, PSL_MEM_HOST, 0};
		r[n++].rc = psl_kv_wait(g_kv, psl_kv_push(g_kv, &kv, psl_byteps_cmd(0, 7), NULL,
							  NULL));
	}
	r[n].what = "a push of request type kCompressedPushPull";
	{
		int len = q->len;
		struct psl_kv kv = {&q->key, 1, q->push, (size_t)len, &len, PSL_MEM_HOST, 0};
		r[n++].rc = psl_kv_wait(g_kv, psl_kv_push(g_kv, &kv,
							  psl_byteps_cmd(2, q->dt), NULL, NULL));
	}
	r[n].what = "a push of an unknown request type (5)";
	{
		int len = q->len;
		struct psl_kv kv = {&q->key, 1, q->push, (size_t)len, &len, PSL_MEM_HOST, 0};
		r[n++].rc = psl_kv_wait(g_kv, psl_kv_push(g_kv, &kv,
							  psl_byteps_cmd(5, q->dt), NULL, NULL));
	}
	/* pulls of a key this worker pushed, in the middle of a round: one that
	 * were served would take this worker's turn of the round, and its real
	 * pull would wait for a round that never completes */
	for (j = 0; j < 7; j++) {
		static const int cmds[7][2] = {{0, 99}, {0, 11}, {0, 9}, {0, -1},
					       {2, -2}, {1, -2}, {5, -2}};
		int rt = cmds[j][0], dt = cmds[j][1];
		if (dt == -1)
			dt = other_type(q->dt);
		else if (dt == -2)
			dt = q->dt;
		snprintf(pw[j], sizeof(pw[j]), "a pull of request type %d, data type %d (cmd %d)",
			 rt, dt, psl_byteps_cmd(rt, dt));
		r[n].what = pw[j];
		r[n++].rc = psl_kv_wait(g_kv, psl_kv_pull(g_kv, &q->key, 1, &out,
							  psl_byteps_cmd(rt, dt), NULL, NULL));
	}
	r[n].what = "a pull of a key never pushed";
	r[n++].rc = psl_kv_wait(g_kv, psl_kv_pull(g_kv, &unknown, 1, &out,
						  psl_byteps_cmd(0, q->dt), NULL, NULL));
	for (i = 0; i < n; i++) {
		if (r[i].rc >= 0)
			failf("%s (key %" PRIu64 ") was accepted; expected an error", r[i].what,
			      i == n - 1 ? unknown : q->key);
		else if (!g_quiet)
			printf("pslite-check worker %d: %s (key %" PRIu64 ") was refused: %s\n",
			       g_me, r[i].what, i == n - 1 ? unknown : q->key,
			       psl_strerror(r[i].rc));
	}
}

/* ---------------------------------------------------------------- main -- */

/* Whether to run round r. Async ends on an odd round (its last push is +a,
 * so the final sum shows every worker's). Sync with --seconds decides after
 * each round, by the stop flag (g_ctl). */
static bool more_rounds(long r, double start)
{
	if (g_seconds <= 0)
		return r <= g_rounds;
	return now_s() - start < g_seconds || (g_async && (r - 1) % 2 == 0);
}

/* Sync rounds with --seconds: every worker must stop after the same round
 * (a pull of a round that another worker never pushes waits for ever), so
 * worker 0 decides, in band: a one-element int32 tensor that it pushes as 1
 * when its time is up and the others push as 0; every worker reads the same
 * sum and stops after that round. */
static struct part *g_ctl;

static int parse_dtypes(const char *s)
{
	char buf[256], *tok, *save = NULL;
	int d;
	snprintf(buf, sizeof(buf), "%s", s);
	g_ndtypes = 0;
	for (tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		for (d = 0; d < 11; d++)
			if (psl_byteps_dtype_size(d) && !strcmp(tok, psl_byteps_dtype_name(d)))
				break;
		if (d == 11 || g_ndtypes == 16) {
			fprintf(stderr,
				"pslite-check: --dtypes: '%s' is not one of float32, float64, "
				"float16, bfloat16, int32, int64, int8, uint8\n",
				tok);
			return -1;
		}
		g_dtypes[g_ndtypes++] = d;
	}
	return g_ndtypes ? 0 : -1;
}

static long parse_long(const char *opt, const char *v, long min)
{
	char *end;
	long x;
	errno = 0;
	x = strtol(v, &end, 10);
	if (errno || *end || x < min) {
		fprintf(stderr, "pslite-check: %s %s: expected an integer >= %ld\n", opt, v, min);
		exit(2);
	}
	return x;
}

static int usage(void)
{
	fprintf(stderr,
		"usage: pslite-check [--dtypes LIST] [--tensors N] [--size BYTES] [--rounds R]\n"
		"                    [--seconds S] [--bad] [--bench] [--json] [--quiet]\n"
		"  --dtypes    float32,float64,float16,bfloat16,int32,int64,int8,uint8 (float32)\n"
		"  --tensors   tensors per data type (2); tensor t has about BYTES*(t+1) bytes\n"
		"  --size      bytes of the first tensor (300000), split into partitions of\n"
		"              BYTEPS_PARTITION_BYTES (4096000, rounded up to the page size)\n"
		"  --rounds    push/pull rounds (20); --seconds: stop after S seconds instead\n"
		"  --bad       also send requests the server must refuse (worker 0)\n"
		"  --leave-pull  (tests) worker 0 ends with a pull that no round answers\n"
		"  --one-start-barrier  (tests) skip BytePS's Barrier(all) after the start-up\n"
		"              barrier: the job hangs, and the scheduler says which nodes are missing\n"
		"  --restart-ok  a server lost and started again (PS_RECOVERY) is no failure:\n"
		"              its keys are initialised again and checked from an agreed round\n"
		"              on; the rounds between are lost (sync mode, --rounds only)\n"
		"  --progress  a line after every round\n"
		"  --bench     for timing: every tensor of --size bytes, the same small values\n"
		"              every round, a sample of the elements checked\n"
		"environment: DMLC_* as for any worker, BYTEPS_ENABLE_ASYNC, BYTEPS_PARTITION_BYTES,\n"
		"BYTEPS_KEY_HASH_FN (djb2, sdbm, naive). In the roles scheduler and server it runs\n"
		"pslite-server.\n");
	return 2;
}

static int parse_args(int argc, char **argv)
{
	int i;
	for (i = 1; i < argc; i++) {
		const char *a = argv[i];
		bool more = i + 1 < argc;
		if (!strcmp(a, "--dtypes") && more) {
			if (parse_dtypes(argv[++i]))
				return -1;
		} else if (!strcmp(a, "--tensors") && more) {
			g_tensors = (int)parse_long(a, argv[++i], 1);
			if (g_tensors > 4096) {
				fprintf(stderr, "pslite-check: --tensors %d: at most 4096\n", g_tensors);
				return -1;
			}
		} else if (!strcmp(a, "--size") && more) {
			g_size = (size_t)parse_long(a, argv[++i], 8);
		} else if (!strcmp(a, "--rounds") && more) {
			g_rounds = parse_long(a, argv[++i], 1);
		} else if (!strcmp(a, "--seconds") && more) {
			char *end;
			g_seconds = strtod(argv[++i], &end);
			if (*end || g_seconds <= 0) {
				fprintf(stderr, "pslite-check: --seconds %s: expected a positive "
						"number\n",
					argv[i]);
				return -1;
			}
		} else if (!strcmp(a, "--bad")) {
			g_bad = true;
		} else if (!strcmp(a, "--one-start-barrier")) {
			g_one_barrier = true;
		} else if (!strcmp(a, "--leave-pull")) {
			g_leave_pull = true;
		} else if (!strcmp(a, "--progress")) {
			g_progress = true;
		} else if (!strcmp(a, "--restart-ok")) {
			g_restart_ok = true;
		} else if (!strcmp(a, "--bench")) {
			g_bench = true;
		} else if (!strcmp(a, "--json")) {
			g_json = true;
		} else if (!strcmp(a, "--quiet")) {
			g_quiet = true;
		} else {
			return -1;
		}
	}
	return 0;
}

static int env_setup(void)
{
	const char *v = getenv("BYTEPS_PARTITION_BYTES");
	const char *a = getenv("BYTEPS_ENABLE_ASYNC");
	const char *hf = getenv("BYTEPS_KEY_HASH_FN");
	long page = sysconf(_SC_PAGESIZE), local = 1;
	const char *ls = getenv("BYTEPS_LOCAL_SIZE");
	long bytes = 4096000;

	if (v && *v)
		bytes = parse_long("BYTEPS_PARTITION_BYTES", v, 1);
	if (ls && *ls)
		local = parse_long("BYTEPS_LOCAL_SIZE", ls, 1);
	if (page <= 0)
		page = 4096;
	/* BytePS rounds it up to a multiple of local_size pages */
	g_part = (size_t)((bytes + local * page - 1) / (local * page) * (local * page));
	g_async = a && *a && strcmp(a, "0");
	if (hf && *hf) {
		if (strcmp(hf, "djb2") && strcmp(hf, "sdbm") && strcmp(hf, "naive")) {
			fprintf(stderr, "pslite-check: BYTEPS_KEY_HASH_FN=%s: expected djb2, sdbm "
					"or naive\n",
				hf);
			return -1;
		}
		g_hash = hf;
	}
	return 0;
}

int main(int argc, char **argv)
{
	const char *role = getenv("DMLC_ROLE");
	double t0, busy = 0, start, wall;
	long r, done_rounds = 0;
	size_t i, total_bytes = 0;
	int rc, t, d, exit_code = 0;

	setvbuf(stdout, NULL, _IOLBF, 0);
	if (parse_args(argc, argv))
		return usage();
	if (env_setup())
		return 2;
	if (role && strcmp(role, "worker")) {
		rc = psl_byteps_server_run(NULL);
		if (rc)
			fprintf(stderr, "pslite-check (%s): %s\n", role, psl_strerror(rc));
		return rc ? 1 : 0;
	}
	if (g_async && g_bench) {
		fprintf(stderr, "pslite-check: --bench times sync mode; unset BYTEPS_ENABLE_ASYNC\n");
		return 2;
	}
	if (g_restart_ok && (g_async || g_bench || g_bad || g_seconds > 0 || g_leave_pull)) {
		fprintf(stderr, "pslite-check: --restart-ok checks sync rounds of --rounds: leave "
				"out BYTEPS_ENABLE_ASYNC, --bench, --bad, --seconds and --leave-pull\n");
		return 2;
	}
	if (g_async && g_rounds % 2 == 0)
		g_rounds++; /* the last push is +a, so the final sum shows every worker */

	rc = psl_start(0, true);
	if (rc) {
		fprintf(stderr, "pslite-check: cannot start: %s\n", psl_strerror(rc));
		psl_finalize(0, false);
		return 2;
	}
	g_me = psl_my_rank();
	g_W = psl_num_workers();
	rc = psl_kv_worker_new(0, 0, PSL_BYTES, &g_kv);
	if (rc) {
		fprintf(stderr, "pslite-check: cannot create the KV worker: %s\n", psl_strerror(rc));
		exit_code = 2;
		goto out_finalize;
	}
	/* BytePS's workers, servers and scheduler pass this barrier after the
	 * start-up barrier (docs/pslite-server.md) */
	rc = g_one_barrier ? 0 : psl_barrier(0, PSL_GROUP_ALL);
	if (rc) {
		fprintf(stderr, "pslite-check: barrier: %s\n", psl_strerror(rc));
		exit_code = 2;
		goto out_worker;
	}
	for (d = 0; d < g_ndtypes; d++) {
		for (t = 0; t < g_tensors; t++) {
			size_t esz = psl_byteps_dtype_size(g_dtypes[d]);
			/* sizes that do not fall on partition or vector boundaries;
			 * --bench: all of --size */
			size_t bytes = g_bench ? g_size / esz * esz
					       : (g_size * (size_t)(t + 1) / esz + (size_t)t * 37 + 1) *
							 esz;
			rc = add_tensor(d * g_tensors + t, g_dtypes[d], bytes);
			if (rc) {
				fprintf(stderr, "pslite-check: out of memory\n");
				exit_code = 2;
				goto out_worker;
			}
			total_bytes += bytes;
		}
	}
	if (g_restart_ok && restart_setup()) {
		fprintf(stderr, "pslite-check: out of memory\n");
		exit_code = 2;
		goto out_worker;
	}
	if (g_seconds > 0 && !g_async) {
		rc = add_tensor(0xfff1, PSL_BYTEPS_INT32, 4);
		if (rc) {
			fprintf(stderr, "pslite-check: out of memory\n");
			exit_code = 2;
			goto out_worker;
		}
		g_ctl = &g_parts[g_nparts - 1];
		g_ctl->ctl = true;
	}
	if (!g_quiet && g_me == 0)
		printf("pslite-check: %s, %d worker(s), %d server(s), van %s: %zu tensors in %zu "
		       "partitions of up to %zu bytes, %zu bytes per round\n",
		       g_async ? "async" : "sync", g_W, psl_num_servers(), psl_van_name(),
		       (size_t)(g_ndtypes * g_tensors), g_nparts, g_part, total_bytes);

	/* init: every worker pushes every partition once (async: the store's
	 * initial value, the same on every worker) */
	for (i = 0; i < g_nparts; i++) {
		if (g_async)
			fill_async(&g_parts[i], 0);
		else
			fill_sync(&g_parts[i], 0);
		if ((rc = check_push(&g_parts[i], g_parts[i].dt, g_parts[i].len, 0)))
			failf("init push: %s", psl_strerror(rc));
	}
	if (wait_all(true, false)) {
		exit_code = 1;
		goto out_worker;
	}

	if (g_bench) /* the same values every round: filled once, not timed */
		for (i = 0; i < g_nparts; i++)
			fill_sync(&g_parts[i], 1);
	start = now_s();
	for (r = 1; g_ctl || more_rounds(r, start); r++) {
		if (g_bad && g_me == 0 && r == 2)
			send_bad();
		if (g_restart_ok && restart_round_start(r))
			break;
		for (i = 0; i < g_nparts; i++)
			g_parts[i].skipped = g_restart_ok && !restart_active(&g_parts[i]);
		if (!g_bench)
			for (i = 0; i < g_nparts; i++) {
				if (g_parts[i].skipped)
					continue;
				if (g_async)
					fill_async(&g_parts[i], r);
				else
					fill_sync(&g_parts[i], r);
			}
		if (g_ctl)
			put_int(4, g_ctl->push, g_me == 0 && now_s() - start >= g_seconds);
		t0 = now_s();
		if (g_async) {
			/* push, and pull after the push is in */
			for (i = 0; i < g_nparts; i++)
				if ((rc = check_push(&g_parts[i], g_parts[i].dt, g_parts[i].len, 0)))
					failf("push: %s", psl_strerror(rc));
			if (wait_all(true, false))
				break;
			for (i = 0; i < g_nparts; i++)
				if ((rc = check_pull(&g_parts[i])))
					failf("pull: %s", psl_strerror(rc));
			if (wait_all(false, true))
				break;
		} else {
			/* push and pull together: the pull is answered when the round is
			 * complete */
			for (i = 0; i < g_nparts; i++) {
				if (g_parts[i].skipped)
					continue;
				if ((rc = check_push(&g_parts[i], g_parts[i].dt, g_parts[i].len, 0)))
					failf("push: %s", psl_strerror(rc));
				if ((rc = check_pull(&g_parts[i])))
					failf("pull: %s", psl_strerror(rc));
			}
			if (g_restart_ok ? restart_wait_all(r) : wait_all(true, true))
				break;
		}
		busy += now_s() - t0; /* time in requests, not in filling and checking */
		done_rounds = r;
		for (i = 0; i < g_nparts; i++) {
			if (g_parts[i].skipped)
				continue;
			if (g_async)
				check_async(&g_parts[i], r, false);
			else
				check_sync(&g_parts[i], r);
		}
		if (g_progress)
			printf("pslite-check worker %d: round %ld done\n", g_me, r);
		if (g_fail || (g_ctl && get_int(4, g_ctl->pull)))
			break;
	}
	wall = now_s() - start;
	if (g_restart_ok)
		restart_finish(done_rounds);

	if (g_async && !g_fail) {
		/* every worker's last push is in: the store is init + every a */
		rc = psl_barrier(0, PSL_GROUP_WORKERS);
		if (rc)
			failf("barrier of the workers: %s", psl_strerror(rc));
		for (i = 0; i < g_nparts && !rc; i++)
			if ((rc = check_pull(&g_parts[i])))
				failf("pull: %s", psl_strerror(rc));
		if (!wait_all(false, true))
			for (i = 0; i < g_nparts; i++)
				check_async(&g_parts[i], done_rounds, true);
	}

	{
		/* bench: wall time of the rounds, checks included (as pslite-bench
		 * measures); otherwise the time in requests (filling and checking
		 * every element take longer than the requests) */
		double secs = g_bench ? wall : busy > 0 ? busy : 1e-9;
		double gbps = 8.0 * (double)total_bytes * (double)done_rounds / (secs * 1e9);
		if (g_fail)
			exit_code = 1;
		printf("pslite-check worker %d: %s: %s, %ld rounds of %zu partitions (%zu bytes), "
		       "%zu elements checked%s, goodput %.4f Gbps (%s)\n",
		       g_me, g_fail ? "FAIL" : "PASS", g_async ? "async" : "sync", done_rounds,
		       g_nparts, total_bytes, g_checked, g_bench ? " (sampled)" : "", gbps,
		       g_bench ? "wall time" : "time in requests");
		if (g_fail)
			printf("pslite-check worker %d: FAIL: %ld mismatch(es) or failed "
			       "request(s)\n",
			       g_me, g_fail);
		if (g_json)
			printf("{\"tool\":\"pslite-check\",\"van\":\"%s\",\"mode\":\"%s\","
			       "\"worker\":%d,\"workers\":%d,\"servers\":%d,\"partitions\":%zu,"
			       "\"bytes_per_round\":%zu,\"rounds\":%ld,\"seconds\":%.4f,"
			       "\"goodput_gbps\":%.4f,\"checked\":%zu,\"failures\":%ld}\n",
			       psl_van_name(), g_async ? "async" : "sync", g_me, g_W,
			       psl_num_servers(), g_nparts, total_bytes, done_rounds, secs, gbps,
			       g_checked, g_fail);
	}

	if (g_leave_pull && g_me == 0 && !g_async && g_nparts) {
		/* a pull of a round nobody pushes: the server must answer it when
		 * the job ends (before its van goes), and this worker leaves
		 * without waiting for it */
		if ((rc = check_pull(&g_parts[0])))
			failf("pull: %s", psl_strerror(rc));
		rc = psl_finalize(0, true);
		if (rc && !exit_code)
			exit_code = 1;
		psl_kv_worker_free(g_kv); /* the pull failed at finalize */
		goto out_free;
	}
out_worker:
	psl_kv_worker_free(g_kv);
	restart_free();
out_finalize:
	rc = psl_finalize(0, true);
	if (rc && !exit_code)
		exit_code = 1;
out_free:
	for (i = 0; i < g_nparts; i++) {
		free(g_parts[i].push);
		free(g_parts[i].pull);
	}
	free(g_parts);
	return exit_code;
}
