/*
 * insttest: a node of an instance-group job (DMLC_GROUP_SIZE = G > 1) that
 * runs either a whole group in this process (INSTTEST_MODE=group,
 * psl_start_group: ps-lite's model, DMLC_RANK the group's rank) or one
 * instance of it (INSTTEST_MODE=single, psl_start: StepMesh's model,
 * DMLC_NODE_RANK and STEPMESH_GPU). DMLC_ROLE says what it is (joint: G
 * servers and G workers).
 *
 * A server instance keeps the last value pushed to each key and answers
 * pulls from it; it checks that each request came from the worker instance
 * of its own index: the worker passes its index as the request's cmd, its
 * keys name its instance rank (range start + rank x 100 + j), and the
 * request's sender must be that worker's group's id (9 + 2 x group rank:
 * with instance groups a handler sees the worker group, as C++ ps-lite's
 * and StepMesh's KVMeta do).
 * A worker instance (one thread each) pushes and pulls its own keys in every
 * server group's range, INSTTEST_ROUNDS times, and checks every pulled value.
 * Every instance checks its rank, id and instance index, a barrier is passed
 * in between (not with INSTTEST_BARRIER=0), and each prints "insttest ROLE R.I: OK" (server: with the
 * number of requests it served) or what differed, exiting 1.
 */
#define _GNU_SOURCE 1
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <pslite.h>

#define MAX_INST PSL_MAX_GROUP
#define NKEYS 8	    /* per worker instance and server group */
#define TABLE 4096  /* keys a server instance holds */

static atomic_int g_fail;

#define CHECK(cond, who, ...)                                                          \
	do {                                                                           \
		if (!(cond)) {                                                         \
			fprintf(stderr, "insttest %s: FAILED at line %d: ", who, __LINE__); \
			fprintf(stderr, __VA_ARGS__);                                  \
			fprintf(stderr, "\n");                                         \
			atomic_fetch_add(&g_fail, 1);                                  \
		}                                                                      \
	} while (0)

struct inst {
	int index; /* in the group */
	char who[48];
	struct psl_kv_server *srv;
	struct psl_kv_worker *wrk;
	pthread_mutex_t mu;
	uint64_t keys[TABLE], vals[TABLE];
	int nkeys;
	uint64_t base; /* a server instance's group's key range starts here */
	atomic_int requests, bad_sender;
};

/* this process's server and worker instances (both for DMLC_ROLE=joint) */
static struct inst g_srv[MAX_INST], g_wrk[MAX_INST];
static int g_n;

static uint64_t *slot(struct inst *in, uint64_t key, bool add)
{
	int i;
	for (i = 0; i < in->nkeys; i++)
		if (in->keys[i] == key)
			return &in->vals[i];
	if (!add || in->nkeys == TABLE)
		return NULL;
	in->keys[in->nkeys] = key;
	in->vals[in->nkeys] = 0;
	return &in->vals[in->nkeys++];
}

/* Whether a request came from the worker instance of in's index: by its cmd,
 * by the instance rank its keys name, and by its sender (that instance's
 * group's id). Says the first that differs. */
static bool from_own_index(struct inst *in, const struct psl_kv_request *req)
{
	int g = psl_group_size(), wr = -1, want;
	bool ok;
	if (req->kv.num_keys > 0 && req->kv.keys[0] >= in->base)
		wr = (int)((req->kv.keys[0] - in->base) / 100);
	want = wr >= 0 ? psl_worker_rank_to_id(wr / g) : -1;
	ok = req->meta.cmd == in->index && wr % g == in->index && req->meta.sender == want;
	if (!ok && atomic_load(&in->bad_sender) == 0)
		fprintf(stderr, "insttest %s: a request with cmd %d from node %d, keys of worker "
				"instance rank %d (whose group's id is %d)\n",
			in->who, req->meta.cmd, req->meta.sender, wr, want);
	return ok;
}

