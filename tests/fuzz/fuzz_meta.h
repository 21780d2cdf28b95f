/*
 * The property both fuzzers check for one input: psl__meta_decode either
 * rejects it (with a reason), or accepts a meta that encodes back to a frame
 * of the input's length and decodes again to the same meta. Run under
 * AddressSanitizer, the caller hands in a buffer of exactly `len` bytes, so
 * any read past it is reported.
 */
#ifndef PSL_FUZZ_META_H
#define PSL_FUZZ_META_H

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "message.h"

#define FUZZ_CHECK(c)                                                                    \
	do {                                                                             \
		if (!(c)) {                                                              \
			fprintf(stderr, "fuzz_meta: %s:%d: check failed: %s\n", __FILE__, \
				__LINE__, #c);                                           \
			abort();                                                         \
		}                                                                        \
	} while (0)

static void fuzz_same_node(const struct psl__node *a, const struct psl__node *b)
{
	FUZZ_CHECK(a->role == b->role && a->id == b->id && a->port == b->port);
	FUZZ_CHECK(!strcmp(a->hostname, b->hostname));
	FUZZ_CHECK(a->is_recovery == b->is_recovery && a->customer_id == b->customer_id);
	FUZZ_CHECK(a->aux_id == b->aux_id && a->addr_len == b->addr_len);
	FUZZ_CHECK(!memcmp(a->addr, b->addr, a->addr_len));
	FUZZ_CHECK(b->first_port == (a->first_port ? a->first_port : a->port));
}

/* What the wire carries of a decoded meta must survive encode + decode. */
static void fuzz_same_meta(const struct psl__meta *a, const struct psl__meta *b)
{
	int i;
	FUZZ_CHECK(a->head == b->head && a->app_id == b->app_id);
	FUZZ_CHECK(a->customer_id == b->customer_id && a->timestamp == b->timestamp);
	FUZZ_CHECK(a->request == b->request && a->push == b->push);
	FUZZ_CHECK(a->simple_app == b->simple_app);
	FUZZ_CHECK(a->src_dev_type == b->src_dev_type && a->src_dev_id == b->src_dev_id);
	FUZZ_CHECK(a->dst_dev_type == b->dst_dev_type && a->dst_dev_id == b->dst_dev_id);
	FUZZ_CHECK(a->data_size == b->data_size && a->key == b->key && a->addr == b->addr);
	FUZZ_CHECK(a->val_len == b->val_len && a->option == b->option && a->sid == b->sid);
	FUZZ_CHECK(a->body_size == b->body_size);
	FUZZ_CHECK(!a->body_size || !memcmp(a->body, b->body, (size_t)a->body_size));
	FUZZ_CHECK(a->data_type_size == b->data_type_size);
	for (i = 0; i < a->data_type_size; i++)
		FUZZ_CHECK(a->data_type[i] == b->data_type[i]);
	FUZZ_CHECK(a->cmd == b->cmd && a->node_size == b->node_size);
	if (a->cmd == PSL_CMD_ACK)
		FUZZ_CHECK(a->msg_sig == b->msg_sig);
	if (a->cmd == PSL_CMD_BARRIER || a->cmd == PSL_CMD_INSTANCE_BARRIER)
		FUZZ_CHECK(a->barrier_group == b->barrier_group);
	for (i = 0; i < a->node_size; i++)
		fuzz_same_node(&a->nodes[i], &b->nodes[i]);
}

/* Returns 1 if the input was accepted, 0 if it was rejected. */
static int fuzz_meta_one(const uint8_t *data, size_t len)
{
	struct psl__meta m, m2, m3;
	char why[256];
	uint8_t *enc, *enc2;
	size_t n;
	int rc;

	why[0] = 0;
	rc = psl__meta_decode(data, len, &m, why, sizeof(why));
	if (rc) {
		FUZZ_CHECK(rc == -EBADMSG || rc == -ENOMEM);
		FUZZ_CHECK(rc == -ENOMEM || why[0] != 0);
		FUZZ_CHECK(m.nodes == NULL && m.node_size == 0);
		return 0;
	}
	FUZZ_CHECK(m.node_size >= 0 && m.data_type_size >= 0 && m.body_size >= 0);
	n = psl__meta_size(&m);
	FUZZ_CHECK(n == len);
	enc = malloc(n);
	FUZZ_CHECK(enc != NULL);
	FUZZ_CHECK(psl__meta_encode(&m, enc) == n);
	rc = psl__meta_decode(enc, n, &m2, why, sizeof(why));
	if (rc)
		fprintf(stderr, "fuzz_meta: re-encoded meta rejected: %s\n", why);
	FUZZ_CHECK(rc == 0);
	fuzz_same_meta(&m, &m2);
	/* and encoding is stable from there on */
	enc2 = malloc(n);
	FUZZ_CHECK(enc2 != NULL);
	FUZZ_CHECK(psl__meta_encode(&m2, enc2) == n);
	FUZZ_CHECK(!memcmp(enc, enc2, n));
	FUZZ_CHECK(psl__meta_decode(enc2, n, &m3, why, sizeof(why)) == 0);
	psl__meta_clear(&m3);
	free(enc2);
	psl__meta_clear(&m2);
	free(enc);
	psl__meta_clear(&m);
	return 1;
}

#endif
