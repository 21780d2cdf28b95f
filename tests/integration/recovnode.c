/*
 * recovnode: a node of the recovery tests (recovery.sh). DMLC_ROLE says
 * which:
 *
 *   scheduler  psl_start, psl_finalize; exits 3 if the job is not whole at
 *              its end (psl_job_lost), else 0
 *   server     serves a PSL_KV_STORE_OVERWRITE store of uint64 values
 *   worker     RECOV_ROUNDS rounds (default 300), 10 ms apart: pushes one
 *              key of every server's range, pulls it back and checks every
 *              value. A round that fails with a loss error (a server was
 *              lost) is tried again, up to 5 times (with PS_RECOVERY_WAIT
 *              the retry waits for the server's replacement).
 *
 * Every node prints "recovnode ROLE RANK: ready (recovery N)" once started.
 * RECOV_GROUP_BARRIER=1 starts as BytePS's nodes do (and recovery_node.cc of
 * tests/interop): psl_start without the barrier, then psl_barrier of every
 * node unless psl_is_recovery(), so that C++ nodes can be in the job.
 * RECOV_END_FILE=PATH: a server enters the final barrier only once PATH
 * exists (a C++ ps-lite scheduler counts a lost server's request for it and
 * its replacement's both, docs/recovery.md).
 * RECOV_GROUP=1: the process runs its whole instance group (psl_start_group,
 * DMLC_GROUP_SIZE instances): a server one store per instance, a worker one
 * thread per instance, each with its own KV worker and keys (its instance
 * rank's); "ready (recovery 1)" when every instance is a recovery.
 * DMLC_ROLE=joint: the process is both, its server a store and its worker
 * the rounds (on a thread of its own), "recovnode joint RANK: ready ...".
 * RECOV_NO_RETRY=1: a round is not tried again, but for -ENOENT (the pull
 * half of a push-pull was in flight to a lost server, which had the push
 * half: its replacement starts empty), tried once more and counted as
 * "refilled".
 * A worker prints "round N" every 20 rounds, then "OK (N rounds, M retried)"
 * (with ", K refilled" before the parenthesis where K > 0) and exits 0; a
 * wrong value: "FAILED ..." and exit 1; a round that could not complete:
 * "gave up ..." and exit 3.
 */
#define _GNU_SOURCE 1
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <pslite.h>

#define VALS 4 /* values per key */

static __thread int rank_here; /* (a group's worker: the thread's instance rank) */

static bool loss_error(int rc)
{
	return rc == -EHOSTDOWN || rc == -ECONNRESET || rc == -ETIMEDOUT ||
	       rc == -ECONNABORTED || rc == -ENOENT;
}

static uint64_t value(uint64_t key, int round, int j)
{
	return key * 31 + (uint64_t)round * 7919 + (uint64_t)j;
}

/* One round: push, pull, check. 0, a loss error, or 1 for a wrong value. */
static int one_round(struct psl_kv_worker *w, int round)
{
	int ns = psl_num_servers(), r, j, rc;
	uint64_t keys[64], vals[64 * VALS], got[64 * VALS];
	struct psl_kv kv = {.keys = keys, .num_keys = (size_t)ns, .vals = vals,
			    .num_vals = (size_t)ns * VALS};
	struct psl_kv_out out = {.vals = got, .cap = (size_t)ns * VALS};

	for (r = 0; r < ns && r < 64; r++) {
		uint64_t b, e;
		psl_server_key_range(r, &b, &e);
		keys[r] = b + (uint64_t)rank_here * 64 + (uint64_t)(round % 8);
		for (j = 0; j < VALS; j++)
			vals[r * VALS + j] = value(keys[r], round, j);
	}
	memset(got, 0, sizeof(got));
	if (getenv("RECOV_PUSHPULL")) {
		rc = psl_kv_pushpull(w, &kv, &out, 0, NULL, NULL);
	} else {
		rc = psl_kv_push(w, &kv, 0, NULL, NULL);
		if (rc >= 0)
			rc = psl_kv_wait(w, rc);
		if (rc)
			return rc;
		rc = psl_kv_pull(w, keys, (size_t)ns, &out, 0, NULL, NULL);
	}
	if (rc >= 0)
		rc = psl_kv_wait(w, rc);
	if (rc)
		return rc;
	for (r = 0; r < ns * VALS; r++)
		if (got[r] != vals[r]) {
			printf("recovnode worker %d: FAILED round %d: value %d of key %" PRIu64
			       " is %" PRIu64 ", expected %" PRIu64 "\n",
			       rank_here, round, r % VALS, keys[r / VALS], got[r], vals[r]);
			return 1;
		}
	return 0;
}

