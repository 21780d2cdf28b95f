/*
 * Unit tests for CUDA memory through the API (core/cuda.c and its use in
 * kv_worker.c, kv_server.c, kv_batch.c), against the fake CUDA runtime
 * (fake_cudart.c, whose device memory the host cannot touch) over the fake
 * van: loading the runtime and its errors, staging through pinned buffers
 * (push, pull, server response, batch), the direct path for a van that
 * takes CUDA memory, injected CUDA failures, and a pinned pool that does
 * not grow; ordering with the caller's CUDA work (the fake's streams run
 * later, its kernels write and read after a delay), devices and contexts,
 * the last-error slot, and which runtime is loaded.
 */
#define _GNU_SOURCE 1
#include "config.h"

#include <dlfcn.h>
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "cuda.h"
#include "customer.h"
#include "message.h"
#include "postoffice.h"
#include "pslite.h"
#include "resender.h"
#include "van_host.h"
#include "testutil.h"
#include "fakevan.h"

#ifndef FAKE_CUDART
#error "FAKE_CUDART: the path of the fake runtime, from the Makefile"
#endif

/* Use the fake runtime, with FAKE_CUDA_* settings fail (NULL: none). */
static void use_fake(const char *fail, const char *devices)
{
	psl__cuda_reset();
	setenv("PS_CUDA_LIB", FAKE_CUDART, 1);
	if (fail)
		setenv("FAKE_CUDA_FAIL", fail, 1);
	else
		unsetenv("FAKE_CUDA_FAIL");
	if (devices)
		setenv("FAKE_CUDA_DEVICES", devices, 1);
	else
		unsetenv("FAKE_CUDA_DEVICES");
	unsetenv("PS_CUDA_DIRECT");
}

static int teardown(void **state)
{
	psl__po.caps.flags = 0;
	node_down(state);
	psl__cuda_reset();
	return 0;
}

/* A device buffer holding n bytes of src. */
static void *dev_copy_of(const void *src, size_t n)
{
	void *d;
	assert_int_equal(psl_mem_alloc(PSL_MEM_CUDA, 0, n, &d), 0);
	assert_int_equal(psl_mem_copy(d, PSL_MEM_CUDA, 0, src, PSL_MEM_HOST, -1, n), 0);
	return d;
}

static void dev_read(void *dst, const void *d, size_t n)
{
	assert_int_equal(psl_mem_copy(dst, PSL_MEM_HOST, -1, d, PSL_MEM_CUDA, 0, n), 0);
}

static size_t reply_meta(const struct sent *s, int option, uint8_t *buf)
{
	struct psl__meta m;
	psl__meta_init(&m);
	m.head = s->m.head;
	m.app_id = s->m.app_id;
	m.customer_id = s->m.customer_id;
	m.timestamp = s->m.timestamp;
	m.push = s->m.push;
	m.option = option;
	m.key = s->m.key;
	m.src_dev_type = m.dst_dev_type = PSL_DEV_CPU;
	return psl__meta_encode(&m, buf);
}

static void reply(const struct sent *s, uint32_t nseg, const void *const *data, const size_t *len)
{
	uint8_t buf[1024];
	size_t n = reply_meta(s, s->m.option, buf);
	deliver_raw(s->to, buf, n, nseg, data, len);
}

/* A function of the loaded fake runtime (tests only). */
static void *fake_sym(const char *name)
{
	void *h, *f;
	assert_true(psl_cuda_describe(NULL, 0) > 0); /* loaded */
	h = dlopen(FAKE_CUDART, RTLD_NOW | RTLD_NOLOAD);
	assert_non_null(h);
	f = dlsym(h, name);
	dlclose(h);
	assert_non_null(f);
	return f;
}

typedef int (*fill_fn)(void *, uint32_t, size_t, unsigned, void *);
typedef int (*kcopy_fn)(void *, const void *, size_t, unsigned, void *);
typedef long (*query_fn)(const char *);
typedef int (*memcpy_fn)(void *, const void *, size_t, int);
typedef int (*int_fn)(void);
typedef int (*setdev_fn)(int);
typedef int (*mkstream_fn)(void **, unsigned);
typedef int (*stream_fn)(void *);

/* ------------------------------------------------------------- loading -- */

/* No runtime, no device, a host pointer said to be CUDA, the wrong device:
 * each a clear error, nothing sent. */
static void test_errors(void **state)
{
	uint64_t key = 1;
	float host[4] = {1, 2, 3, 4};
	void *d;
	struct psl_kv kv = {&key, 1, host, 4, NULL, PSL_MEM_CUDA, 0};
	struct psl_kv_worker *w;
	struct capture cap;
	char *log, line[512];
	(void)state;

	node_up(1);
	assert_int_equal(psl_kv_worker_new(0, 0, PSL_FLOAT32, &w), 0);

	psl__cuda_reset();
	setenv("PS_CUDA_LIB", "/nonexistent/libcudart.so", 1);
	capture_start(&cap);
	assert_int_equal(psl_kv_push(w, &kv, 0, NULL, NULL), -ENOENT);
	log = capture_end(&cap);
	assert_non_null(strstr(log, "PS_CUDA_LIB=/nonexistent/libcudart.so cannot be loaded"));
	free(log);
	assert_true(psl_cuda_describe(line, sizeof(line)) < 0);
	assert_non_null(strstr(line, "PS_CUDA_LIB"));

	/* a library that is not a CUDA runtime */
	psl__cuda_reset();
	setenv("PS_CUDA_LIB", "libc.so.6", 1);
	assert_int_equal(psl_cuda_describe(line, sizeof(line)), -ENOSYS);
	assert_non_null(strstr(line, "not a CUDA runtime"));

	use_fake(NULL, "0");
	capture_start(&cap);
	assert_int_equal(psl_kv_push(w, &kv, 0, NULL, NULL), -ENODEV);
	log = capture_end(&cap);
	assert_non_null(strstr(log, "finds no GPU"));
	free(log);

	use_fake(NULL, "2");
	assert_int_equal(psl_cuda_describe(line, sizeof(line)), 2);
	assert_non_null(strstr(line, "runtime 12.4"));
	assert_non_null(strstr(line, "1: Fake GPU 1"));
	capture_start(&cap);
	assert_int_equal(psl_kv_push(w, &kv, 0, NULL, NULL), -EINVAL); /* host memory */
	log = capture_end(&cap);
	assert_non_null(strstr(log, "pass PSL_MEM_HOST"));
	free(log);
	d = dev_copy_of(host, sizeof(host));
	kv.vals = d;
	kv.dev = 1; /* it is on device 0 */
	capture_start(&cap);
	assert_int_equal(psl_kv_push(w, &kv, 0, NULL, NULL), -EINVAL);
	log = capture_end(&cap);
	assert_non_null(strstr(log, "pass dev = 0"));
	free(log);
	kv.dev = 7;
	assert_int_equal(psl_kv_push(w, &kv, 0, NULL, NULL), -ENODEV);
	kv.mem = 5;
	assert_int_equal(psl_kv_push(w, &kv, 0, NULL, NULL), -EINVAL);
	assert_int_equal(g_nsent, 0);
	psl_mem_free(PSL_MEM_CUDA, 0, d);
	psl_kv_worker_free(w);
}

/* The fake's device memory is out of the host's reach, as a GPU's is: a
 * core that read it directly would crash these tests. */
static void test_fake_is_strict(void **state)
{
	char c = 1, back = 0;
	void *d;
	pid_t pid;
	int st;
	(void)state;

	use_fake(NULL, NULL);
	d = dev_copy_of(&c, 1);
	dev_read(&back, d, 1);
	assert_int_equal(back, 1);
	/* a copy with the wrong direction or past the end is refused */
	assert_int_equal(psl__cuda_copy(&back, PSL_MEM_HOST, -1, (char *)d + 200, PSL_MEM_CUDA, 0,
					100),
			 -EIO);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) { /* (without cmocka's handler, which would run the rest here) */
		signal(SIGSEGV, SIG_DFL);
		signal(SIGBUS, SIG_DFL);
		_exit(*(volatile char *)d == 1 ? 0 : 3);
	}
	assert_int_equal(waitpid(pid, &st, 0), pid);
	assert_false(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	psl_mem_free(PSL_MEM_CUDA, 0, d);
}

