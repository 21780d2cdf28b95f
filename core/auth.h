/* The job secret (PS_JOB_SECRET): proofs that a node knows it, without
 * sending it. Without a secret every function here says so and nothing on
 * the wire changes. */
#ifndef PSL_CORE_AUTH_H
#define PSL_CORE_AUTH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "message.h"

struct psl__office;

bool psl__auth_on(struct psl__office *o);
/* HMAC-SHA256 of msg under the job's secret: 0, or -ENOENT without one. */
int psl__auth_mac(struct psl__office *o, const void *msg, size_t len, uint8_t mac[32]);
/* 0 if mac is msg's, -EACCES if not, -ENOENT without a secret. */
int psl__auth_check(struct psl__office *o, const void *msg, size_t len, const uint8_t mac[32]);
/* Fills buf with n random bytes as 2n hex digits (buf holds 2n+1). */
int psl__auth_nonce_hex(char *buf, size_t n);

/* A registration's proof, carried in the ADD_NODE's body:
 * "pslauth1 <nonce> <mac>", the mac over the node's role, host, port and
 * the nonce. Writes it into body (PSL__AUTH_BODY_MAX bytes). */
#define PSL__AUTH_BODY_MAX 160
int psl__auth_register_body(struct psl__office *o, const struct psl__node *n,
			    const char *nonce, char *body);
/* Checks a registration: 0 and the nonce into nonce[33], or -EACCES. */
int psl__auth_register_check(struct psl__office *o, const struct psl__meta *m, char nonce[33]);
/* The node list's proof for the node that registered with nonce: a mac
 * over the nonce and every node's id, role, host and port. */
int psl__auth_list_body(struct psl__office *o, const struct psl__node *nodes, int n,
			const char *nonce, char *body);
int psl__auth_list_check(struct psl__office *o, const struct psl__meta *m, const char *nonce);

#endif
