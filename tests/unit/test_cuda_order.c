/*
 * Unit tests for CUDA memory through the API, against the fake CUDA
 * runtime over the fake van (cuda_fixture.h): ordering with the caller's
 * CUDA work (the fake's streams run later, its kernels write and read after
 * a delay) for pushes, pulls, responses and batches, the stream API,
 * devices and contexts, the last-error slot, and which runtime is loaded.
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
#include <stdatomic.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
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
#include "cuda_fixture.h"

/* ------------------------------------------------ ordering with the caller -- */


#define NV 4096		      /* floats in the buffers below */
#define SLOW_US 100000	      /* a kernel that takes 0.1 s */
#define F1 0x3f800000u	      /* 1.0f */
#define F2 0x40000000u	      /* 2.0f */
#define F5 0x40a00000u	      /* 5.0f */

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

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
		sends_done(w); /* (zpush: sent once its copy is done) */
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

/* A pull request of key 3, timestamp ts, from worker 9 to the server. */
static void deliver_pull(int ts)
{
	static uint64_t key = 3;
	const void *data[2] = {&key, NULL};
	size_t l[2] = {8, 0};
	struct psl__meta m;
	uint8_t buf[512];
	size_t n;
	psl__meta_init(&m);
	m.app_id = 0;
	m.timestamp = ts;
	m.request = true;
	m.src_dev_type = m.dst_dev_type = PSL_DEV_CPU;
	n = psl__meta_encode(&m, buf);
	deliver_raw(9, buf, n, 2, data, l);
}

/* A server answers from a GPU buffer that a slow kernel on its stream has
 * just been asked to write: the worker gets the kernel's value
 * (psl_kv_respond; psl_kv_zrespond, staged or with a van that takes GPU
 * memory). A z-form response does not wait for the kernel: its handler
 * goes on, the response is sent once the GPU is done. */
static void test_order_respond(void **state)
{
	static const uint32_t fill[3] = {F5, F2, F1};
	struct psl_kv_server *srv;
	uint64_t key = 3;
	void *d;
	double t;
	int i;
	(void)state;

	node_up_as(PSL_SERVER, 8, 1, 1);
	use_fake(NULL, NULL);
	d = dev_floats(0);
	g_nreq = g_done = 0;
	assert_int_equal(psl_kv_server_new(0, PSL_FLOAT32, keep_handler, NULL, &srv), 0);
	for (i = 0; i < 3; i++)
		deliver_pull(70 + i);
	assert_int_equal(g_nreq, 3);
	for (i = 0; i < 3; i++) {
		struct psl_kv res = {&key, 1, d, NV, NULL, PSL_MEM_CUDA, 0};
		assert_int_equal(((fill_fn)fake_sym("fake_kernel_fill"))(d, fill[i], NV,
									  i ? 5 * SLOW_US : SLOW_US,
									  NULL),
				 0);
		if (i == 2)
			psl__po.caps.flags |= PSL_VAN_CAP_MEM_CUDA;
		t = now_s();
		if (i)
			assert_int_equal(psl_kv_zrespond(g_req[i], &res, done_cb, NULL), 0);
		else
			assert_int_equal(psl_kv_respond(g_req[i], &res), 0);
		t = now_s() - t;
		if (i && t > 0.25)
			fail_msg("response %d took %.3f s: it waited for the kernel", i, t);
		psl__cuda_after_idle();
		assert_int_equal(g_nsent, i + 1);
		assert_int_equal(g_sent[i].mem[1], i == 2 ? PSL_MEM_CUDA : PSL_MEM_HOST);
		expect_seg(&g_sent[i], 1, i == 0 ? 5.0f : i == 1 ? 2.0f : 1.0f);
	}
	assert_int_equal(g_done, 2);
	assert_int_equal(((query_fn)fake_sym("fake_cuda_query"))("device_syncs"), 0);
	psl_kv_server_free(srv);
	psl_mem_free(PSL_MEM_CUDA, 0, d);
}

/* An AF batch, its push tensor staged and then to a van that takes GPU
 * memory: its GPU push tensor is read after the 0.5 s kernel that writes
 * it, its GPU pull tensor written after the queued reader. The call does
 * not wait for the kernel (the tensors are the caller's until completion):
 * its messages are sent once the GPU is done, and a host push made right
 * after it is sent after them. */