/* -------------------------------------------------------------- staging -- */

/* A push from device memory with a van that moves host memory only: one
 * copy into a pinned buffer (the copy a push makes anyway), the bytes on
 * the wire are the device buffer's, the meta says where they came from, and
 * the buffer goes back to the pool when the van is done. */
static void test_push_staged(void **state)
{
	uint64_t keys[2] = {1, 2};
	float host[6] = {1, 2, 3, 4, 5, 6};
	void *d;
	struct psl_kv_worker *w;
	size_t in_use;
	int z;
	(void)state;

	node_up(1);
	use_fake(NULL, NULL);
	d = dev_copy_of(host, sizeof(host));
	assert_int_equal(psl_kv_worker_new(0, 0, PSL_FLOAT32, &w), 0);
	for (z = 0; z < 2; z++) {
		struct psl_kv kv = {keys, 2, d, 6, NULL, PSL_MEM_CUDA, 0};
		int ts = z ? psl_kv_zpush(w, &kv, 0, NULL, NULL) : psl_kv_push(w, &kv, 0, NULL, NULL);
		const struct sent *s = &g_sent[g_nsent - 1];
		assert_true(ts >= 0);
		assert_int_equal(s->nseg, 2);
		assert_int_equal(s->mem[1], PSL_MEM_HOST);
		assert_int_equal(s->len[1], sizeof(host));
		assert_memory_equal(s->seg[1], host, sizeof(host));
		assert_int_equal(s->m.src_dev_type, PSL_DEV_GPU);
		assert_int_equal(s->m.src_dev_id, 0);
		/* fake_send let go of it at once */
		psl__cuda_stage_bytes(&in_use);
		assert_int_equal(in_use, 0);
		reply(s, 0, NULL, NULL);
		assert_int_equal(psl_kv_wait(w, ts), 0);
	}
	psl_kv_worker_free(w);
	psl_mem_free(PSL_MEM_CUDA, 0, d);
}

/* A pull into device memory: the van's host buffer is copied to the GPU on
 * completion (no loan of device memory to a van that cannot write it), the
 * meta asks for a GPU destination. */
static void test_pull_staged(void **state)
{
	uint64_t key = 5;
	double v[3] = {0.5, 1.5, 2.5}, back[3] = {0};
	int len = 3, lens = -1;
	void *d;
	struct psl_kv_worker *w;
	struct psl_kv_out out;
	struct psl_van_dest dest;
	uint8_t buf[256];
	size_t n;
	int ts;
	(void)state;

	node_up(1);
	use_fake(NULL, NULL);
	assert_int_equal(psl_mem_alloc(PSL_MEM_CUDA, 0, sizeof(v), &d), 0);
	assert_int_equal(psl_kv_worker_new(0, 0, PSL_FLOAT64, &w), 0);
	out = (struct psl_kv_out){d, 3, 0, &lens, PSL_MEM_CUDA, 0};
	ts = psl_kv_zpull(w, &key, 1, &out, 0, NULL, NULL);
	assert_true(ts >= 0);
	assert_int_equal(g_sent[0].m.dst_dev_type, PSL_DEV_GPU);
	{
		const void *data[3] = {&key, v, &len};
		size_t l[3] = {8, sizeof(v), 4};
		reply(&g_sent[0], 3, data, l);
	}
	assert_int_equal(psl_kv_wait(w, ts), 0);
	assert_int_equal(out.num_vals, 3);
	assert_int_equal(lens, 3);
	dev_read(back, d, sizeof(back));
	assert_memory_equal(back, v, sizeof(v));

	/* a van that asks where to receive gets a pinned buffer (no loan of
	 * device memory to a van that cannot write it): the copy to the GPU
	 * is from pinned memory */
	{
		query_fn q = (query_fn)fake_sym("fake_cuda_query");
		long pageable = q("pageable_copies"), pinned = q("pinned_copies");
		const void *data[3] = {&key, NULL, &len};
		size_t l[3] = {8, sizeof(v), 4};
		double v2[3] = {7.5, 8.5, 9.5};
		clear_sent();
		ts = psl_kv_zpull(w, &key, 1, &out, 0, NULL, NULL);
		n = reply_meta(&g_sent[0], 0, buf);
		memset(&dest, 0, sizeof(dest));
		assert_int_equal(
			psl__po.host.recv_dest(psl__po.host.ctx, 8, buf, n, 1, sizeof(v2), &dest), 0);
		assert_int_equal(dest.mem_type, PSL_MEM_HOST);
		assert_ptr_not_equal(dest.data, d);
		memcpy(dest.data, v2, sizeof(v2)); /* the van writes, gives it back, delivers */
		psl__po.host.recv_dest_put(psl__po.host.ctx, dest.loan, 0);
		data[1] = dest.data;
		deliver_raw_lent_mem(8, buf, n, 3, data, l, 1, PSL_MEM_HOST, -1);
		assert_int_equal(psl_kv_wait(w, ts), 0);
		dev_read(back, d, sizeof(back));
		assert_memory_equal(back, v2, sizeof(v2));
		assert_int_equal(q("pageable_copies"), pageable + 1); /* (dev_read's) */
		assert_int_equal(q("pinned_copies"), pinned + 1);
	}
	psl_kv_worker_free(w);
	psl_mem_free(PSL_MEM_CUDA, 0, d);
}

/* The direct path: a van that declares CUDA memory gets the device pointer
 * itself, and a pull's device buffer is lent to it; PS_CUDA_DIRECT=0 stages
 * anyway. */
static void test_direct(void **state)
{
	uint64_t key = 5;
	float v[4] = {1, 2, 3, 4};
	void *d, *o;
	struct psl_kv_worker *w;
	struct psl_kv kv;
	struct psl_kv_out out = {0};
	struct psl_van_dest dest;
	uint8_t buf[256];
	size_t n;
	int ts;
	(void)state;

	node_up(1);
	use_fake(NULL, NULL);
	psl__po.caps.flags |= PSL_VAN_CAP_MEM_CUDA;
	d = dev_copy_of(v, sizeof(v));
	assert_int_equal(psl_mem_alloc(PSL_MEM_CUDA, 0, sizeof(v), &o), 0);
	assert_int_equal(psl_kv_worker_new(0, 0, PSL_FLOAT32, &w), 0);
	kv = (struct psl_kv){&key, 1, d, 4, NULL, PSL_MEM_CUDA, 0};
	ts = psl_kv_zpush(w, &kv, 0, NULL, NULL);
	assert_true(ts >= 0);
	assert_int_equal(g_sent[0].mem[1], PSL_MEM_CUDA);
	assert_memory_equal(g_sent[0].seg[1], v, sizeof(v));
	reply(&g_sent[0], 0, NULL, NULL);
	assert_int_equal(psl_kv_wait(w, ts), 0);
	/* psl_kv_push copies: into pinned host memory */
	ts = psl_kv_push(w, &kv, 0, NULL, NULL);
	assert_int_equal(g_sent[1].mem[1], PSL_MEM_HOST);
	reply(&g_sent[1], 0, NULL, NULL);
	assert_int_equal(psl_kv_wait(w, ts), 0);

	out = (struct psl_kv_out){o, 4, 0, NULL, PSL_MEM_CUDA, 0};
	ts = psl_kv_zpull(w, &key, 1, &out, 0, NULL, NULL);
	n = reply_meta(&g_sent[2], 0, buf);
	memset(&dest, 0, sizeof(dest));
	assert_int_equal(psl__po.host.recv_dest(psl__po.host.ctx, 8, buf, n, 1, 16, &dest), 0);
	assert_ptr_equal(dest.data, o);
	assert_int_equal(dest.mem_type, PSL_MEM_CUDA);
	assert_int_equal(dest.dev_id, 0);
	assert_int_equal(psl_mem_copy(dest.data, PSL_MEM_CUDA, 0, v, PSL_MEM_HOST, -1, 16), 0);
	psl__po.host.recv_dest_put(psl__po.host.ctx, dest.loan, 0);
	{
		/* the van delivers the segment where it was lent: in device memory */
		const void *data[2] = {&key, o};
		size_t l[2] = {8, 16};
		deliver_raw_lent_mem(8, buf, n, 2, data, l, 1, PSL_MEM_CUDA, 0);
	}
	assert_int_equal(psl_kv_wait(w, ts), 0);
	assert_int_equal(out.num_vals, 4);

	psl_mem_free(PSL_MEM_CUDA, 0, d);
	psl_mem_free(PSL_MEM_CUDA, 0, o);

	use_fake(NULL, NULL); /* (PS_CUDA_DIRECT is read once per load) */
	setenv("PS_CUDA_DIRECT", "0", 1);
	d = dev_copy_of(v, sizeof(v));
	kv.vals = d;
	ts = psl_kv_zpush(w, &kv, 0, NULL, NULL);
	assert_int_equal(g_sent[g_nsent - 1].mem[1], PSL_MEM_HOST);
	assert_memory_equal(g_sent[g_nsent - 1].seg[1], v, sizeof(v));
	reply(&g_sent[g_nsent - 1], 0, NULL, NULL);
	assert_int_equal(psl_kv_wait(w, ts), 0);
	unsetenv("PS_CUDA_DIRECT");
	psl_kv_worker_free(w);
	psl_mem_free(PSL_MEM_CUDA, 0, d);
}

