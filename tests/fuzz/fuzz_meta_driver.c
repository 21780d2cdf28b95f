/*
 * Deterministic mutation fuzzer for psl__meta_decode, run by every make
 * check: hundreds of thousands of mutations and truncations of valid encoded
 * metas (data messages, node lists, barriers, ACKs), each decoded from a heap
 * buffer of exactly its length, so that under the AddressSanitizer build any
 * read past the frame is reported. Every accepted input must round-trip
 * (fuzz_meta.h).
 *
 *   fuzz_meta_driver [ITERATIONS] [SEED]    (default 300000, 1; or
 *                                            FUZZ_ITERATIONS in the environment)
 *   fuzz_meta_driver --write-seeds DIR      write the seed metas as a corpus
 */
#define _GNU_SOURCE 1
#include "config.h"

#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fuzz_meta.h"

static uint64_t rng = 1;
static uint64_t rnd(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

#define MAX_SEEDS 16
static uint8_t *seeds[MAX_SEEDS];
static size_t seed_len[MAX_SEEDS];
static int nseeds;

static void add_seed(const struct psl__meta *m)
{
	size_t n = psl__meta_size(m);
	uint8_t *b = malloc(n);
	FUZZ_CHECK(b && nseeds < MAX_SEEDS);
	FUZZ_CHECK(psl__meta_encode(m, b) == n);
	FUZZ_CHECK(fuzz_meta_one(b, n) == 1);
	seeds[nseeds] = b;
	seed_len[nseeds++] = n;
}

static void node(struct psl__node *n, int role, int id, const char *host, int port)
{
	memset(n, 0, sizeof(*n));
	n->role = role;
	n->id = id;
	snprintf(n->hostname, sizeof(n->hostname), "%s", host);
	n->port = port;
	n->aux_id = -1;
}

static void make_seeds(void)
{
	static struct psl__node nodes[5];
	struct psl__meta m;
	int i;

	/* a KV push (docs/wire.md 4.8) */
	psl__meta_init(&m);
	m.head = 0;
	m.app_id = m.customer_id = m.timestamp = 0;
	m.request = m.push = true;
	m.src_dev_type = m.dst_dev_type = PSL_DEV_CPU;
	m.src_dev_id = m.dst_dev_id = 0;
	m.data_size = 40;
	m.val_len = 4;
	m.addr = 0x1122334455667788ull;
	m.data_type_size = 3;
	m.data_type[0] = 8;
	m.data_type[1] = 9;
	m.data_type[2] = 3;
	add_seed(&m);
	/* a SimpleApp request with a body */
	m.simple_app = true;
	m.push = false;
	m.body = "hello from worker 0";
	m.body_size = (int)strlen(m.body);
	m.data_type_size = 0;
	add_seed(&m);
	/* a registration */
	node(&nodes[0], 1, 32767, "127.0.0.1", 40001);
	psl__meta_init(&m);
	m.cmd = PSL_CMD_ADD_NODE;
	m.nodes = nodes;
	m.node_size = 1;
	m.timestamp = 0;
	add_seed(&m);
	/* a node list: workers, servers, scheduler */
	node(&nodes[0], 1, 9, "127.0.0.1", 40001);
	node(&nodes[1], 1, 11, "127.0.0.1", 40002);
	node(&nodes[2], 0, 8, "10.0.0.2", 40003);
	node(&nodes[3], 0, 10, "host.example.org", 40004);
	nodes[3].addr_len = 16;
	for (i = 0; i < 16; i++)
		nodes[3].addr[i] = (uint8_t)(0xA0 + i);
	node(&nodes[4], 2, 1, "127.0.0.1", 9000);
	m.node_size = 5;
	add_seed(&m);
	/* node list after an odd-length body (misaligned records) */
	m.body = "xyz";
	m.body_size = 3;
	m.data_type_size = 1;
	m.data_type[0] = 11;
	m.node_size = 2;
	add_seed(&m);
	/* barrier, ACK, heartbeat */
	psl__meta_init(&m);
	m.cmd = PSL_CMD_INSTANCE_BARRIER;
	m.barrier_group = 7;
	m.request = true;
	m.app_id = 0;
	m.customer_id = 0;
	add_seed(&m);
	psl__meta_init(&m);
	m.cmd = PSL_CMD_ACK;
	m.msg_sig = 0x000009080000000Bull;
	add_seed(&m);
	psl__meta_init(&m);
	m.cmd = PSL_CMD_HEARTBEAT;
	m.nodes = &nodes[2];
	m.node_size = 1;
	add_seed(&m);
}

static const int32_t interesting[] = {0,   1,   2,	 3,   -1,	 7,	   8,	    9,
				      11,  12,  16,	 17,  63,	 64,	   65,	    112,
				      552, 553, 32767, 32768, 65535, 65536, INT_MAX, INT_MIN};

/* Offsets of the int32 fields that steer decoding. */
static const size_t hot[] = {0, 4, 8, 12, 16, 44, 48, 56, 72};

static size_t mutate(const uint8_t *src, size_t len, uint8_t *dst, size_t cap)
{
	size_t n = len, k, steps = 1 + rnd() % 4;
	memcpy(dst, src, len);
	for (k = 0; k < steps; k++) {
		size_t off;
		int32_t v;
		switch (rnd() % 9) {
		case 0: /* flip a bit */
			if (n)
				dst[rnd() % n] ^= (uint8_t)(1u << (rnd() % 8));
			break;
		case 1: /* a random byte */
			if (n)
				dst[rnd() % n] = (uint8_t)rnd();
			break;
		case 2: /* an interesting int32 on a steering field */
			off = hot[rnd() % (sizeof(hot) / sizeof(hot[0]))];
			v = interesting[rnd() % (sizeof(interesting) / sizeof(interesting[0]))];
			if (off + 4 <= n)
				memcpy(dst + off, &v, 4);
			break;
		case 3: /* an interesting int32 anywhere, 4-aligned */
			if (n >= 4) {
				off = (rnd() % (n / 4)) * 4;
				v = interesting[rnd() % (sizeof(interesting) / sizeof(interesting[0]))];
				memcpy(dst + off, &v, 4);
			}
			break;
		case 4: /* inside a node record: role, id, port, flags, lengths */
			if (n > 112 + 552) {
				static const size_t nf[] = {0, 4, 8, 71, 204, 464, 536, 540, 544};
				size_t base = n - 552 * (1 + rnd() % ((n - 112) / 552));
				off = base + nf[rnd() % (sizeof(nf) / sizeof(nf[0]))];
				if (off + 4 <= n) {
					v = interesting[rnd() % (sizeof(interesting) /
								 sizeof(interesting[0]))];
					memcpy(dst + off, &v, 4);
				}
				if (rnd() % 4 == 0 && base + 72 <= n)
					memset(dst + base + 8, 'A' + (int)(rnd() % 26), 64);
			}
			break;
		case 5: /* truncate */
			n = n ? rnd() % n : 0;
			break;
		case 6: /* extend with random bytes */
		{
			size_t add = 1 + rnd() % 600;
			if (n + add > cap)
				add = cap - n;
			for (off = 0; off < add; off++)
				dst[n + off] = (uint8_t)rnd();
			n += add;
			break;
		}
		case 7: /* fix the counts to a random but consistent-looking size */
			if (n >= 112) {
				int32_t body = (int32_t)(rnd() % 8), nt = (int32_t)(rnd() % 4),
					nn = (int32_t)(rnd() % 3);
				size_t want = 112 + (size_t)body + 4 * (size_t)nt + 552 * (size_t)nn;
				memcpy(dst + 4, &body, 4);
				memcpy(dst + 44, &nt, 4);
				memcpy(dst + 12, &nn, 4);
				if (want <= cap) {
					for (off = n; off < want; off++)
						dst[off] = (uint8_t)(rnd() % 3 ? 0 : rnd());
					n = want;
				}
			}
			break;
		default: /* splice the tail of another seed */
		{
			int s = (int)(rnd() % (uint64_t)nseeds);
			size_t at = n ? rnd() % n : 0, from = rnd() % seed_len[s];
			size_t take = seed_len[s] - from;
			if (at + take > cap)
				take = cap - at;
			memcpy(dst + at, seeds[s] + from, take);
			n = at + take;
			break;
		}
		}
	}
	return n;
}

static int write_seeds(const char *dir)
{
	int i;
	for (i = 0; i < nseeds; i++) {
		char p[4096];
		FILE *f;
		snprintf(p, sizeof(p), "%s/seed-%02d", dir, i);
		f = fopen(p, "wb");
		if (!f || fwrite(seeds[i], 1, seed_len[i], f) != seed_len[i]) {
			fprintf(stderr, "fuzz_meta_driver: cannot write %s: %s\n", p, strerror(errno));
			return 1;
		}
		fclose(f);
	}
	printf("wrote %d seeds to %s\n", nseeds, dir);
	return 0;
}

int main(int argc, char **argv)
{
	long iters = 300000, i, accepted = 0, rejected = 0;
	size_t cap = 112 + 64 + 64 + 6 * 552 + 1024;
	uint8_t *work = malloc(cap);
	const char *env = getenv("FUZZ_ITERATIONS");
	clock_t t0 = clock();
	int s;

	make_seeds();
	if (argc == 3 && !strcmp(argv[1], "--write-seeds")) {
		int rc = write_seeds(argv[2]);
		for (s = 0; s < nseeds; s++)
			free(seeds[s]);
		free(work);
		return rc;
	}
	if (env && *env)
		iters = atol(env);
	if (argc > 1)
		iters = atol(argv[1]);
	if (argc > 2)
		rng = strtoull(argv[2], NULL, 0) | 1;
	if (iters <= 0 || !work) {
		fprintf(stderr, "usage: fuzz_meta_driver [ITERATIONS] [SEED]\n");
		return 2;
	}
	for (s = 0; s < nseeds; s++) {
		size_t n;
		/* every truncation of every seed, exactly */
		for (n = 0; n < seed_len[s]; n++) {
			uint8_t *b = malloc(n ? n : 1);
			memcpy(b, seeds[s], n);
			FUZZ_CHECK(fuzz_meta_one(b, n) == 0);
			free(b);
		}
	}
	for (i = 0; i < iters; i++) {
		int sd = (int)(rnd() % (uint64_t)nseeds);
		size_t n = mutate(seeds[sd], seed_len[sd], work, cap);
		uint8_t *exact = malloc(n ? n : 1);
		FUZZ_CHECK(exact != NULL);
		memcpy(exact, work, n);
		if (fuzz_meta_one(exact, n))
			accepted++;
		else
			rejected++;
		free(exact);
	}
	printf("fuzz_meta_driver: %ld mutations (%ld accepted and round-tripped, %ld rejected) "
	       "in %.1f s\n",
	       iters, accepted, rejected, (double)(clock() - t0) / CLOCKS_PER_SEC);
	/* a driver that only ever hits one side tests little */
	if (iters >= 1000 && (accepted < iters / 100 || rejected < iters / 100)) {
		fprintf(stderr, "fuzz_meta_driver: the mutations are too one-sided to test much\n");
		return 1;
	}
	for (s = 0; s < nseeds; s++)
		free(seeds[s]);
	free(work);
	return 0;
}
