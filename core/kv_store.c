/* A ready KV server (ps-lite's KVServerDefaultHandle): pushes are stored per
 * key, summed or overwritten; pulls answer what a key holds. */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "pslite.h"

#define NBUCKETS 4096

struct entry {
	uint64_t key;
	size_t n;     /* values */
	char *vals;   /* n * esz bytes */
	struct entry *next;
};

struct psl_kv_store {
	struct psl_kv_server *srv;
	enum psl_dtype dt;
	size_t esz;
	enum psl_kv_store_mode mode;
	pthread_mutex_t mu;
	struct entry *bucket[NBUCKETS];
};

static struct entry **slot(struct psl_kv_store *st, uint64_t key)
{
	struct entry **e = &st->bucket[(key * 0x9e3779b97f4a7c15ull) >> 52];
	while (*e && (*e)->key != key)
		e = &(*e)->next;
	return e;
}

#define ADD(T)                                                                   \
	do {                                                                     \
		T *d = (T *)dst;                                                 \
		const T *s = (const T *)src;                                     \
		for (i = 0; i < n; i++)                                          \
			d[i] = (T)(d[i] + s[i]);                                 \
	} while (0)

/* dst[i] += src[i] for n values of dt; -EINVAL for a dtype with no sum. */
static int add(enum psl_dtype dt, void *dst, const void *src, size_t n)
{
	size_t i;
	switch (dt) {
	case PSL_INT8: ADD(int8_t); return 0;
	case PSL_INT16: ADD(int16_t); return 0;
	case PSL_INT32: ADD(int32_t); return 0;
	case PSL_INT64: ADD(int64_t); return 0;
	case PSL_UINT8: ADD(uint8_t); return 0;
	case PSL_UINT16: ADD(uint16_t); return 0;
	case PSL_UINT32: ADD(uint32_t); return 0;
	case PSL_UINT64: ADD(uint64_t); return 0;
	case PSL_FLOAT32: ADD(float); return 0;
	case PSL_FLOAT64: ADD(double); return 0;
	default: return -EINVAL;
	}
}

/* Stores n values of key (st->mu held). */
static int store_locked(struct psl_kv_store *st, uint64_t key, const char *v, size_t n)
{
	struct entry **e = slot(st, key);
	char *copy;
	if (*e && st->mode == PSL_KV_STORE_SUM) {
		if ((*e)->n != n) {
			PSL_WARN("KV store: a push of %zu values for key %" PRIu64 ", which holds "
				 "%zu: a sum needs as many; answered with EINVAL",
				 n, key, (*e)->n);
			return -EINVAL;
		}
		return add(st->dt, (*e)->vals, v, n);
	}
	if (!(copy = malloc(n * st->esz + 1)))
		return -ENOMEM;
	memcpy(copy, v, n * st->esz);
	if (!*e && !(*e = calloc(1, sizeof(**e)))) {
		free(copy);
		return -ENOMEM;
	}
	(*e)->key = key;
	free((*e)->vals);
	(*e)->vals = copy;
	(*e)->n = n;
	return 0;
}

static int on_push(struct psl_kv_store *st, const struct psl_kv *kv)
{
	size_t i, off = 0, each = kv->num_keys ? kv->num_vals / kv->num_keys : 0;
	int rc = 0;
	pthread_mutex_lock(&st->mu);
	for (i = 0; i < kv->num_keys && !rc; i++) {
		size_t n = kv->lens ? (size_t)kv->lens[i] : each;
		rc = store_locked(st, kv->keys[i], (const char *)kv->vals + off * st->esz, n);
		off += n;
	}
	pthread_mutex_unlock(&st->mu);
	return rc;
}