/* PS_RESEND keeps a copy of each message until it is acknowledged: a CUDA
 * segment sent directly is copied out of the GPU for it, and a resend sends
 * that host copy. */
static void test_direct_resend(void **state)
{
	uint64_t key = 5;
	float v[4] = {1, 2, 3, 4};
	void *d;
	struct psl_kv_worker *w;
	struct psl_kv kv;
	int ts;
	(void)state;

	node_up(1);
	use_fake(NULL, NULL);
	psl__po.caps.flags |= PSL_VAN_CAP_MEM_CUDA;
	psl__po.cfg.resend = true;
	atomic_store(&psl__po.resend_live, true);
	assert_int_equal(psl__resender_init(10), 0);
	d = dev_copy_of(v, sizeof(v));
	assert_int_equal(psl_kv_worker_new(0, 0, PSL_FLOAT32, &w), 0);
	kv = (struct psl_kv){&key, 1, d, 4, NULL, PSL_MEM_CUDA, 0};
	ts = psl_kv_zpush(w, &kv, 0, NULL, NULL);
	assert_true(ts >= 0);
	assert_int_equal(g_sent[0].mem[1], PSL_MEM_CUDA);
	assert_int_equal(psl__resender_pending(), 1);
	psl__resender_tick(INT64_MAX / 2); /* long past its timeout: resent */
	assert_int_equal(g_nsent, 2);
	assert_int_equal(g_sent[1].mem[1], PSL_MEM_HOST);
	assert_memory_equal(g_sent[1].seg[1], v, sizeof(v));
	psl__resender_fini();
	psl__po.cfg.resend = false;
	atomic_store(&psl__po.resend_live, false);
	reply(&g_sent[0], 0, NULL, NULL);
	assert_int_equal(psl_kv_wait(w, ts), 0);
	psl_kv_worker_free(w);
	psl_mem_free(PSL_MEM_CUDA, 0, d);
}

/* ------------------------------------------------------------- failures -- */

/* CUDA failing under a request: the copy of a push (the call fails, nothing
 * sent), the copy of a pull's answer (the request fails with EIO; the next
 * one works), a pinned allocation (ENOMEM). */
static void test_injected(void **state)
{
	uint64_t key = 1;
	float v[4] = {1, 2, 3, 4}, back[4];
	void *d;
	struct psl_kv_worker *w;
	struct psl_kv kv;
	struct psl_kv_out out;
	struct capture cap;
	char *log;
	int ts, lens = 4;
	(void)state;

	node_up(1);
	/* copies 1 and 2 fill the device buffer and a first push; 3 fails */
	use_fake("copy@3", NULL);
	d = dev_copy_of(v, sizeof(v));
	assert_int_equal(psl_kv_worker_new(0, 0, PSL_FLOAT32, &w), 0);
	kv = (struct psl_kv){&key, 1, d, 4, NULL, PSL_MEM_CUDA, 0};
	ts = psl_kv_push(w, &kv, 0, NULL, NULL);
	assert_true(ts >= 0);
	reply(&g_sent[0], 0, NULL, NULL);
	assert_int_equal(psl_kv_wait(w, ts), 0);
	capture_start(&cap);
	assert_int_equal(psl_kv_push(w, &kv, 0, NULL, NULL), -EIO);
	log = capture_end(&cap);
	assert_non_null(strstr(log, "injected by FAKE_CUDA_FAIL"));
	free(log);
	assert_int_equal(g_nsent, 1);

	/* the 4th copy (the answer of a pull to the GPU) fails */
	out = (struct psl_kv_out){d, 4, 0, NULL, PSL_MEM_CUDA, 0};
	psl__cuda_reset();
	use_fake("copy@1", NULL);
	psl_mem_free(PSL_MEM_CUDA, 0, d); /* (a new runtime: a new buffer) */
	assert_int_equal(psl_mem_alloc(PSL_MEM_CUDA, 0, sizeof(v), &d), 0);
	out.vals = d;
	ts = psl_kv_zpull(w, &key, 1, &out, 0, NULL, NULL);
	{
		const void *data[3] = {&key, v, &lens};
		size_t l[3] = {8, sizeof(v), 4};
		capture_start(&cap);
		reply(&g_sent[g_nsent - 1], 3, data, l);
		assert_int_equal(psl_kv_wait(w, ts), -EIO);
		log = capture_end(&cap);
		free(log);
		ts = psl_kv_zpull(w, &key, 1, &out, 0, NULL, NULL);
		reply(&g_sent[g_nsent - 1], 3, data, l);
		assert_int_equal(psl_kv_wait(w, ts), 0);
	}
	dev_read(back, d, sizeof(back));
	assert_memory_equal(back, v, sizeof(v));
	psl_mem_free(PSL_MEM_CUDA, 0, d);

	use_fake("hostalloc@1", NULL);
	d = dev_copy_of(v, sizeof(v));
	kv.vals = d;
	capture_start(&cap);
	assert_int_equal(psl_kv_push(w, &kv, 0, NULL, NULL), -ENOMEM);
	log = capture_end(&cap);
	assert_non_null(strstr(log, "pinned staging buffer"));
	free(log);
	psl_kv_worker_free(w);
	psl_mem_free(PSL_MEM_CUDA, 0, d);
}

/* ---------------------------------------------------------------- server -- */

static struct psl_kv_request *g_req[8];
static int g_nreq, g_done;

static void keep_handler(struct psl_kv_server *s, struct psl_kv_request *req, void *arg)
{
	(void)s;
	(void)arg;
	g_req[g_nreq++] = req;
}

static void done_cb(void *arg)
{
	(void)arg;
	g_done++;
}

/* A server answers a pull from device memory: copied (psl_kv_respond) or
 * zero-copy (psl_kv_zrespond: staged, and the caller's buffer is free at
 * once), with the meta's source device. */
