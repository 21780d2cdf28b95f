/*
 * zfree: a zero-copy push whose request fails while the van still sends its
 * buffers (issue 26, case 8). One worker, one server. The worker freezes the
 * server (SIGSTOP), pushes ZFREE_MB (64) MiB to it with psl_kv_zpush under a
 * deadline of 500 ms (psl_kv_worker_set_timeout), and lets the server go on
 * 1.5 s later. The request fails (ETIMEDOUT); as soon as it completes, the
 * worker overwrites its buffer with 0xEE and frees it, as pslite.h allows.
 * The server checks each byte it receives: when the request completed while
 * the van still held the buffer, it receives 0xEE where the data was ("N
 * bytes differ"). A one-byte push after it, answered, shows that the server
 * has checked it. The server writes its pid to ZFREE_DIR.
 */
#define _GNU_SOURCE 1
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <pslite.h>

#define RESUME_MS 1500

static uint8_t pattern(uint64_t key, size_t i)
{
	return (uint8_t)((i * 131 + key * 7 + (i >> 12)) % 200); /* never 0xEE */
}

static int64_t now_ms(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (int64_t)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

static void handler(struct psl_kv_server *s, struct psl_kv_request *req, void *arg)
{
	const uint8_t *v = req->kv.vals;
	size_t i, off = 0, k, bad = 0, first = 0;
	(void)s;
	(void)arg;
	for (k = 0; req->meta.push && k < req->kv.num_keys; k++) {
		size_t len = req->kv.lens ? (size_t)req->kv.lens[k] : req->kv.num_vals;
		for (i = 0; i < len; i++)
			if (v[off + i] != pattern(req->kv.keys[k], i) && !bad++)
				first = i;
		if (len >= 1 << 20)
			printf("zfree server: a push of %zu bytes: %s (%zu bytes differ, the "
			       "first at offset %zu)\n",
			       len, bad ? "CORRUPTED" : "intact", bad, first);
		off += len;
	}
	psl_kv_respond(req, NULL);
}

static int read_pid(const char *dir, int rank)
{
	char path[4096];
	int pid = 0, tries;
	snprintf(path, sizeof(path), "%s/server%d.pid", dir, rank);
	for (tries = 0; tries < 100 && pid <= 0; tries++) {
		FILE *f = fopen(path, "r");
		if (f) {
			if (fscanf(f, "%d", &pid) != 1)
				pid = 0;
			fclose(f);
		}
		if (pid <= 0)
			usleep(100000);
	}
	return pid;
}

static void *resume(void *arg)
{
	int pid = *(int *)arg;
	usleep(RESUME_MS * 1000);
	kill(pid, SIGCONT);
	return NULL;
}

/* A one-byte push to the same server, answered: the server handles a
 * worker's messages in order, so it has checked the big push by then (and
 * the job's end cannot cut that short). 0, or -1 (said). */
static int after_push(struct psl_kv_worker *w, uint64_t key)
{
	uint8_t one = pattern(key, 0);
	int ts, rc;
	psl_kv_worker_set_timeout(w, 30000);
	ts = psl_kv_push(w, &(struct psl_kv){&key, 1, &one, 1, NULL, PSL_MEM_HOST, 0}, 0, NULL,
			 NULL);
	rc = ts < 0 ? ts : psl_kv_wait(w, ts);
	if (rc)
		fprintf(stderr, "zfree worker: FAILED: the push after it: %s\n", psl_strerror(rc));
	return rc ? -1 : 0;
}

static int run_worker(const char *dir, size_t big)
{
	struct psl_kv_worker *w;
	uint64_t key, e;
	uint8_t *vals = malloc(big);
	int pid, ts, rc;
	pthread_t th;
	int64_t t0;
	size_t i;

	if ((rc = psl_kv_worker_new(0, 0, PSL_UINT8, &w)))
		return fprintf(stderr, "zfree worker: %s\n", psl_strerror(rc)), 1;
	psl_server_key_range(0, &key, &e);
	pid = read_pid(dir, 0);
	if (!vals || pid <= 0)
		return fprintf(stderr, "zfree worker: no buffer or no server pid\n"), 1;
	for (i = 0; i < big; i++)
		vals[i] = pattern(key, i);
	psl_kv_worker_set_timeout(w, 500);
	kill(pid, SIGSTOP);
	t0 = now_ms();
	ts = psl_kv_zpush(w, &(struct psl_kv){&key, 1, vals, big, NULL, PSL_MEM_HOST, 0}, 0,
			  NULL, NULL);
	if (ts < 0 || pthread_create(&th, NULL, resume, &pid))
		return fprintf(stderr, "zfree worker: zpush: %s\n", psl_strerror(ts)), 1;
	rc = psl_kv_wait(w, ts);
	printf("zfree worker: the push completed after %lld ms (deadline 500 ms, the server "
	       "resumed after %d ms): %s\n",
	       (long long)(now_ms() - t0), RESUME_MS, rc ? psl_strerror(rc) : "no error");
	memset(vals, 0xEE, big); /* the request completed: ours again */
	free(vals);
	pthread_join(th, NULL);
	if (rc != -ETIMEDOUT)
		fprintf(stderr, "zfree worker: FAILED: expected ETIMEDOUT\n");
	if (after_push(w, key))
		rc = 0; /* (not ETIMEDOUT: fails) */
	psl_kv_worker_free(w);
	return rc == -ETIMEDOUT ? 0 : 1;
}

int main(void)
{
	const char *dir = getenv("ZFREE_DIR");
	size_t big = (size_t)(getenv("ZFREE_MB") ? atoi(getenv("ZFREE_MB")) : 64) << 20;
	struct psl_kv_server *srv = NULL;
	int rc, code = 0;

	setvbuf(stdout, NULL, _IOLBF, 0);
	if (!dir)
		return fprintf(stderr, "zfree: set ZFREE_DIR\n"), 2;
	if ((rc = psl_start(0, true)))
		return fprintf(stderr, "zfree: psl_start: %s\n", psl_strerror(rc)), 2;
	if (psl_is_server()) {
		char path[4096];
		FILE *f;
		if ((rc = psl_kv_server_new(0, PSL_UINT8, handler, NULL, &srv)))
			return fprintf(stderr, "zfree: %s\n", psl_strerror(rc)), 2;
		snprintf(path, sizeof(path), "%s/server%d.pid", dir, psl_my_rank());
		f = fopen(path, "w");
		if (f) {
			fprintf(f, "%d\n", (int)getpid());
			fclose(f);
		}
	}
	if (psl_is_worker())
		code = run_worker(dir, big);
	psl_finalize(0, true);
	return code;
}
