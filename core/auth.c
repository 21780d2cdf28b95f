/* The job secret's proofs: HMAC-SHA256 (core/sha256.c) over a nonce and what
 * the message says, never the secret itself. */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>

#include "auth.h"
#include "postoffice.h"
#include "sha256.h"

#define TAG "pslauth1 "

bool psl__auth_on(struct psl__office *o)
{
	return o->cfg.secret_len > 0;
}

int psl__auth_mac(struct psl__office *o, const void *msg, size_t len, uint8_t mac[32])
{
	if (!psl__auth_on(o))
		return -ENOENT;
	psl__hmac_sha256(o->cfg.secret, o->cfg.secret_len, msg, len, mac);
	return 0;
}

int psl__auth_check(struct psl__office *o, const void *msg, size_t len, const uint8_t mac[32])
{
	uint8_t want[32];
	int rc = psl__auth_mac(o, msg, len, want);
	if (rc)
		return rc;
	return psl__memeq_ct(want, mac, 32) ? 0 : -EACCES;
}

static void to_hex(const uint8_t *d, size_t n, char *out)
{
	static const char x[] = "0123456789abcdef";
	size_t i;
	for (i = 0; i < n; i++) {
		out[2 * i] = x[d[i] >> 4];
		out[2 * i + 1] = x[d[i] & 15];
	}
	out[2 * n] = 0;
}

int psl__auth_nonce_hex(char *buf, size_t n)
{
	uint8_t r[64];
	size_t got = 0;
	if (n > sizeof(r))
		return -EINVAL;
	while (got < n) {
		ssize_t k = getrandom(r + got, n - got, 0);
		if (k < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		got += (size_t)k;
	}
	to_hex(r, n, buf);
	return 0;
}

static void register_text(const struct psl__node *n, const char *nonce, char *out, size_t len)
{
	snprintf(out, len, "pslite-register|%d|%s|%d|%s", n->role, n->hostname, n->port, nonce);
}

int psl__auth_register_body(struct psl__office *o, const struct psl__node *n,
			    const char *nonce, char *body)
{
	char text[256];
	uint8_t mac[32];
	char hex[65];
	int rc;
	register_text(n, nonce, text, sizeof(text));
	if ((rc = psl__auth_mac(o, text, strlen(text), mac)))
		return rc;
	to_hex(mac, 32, hex);
	snprintf(body, PSL__AUTH_BODY_MAX, TAG "%s %s", nonce, hex);
	return 0;
}

/* "<32 hex> <64 hex>" after the tag -> nonce, mac */
static int parse_hex(const char *s, size_t n, uint8_t *out)
{
	size_t i;
	for (i = 0; i < 2 * n; i++) {
		char c = s[i];
		int v = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
		if (v < 0)
			return -EINVAL;
		if (i % 2 == 0)
			out[i / 2] = (uint8_t)(v << 4);
		else
			out[i / 2] |= (uint8_t)v;
	}
	return 0;
}

int psl__auth_register_check(struct psl__office *o, const struct psl__meta *m, char nonce[33])
{
	const size_t tl = strlen(TAG);
	char text[256];
	uint8_t mac[32];
	/* (a pslite node's view of the counts may follow: registration.c) */
	if (!m->body || m->body_size < (int)(tl + 32 + 1 + 64) ||
	    (m->body_size > (int)(tl + 32 + 1 + 64) && m->body[tl + 32 + 1 + 64] != '|') ||
	    memcmp(m->body, TAG, tl) ||
	    m->body[tl + 32] != ' ' || m->node_size != 1)
		return -EACCES;
	memcpy(nonce, m->body + tl, 32);
	nonce[32] = 0;
	if (parse_hex(nonce, 16, mac) || parse_hex(m->body + tl + 33, 32, mac))
		return -EACCES;
	register_text(&m->nodes[0], nonce, text, sizeof(text));
	return psl__auth_check(o, text, strlen(text), mac) ? -EACCES : 0;
}

static int list_mac(struct psl__office *o, const struct psl__node *nodes, int n,
		    const char *nonce, uint8_t mac[32])
{
	struct psl__sha256 s;
	uint8_t h[32];
	char item[128], hex[65], text[160];
	int i;
	psl__sha256_init(&s);
	for (i = 0; i < n; i++) {
		snprintf(item, sizeof(item), "%d|%d|%s|%d;", nodes[i].id, nodes[i].role,
			 nodes[i].hostname, nodes[i].port);
		psl__sha256_update(&s, item, strlen(item));
	}
	psl__sha256_final(&s, h);
	to_hex(h, 32, hex);
	snprintf(text, sizeof(text), "pslite-nodelist|%s|%s", nonce, hex);
	return psl__auth_mac(o, text, strlen(text), mac);
}

int psl__auth_list_body(struct psl__office *o, const struct psl__node *nodes, int n,
			const char *nonce, char *body)
{
	uint8_t mac[32];
	char hex[65];
	int rc = list_mac(o, nodes, n, nonce, mac);
	if (rc)
		return rc;
	to_hex(mac, 32, hex);
	snprintf(body, PSL__AUTH_BODY_MAX, TAG "%s", hex);
	return 0;
}

int psl__auth_list_check(struct psl__office *o, const struct psl__meta *m, const char *nonce)
{
	const size_t tl = strlen(TAG);
	uint8_t mac[32], want[32];
	if (!m->body || m->body_size != (int)(tl + 64) || memcmp(m->body, TAG, tl) ||
	    parse_hex(m->body + tl, 32, mac))
		return -EACCES;
	if (list_mac(o, m->nodes, m->node_size, nonce, want))
		return -EACCES;
	return psl__memeq_ct(want, mac, 32) ? 0 : -EACCES;
}