static void test_server_respond(void **state)
{
	struct psl_kv_server *srv;
	struct psl__meta m;
	uint64_t key = 3;
	int32_t v[5] = {10, 20, 30, 40, 50};
	const void *data[2] = {&key, NULL};
	size_t l[2] = {8, 0};
	void *d;
	int i;
	(void)state;

	node_up_as(PSL_SERVER, 8, 1, 1);
	use_fake(NULL, NULL);
	d = dev_copy_of(v, sizeof(v));
	g_nreq = g_done = 0;
	assert_int_equal(psl_kv_server_new(0, PSL_INT32, keep_handler, NULL, &srv), 0);
	for (i = 0; i < 3; i++) {
		psl__meta_init(&m);
		m.app_id = 0;
		m.timestamp = 40 + i;
		m.request = true;
		m.src_dev_type = m.dst_dev_type = PSL_DEV_CPU;
		uint8_t buf[512];
		size_t n = psl__meta_encode(&m, buf);
		deliver_raw(9, buf, n, 2, data, l);
	}
	assert_int_equal(g_nreq, 3);
	{
		struct psl_kv res = {&key, 1, d, 5, NULL, PSL_MEM_CUDA, 0};
		assert_int_equal(psl_kv_respond(g_req[0], &res), 0);
		assert_memory_equal(g_sent[g_nsent - 1].seg[1], v, sizeof(v));
		assert_int_equal(g_sent[g_nsent - 1].mem[1], PSL_MEM_HOST);
		assert_int_equal(g_sent[g_nsent - 1].m.src_dev_type, PSL_DEV_GPU);
		assert_int_equal(psl_kv_zrespond(g_req[1], &res, done_cb, NULL), 0);
		assert_int_equal(g_done, 1);
		assert_memory_equal(g_sent[g_nsent - 1].seg[1], v, sizeof(v));
		/* a host buffer said to be CUDA: the worker gets an error answer */
		res.vals = v;
		assert_int_equal(psl_kv_respond(g_req[2], &res), -EINVAL);
		assert_int_equal(g_sent[g_nsent - 1].nseg, 0);
		assert_int_equal(g_sent[g_nsent - 1].m.option, -EINVAL);
	}
	psl_kv_server_free(srv);
	psl_mem_free(PSL_MEM_CUDA, 0, d);
}

/* A push from worker 9 (rank 0) of key with vals, as a batch message (the
 * meta names the key). lend: let the van ask where the values go first. */
static void push_batch_msg(uint64_t key, const void *vals, size_t len, bool lend,
			   struct psl_van_dest *dest, int *lent_rc)
{
	struct psl__meta m;
	uint8_t buf[512];
	size_t n;
	const void *data[2] = {&key, vals};
	size_t l[2] = {8, len};

	psl__meta_init(&m);
	m.app_id = 0;
	m.timestamp = 60;
	m.request = true;
	m.push = true;
	m.key = key;
	m.option = 0x40000000 | (1 << 15); /* PSL_KV_BATCH_OPTION(1, 0) */
	m.src_dev_type = m.dst_dev_type = PSL_DEV_CPU;
	n = psl__meta_encode(&m, buf);
	*lent_rc = -1;
	if (lend) {
		memset(dest, 0, sizeof(*dest));
		*lent_rc = psl__po.host.recv_dest(psl__po.host.ctx, 9, buf, n, 1, len, dest);
	}
	if (*lent_rc == 0) {
		/* the van writes where it was told, gives the loan back, delivers */
		assert_int_equal(psl_mem_copy(dest->data, dest->mem_type, dest->dev_id, vals,
					      PSL_MEM_HOST, -1, len),
				 0);
		psl__po.host.recv_dest_put(psl__po.host.ctx, dest->loan, 0);
		data[1] = dest->data;
		deliver_raw_lent_mem(9, buf, n, 2, data, l, 1, dest->mem_type, dest->dev_id);
		return;
	}
	deliver_raw(9, buf, n, 2, data, l);
}

/* Registered receive buffers (StepMesh's RegisterRecvBuffer): a batch push
 * of a registered key is received in place where the van asks (host), is
 * copied there otherwise (a GPU buffer with a host-only van), reaches the
 * handler there with its memory type; too big a push is refused; another
 * worker's or key's push is not touched; unregistering ends it. */
static void test_server_recv_buffer(void **state)
{
	struct psl_kv_server *srv;
	uint32_t v[4] = {1, 2, 3, 4}, host[8] = {0}, back[4];
	void *d;
	struct psl_van_dest dest;
	int rc;
	(void)state;

	node_up_as(PSL_SERVER, 8, 1, 2);
	use_fake(NULL, NULL);
	g_nreq = 0;
	assert_int_equal(psl_kv_server_new(0, PSL_UINT32, keep_handler, NULL, &srv), 0);
	assert_int_equal(psl_kv_server_recv_buffer(srv, 0, 5, host, sizeof(host), PSL_MEM_HOST, 0),
			 0);
	assert_int_equal(psl_kv_server_recv_buffer(srv, 0, 6, v, 16, PSL_MEM_CUDA, 0), -EINVAL);

	/* in place: the van is lent the registered buffer */
	push_batch_msg(5, v, sizeof(v), true, &dest, &rc);
	assert_int_equal(rc, 0);
	assert_ptr_equal(dest.data, host);
	assert_int_equal(g_nreq, 1);
	assert_ptr_equal(g_req[0]->kv.vals, host);
	assert_int_equal(g_req[0]->kv.mem, PSL_MEM_HOST);
	assert_memory_equal(host, v, sizeof(v));
	psl_kv_respond(g_req[0], NULL);
	/* copied there when the van did not ask */
	memset(host, 0, sizeof(host));
	push_batch_msg(5, v, sizeof(v), false, &dest, &rc);
	assert_ptr_equal(g_req[1]->kv.vals, host);
	assert_memory_equal(host, v, sizeof(v));
	psl_kv_respond(g_req[1], NULL);
	/* another key: untouched, the van's own buffer */
	push_batch_msg(7, v, sizeof(v), true, &dest, &rc);
	assert_true(rc < 0);
	assert_true(g_req[2]->kv.vals != host);
	psl_kv_respond(g_req[2], NULL);

	/* a GPU buffer, a van that moves host memory: copied up on arrival */
	d = NULL;
	assert_int_equal(psl_mem_alloc(PSL_MEM_CUDA, 0, 32, &d), 0);
	assert_int_equal(psl_kv_server_recv_buffer(srv, 0, 5, d, 32, PSL_MEM_CUDA, 0), 0);
	push_batch_msg(5, v, sizeof(v), true, &dest, &rc);
	assert_true(rc < 0); /* not lent: the van cannot write GPU memory */
	assert_ptr_equal(g_req[3]->kv.vals, d);
	assert_int_equal(g_req[3]->kv.mem, PSL_MEM_CUDA);
	dev_read(back, d, sizeof(back));
	assert_memory_equal(back, v, sizeof(v));
	psl_kv_respond(g_req[3], NULL);
	/* too big for it: answered with EMSGSIZE, the handler never sees it */
	{
		uint32_t big[16] = {0};
		struct capture cap;
		char *log;
		capture_start(&cap);
		push_batch_msg(5, big, sizeof(big), false, &dest, &rc);
		log = capture_end(&cap);
		assert_non_null(strstr(log, "its registered receive buffer holds 32"));
		free(log);
		assert_int_equal(g_nreq, 4);
		assert_int_equal(g_sent[g_nsent - 1].m.option, -EMSGSIZE);
	}
	/* unregistered: back to the van's buffers */
	assert_int_equal(psl_kv_server_recv_buffer(srv, 0, 5, NULL, 0, PSL_MEM_HOST, 0), 0);
	push_batch_msg(5, v, sizeof(v), false, &dest, &rc);
	assert_true(g_req[4]->kv.vals != d);
	assert_int_equal(g_req[4]->kv.mem, PSL_MEM_HOST);
	psl_kv_respond(g_req[4], NULL);
	psl_kv_server_free(srv);
	psl_mem_free(PSL_MEM_CUDA, 0, d);
}

