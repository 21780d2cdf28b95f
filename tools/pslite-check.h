/* pslite-check: what its files share */
#pragma once

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <pslite.h>

/* One tensor partition: one key. */
struct part {
	bool ctl;	 /* the stop flag of --seconds in sync mode */
	int t;		 /* tensor index (its declared key) */
	int dt;
	size_t esz;
	size_t off;	 /* first element of the partition in the tensor */
	size_t n;	 /* elements */
	uint64_t key;	 /* on the wire */
	int server;	 /* the server that holds the key */
	int len;	 /* bytes, the lens frame */
	int outlen;
	unsigned char *push, *pull;
	struct psl_kv_out out;
	int ts_push, ts_pull;
	atomic_int st_push, st_pull; /* 0 pending, 1 done, or the error */
	atomic_long done_push, done_pull; /* the order in which they completed */
	bool reinit;	 /* --restart-ok: needs a first push to the server again */
	bool went_on;	 /* --restart-ok: its first push there is the lost round's */
	bool skipped;	 /* --restart-ok: not pushed or not pulled right this round */
};

extern struct part *g_parts;
extern size_t g_nparts;
extern struct psl_kv_worker *g_kv;
extern int g_me, g_W;
extern long g_fail;

uint64_t check_encode_key(uint64_t key, int *server_out);
int check_push(struct part *q, int dt_on_wire, int len, int rtype);
int check_pull(struct part *q);
/* A mismatch or failed request (the first 10 are printed). */
__attribute__((format(printf, 1, 2))) void failf(const char *fmt, ...);