/* The answer to a pull of kv's keys: their values, lens where they differ. */
static int on_pull(struct psl_kv_store *st, struct psl_kv_request *req)
{
	const struct psl_kv *kv = &req->kv;
	size_t i, total = 0, off = 0;
	struct entry *e;
	int *lens = calloc(kv->num_keys + 1, sizeof(int)), rc = 0;
	char *vals = NULL;
	bool same = true;
	if (!lens)
		return -ENOMEM;
	pthread_mutex_lock(&st->mu);
	for (i = 0; i < kv->num_keys; i++) {
		if (!(e = *slot(st, kv->keys[i]))) {
			PSL_WARN("KV store: a pull of key %" PRIu64 ", which no worker pushed: "
				 "answered with ENOENT", kv->keys[i]);
			rc = -ENOENT;
			goto out;
		}
		lens[i] = (int)e->n;
		same = same && e->n == (size_t)lens[0];
		total += e->n;
	}
	if (!(vals = malloc(total * st->esz + 1))) {
		rc = -ENOMEM;
		goto out;
	}
	for (i = 0; i < kv->num_keys; off += (size_t)lens[i++] * st->esz)
		memcpy(vals + off, (*slot(st, kv->keys[i]))->vals, (size_t)lens[i] * st->esz);
out:
	pthread_mutex_unlock(&st->mu);
	if (!rc) {
		struct psl_kv res = {.keys = kv->keys, .num_keys = kv->num_keys, .vals = vals,
				     .num_vals = total, .lens = same ? NULL : lens};
		rc = psl_kv_respond(req, &res); /* (copies) */
		rc = rc ? 1 : 0; /* answered, with an error or not */
	}
	free(vals);
	free(lens);
	return rc;
}

static void handle(struct psl_kv_server *s, struct psl_kv_request *req, void *arg)
{
	struct psl_kv_store *st = arg;
	int rc = 0;
	(void)s;
	if (req->meta.push)
		rc = on_push(st, &req->kv);
	if (!rc && req->meta.pull) {
		rc = on_pull(st, req);
		if (rc >= 0)
			return; /* answered */
	}
	if (rc)
		psl_kv_respond_error(req, rc);
	else
		psl_kv_respond(req, NULL);
}

int psl_kv_store_new(int app_id, enum psl_dtype dtype, enum psl_kv_store_mode mode,
		     struct psl_kv_store **out)
{
	struct psl_kv_store *st;
	int rc;
	char probe[8] = {0};
	psl__clear_error();
	if (!out || (mode != PSL_KV_STORE_SUM && mode != PSL_KV_STORE_OVERWRITE))
		return PSL_FAIL(-EINVAL, PSL_LOG_WARN, "psl_kv_store_new: %s",
				!out ? "out is NULL"
				     : "mode is neither PSL_KV_STORE_SUM nor PSL_KV_STORE_OVERWRITE");
	if (mode == PSL_KV_STORE_SUM && add(dtype, probe, probe, 0))
		return PSL_FAIL(-EINVAL, PSL_LOG_WARN, "psl_kv_store_new: dtype %d cannot be "
				"summed: use an integer or float32/64 dtype, or "
				"PSL_KV_STORE_OVERWRITE", (int)dtype);
	if (!(st = calloc(1, sizeof(*st))))
		return PSL_FAIL(-ENOMEM, PSL_LOG_ERROR, "psl_kv_store_new: out of memory");
	st->dt = dtype;
	st->esz = psl_dtype_size(dtype);
	st->mode = mode;
	pthread_mutex_init(&st->mu, NULL);
	rc = psl_kv_server_new(app_id, dtype, handle, st, &st->srv);
	if (rc) {
		pthread_mutex_destroy(&st->mu);
		free(st);
		return rc;
	}
	*out = st;
	return 0;
}

void psl_kv_store_free(struct psl_kv_store *st)
{
	size_t b;
	if (!st)
		return;
	psl_kv_server_free(st->srv);
	for (b = 0; b < NBUCKETS; b++) {
		while (st->bucket[b]) {
			struct entry *e = st->bucket[b];
			st->bucket[b] = e->next;
			free(e->vals);
			free(e);
		}
	}
	pthread_mutex_destroy(&st->mu);
	free(st);
}