/* ----------------------------------------------------------------- batch -- */

/* A batch with a device push tensor and a device pull tensor. */
static void test_batch(void **state)
{
	float pv[3] = {1, 2, 3}, ans[2] = {7, 8}, back[2] = {0};
	void *dp, *dq;
	struct psl_kv_tensor push = {0}, pull = {0};
	struct psl_kv_batch b = {0};
	struct psl_kv_worker *w;
	int ts, i;
	(void)state;

	node_up(1);
	use_fake(NULL, NULL);
	dp = dev_copy_of(pv, sizeof(pv));
	assert_int_equal(psl_mem_alloc(PSL_MEM_CUDA, 0, sizeof(ans), &dq), 0);
	push = (struct psl_kv_tensor){.key = 1, .vals = dp, .len = 3, .mem = PSL_MEM_CUDA};
	pull = (struct psl_kv_tensor){.key = 2, .vals = dq, .len = 2, .mem = PSL_MEM_CUDA};
	b.push = &push;
	b.npush = 1;
	b.pull = &pull;
	b.npull = 1;
	assert_int_equal(psl_kv_worker_new(0, 0, PSL_FLOAT32, &w), 0);
	ts = psl_kv_batch_pushpull(w, &b, 0, 0, NULL, NULL);
	assert_true(ts >= 0);
	assert_int_equal(g_nsent, 2);
	for (i = 0; i < 2; i++) {
		const struct sent *s = &g_sent[i];
		if (s->m.push) {
			assert_int_equal(s->mem[1], PSL_MEM_HOST);
			assert_memory_equal(s->seg[1], pv, sizeof(pv));
			reply(s, 0, NULL, NULL);
		} else {
			uint64_t k = 2;
			const void *data[2] = {&k, ans};
			size_t l[2] = {8, sizeof(ans)};
			assert_int_equal(s->m.dst_dev_type, PSL_DEV_GPU);
			reply(s, 2, data, l);
		}
	}
	assert_int_equal(psl_kv_wait(w, ts), 0);
	assert_int_equal(pull.received, 2);
	dev_read(back, dq, sizeof(back));
	assert_memory_equal(back, ans, sizeof(ans));
	psl_kv_worker_free(w);
	psl_mem_free(PSL_MEM_CUDA, 0, dp);
	psl_mem_free(PSL_MEM_CUDA, 0, dq);
}


/* ------------------------------------------------ ordering with the caller -- */


#define NV 4096		      /* floats in the buffers below */
#define SLOW_US 100000	      /* a kernel that takes 0.1 s */
#define F1 0x3f800000u	      /* 1.0f */
#define F2 0x40000000u	      /* 2.0f */
#define F5 0x40a00000u	      /* 5.0f */

/* A device buffer of NV floats, each v (a synchronous copy). */
static void *dev_floats(float v)
{
	static float h[NV];
	void *d;
	int i;
	for (i = 0; i < NV; i++)
		h[i] = v;
	assert_int_equal(psl_mem_alloc(PSL_MEM_CUDA, 0, sizeof(h), &d), 0);
	assert_int_equal(((memcpy_fn)fake_sym("cudaMemcpy"))(d, h, sizeof(h), 1), 0);
	return d;
}

/* All NV floats of device buffer d, read as cudaMemcpy does: after the
 * work queued on the legacy default stream. */
static void expect_dev(const void *d, float v)
{
	static float h[NV];
	int i;
	assert_int_equal(((memcpy_fn)fake_sym("cudaMemcpy"))(h, d, sizeof(h), 2), 0);
	for (i = 0; i < NV; i++)
		if (h[i] != v)
			fail_msg("value %d is %g, expected %g", i, (double)h[i], (double)v);
}

static void expect_seg(const struct sent *s, int seg, float v)
{
	const float *h = (const float *)(const void *)s->seg[seg];
	int i;
	assert_int_equal(s->len[seg], NV * sizeof(float));
	for (i = 0; i < NV; i++)
		if (h[i] != v)
			fail_msg("sent value %d is %g, expected %g", i, (double)h[i], (double)v);
}

/* Issue 30, case 1: a slow kernel on the caller's stream (the legacy
 * default stream: none was set) writes the buffer, then a push from it:
 * what is sent is the kernel's value. */
static void test_order_push(void **state)
{
	uint64_t key = 1;
	struct psl_kv_worker *w;
	void *d;
	int z;
	(void)state;

	node_up(1);
	use_fake(NULL, NULL);
	d = dev_floats(0);
	assert_int_equal(psl_kv_worker_new(0, 0, PSL_FLOAT32, &w), 0);
	for (z = 0; z < 2; z++) {
		struct psl_kv kv = {&key, 1, d, NV, NULL, PSL_MEM_CUDA, 0};
		int ts;
		assert_int_equal(((fill_fn)fake_sym("fake_kernel_fill"))(d, z ? F2 : F1, NV,
									  SLOW_US, NULL),
				 0);
		ts = z ? psl_kv_zpush(w, &kv, 0, NULL, NULL) : psl_kv_push(w, &kv, 0, NULL, NULL);
		assert_true(ts >= 0);
		expect_seg(&g_sent[g_nsent - 1], 1, z ? 2.0f : 1.0f);
		reply(&g_sent[g_nsent - 1], 0, NULL, NULL);
		assert_int_equal(psl_kv_wait(w, ts), 0);
	}
	assert_int_equal(((query_fn)fake_sym("fake_cuda_query"))("device_syncs"), 0);
	psl_kv_worker_free(w);
	psl_mem_free(PSL_MEM_CUDA, 0, d);
}

/* The answer of a pull (or push-pull) of key into x: NV floats of 1.0. */
static void answer_pull(const struct sent *s)
{
	static float v[NV];
	uint64_t key = s->m.key ? s->m.key : 1;
	int i;
	for (i = 0; i < NV; i++)
		v[i] = 1.0f;
	if (s->nseg >= 1 && s->len[0] == 8)
		memcpy(&key, s->seg[0], 8);
	{
		const void *data[2] = {&key, v};
		size_t l[2] = {8, sizeof(v)};
		reply(s, 2, data, l);
	}
}

/* Issue 30, case 2: a reader queued on the caller's stream behind a slow
 * kernel reads x while a pull into x is answered at once: the reader sees
 * x's old value; the caller's work queued after completion sees the pulled
 * one. For psl_kv_pull, psl_kv_zpull and psl_kv_pushpull. */
static void test_order_pull(void **state)
{
	uint64_t key = 1;
	struct psl_kv_worker *w;
	void *x, *y, *src;
	int form;
	(void)state;

	node_up(1);
	use_fake(NULL, NULL);
	src = dev_floats(3);
	assert_int_equal(psl_kv_worker_new(0, 0, PSL_FLOAT32, &w), 0);
	for (form = 0; form < 3; form++) {
		struct psl_kv_out out;
		struct psl_kv kv = {&key, 1, src, NV, NULL, PSL_MEM_CUDA, 0};
		int ts, i;
		x = dev_floats(2);
		y = dev_floats(0);
		out = (struct psl_kv_out){x, NV, 0, NULL, PSL_MEM_CUDA, 0};
		assert_int_equal(((kcopy_fn)fake_sym("fake_kernel_copy"))(y, x, NV * 4, SLOW_US,
									  NULL),
				 0);
		clear_sent();
		ts = form == 0	 ? psl_kv_pull(w, &key, 1, &out, 0, NULL, NULL)
		     : form == 1 ? psl_kv_zpull(w, &key, 1, &out, 0, NULL, NULL)
				 : psl_kv_pushpull(w, &kv, &out, 0, NULL, NULL);
		assert_true(ts >= 0);
		for (i = 0; i < g_nsent; i++)
			if (g_sent[i].m.push)
				reply(&g_sent[i], 0, NULL, NULL);
			else
				answer_pull(&g_sent[i]);
		assert_int_equal(psl_kv_wait(w, ts), 0);
		expect_dev(y, 2.0f); /* the reader: the old value */
		assert_int_equal(((kcopy_fn)fake_sym("fake_kernel_copy"))(y, x, NV * 4, 0, NULL),
				 0);
		expect_dev(y, 1.0f); /* later work: the pulled one */
		psl_mem_free(PSL_MEM_CUDA, 0, x);
		psl_mem_free(PSL_MEM_CUDA, 0, y);
	}
	psl_kv_worker_free(w);
	psl_mem_free(PSL_MEM_CUDA, 0, src);
}