static void handle(struct psl_kv_server *s, struct psl_kv_request *req, void *arg)
{
	struct inst *in = arg;
	uint64_t out[64], *v;
	size_t i, n = req->kv.num_keys;
	struct psl_kv res = {.keys = req->kv.keys, .num_keys = n, .vals = out, .num_vals = n};

	atomic_fetch_add(&in->requests, 1);
	if (!from_own_index(in, req))
		atomic_fetch_add(&in->bad_sender, 1);
	if (n > 64 || (req->meta.push && req->kv.num_vals != n)) {
		psl_kv_respond_error(req, -EINVAL);
		return;
	}
	pthread_mutex_lock(&in->mu);
	for (i = 0; i < n; i++) {
		v = slot(in, req->kv.keys[i], req->meta.push);
		if (req->meta.push && v)
			*v = ((const uint64_t *)req->kv.vals)[i];
		out[i] = v ? *v : 0;
	}
	pthread_mutex_unlock(&in->mu);
	psl_kv_respond(req, req->meta.pull ? &res : NULL);
}

static uint64_t value(uint64_t key, int rank, int round)
{
	return key * 0x9E3779B97F4A7C15ull + (uint64_t)rank * 1000003u + (uint64_t)round;
}

static void *work(void *arg)
{
	struct inst *in = arg;
	int rank, nserv = psl_num_servers(), round, s, j, rounds;
	size_t nk = 0;
	uint64_t keys[64], vals[64], got[64], b, e;
	const char *r = getenv("INSTTEST_ROUNDS");

	rounds = r ? atoi(r) : 20;
	if (psl_use_instance(PSL_WORKER, in->index)) {
		CHECK(0, in->who, "psl_use_instance: %s", psl_last_error());
		return NULL;
	}
	rank = psl_my_instance_rank();
	for (s = 0; s < nserv && nk + NKEYS <= 64; s++) {
		if (psl_server_key_range(s, &b, &e)) {
			CHECK(0, in->who, "psl_server_key_range(%d): %s", s, psl_last_error());
			return NULL;
		}
		for (j = 0; j < NKEYS; j++)
			keys[nk++] = b + (uint64_t)rank * 100 + (uint64_t)j;
	}
	for (round = 0; round < rounds; round++) {
		struct psl_kv kv = {.keys = keys, .num_keys = nk, .vals = vals, .num_vals = nk};
		struct psl_kv_out out = {.vals = got, .cap = nk};
		size_t i;
		int ts, rc;

		for (i = 0; i < nk; i++)
			vals[i] = value(keys[i], rank, round);
		ts = psl_kv_push(in->wrk, &kv, in->index, NULL, NULL);
		rc = ts < 0 ? ts : psl_kv_wait(in->wrk, ts);
		CHECK(rc == 0, in->who, "push round %d: %s", round, psl_strerror(rc));
		memset(got, 0, sizeof(got));
		ts = psl_kv_pull(in->wrk, keys, nk, &out, in->index, NULL, NULL);
		rc = ts < 0 ? ts : psl_kv_wait(in->wrk, ts);
		CHECK(rc == 0, in->who, "pull round %d: %s", round, psl_strerror(rc));
		if (rc)
			return NULL;
		CHECK(out.num_vals == nk, in->who, "pull round %d: %zu values, expected %zu",
		      round, out.num_vals, nk);
		for (i = 0; i < nk; i++)
			if (got[i] != vals[i]) {
				CHECK(0, in->who, "round %d key %" PRIu64 ": pulled %" PRIu64
				      ", pushed %" PRIu64, round, keys[i], got[i], vals[i]);
				return NULL;
			}
	}
	return NULL;
}

/* The instances this process runs of a role: all G of its group, or its
 * own. */
static void list_instances(bool group, struct inst *insts)
{
	int i, g = psl_group_size();
	g_n = group ? g : 1;
	for (i = 0; i < g_n; i++) {
		insts[i].index = group ? i : psl_my_instance();
		pthread_mutex_init(&insts[i].mu, NULL);
	}
}