static void test_order_batch(void **state)
{
	static float h[NV];
	uint64_t key = 3;
	void *dp, *dq, *y;
	struct psl_kv_tensor push = {0}, pull = {0};
	struct psl_kv_batch b = {0};
	struct psl_kv kv = {&key, 1, h, NV, NULL, PSL_MEM_HOST, 0};
	struct psl_kv_worker *w;
	int ts, tp, i, direct;
	double t;
	(void)state;

	node_up(1);
	use_fake(NULL, NULL);
	dp = dev_floats(0);
	y = dev_floats(0);
	assert_int_equal(psl_kv_worker_new(0, 0, PSL_FLOAT32, &w), 0);
	for (direct = 0; direct < 2; direct++) {
		clear_sent();
		psl__po.caps.flags = direct ? PSL_VAN_CAP_MEM_CUDA : 0;
		dq = dev_floats(2);
		push = (struct psl_kv_tensor){.key = 1, .vals = dp, .len = NV,
					      .mem = PSL_MEM_CUDA};
		pull = (struct psl_kv_tensor){.key = 2, .vals = dq, .len = NV,
					      .mem = PSL_MEM_CUDA};
		b = (struct psl_kv_batch){.push = &push, .npush = 1, .pull = &pull, .npull = 1};
		assert_int_equal(((fill_fn)fake_sym("fake_kernel_fill"))(dp, direct ? F1 : F5, NV,
									  5 * SLOW_US, NULL),
				 0);
		assert_int_equal(((kcopy_fn)fake_sym("fake_kernel_copy"))(y, dq, NV * 4,
									   SLOW_US, NULL),
				 0);
		t = now_s();
		ts = psl_kv_batch_pushpull(w, &b, 0, 0, NULL, NULL);
		tp = psl_kv_push(w, &kv, 0, NULL, NULL);
		t = now_s() - t;
		assert_true(ts >= 0 && tp >= 0);
		if (t > 0.25)
			fail_msg("batch %d took %.3f s: it waited for the kernel", direct, t);
		sends_done(w);
		assert_int_equal(g_nsent, 3);
		assert_memory_equal(g_sent[2].seg[0], &key, 8); /* (the host push came last) */
		for (i = 0; i < 2; i++) {
			if (g_sent[i].m.push) {
				assert_int_equal(g_sent[i].mem[1],
						 direct ? PSL_MEM_CUDA : PSL_MEM_HOST);
				expect_seg(&g_sent[i], 1, direct ? 1.0f : 5.0f);
				reply(&g_sent[i], 0, NULL, NULL);
			} else {
				answer_pull(&g_sent[i]);
			}
		}
		reply(&g_sent[2], 0, NULL, NULL);
		assert_int_equal(psl_kv_wait(w, ts), 0);
		assert_int_equal(psl_kv_wait(w, tp), 0);
		expect_dev(y, 2.0f);
		expect_dev(dq, 1.0f);
		psl_mem_free(PSL_MEM_CUDA, 0, dq);
	}
	assert_int_equal(((query_fn)fake_sym("fake_cuda_query"))("device_syncs"), 0);
	psl_kv_worker_free(w);
	psl_mem_free(PSL_MEM_CUDA, 0, dp);
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
	sends_done(w);
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
	uint64_t key = 3;
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
	deliver_pull(80);
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

/* ------------------------------------ copies that do not wait for others -- */

typedef void (*setdelay_fn)(long);

/* One staging copy of NV floats between host and device 0, in a thread. */
struct copy_job {
	void *dst;
	int32_t dst_mem;
	const void *src;
	int32_t src_mem;
	void *stream;
	int rc;
	double took;
};

static void *copy_main(void *arg)
{
	struct copy_job *j = arg;
	double t = now_s();
	j->rc = psl__cuda_copy_after(j->dst, j->dst_mem, 0, j->src, j->src_mem, 0,
				     NV * sizeof(float), j->stream);
	j->took = now_s() - t;
	return NULL;
}

/* Starts j in *th and returns once its copy is queued (the fake counts it). */
static void copy_start(pthread_t *th, struct copy_job *j)
{
	long c0 = ((query_fn)fake_sym("fake_cuda_query"))("copies");
	assert_int_equal(pthread_create(th, NULL, copy_main, j), 0);
	while (((query_fn)fake_sym("fake_cuda_query"))("copies") == c0)
		usleep(1000);
	usleep(5000); /* (past the call that queues it) */
}

/* A caller's non-blocking stream whose kernel writes val into d in 0.5 s. */
static void *slow_stream(void *d, uint32_t val)
{
	void *s;
	assert_int_equal(((mkstream_fn)fake_sym("cudaStreamCreateWithFlags"))(&s, 1), 0);
	assert_int_equal(((fill_fn)fake_sym("fake_kernel_fill"))(d, val, NV, 5 * SLOW_US, s), 0);
	return s;
}

/* A pinned staging buffer of NV floats, each v. */
static float *pinned_floats(float v)
{
	int err, i;
	float *h = psl__cuda_stage_get(NV * sizeof(float), 0, &err);
	assert_non_null(h);
	for (i = 0; i < NV; i++)
		h[i] = v;
	return h;
}

static void expect_host(const float *h, float v)
{
	int i;
	for (i = 0; i < NV; i++)
		if (h[i] != v)
			fail_msg("value %d is %g, expected %g", i, (double)h[i], (double)v);
}

/* Two threads copy from the GPU (one direction: one core stream). B's copy
 * is queued first; A's then waits there for a slow kernel of its caller's
 * stream, while B is on its way to waiting (the fake's sync delay). B
 * waits for its own copy only, not for A's queued behind it. */
static void test_copy_own_wait(void **state)
{
	struct copy_job b = {0};
	float *ha, *hb;
	void *da, *db, *s;
	pthread_t th;
	double t;
	(void)state;

	node_up(1);
	use_fake(NULL, NULL);
	da = dev_floats(0);
	db = dev_floats(3);
	ha = pinned_floats(0);
	hb = pinned_floats(0);
	s = slow_stream(da, F1);
	((setdelay_fn)fake_sym("fake_cuda_set_sync_delay"))(SLOW_US);
	b = (struct copy_job){hb, PSL_MEM_HOST, db, PSL_MEM_CUDA, PSL_CUDA_STREAM_NONE, -1, 0};
	copy_start(&th, &b);
	t = now_s();
	assert_int_equal(psl__cuda_copy_after(ha, PSL_MEM_HOST, -1, da, PSL_MEM_CUDA, 0,
					      NV * sizeof(float), s),
			 0);
	t = now_s() - t;
	assert_int_equal(pthread_join(th, NULL), 0);
	((setdelay_fn)fake_sym("fake_cuda_set_sync_delay"))(0);
	assert_int_equal(b.rc, 0);
	expect_host(ha, 1.0f); /* after the kernel */
	expect_host(hb, 3.0f);
	assert_true(t > 0.3);
	if (b.took > 0.35)
		fail_msg("B's copy took %.3f s: it waited for A's copy (%.3f s)", b.took, t);
	assert_int_equal(((stream_fn)fake_sym("cudaStreamDestroy"))(s), 0);
	psl__cuda_stage_put(ha);
	psl__cuda_stage_put(hb);
	psl_mem_free(PSL_MEM_CUDA, 0, da);
	psl_mem_free(PSL_MEM_CUDA, 0, db);
}

/* A copy to the GPU that waits for a slow kernel of its caller's stream (a
 * pull completing into a tensor a kernel still writes) does not hold up a
 * copy from the GPU that another thread makes meanwhile (a push): each
 * direction has a core stream of its own. The first still writes after the
 * kernel. */
static void test_copy_directions(void **state)
{
	struct copy_job a;
	float *ha, *hb;
	void *da, *db, *s;
	pthread_t th;
	double t;
	(void)state;

	node_up(1);
	use_fake(NULL, NULL);
	da = dev_floats(0);
	db = dev_floats(3);
	ha = pinned_floats(2);
	hb = pinned_floats(0);
	s = slow_stream(da, F1);
	a = (struct copy_job){da, PSL_MEM_CUDA, ha, PSL_MEM_HOST, s, -1, 0};
	copy_start(&th, &a);
	t = now_s();
	assert_int_equal(psl__cuda_copy_after(hb, PSL_MEM_HOST, -1, db, PSL_MEM_CUDA, 0,
					      NV * sizeof(float), PSL_CUDA_STREAM_NONE),
			 0);
	t = now_s() - t;
	expect_host(hb, 3.0f);
	if (t > 0.25)
		fail_msg("the copy from the GPU took %.3f s: it waited for the kernel", t);
	assert_int_equal(pthread_join(th, NULL), 0);
	assert_int_equal(a.rc, 0);
	assert_true(a.took > 0.3);
	expect_dev(da, 2.0f); /* the copy's, after the kernel's 1.0 */
	assert_int_equal(((stream_fn)fake_sym("cudaStreamDestroy"))(s), 0);
	psl__cuda_stage_put(ha);
	psl__cuda_stage_put(hb);
	psl_mem_free(PSL_MEM_CUDA, 0, da);
	psl_mem_free(PSL_MEM_CUDA, 0, db);
}

/* Pull answer v (NV floats of one key) received in the pinned buffer the
 * core lends (recv_dest), for the last request sent; the buffer. */
static void *answer_in_loan(float v)
{
	const struct sent *s = &g_sent[g_nsent - 1];
	static float h[NV];
	uint64_t key = 1;
	const void *data[2] = {&key, NULL};
	size_t l[2] = {8, sizeof(h)}, n;
	struct psl_van_dest dest;
	uint8_t buf[256];
	int i;
	for (i = 0; i < NV; i++)
		h[i] = v;
	n = reply_meta(s, 0, buf);
	memset(&dest, 0, sizeof(dest));
	assert_int_equal(psl__po.host.recv_dest(psl__po.host.ctx, 8, buf, n, 1, sizeof(h), &dest), 0);
	assert_int_equal(dest.mem_type, PSL_MEM_HOST);
	memcpy(dest.data, h, sizeof(h)); /* the van writes, gives it back, delivers */
	psl__po.host.recv_dest_put(psl__po.host.ctx, dest.loan, 0);
	data[1] = dest.data;
	deliver_raw_lent_mem(8, buf, n, 2, data, l, 1, PSL_MEM_HOST, -1);
	return dest.data;
}

/* A worker ordered with a non-blocking stream st on which a slow kernel
 * copies x (2.0) into y; a pull into x goes next. */
struct slow_reader {
	struct psl_kv_worker *w;
	void *st, *x, *y, *z;
};

static void slow_reader_up(struct slow_reader *s)
{
	node_up(1);
	use_fake(NULL, NULL);
	assert_int_equal(((mkstream_fn)fake_sym("cudaStreamCreateWithFlags"))(&s->st, 1), 0);
	assert_int_equal(psl_kv_worker_new(0, 0, PSL_FLOAT32, &s->w), 0);
	assert_int_equal(psl_kv_worker_set_cuda_stream(s->w, s->st), 0);
	s->x = dev_floats(2);
	s->y = dev_floats(0);
	s->z = dev_floats(0);
	assert_int_equal(((kcopy_fn)fake_sym("fake_kernel_copy"))(s->y, s->x, NV * 4, 5 * SLOW_US,
								    s->st),
			 0);
}

/* The pull into x that began at t completed: soon (it did not wait for
 * its copy to the GPU); then work is queued after it, copying x into z. */
static void slow_reader_pulled(struct slow_reader *s, double t)
{
	t = now_s() - t;
	if (t > 0.25)
		fail_msg("the pull took %.3f s: it waited for its copy to the GPU", t);
	assert_int_equal(((kcopy_fn)fake_sym("fake_kernel_copy"))(s->z, s->x, NV * 4, 0, s->st), 0);
}

/* Once the stream ran: the reader queued before the pull saw the old value
 * (2.0), x holds the pulled one (1.0), and so did the work queued after. */
static void slow_reader_check(struct slow_reader *s)
{
	assert_int_equal(((stream_fn)fake_sym("cudaStreamSynchronize"))(s->st), 0);
	expect_dev(s->y, 2.0f);
	expect_dev(s->x, 1.0f);
	expect_dev(s->z, 1.0f);
}

static void slow_reader_down(struct slow_reader *s)
{
	psl_kv_worker_free(s->w);
	assert_int_equal(((stream_fn)fake_sym("cudaStreamDestroy"))(s->st), 0);
	psl_mem_free(PSL_MEM_CUDA, 0, s->x);
	psl_mem_free(PSL_MEM_CUDA, 0, s->y);
	psl_mem_free(PSL_MEM_CUDA, 0, s->z);
}

/* A pull into GPU memory whose caller named a stream completes without
 * waiting for the copy (queued behind a 0.5 s reader of the tensor on that
 * stream); the reader sees the old value, the stream's later work the
 * pulled one. The pinned buffer is not lent again before the copy has
 * read it: a second pull (PSL_CUDA_STREAM_NONE: it waits) writes another
 * value into a buffer of the same size meanwhile. */
static void test_pull_no_wait(void **state)
{
	uint64_t key = 1;
	struct slow_reader s;
	struct psl_kv_out out;
	void *x2;
	size_t in_use;
	double t;
	int ts;
	(void)state;

	slow_reader_up(&s);
	x2 = dev_floats(0);
	out = (struct psl_kv_out){s.x, NV, 0, NULL, PSL_MEM_CUDA, 0};
	t = now_s();
	ts = psl_kv_zpull(s.w, &key, 1, &out, 0, NULL, NULL);
	answer_in_loan(1.0f);
	assert_int_equal(psl_kv_wait(s.w, ts), 0);
	slow_reader_pulled(&s, t);

	assert_int_equal(psl_kv_worker_set_cuda_stream(s.w, PSL_CUDA_STREAM_NONE), 0);
	out = (struct psl_kv_out){x2, NV, 0, NULL, PSL_MEM_CUDA, 0};
	ts = psl_kv_zpull(s.w, &key, 1, &out, 0, NULL, NULL);
	answer_in_loan(5.0f);
	assert_int_equal(psl_kv_wait(s.w, ts), 0);
	expect_dev(x2, 5.0f); /* (none: done when the pull is) */

	slow_reader_check(&s); /* (x: the first pull's, not the second's) */
	slow_reader_down(&s);
	psl__cuda_stage_put(psl__cuda_stage_get(NV * 4, 0, &ts)); /* (the pool looks) */
	psl__cuda_stage_bytes(&in_use);
	assert_int_equal(in_use, 0);
	psl_mem_free(PSL_MEM_CUDA, 0, x2);
}

/* The same when the van received the values into its own (pageable)
 * buffer, not the pinned one the core lends: they are copied into a
 * pinned buffer of the pool first, and the copy to the GPU is not waited
 * for. */
static void test_pull_no_wait_van_buffer(void **state)
{
	uint64_t key = 1;
	struct slow_reader s;
	struct psl_kv_out out;
	long pageable;
	double t;
	int ts;
	(void)state;

	slow_reader_up(&s);
	pageable = ((query_fn)fake_sym("fake_cuda_query"))("pageable_copies");
	out = (struct psl_kv_out){s.x, NV, 0, NULL, PSL_MEM_CUDA, 0};
	t = now_s();
	ts = psl_kv_pull(s.w, &key, 1, &out, 0, NULL, NULL);
	answer_pull(&g_sent[g_nsent - 1]); /* (1.0, in the van's buffer) */
	assert_int_equal(psl_kv_wait(s.w, ts), 0);
	slow_reader_pulled(&s, t);
	assert_int_equal(((stream_fn)fake_sym("cudaStreamSynchronize"))(s.st), 0);
	/* (before the checks' own copies from the GPU) */
	assert_int_equal(((query_fn)fake_sym("fake_cuda_query"))("pageable_copies"), pageable);
	slow_reader_check(&s);
	slow_reader_down(&s);
}

/* An AF batch's GPU pull tensor, for a caller that named a stream, as a
 * pull's (test_pull_no_wait_van_buffer): the batch completes without
 * waiting for the copy queued behind the reader, which sees the old value;
 * the stream's later work sees the answer. */
static void test_batch_no_wait(void **state)
{
	static float h[NV];
	struct slow_reader s;
	struct psl_kv_tensor push, pull;
	struct psl_kv_batch b;
	double t;
	int ts, i;
	(void)state;

	slow_reader_up(&s);
	push = (struct psl_kv_tensor){.key = 1, .vals = h, .len = NV};
	pull = (struct psl_kv_tensor){.key = 2, .vals = s.x, .len = NV, .mem = PSL_MEM_CUDA};
	b = (struct psl_kv_batch){.push = &push, .npush = 1, .pull = &pull, .npull = 1};
	t = now_s();
	ts = psl_kv_batch_pushpull(s.w, &b, 0, 0, NULL, NULL);
	assert_true(ts >= 0);
	assert_int_equal(g_nsent, 2);
	for (i = 0; i < 2; i++) {
		if (g_sent[i].m.push)
			reply(&g_sent[i], 0, NULL, NULL);
		else
			answer_pull(&g_sent[i]); /* (1.0, in the van's buffer) */
	}
	assert_int_equal(psl_kv_wait(s.w, ts), 0);
	slow_reader_pulled(&s, t);
	slow_reader_check(&s);
	slow_reader_down(&s);
}

/* A push into a GPU buffer the server registered (a van that moves host
 * memory: copied there), while a 0.5 s kernel that reads that buffer is
 * queued on the server's stream: the handler gets the push at once, the
 * kernel reads the old values, the stream's later work the pushed ones. */
static void test_recv_no_wait(void **state)
{
	static float h[NV];
	struct psl_kv_server *srv;
	struct psl_van_dest dest;
	void *d, *y;
	double t;
	int rc, i;
	(void)state;

	node_up_as(PSL_SERVER, 8, 1, 1);
	use_fake(NULL, NULL);
	d = dev_floats(2);
	y = dev_floats(0);
	for (i = 0; i < NV; i++)
		h[i] = 1.0f;
	g_nreq = 0;
	assert_int_equal(psl_kv_server_new(0, PSL_FLOAT32, keep_handler, NULL, &srv), 0);
	assert_int_equal(psl_kv_server_recv_buffer(srv, 0, 5, d, sizeof(h), PSL_MEM_CUDA, 0), 0);
	assert_int_equal(((kcopy_fn)fake_sym("fake_kernel_copy"))(y, d, sizeof(h), 5 * SLOW_US,
								   NULL),
			 0);
	t = now_s();
	push_batch_msg(5, h, sizeof(h), true, &dest, &rc);
	t = now_s() - t;
	assert_true(rc < 0); /* (not lent: the van cannot write GPU memory) */
	assert_int_equal(g_nreq, 1);
	assert_ptr_equal(g_req[0]->kv.vals, d);
	if (t > 0.25)
		fail_msg("the push took %.3f s to reach the handler: it waited for the kernel", t);
	expect_dev(y, 2.0f);
	expect_dev(d, 1.0f);
	assert_int_equal(psl_kv_respond(g_req[0], NULL), 0);
	assert_int_equal(((query_fn)fake_sym("fake_cuda_query"))("device_syncs"), 0);
	psl_kv_server_free(srv);
	psl_mem_free(PSL_MEM_CUDA, 0, d);
	psl_mem_free(PSL_MEM_CUDA, 0, y);
}

/* A z-form push from GPU memory (its caller keeps the buffer until
 * completion) does not wait for its staging copy, queued behind a 0.5 s
 * kernel that writes the buffer: it returns at once and is sent once the
 * copy is done, with the kernel's values; a pull of its key made right
 * after it is sent after it. */
static void test_zpush_no_wait(void **state)
{
	uint64_t key = 1;
	static float h[NV];
	struct psl_kv_worker *w;
	struct psl_kv_out out = {h, NV, 0, NULL, PSL_MEM_HOST, 0};
	struct psl_kv kv;
	int ts, tq;
	double t;
	void *d;
	(void)state;

	node_up(1);
	use_fake(NULL, NULL);
	d = dev_floats(0);
	assert_int_equal(psl_kv_worker_new(0, 0, PSL_FLOAT32, &w), 0);
	kv = (struct psl_kv){&key, 1, d, NV, NULL, PSL_MEM_CUDA, 0};
	assert_int_equal(((fill_fn)fake_sym("fake_kernel_fill"))(d, F5, NV, 5 * SLOW_US, NULL), 0);
	t = now_s();
	ts = psl_kv_zpush(w, &kv, 0, NULL, NULL);
	tq = psl_kv_zpull(w, &key, 1, &out, 0, NULL, NULL);
	t = now_s() - t;
	assert_true(ts >= 0 && tq >= 0);
	if (t > 0.25)
		fail_msg("the push took %.3f s: it waited for its copy from the GPU", t);
	sends_done(w);
	assert_int_equal(g_nsent, 2);
	assert_true(g_sent[0].m.push && !g_sent[1].m.push);
	expect_seg(&g_sent[0], 1, 5.0f);
	reply(&g_sent[0], 0, NULL, NULL);
	answer_pull(&g_sent[1]);
	assert_int_equal(psl_kv_wait(w, ts), 0);
	assert_int_equal(psl_kv_wait(w, tq), 0);
	assert_int_equal(out.num_vals, NV);
	assert_int_equal(((query_fn)fake_sym("fake_cuda_query"))("device_syncs"), 0);
	psl_kv_worker_free(w);
	psl_mem_free(PSL_MEM_CUDA, 0, d);
}

/* which thread sent (g_send_hook, set again before each send): the
 * test's, or another */
static pthread_t g_caller;
static atomic_int g_here, g_elsewhere;
static void count_sender(void)
{
	atomic_fetch_add(pthread_equal(pthread_self(), g_caller) ? &g_here : &g_elsewhere, 1);
}

/* count_sender counts from 0, against the calling thread */
static void count_from_here(void)
{
	g_caller = pthread_self();
	atomic_store(&g_here, 0);
	atomic_store(&g_elsewhere, 0);
}

/* n z-form pushes of kv, each answered: how many its caller sent */
static int zpushes_here(struct psl_kv_worker *w, const struct psl_kv *kv, int n)
{
	int i, ts;
	count_from_here();
	for (i = 0; i < n; i++) {
		g_send_hook = count_sender;
		assert_true((ts = psl_kv_zpush(w, kv, 0, NULL, NULL)) >= 0);
		sends_done(w);
		expect_seg(&g_sent[g_nsent - 1], 1, 2.0f);
		reply(&g_sent[g_nsent - 1], 0, NULL, NULL);
		assert_int_equal(psl_kv_wait(w, ts), 0);
	}
	assert_int_equal(atomic_load(&g_here) + atomic_load(&g_elsewhere), n);
	return atomic_load(&g_here);
}

/* A z-form push whose copy is done within PS_CUDA_SPIN_US (nothing queued
 * on the stream, nothing before it) is sent by its caller: handing it to
 * pslite's CUDA thread costs more than such a copy on a GPU (docs/gpu.md,
 * "Who waits"). One behind a slow kernel is sent by that thread, and the
 * call waits no longer than that. PS_CUDA_SPIN_US=0: all by that thread;
 * a bad value is a warning and the default. (The fake runs a copy on a
 * thread of its own: 50 ms here, so that a loaded machine passes.) */
static void test_zpush_sent_here(void **state)
{
	uint64_t key = 1;
	struct psl_kv_worker *w;
	struct psl_kv kv;
	int ts;
	double t;
	void *d;
	(void)state;

	node_up(1);
	setenv("PS_CUDA_SPIN_US", "50000", 1);
	use_fake(NULL, NULL);
	d = dev_floats(2);
	assert_int_equal(psl_kv_worker_new(0, 0, PSL_FLOAT32, &w), 0);
	kv = (struct psl_kv){&key, 1, d, NV, NULL, PSL_MEM_CUDA, 0};
	assert_int_equal(zpushes_here(w, &kv, 5), 5);
	atomic_store(&g_here, 0);
	assert_int_equal(((fill_fn)fake_sym("fake_kernel_fill"))(d, F5, NV, 5 * SLOW_US, NULL), 0);
	g_send_hook = count_sender;
	t = now_s();
	assert_true((ts = psl_kv_zpush(w, &kv, 0, NULL, NULL)) >= 0);
	t = now_s() - t;
	sends_done(w);
	assert_int_equal(atomic_load(&g_here), 0);
	assert_null(g_send_hook); /* (it was sent) */
	if (t > 0.25)
		fail_msg("the push took %.3f s: it waited for the slow kernel", t);
	expect_seg(&g_sent[g_nsent - 1], 1, 5.0f);
	reply(&g_sent[g_nsent - 1], 0, NULL, NULL);
	assert_int_equal(psl_kv_wait(w, ts), 0);
	assert_int_equal(((fill_fn)fake_sym("fake_kernel_fill"))(d, F2, NV, 0, NULL), 0);
	setenv("PS_CUDA_SPIN_US", "0", 1);
	psl__cuda_spin_reread(); /* (it is read once) */
	assert_int_equal(zpushes_here(w, &kv, 5), 0);
	setenv("PS_CUDA_SPIN_US", "lots", 1);
	psl__cuda_spin_reread();
	assert_int_equal(psl__cuda_spin_ns(), PSL__CUDA_SPIN_US * 1000);
	unsetenv("PS_CUDA_SPIN_US");
	psl__cuda_spin_reread();
	psl_kv_worker_free(w);
	psl_mem_free(PSL_MEM_CUDA, 0, d);
}

/* The same for a server's z-form response from GPU memory: sent by the
 * thread that answers when its copy is done within PS_CUDA_SPIN_US. */
static void test_zrespond_sent_here(void **state)
{
	struct psl_kv_server *srv;
	uint64_t key = 3;
	void *d;
	int i;
	(void)state;

	node_up_as(PSL_SERVER, 8, 1, 1);
	setenv("PS_CUDA_SPIN_US", "50000", 1);
	use_fake(NULL, NULL);
	d = dev_floats(2);
	g_nreq = g_done = 0;
	assert_int_equal(psl_kv_server_new(0, PSL_FLOAT32, keep_handler, NULL, &srv), 0);
	for (i = 0; i < 6; i++)
		deliver_pull(100 + i);
	assert_int_equal(g_nreq, 6);
	count_from_here();
	for (i = 0; i < 6; i++) {
		struct psl_kv res = {&key, 1, d, NV, NULL, PSL_MEM_CUDA, 0};
		g_send_hook = count_sender;
		assert_int_equal(psl_kv_zrespond(g_req[i], &res, done_cb, NULL), 0);
		psl__cuda_after_idle();
		assert_int_equal(g_nsent, i + 1);
		expect_seg(&g_sent[i], 1, 2.0f);
	}
	g_send_hook = NULL;
	unsetenv("PS_CUDA_SPIN_US");
	psl__cuda_spin_reread();
	assert_int_equal(g_done, 6);
	if (atomic_load(&g_here) != 6)
		fail_msg("%d of 6 z-form responses from an idle stream were sent by another thread "
			 "than the one that answered", atomic_load(&g_elsewhere));
	psl_kv_server_free(srv);
	psl_mem_free(PSL_MEM_CUDA, 0, d);
}

/* Until the fake's streams of device 0 ran what was queued on them: a
 * wait that the fake fails (FAKE_CUDA_FAIL sync@) leaves the copy queued,
 * and a reset frees the pinned buffers it writes. */
static void fake_idle(void)
{
	assert_int_equal(((int (*)(void))fake_sym("cudaDeviceSynchronize"))(), 0);
}

/* A worker (*w) whose copies from the GPU fail once queued (the wait for
 * them reports the error), and a GPU buffer of NV floats to push. */
static void *failing_copies_up(struct psl_kv_worker **w)
{
	void *d;
	node_up(1);
	use_fake("sync@1+", NULL);
	d = dev_floats(0);
	assert_int_equal(psl_kv_worker_new(0, 0, PSL_FLOAT32, w), 0);
	return d;
}

/* A z-form push whose copy from the GPU fails after it was queued (the
 * wait for it reports the error): the push fails with EIO, nothing is
 * sent, and a push-pull's pull fails with it; a worker freed with a push
 * not yet sent sends it first. */
static void test_zpush_copy_fails(void **state)
{
	uint64_t key = 1;
	static float h[NV];
	struct psl_kv_worker *w;
	struct psl_kv_out out = {h, NV, 0, NULL, PSL_MEM_HOST, 0};
	struct psl_kv kv;
	int ts, tq;
	void *d = failing_copies_up(&w);
	(void)state;

	kv = (struct psl_kv){&key, 1, d, NV, NULL, PSL_MEM_CUDA, 0};
	ts = psl_kv_zpush(w, &kv, 0, NULL, NULL);
	tq = psl_kv_zpushpull(w, &kv, &out, 0, NULL, NULL);
	assert_true(ts >= 0 && tq >= 0);
	assert_int_equal(psl_kv_wait(w, ts), -EIO);
	assert_int_equal(psl_kv_wait(w, tq), -EIO);
	sends_done(w);
	assert_int_equal(g_nsent, 0);
	fake_idle(); /* (the failed waits did not wait for the copies) */
	use_fake(NULL, NULL);
	psl_mem_free(PSL_MEM_CUDA, 0, d); /* (a new runtime: a new buffer) */
	d = dev_floats(0);
	kv.vals = d;
	assert_int_equal(((fill_fn)fake_sym("fake_kernel_fill"))(d, F5, NV, SLOW_US, NULL), 0);
	assert_int_equal(psl_kv_worker_set_timeout(w, 300), 0); /* (nobody answers) */
	ts = psl_kv_zpush(w, &kv, 0, NULL, NULL);
	assert_true(ts >= 0);
	psl_kv_worker_free(w); /* (its push is sent first, then fails by its deadline) */
	assert_int_equal(g_nsent, 1);
	psl_mem_free(PSL_MEM_CUDA, 0, d);
}

/* A z-form response whose copy from the GPU fails after it was queued:
 * the worker gets the error (EIO) as its answer, the caller's done is
 * called once. */
static void test_zrespond_copy_fails(void **state)
{
	struct psl_kv_server *srv;
	uint64_t key = 3;
	void *d;
	(void)state;

	node_up_as(PSL_SERVER, 8, 1, 1);
	use_fake("sync@1+", NULL);
	d = dev_floats(0);
	g_nreq = g_done = 0;
	assert_int_equal(psl_kv_server_new(0, PSL_FLOAT32, keep_handler, NULL, &srv), 0);
	deliver_pull(90);
	assert_int_equal(g_nreq, 1);
	{
		struct psl_kv res = {&key, 1, d, NV, NULL, PSL_MEM_CUDA, 0};
		assert_int_equal(psl_kv_zrespond(g_req[0], &res, done_cb, NULL), 0);
	}
	psl__cuda_after_idle();
	assert_int_equal(g_done, 1);
	assert_int_equal(g_nsent, 1);
	assert_int_equal(g_sent[0].nseg, 0);
	assert_int_equal(g_sent[0].m.option, -EIO);
	psl_kv_server_free(srv);
	fake_idle(); /* (the failed wait did not wait for the copy) */
	use_fake(NULL, NULL);
	psl_mem_free(PSL_MEM_CUDA, 0, d);
}

/* its callback (on pslite's CUDA thread) frees its worker: refused */
static atomic_int g_freed_in_cb;
static void free_worker_cb(int ts, int status, void *arg)
{
	(void)ts;
	(void)status;
	psl_kv_worker_free(arg);
	atomic_store(&g_freed_in_cb, 1);
}

/* An AF batch whose push tensor's copy from the GPU fails after it was
 * queued: the batch fails with EIO and nothing is sent. Its callback runs
 * on pslite's CUDA thread, and psl_kv_worker_free there is refused with an
 * error (the old core freed the worker under the thread still using it). */
static void test_batch_copy_fails(void **state)
{
	struct psl_kv_tensor push;
	struct psl_kv_batch b;
	struct psl_kv_worker *w;
	struct capture c;
	char *log;
	int ts;
	void *d = failing_copies_up(&w);
	(void)state;

	push = (struct psl_kv_tensor){.key = 1, .vals = d, .len = NV, .mem = PSL_MEM_CUDA};
	b = (struct psl_kv_batch){.push = &push, .npush = 1};
	atomic_store(&g_freed_in_cb, 0);
	capture_start(&c);
	ts = psl_kv_batch_pushpull(w, &b, 0, 0, free_worker_cb, w);
	assert_true(ts >= 0);
	assert_int_equal(psl_kv_wait(w, ts), -EIO);
	sends_done(w);
	log = capture_end(&c);
	assert_int_equal(atomic_load(&g_freed_in_cb), 1);
	assert_non_null(strstr(log, "psl_kv_worker_free from one of its own callbacks or its "
				    "handler (on a pslite CUDA thread,"));
	free(log);
	sends_done(w);
	assert_int_equal(g_nsent, 0);
	psl_kv_worker_free(w);
	fake_idle(); /* (the failed wait did not wait for the copy) */
	use_fake(NULL, NULL);
	psl_mem_free(PSL_MEM_CUDA, 0, d);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		T(test_order_push), T(test_order_pull), T(test_order_respond), T(test_order_batch),
		T(test_stream_api), T(test_server_stream),
		T(test_device_context), T(test_last_error), T(test_runtime_choice),
		T(test_copy_own_wait), T(test_copy_directions), T(test_pull_no_wait),
		T(test_pull_no_wait_van_buffer), T(test_batch_no_wait), T(test_recv_no_wait),
		T(test_zpush_no_wait), T(test_zpush_sent_here), T(test_zrespond_sent_here),
		T(test_zpush_copy_fails), T(test_zrespond_copy_fails), T(test_batch_copy_fails),
	};
	return cmocka_run_group_tests_name("cuda order", tests, NULL, NULL);
}