/* A server answers from a GPU buffer that a slow kernel on its stream has
 * just been asked to write: the worker gets the kernel's value
 * (psl_kv_respond and psl_kv_zrespond). */
static void test_order_respond(void **state)
{
	struct psl_kv_server *srv;
	struct psl__meta m;
	uint64_t key = 3;
	const void *data[2] = {&key, NULL};
	size_t l[2] = {8, 0};
	void *d;
	int i;
	(void)state;

	node_up_as(PSL_SERVER, 8, 1, 1);
	use_fake(NULL, NULL);
	d = dev_floats(0);
	g_nreq = g_done = 0;
	assert_int_equal(psl_kv_server_new(0, PSL_FLOAT32, keep_handler, NULL, &srv), 0);
	for (i = 0; i < 2; i++) {
		uint8_t buf[512];
		size_t n;
		psl__meta_init(&m);
		m.app_id = 0;
		m.timestamp = 70 + i;
		m.request = true;
		m.src_dev_type = m.dst_dev_type = PSL_DEV_CPU;
		n = psl__meta_encode(&m, buf);
		deliver_raw(9, buf, n, 2, data, l);
	}
	assert_int_equal(g_nreq, 2);
	for (i = 0; i < 2; i++) {
		struct psl_kv res = {&key, 1, d, NV, NULL, PSL_MEM_CUDA, 0};
		assert_int_equal(((fill_fn)fake_sym("fake_kernel_fill"))(d, i ? F2 : F5, NV,
									  SLOW_US, NULL),
				 0);
		if (i)
			assert_int_equal(psl_kv_zrespond(g_req[i], &res, done_cb, NULL), 0);
		else
			assert_int_equal(psl_kv_respond(g_req[i], &res), 0);
		expect_seg(&g_sent[g_nsent - 1], 1, i ? 2.0f : 5.0f);
	}
	psl_kv_server_free(srv);
	psl_mem_free(PSL_MEM_CUDA, 0, d);
}

/* An AF batch: its GPU push tensor is read after the slow kernel that
 * writes it, its GPU pull tensor written after the queued reader. */
static void test_order_batch(void **state)
{
	void *dp, *dq, *y;
	struct psl_kv_tensor push = {0}, pull = {0};
	struct psl_kv_batch b = {0};
	struct psl_kv_worker *w;
	int ts, i;
	(void)state;

	node_up(1);
	use_fake(NULL, NULL);
	dp = dev_floats(0);
	dq = dev_floats(2);
	y = dev_floats(0);
	push = (struct psl_kv_tensor){.key = 1, .vals = dp, .len = NV, .mem = PSL_MEM_CUDA};
	pull = (struct psl_kv_tensor){.key = 2, .vals = dq, .len = NV, .mem = PSL_MEM_CUDA};
	b = (struct psl_kv_batch){.push = &push, .npush = 1, .pull = &pull, .npull = 1};
	assert_int_equal(psl_kv_worker_new(0, 0, PSL_FLOAT32, &w), 0);
	assert_int_equal(((fill_fn)fake_sym("fake_kernel_fill"))(dp, F5, NV, SLOW_US, NULL), 0);
	assert_int_equal(((kcopy_fn)fake_sym("fake_kernel_copy"))(y, dq, NV * 4, SLOW_US, NULL),
			 0);
	ts = psl_kv_batch_pushpull(w, &b, 0, 0, NULL, NULL);
	assert_true(ts >= 0);
	assert_int_equal(g_nsent, 2);
	for (i = 0; i < 2; i++) {
		if (g_sent[i].m.push) {
			expect_seg(&g_sent[i], 1, 5.0f);
			reply(&g_sent[i], 0, NULL, NULL);
		} else {
			answer_pull(&g_sent[i]);
		}
	}
	assert_int_equal(psl_kv_wait(w, ts), 0);
	expect_dev(y, 2.0f);
	expect_dev(dq, 1.0f);
	psl_kv_worker_free(w);
	psl_mem_free(PSL_MEM_CUDA, 0, dp);
	psl_mem_free(PSL_MEM_CUDA, 0, dq);
	psl_mem_free(PSL_MEM_CUDA, 0, y);
}


/* The stream set with psl_kv_worker_set_cuda_stream is the one waited
 * for (a non-blocking stream, which the legacy one does not order);
 * PSL_CUDA_STREAM_NONE waits for nothing; a van that takes GPU memory
 * gets a pushed buffer once the stream's work is done, and is not lent a
 * pull's buffer that a queued reader still reads. */
static void test_stream_api(void **state)
{
	uint64_t key = 1;
	struct psl_kv_worker *w;
	struct psl_kv kv;
	struct psl_kv_out out;
	struct psl_van_dest dest;
	uint8_t buf[256];
	void *st, *d, *x, *y;
	size_t n;
	int ts;
	(void)state;

	node_up(1);
	use_fake(NULL, NULL);
	assert_int_equal(psl_kv_worker_set_cuda_stream(NULL, NULL), -EINVAL);
	assert_int_equal(((mkstream_fn)fake_sym("cudaStreamCreateWithFlags"))(&st, 1), 0);
	assert_int_equal(psl_kv_worker_new(0, 0, PSL_FLOAT32, &w), 0);
	assert_int_equal(psl_kv_worker_set_cuda_stream(w, st), 0);
	d = dev_floats(0);
	kv = (struct psl_kv){&key, 1, d, NV, NULL, PSL_MEM_CUDA, 0};

	/* the worker's stream is waited for, the legacy one is not */
	assert_int_equal(((fill_fn)fake_sym("fake_kernel_fill"))(d, F1, NV, SLOW_US, st), 0);
	ts = psl_kv_push(w, &kv, 0, NULL, NULL);
	expect_seg(&g_sent[g_nsent - 1], 1, 1.0f);
	reply(&g_sent[g_nsent - 1], 0, NULL, NULL);
	assert_int_equal(psl_kv_wait(w, ts), 0);
	assert_int_equal(((fill_fn)fake_sym("fake_kernel_fill"))(d, F2, NV, SLOW_US, NULL), 0);
	ts = psl_kv_push(w, &kv, 0, NULL, NULL);
	expect_seg(&g_sent[g_nsent - 1], 1, 1.0f);
	reply(&g_sent[g_nsent - 1], 0, NULL, NULL);
	assert_int_equal(psl_kv_wait(w, ts), 0);
	expect_dev(d, 2.0f);

	/* none: the data is said to be ready, nothing is waited for */
	assert_int_equal(psl_kv_worker_set_cuda_stream(w, PSL_CUDA_STREAM_NONE), 0);
	assert_int_equal(((fill_fn)fake_sym("fake_kernel_fill"))(d, F5, NV, SLOW_US, st), 0);
	ts = psl_kv_push(w, &kv, 0, NULL, NULL);
	expect_seg(&g_sent[g_nsent - 1], 1, 2.0f);
	reply(&g_sent[g_nsent - 1], 0, NULL, NULL);
	assert_int_equal(psl_kv_wait(w, ts), 0);
	assert_int_equal(((stream_fn)fake_sym("cudaStreamSynchronize"))(st), 0);

	/* a van that takes GPU memory: the pointer once the work is done */
	assert_int_equal(psl_kv_worker_set_cuda_stream(w, st), 0);
	psl__po.caps.flags |= PSL_VAN_CAP_MEM_CUDA;
	assert_int_equal(((fill_fn)fake_sym("fake_kernel_fill"))(d, F1, NV, SLOW_US, st), 0);
	ts = psl_kv_zpush(w, &kv, 0, NULL, NULL);
	assert_int_equal(g_sent[g_nsent - 1].mem[1], PSL_MEM_CUDA);
	expect_seg(&g_sent[g_nsent - 1], 1, 1.0f);
	reply(&g_sent[g_nsent - 1], 0, NULL, NULL);
	assert_int_equal(psl_kv_wait(w, ts), 0);

	/* ... and no loan of a pull buffer that a queued reader still reads */
	x = dev_floats(2);
	y = dev_floats(0);
	out = (struct psl_kv_out){x, NV, 0, NULL, PSL_MEM_CUDA, 0};
	assert_int_equal(((kcopy_fn)fake_sym("fake_kernel_copy"))(y, x, NV * 4, SLOW_US, st), 0);
	ts = psl_kv_zpull(w, &key, 1, &out, 0, NULL, NULL);
	n = reply_meta(&g_sent[g_nsent - 1], 0, buf);
	memset(&dest, 0, sizeof(dest));
	assert_int_equal(psl__po.host.recv_dest(psl__po.host.ctx, 8, buf, n, 1, NV * 4, &dest), 0);
	assert_int_equal(dest.mem_type, PSL_MEM_HOST); /* pinned, not x */
	assert_ptr_not_equal(dest.data, x);
	psl__po.host.recv_dest_put(psl__po.host.ctx, dest.loan, -EIO); /* (not written) */
	answer_pull(&g_sent[g_nsent - 1]);
	assert_int_equal(psl_kv_wait(w, ts), 0);
	assert_int_equal(((stream_fn)fake_sym("cudaStreamSynchronize"))(st), 0);
	expect_dev(y, 2.0f);
	expect_dev(x, 1.0f);
	assert_int_equal(((query_fn)fake_sym("fake_cuda_query"))("device_syncs"), 0);

	psl_kv_worker_free(w);
	assert_int_equal(((stream_fn)fake_sym("cudaStreamDestroy"))(st), 0);
	psl_mem_free(PSL_MEM_CUDA, 0, d);
	psl_mem_free(PSL_MEM_CUDA, 0, x);
	psl_mem_free(PSL_MEM_CUDA, 0, y);
}