/* Each instance: its identity checked, its KV object made on it. */
static void make_objects(int role, struct inst *insts)
{
	int i, g = psl_group_size(), rc;
	const char *rn = role == PSL_SERVER ? "server" : "worker";
	for (i = 0; i < g_n; i++) {
		struct inst *in = &insts[i];
		int ir;
		rc = psl_use_instance(role, in->index);
		snprintf(in->who, sizeof(in->who), "%s %d.%d", rn, psl_my_rank(), in->index);
		CHECK(rc == 0, in->who, "psl_use_instance(%d): %s", in->index, psl_last_error());
		ir = psl_my_instance_rank();
		CHECK(psl_my_instance() == in->index && ir % g == in->index &&
			      ir / g == psl_my_rank(),
		      in->who, "instance %d, instance rank %d, rank %d", psl_my_instance(), ir,
		      psl_my_rank());
		CHECK(psl_my_id() == (role == PSL_SERVER ? psl_server_rank_to_id(ir)
							 : psl_worker_rank_to_id(ir)),
		      in->who, "id %d for instance rank %d", psl_my_id(), ir);
		if (role == PSL_SERVER &&
		    psl_server_key_range(psl_my_rank(), &in->base, &(uint64_t){0}))
			CHECK(0, in->who, "psl_server_key_range: %s", psl_last_error());
		if (role == PSL_SERVER)
			rc = psl_kv_server_new(0, PSL_UINT64, handle, in, &in->srv);
		else
			rc = psl_kv_worker_new(0, 0, PSL_UINT64, &in->wrk);
		CHECK(rc == 0, in->who, "making its KV %s: %s", rn, psl_last_error());
	}
	/* an instance this process does not run: a clear error */
	rc = psl_use_instance(role, g);
	CHECK(rc == -ENOENT && strstr(psl_last_error(), "instance"), "process",
	      "psl_use_instance(%d) of %d: %d (%s)", g, g, rc, psl_last_error());
}

static void report(int role, struct inst *insts)
{
	int i;
	for (i = 0; i < g_n; i++) {
		struct inst *in = &insts[i];
		if (role == PSL_SERVER) {
			CHECK(in->requests > 0 && !in->bad_sender, in->who,
			      "%d requests, %d not from the worker instance of its index", in->requests,
			      in->bad_sender);
			psl_kv_server_free(in->srv);
		} else {
			psl_kv_worker_free(in->wrk);
		}
		if (!g_fail && role == PSL_SERVER)
			printf("insttest %s: OK (%d requests)\n", in->who, in->requests);
		else if (!g_fail)
			printf("insttest %s: OK\n", in->who);
	}
}

int main(void)
{
	const char *mode = getenv("INSTTEST_MODE");
	bool group = !mode || !strcmp(mode, "group");
	pthread_t th[MAX_INST];
	int rc, i;
	bool srv, wrk;

	rc = group ? psl_start_group(0, true) : psl_start(0, true);
	if (rc) {
		fprintf(stderr, "insttest: start: %s\n", psl_strerror(rc));
		psl_finalize(0, false);
		return 3;
	}
	srv = psl_is_server();
	wrk = psl_is_worker();
	if (srv) {
		list_instances(group, g_srv);
		make_objects(PSL_SERVER, g_srv);
	}
	if (wrk) {
		list_instances(group, g_wrk);
		make_objects(PSL_WORKER, g_wrk);
	}
	/* every instance has its KV objects before any request (a C++
	 * scheduler's job passes none: INSTTEST_BARRIER=0) */
	if (!getenv("INSTTEST_BARRIER") || atoi(getenv("INSTTEST_BARRIER"))) {
		rc = psl_barrier(0, PSL_GROUP_ALL);
		CHECK(rc == 0, "process", "psl_barrier: %s", psl_strerror(rc));
	}
	if (wrk) {
		for (i = 0; i < g_n; i++)
			pthread_create(&th[i], NULL, work, &g_wrk[i]);
		for (i = 0; i < g_n; i++)
			pthread_join(th[i], NULL);
	}
	rc = psl_finalize(0, true);
	CHECK(rc == 0, "process", "psl_finalize: %s", psl_strerror(rc));
	if (srv)
		report(PSL_SERVER, g_srv);
	if (wrk)
		report(PSL_WORKER, g_wrk);
	if (!srv && !wrk && !g_fail)
		printf("insttest scheduler: OK\n");
	return g_fail ? 1 : 0;
}