static int worker(void)
{
	struct psl_kv_worker *w;
	const char *e = getenv("RECOV_ROUNDS");
	int rounds = e ? atoi(e) : 300, i, tries, rc = 0, retried = 0, refilled = 0;
	int max_tries = getenv("RECOV_NO_RETRY") ? 1 : 6;
	struct timespec pause = {0, 10 * 1000000L};
	char note[32] = "";

	if (psl_kv_worker_new(0, 0, PSL_UINT64, &w))
		return 1;
	for (i = 0; i < rounds; i++) {
		for (tries = 0; tries < max_tries; tries++) {
			rc = one_round(w, i);
			if (rc == -ENOENT && max_tries == 1) {
				refilled++;
				rc = one_round(w, i);
			}
			if (!rc || !loss_error(rc))
				break;
			retried += tries + 1 < max_tries;
		}
		if (rc == 1)
			break;
		if (rc) {
			printf("recovnode worker %d: gave up in round %d: %s\n", rank_here, i,
			       psl_strerror(rc));
			break;
		}
		if (i % 20 == 0)
			printf("recovnode worker %d: round %d\n", rank_here, i);
		fflush(stdout);
		nanosleep(&pause, NULL);
	}
	psl_kv_worker_free(w);
	if (refilled)
		snprintf(note, sizeof(note), ", %d refilled", refilled);
	if (!rc)
		printf("recovnode worker %d: OK (%d rounds, %d retried%s)\n", rank_here, rounds,
		       retried, note);
	return rc == 1 ? 1 : rc ? 3 : 0;
}

#define MAX_INST 8

static bool grouped(void)
{
	const char *g = getenv("RECOV_GROUP");
	return g && *g == '1';
}

static int instances(void)
{
	int g = grouped() ? psl_group_size() : 1;
	return g < MAX_INST ? g : MAX_INST;
}

/* every instance of the process took a lost node's place */
static bool all_recovery(enum psl_role role)
{
	bool all = true;
	if (role == PSL_SCHEDULER)
		return psl_is_recovery();
	for (int i = 0; i < instances(); i++) {
		if (grouped())
			psl_use_instance(role, i);
		all = all && psl_is_recovery();
	}
	return all;
}

struct inst {
	pthread_t t;
	int index, code;
};

static void *worker_thread(void *arg)
{
	struct inst *in = arg;
	if (grouped())
		psl_use_instance(PSL_WORKER, in->index);
	else if (psl_my_role() == PSL_JOINT) /* (this thread: the worker node) */
		psl_use_role(PSL_WORKER);
	rank_here = grouped() ? psl_my_instance_rank() : psl_my_rank();
	in->code = worker();
	return NULL;
}

/* each instance's rounds on a thread of its own; the worst exit code */
static int workers(void)
{
	struct inst in[MAX_INST];
	int n = instances(), i, code = 0;
	for (i = 0; i < n; i++) {
		in[i].index = i;
		in[i].code = 1;
		if (pthread_create(&in[i].t, NULL, worker_thread, &in[i]))
			return 1;
	}
	for (i = 0; i < n; i++) {
		pthread_join(in[i].t, NULL);
		code = in[i].code > code ? in[i].code : code;
	}
	return code;
}

/* a store on each instance */
static int stores(struct psl_kv_store **st)
{
	for (int i = 0; i < instances(); i++) {
		if (grouped())
			psl_use_instance(PSL_SERVER, i);
		if (psl_kv_store_new(0, PSL_UINT64, PSL_KV_STORE_OVERWRITE, &st[i]))
			return 1;
	}
	return 0;
}

static void wait_end_file(void)
{
	const char *f = getenv("RECOV_END_FILE");
	struct timespec pause = {0, 50 * 1000000L};
	FILE *fp;
	while (f && *f && !(fp = fopen(f, "r")))
		nanosleep(&pause, NULL);
	if (f && *f)
		fclose(fp);
}

int main(void)
{
	struct psl_kv_store *st[MAX_INST] = {NULL};
	const char *who;
	char why[400];
	int rc, code = 0, i;
	bool barrier = !getenv("RECOV_GROUP_BARRIER");

	setvbuf(stdout, NULL, _IOLBF, 0);
	rc = grouped() ? psl_start_group(0, barrier) : psl_start(0, barrier);
	if (!rc && !barrier && !psl_is_recovery())
		rc = psl_barrier(0, PSL_GROUP_ALL);
	if (rc) {
		printf("recovnode: psl_start: %s\n", psl_strerror(rc));
		return 3;
	}
	rank_here = psl_my_rank();
	who = psl_is_scheduler() ? "scheduler"
	      : psl_my_role() == PSL_JOINT ? "joint"
	      : psl_is_server() ? "server" : "worker";
	if (psl_is_server() && stores(st))
		return 1;
	printf("recovnode %s %d: ready (recovery %d)\n", who, rank_here,
	       all_recovery(psl_my_role()));
	if (psl_is_worker())
		code = workers();
	if (psl_is_server())
		wait_end_file();
	psl_finalize(0, true);
	for (i = 0; i < MAX_INST; i++)
		psl_kv_store_free(st[i]);
	if (!code && psl_job_lost(why, sizeof(why))) {
		printf("recovnode %s %d: the job is not whole: %s\n", who, rank_here, why);
		code = 3;
	}
	return code;
}