/* A server's stream (psl_kv_server_set_cuda_stream) is the one its
 * responses from GPU memory wait for. */
static void test_server_stream(void **state)
{
	struct psl_kv_server *srv;
	struct psl__meta m;
	uint64_t key = 3;
	const void *data[2] = {&key, NULL};
	size_t l[2] = {8, 0};
	uint8_t buf[512];
	size_t n;
	void *st, *d;
	(void)state;

	node_up_as(PSL_SERVER, 8, 1, 1);
	use_fake(NULL, NULL);
	d = dev_floats(0);
	g_nreq = 0;
	assert_int_equal(((mkstream_fn)fake_sym("cudaStreamCreateWithFlags"))(&st, 1), 0);
	assert_int_equal(psl_kv_server_new(0, PSL_FLOAT32, keep_handler, NULL, &srv), 0);
	assert_int_equal(psl_kv_server_set_cuda_stream(NULL, st), -EINVAL);
	assert_int_equal(psl_kv_server_set_cuda_stream(srv, st), 0);
	psl__meta_init(&m);
	m.app_id = 0;
	m.timestamp = 80;
	m.request = true;
	m.src_dev_type = m.dst_dev_type = PSL_DEV_CPU;
	n = psl__meta_encode(&m, buf);
	deliver_raw(9, buf, n, 2, data, l);
	assert_int_equal(g_nreq, 1);
	{
		struct psl_kv res = {&key, 1, d, NV, NULL, PSL_MEM_CUDA, 0};
		assert_int_equal(((fill_fn)fake_sym("fake_kernel_fill"))(d, F5, NV, SLOW_US, st),
				 0);
		assert_int_equal(psl_kv_respond(g_req[0], &res), 0);
		expect_seg(&g_sent[g_nsent - 1], 1, 5.0f);
	}
	psl_kv_server_free(srv);
	assert_int_equal(((stream_fn)fake_sym("cudaStreamDestroy"))(st), 0);
	psl_mem_free(PSL_MEM_CUDA, 0, d);
}

/* ------------------------------------------------------ devices, errors -- */

struct dev_job {
	struct psl_kv_worker *w;
	void *d;
	int ts, step;
};

/* Thread bodies: step 0 is the caller (it chose device 1, as PyTorch
 * does): allocation, push, pull; step 1 is a receive thread that never
 * chose a device: it delivers the pull's answer. */
static void *dev_thread(void *arg)
{
	struct dev_job *j = arg;
	static struct psl_kv_out out;
	uint64_t key = 1;
	if (j->step == 0) {
		struct psl_kv kv = {&key, 1, NULL, NV, NULL, PSL_MEM_CUDA, 1};
		int ts;
		assert_int_equal(((setdev_fn)fake_sym("cudaSetDevice"))(1), 0);
		assert_int_equal(psl_mem_alloc(PSL_MEM_CUDA, 1, NV * 4, &j->d), 0);
		kv.vals = j->d;
		ts = psl_kv_push(j->w, &kv, 0, NULL, NULL);
		assert_true(ts >= 0);
		reply(&g_sent[g_nsent - 1], 0, NULL, NULL);
		assert_int_equal(psl_kv_wait(j->w, ts), 0);
		out = (struct psl_kv_out){j->d, NV, 0, NULL, PSL_MEM_CUDA, 1};
		j->ts = psl_kv_zpull(j->w, &key, 1, &out, 0, NULL, NULL);
		assert_true(j->ts >= 0);
	} else {
		answer_pull(&g_sent[g_nsent - 1]);
	}
	return NULL;
}

static void run_thread(struct dev_job *j, int step)
{
	pthread_t t;
	j->step = step;
	assert_int_equal(pthread_create(&t, NULL, dev_thread, j), 0);
	assert_int_equal(pthread_join(t, NULL), 0);
}

/* A process that uses GPU 1 only (2 GPUs): pslite creates no context on
 * GPU 0, neither in the caller's thread nor in a thread that never chose a
 * device (issue 30's "restores device 0" risk). */
static void test_device_context(void **state)
{
	struct dev_job j = {0};
	(void)state;

	node_up(1);
	use_fake(NULL, "2");
	assert_int_equal(psl_cuda_describe(NULL, 0), 2); /* (loads; no context) */
	assert_int_equal(psl_kv_worker_new(0, 0, PSL_FLOAT32, &j.w), 0);
	run_thread(&j, 0);
	run_thread(&j, 1);
	assert_int_equal(psl_kv_wait(j.w, j.ts), 0);
	assert_int_equal(((query_fn)fake_sym("fake_cuda_query"))("contexts"), 2);
	psl_kv_worker_free(j.w);
	{
		/* free it where it lives, from a thread on device 1 */
		assert_int_equal(((setdev_fn)fake_sym("cudaSetDevice"))(1), 0);
		psl_mem_free(PSL_MEM_CUDA, 1, j.d);
	}
	assert_int_equal(((query_fn)fake_sym("fake_cuda_query"))("contexts"), 2);
}

/* Errors pslite handles (a copy that fails, a freed buffer) are not left
 * in the thread's last-error slot; a caller's own error pslite leaves. */
