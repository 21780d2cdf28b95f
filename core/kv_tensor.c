/* A batch tensor's element type and shape in a KV meta: the values frame's
 * data type entry (ps-lite's DataType numbers, pslite's float16, bfloat16
 * and bool beyond them) and, for a shaped tensor, the meta's body. */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <string.h>

#include "kv_tensor.h"
#include "log.h"

static void put_le(char *p, uint64_t v, int n)
{
	int i;
	for (i = 0; i < n; i++)
		p[i] = (char)(v >> (8 * i));
}

static uint64_t get_le(const char *p, int n)
{
	uint64_t v = 0;
	int i;
	for (i = 0; i < n; i++)
		v |= (uint64_t)(unsigned char)p[i] << (8 * i);
	return v;
}

/* Bytes that d's shape covers, or 0 if it has none or an impossible one. */
static uint64_t shape_bytes(int ndim, const int64_t *shape, size_t esz)
{
	uint64_t n = esz;
	int i;
	if (ndim < 1 || ndim > PSL_KV_MAX_DIMS)
		return 0;
	for (i = 0; i < ndim; i++) {
		if (shape[i] < 0 || (shape[i] && n > UINT64_MAX / (uint64_t)shape[i]))
			return 0;
		n *= (uint64_t)shape[i];
	}
	return n;
}

int psl__tdesc_check(const struct psl_kv_tensor *t, size_t esz, const char *what)
{
	size_t dsz = t->dtype ? psl_dtype_size(t->dtype) : esz;
	uint64_t n;
	if (!dsz)
		return PSL_FAIL(-EINVAL, PSL_LOG_WARN,
				"%s tensor of key %" PRIu64 ": dtype %d is no enum psl_dtype value",
				what, t->key, (int)t->dtype);
	if (t->ndim < 0 || t->ndim > PSL_KV_MAX_DIMS)
		return PSL_FAIL(-EINVAL, PSL_LOG_WARN,
				"%s tensor of key %" PRIu64 ": ndim %d, expected 0 to %d", what,
				t->key, t->ndim, PSL_KV_MAX_DIMS);
	if (!t->ndim)
		return 0;
	n = shape_bytes(t->ndim, t->shape, dsz);
	if (n != (uint64_t)t->len * esz && !(n == 0 && t->len == 0))
		return PSL_FAIL(-EINVAL, PSL_LOG_WARN,
				"%s tensor of key %" PRIu64 ": its shape covers %" PRIu64
				" bytes, its len %zu values of %zu bytes: make them agree",
				what, t->key, n, t->len, esz);
	return 0;
}

void psl__tdesc_put(struct psl__meta *m, enum psl_dtype dflt, const struct psl_kv_tensor *t,
		    char *buf)
{
	int i;
	if (m->data_type_size >= 2)
		m->data_type[1] = (int)(t->dtype ? t->dtype : dflt);
	if (t->ndim < 1 || t->ndim > PSL_KV_MAX_DIMS)
		return;
	memcpy(buf, "PSLT", 4);
	put_le(buf + 4, (uint64_t)t->ndim, 4);
	for (i = 0; i < t->ndim; i++)
		put_le(buf + 8 + 8 * i, (uint64_t)t->shape[i], 8);
	m->body = buf;
	m->body_size = 8 + 8 * t->ndim;
}

void psl__tdesc_get(const struct psl__meta *m, struct psl__tdesc *d)
{
	int i, n;
	memset(d, 0, sizeof(*d));
	if (m->data_type_size >= 2 && psl_dtype_size((enum psl_dtype)m->data_type[1]))
		d->dtype = m->data_type[1];
	if (m->body_size < 8 || !m->body || memcmp(m->body, "PSLT", 4))
		return;
	n = (int)get_le(m->body + 4, 4);
	if (n < 1 || n > PSL_KV_MAX_DIMS || m->body_size != 8 + 8 * n)
		return;
	for (i = 0; i < n; i++)
		d->shape[i] = (int64_t)get_le(m->body + 8 + 8 * i, 8);
	d->ndim = n;
}

void psl__tdesc_apply(const struct psl__tdesc *d, size_t bytes, struct psl_kv_tensor *t)
{
	size_t dsz = d->dtype ? psl_dtype_size((enum psl_dtype)d->dtype) : 0;
	t->dtype = (enum psl_dtype)d->dtype;
	t->ndim = 0;
	if (!d->ndim || !dsz)
		return;
	if (shape_bytes(d->ndim, d->shape, dsz) != bytes && bytes) {
		PSL_DBG("a tensor's shape does not cover its %zu bytes: given flat", bytes);
		return;
	}
	t->ndim = d->ndim;
	memcpy(t->shape, d->shape, sizeof(t->shape));
}
