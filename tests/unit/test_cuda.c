/*
 * Unit tests for CUDA memory through the API (core/cuda*.c and its use in
 * kv_worker.c, kv_server.c, kv_batch.c), against the fake CUDA runtime
 * (fake_cudart.c, whose device memory the host cannot touch) over the fake
 * van: loading the runtime and its errors, staging through pinned buffers
 * (push, pull, server response, batch), the direct path for a van that
 * takes CUDA memory, injected CUDA failures, and a pinned pool that does
 * not grow. Ordering with the caller's CUDA work, devices, the last-error
 * slot and the choice of runtime: test_cuda_order.c.
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
#include "cuda_fixture.h"

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
		const struct sent *s;
		sends_done(w); /* (zpush: sent once its copy is done) */
		s = &g_sent[g_nsent - 1];
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
	sends_done(w); /* (sent once the caller's CUDA work is done) */
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
	sends_done(w); /* (staged: sent once its copy is done) */
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
	assert_int_equal(psl__resender_init(psl__cur, 10, false), 0);
	d = dev_copy_of(v, sizeof(v));
	assert_int_equal(psl_kv_worker_new(0, 0, PSL_FLOAT32, &w), 0);
	kv = (struct psl_kv){&key, 1, d, 4, NULL, PSL_MEM_CUDA, 0};
	ts = psl_kv_zpush(w, &kv, 0, NULL, NULL);
	assert_true(ts >= 0);
	sends_done(w);
	assert_int_equal(g_sent[0].mem[1], PSL_MEM_CUDA);
	assert_int_equal(psl__resender_pending(psl__cur), 1);
	psl__resender_tick(psl__cur, INT64_MAX / 2); /* long past its timeout: resent */
	assert_int_equal(g_nsent, 2);
	assert_int_equal(g_sent[1].mem[1], PSL_MEM_HOST);
	assert_memory_equal(g_sent[1].seg[1], v, sizeof(v));
	psl__resender_fini(psl__cur);
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
		psl__cuda_after_idle(); /* (sent once its copy is done) */
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
	sends_done(w); /* (sent once its copy from the GPU is done) */
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

int main(void)
{
	const struct CMUnitTest tests[] = {
		T(test_errors),	  T(test_fake_is_strict), T(test_push_staged),	  T(test_pull_staged),
		T(test_direct),	  T(test_direct_resend), T(test_injected),	  T(test_server_respond),
		T(test_server_recv_buffer),
		T(test_batch),	  T(test_pool_bounded),
	};
	return cmocka_run_group_tests_name("cuda", tests, NULL, NULL);
}