static void test_last_error(void **state)
{
	uint64_t key = 1;
	float v[4] = {1, 2, 3, 4};
	struct psl_kv_worker *w;
	struct psl_kv kv;
	struct capture cap;
	void *d;
	int ts;
	(void)state;

	node_up(1);
	use_fake("copy@3", NULL);
	d = dev_copy_of(v, sizeof(v)); /* copy 1 */
	assert_int_equal(psl_kv_worker_new(0, 0, PSL_FLOAT32, &w), 0);
	kv = (struct psl_kv){&key, 1, d, 4, NULL, PSL_MEM_CUDA, 0};
	ts = psl_kv_push(w, &kv, 0, NULL, NULL); /* copy 2 */
	reply(&g_sent[0], 0, NULL, NULL);
	assert_int_equal(psl_kv_wait(w, ts), 0);
	capture_start(&cap);
	assert_int_equal(psl_kv_push(w, &kv, 0, NULL, NULL), -EIO); /* copy 3 fails */
	free(capture_end(&cap));
	assert_int_equal(((int_fn)fake_sym("cudaPeekAtLastError"))(), 0);

	/* a freed buffer said to be CUDA memory */
	psl_mem_free(PSL_MEM_CUDA, 0, d);
	capture_start(&cap);
	assert_int_equal(psl_kv_push(w, &kv, 0, NULL, NULL), -EINVAL);
	free(capture_end(&cap));
	assert_int_equal(((int_fn)fake_sym("cudaPeekAtLastError"))(), 0);

	/* the caller's own error stays for the caller to see */
	d = dev_copy_of(v, sizeof(v));
	kv.vals = d;
	use_fake(NULL, NULL);
	psl_mem_free(PSL_MEM_CUDA, 0, d);
	d = dev_copy_of(v, sizeof(v));
	kv.vals = d;
	assert_int_equal(((setdev_fn)fake_sym("cudaSetDevice"))(7), 101);
	ts = psl_kv_push(w, &kv, 0, NULL, NULL);
	assert_true(ts >= 0);
	reply(&g_sent[g_nsent - 1], 0, NULL, NULL);
	assert_int_equal(psl_kv_wait(w, ts), 0);
	assert_int_equal(((int_fn)fake_sym("cudaPeekAtLastError"))(), 101);
	assert_int_equal(((int_fn)fake_sym("cudaGetLastError"))(), 101);
	psl_kv_worker_free(w);
	psl_mem_free(PSL_MEM_CUDA, 0, d);
}

/* ------------------------------------------------------------ runtimes -- */

static void copy_file(const char *from, const char *to)
{
	char buf[65536];
	size_t n;
	FILE *a = fopen(from, "rb"), *b = fopen(to, "wb");
	assert_non_null(a);
	assert_non_null(b);
	while ((n = fread(buf, 1, sizeof(buf), a)) > 0)
		assert_int_equal(fwrite(buf, 1, n, b), n);
	fclose(a);
	assert_int_equal(fclose(b), 0);
}

/* In a child: which runtime psl_cuda_describe finds; exits 0 when its line
 * names want, 3 otherwise (printed). */
static void child_expect_runtime(const char *want)
{
	char line[1024];
	int n;
	unsetenv("PS_CUDA_LIB");
	psl__cuda_reset();
	n = psl_cuda_describe(line, sizeof(line));
	if (n == 1 && strstr(line, want))
		_exit(0);
	fprintf(stderr, "test_runtime_choice: %d, '%s' (expected 1 device and %s)\n", n, line,
		want);
	_exit(3);
}

static void run_child(void (*body)(const char *), const char *arg)
{
	int st;
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0)
		body(arg);
	assert_int_equal(waitpid(pid, &st, 0), pid);
	assert_true(WIFEXITED(st));
	assert_int_equal(WEXITSTATUS(st), 0);
}

static void child_preloaded(const char *dir)
{
	char p[512];
	snprintf(p, sizeof(p), "%s/libcudart.so.12", dir);
	if (!dlopen(p, RTLD_NOW | RTLD_GLOBAL))
		_exit(4);
	child_expect_runtime(p);
}

static void child_old_driver(const char *dir)
{
	char p[512];
	setenv("CUDA_HOME", dir, 1);
	setenv("FAKE_CUDA_OLD_DRIVER", "/lib64/", 1);
	snprintf(p, sizeof(p), "%s/lib/libcudart.so", dir);
	child_expect_runtime(p);
}

/* The runtime already in the process (PyTorch's) is the one pslite uses;
 * a runtime that needs a newer driver is passed over for the next. */
static void test_runtime_choice(void **state)
{
	char dir[] = "/tmp/pslite-cudart.XXXXXX", p[512];
	(void)state;

	assert_non_null(mkdtemp(dir));
	psl__cuda_reset();
	snprintf(p, sizeof(p), "%s/libcudart.so.12", dir);
	copy_file(FAKE_CUDART, p);
	run_child(child_preloaded, dir);

	snprintf(p, sizeof(p), "%s/lib64", dir);
	assert_int_equal(mkdir(p, 0700), 0);
	snprintf(p, sizeof(p), "%s/lib", dir);
	assert_int_equal(mkdir(p, 0700), 0);
	snprintf(p, sizeof(p), "%s/lib64/libcudart.so", dir);
	copy_file(FAKE_CUDART, p);
	snprintf(p, sizeof(p), "%s/lib/libcudart.so", dir);
	copy_file(FAKE_CUDART, p);
	run_child(child_old_driver, dir);

	snprintf(p, sizeof(p), "rm -rf '%s'", dir);
	assert_int_equal(system(p), 0);
}

/* ----------------------------------------------------------------- pool -- */

/* 10^5 staged pushes of sizes from 1 byte to 256 KiB: the pinned pool stops
 * growing once it holds one buffer per size class in use. */
static void test_pool_bounded(void **state)
{
	uint64_t key = 1;
	size_t max = 1 << 18, bytes_after_warmup = 0, bytes, in_use;
	unsigned char *host = malloc(max);
	void *d;
	struct psl_kv_worker *w;
	long i;
	(void)state;

	node_up(1);
	use_fake(NULL, NULL);
	memset(host, 0x5a, max);
	d = dev_copy_of(host, max);
	assert_int_equal(psl_kv_worker_new(0, 0, PSL_UINT8, &w), 0);
	for (i = 0; i < 100000; i++) {
		size_t len = (size_t)1 << (i % 19);
		struct psl_kv kv = {&key, 1, d, len, NULL, PSL_MEM_CUDA, 0};
		int ts = psl_kv_push(w, &kv, 0, NULL, NULL);
		assert_true(ts >= 0);
		reply(&g_sent[g_nsent - 1], 0, NULL, NULL);
		assert_int_equal(psl_kv_wait(w, ts), 0);
		clear_sent();
		if (i == 100)
			bytes_after_warmup = psl__cuda_stage_bytes(NULL);
	}
	bytes = psl__cuda_stage_bytes(&in_use);
	assert_int_equal(in_use, 0);
	assert_int_equal(bytes, bytes_after_warmup);
	/* 64 KiB (sizes up to it share a class), 128 KiB, 256 KiB: 3 buffers */
	assert_true(bytes < 2 * max + 3 * 64);
	psl_kv_worker_free(w);
	psl_mem_free(PSL_MEM_CUDA, 0, d);
	free(host);
}

#define T(f) cmocka_unit_test_teardown(f, teardown)

int main(void)
{
	const struct CMUnitTest tests[] = {
		T(test_errors),	  T(test_fake_is_strict), T(test_push_staged),	  T(test_pull_staged),
		T(test_direct),	  T(test_direct_resend), T(test_injected),	  T(test_server_respond),
		T(test_server_recv_buffer),
		T(test_batch),	  T(test_pool_bounded),
		T(test_order_push), T(test_order_pull), T(test_order_respond), T(test_order_batch),
		T(test_stream_api), T(test_server_stream),
		T(test_device_context), T(test_last_error), T(test_runtime_choice),
	};
	return cmocka_run_group_tests_name("cuda", tests, NULL, NULL);
}
