/* A batch tensor's element type and shape in a KV meta (kv_tensor.c): the
 * values frame's data type entry holds the dtype, the meta's body the shape
 * (docs/wire.md section 11.3). */
#ifndef PSL_CORE_KV_TENSOR_H
#define PSL_CORE_KV_TENSOR_H

#include <stddef.h>
#include <stdint.h>

#include "message.h"
#include "pslite.h"

struct psl__tdesc {
	int dtype; /* 0: none given */
	int ndim;
	int64_t shape[PSL_KV_MAX_DIMS];
};

/* Bytes of a meta body that carries a shape: "PSLT", ndim, ndim int64s. */
#define PSL__TDESC_BODY (8 + 8 * PSL_KV_MAX_DIMS)

/* 0 if t's dtype and shape describe its len values of esz bytes, else
 * -EINVAL (logged, naming what). */
int psl__tdesc_check(const struct psl_kv_tensor *t, size_t esz, const char *what);
/* t's dtype (dflt where it has none) into the values frame's data type entry
 * and its shape into m's body (buf: PSL__TDESC_BODY bytes, valid while m is). */
void psl__tdesc_put(struct psl__meta *m, enum psl_dtype dflt, const struct psl_kv_tensor *t,
		    char *buf);
/* What m says of its values: d->dtype 0 and d->ndim 0 where it says nothing
 * that can be read. */
void psl__tdesc_get(const struct psl__meta *m, struct psl__tdesc *d);
/* d onto t if it describes bytes bytes; a shape that does not is dropped. */
void psl__tdesc_apply(const struct psl__tdesc *d, size_t bytes, struct psl_kv_tensor *t);

/* kv_server.c: what a request's values are, and what its answer is to say. */
void psl__kv_request_tdesc(const struct psl_kv_request *req, struct psl__tdesc *d);
void psl__kv_request_answer_tdesc(struct psl_kv_request *req, const struct psl_kv_tensor *t);

#endif
