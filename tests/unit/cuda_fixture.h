/* What the CUDA unit tests (test_cuda.c, test_cuda_order.c) share: the
 * fake runtime (fake_cudart.c) in place of CUDA's, device buffers, answers
 * from the fake van's peer, a server handler that keeps its requests.
 * Included after fakevan.h by each test file. */
#ifndef PSL_TEST_CUDA_FIXTURE_H
#define PSL_TEST_CUDA_FIXTURE_H

#ifndef FAKE_CUDART
#error "FAKE_CUDART: the path of the fake runtime, from the Makefile"
#endif

#include "cuda_after.h"
#include "kv.h"

/* Until the core's CUDA thread ran all its work (psl__cuda_after_idle,
 * which a server's z-form responses from GPU memory wait for directly):
 * w's z-form pushes from GPU memory, whose sends wait there for their
 * data, and its requests made after them; its lock orders what that thread
 * did before what the test reads next. */
static inline void sends_done(struct psl_kv_worker *w)
{
	psl__cuda_after_idle();
	assert_int_equal(atomic_load(&w->deferred), 0);
}

/* Use the fake runtime, with FAKE_CUDA_* settings fail (NULL: none). */
static inline void use_fake(const char *fail, const char *devices)
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

static inline int teardown(void **state)
{
	psl__po.caps.flags = 0;
	node_down(state);
	psl__cuda_reset();
	return 0;
}

/* A device buffer holding n bytes of src. */
static inline void *dev_copy_of(const void *src, size_t n)
{
	void *d;
	assert_int_equal(psl_mem_alloc(PSL_MEM_CUDA, 0, n, &d), 0);
	assert_int_equal(psl_mem_copy(d, PSL_MEM_CUDA, 0, src, PSL_MEM_HOST, -1, n), 0);
	return d;
}

static inline void dev_read(void *dst, const void *d, size_t n)
{
	assert_int_equal(psl_mem_copy(dst, PSL_MEM_HOST, -1, d, PSL_MEM_CUDA, 0, n), 0);
}

static inline void reply(const struct sent *s, uint32_t nseg, const void *const *data,
			 const size_t *len)
{
	uint8_t buf[1024];
	size_t n = reply_meta(s, s->m.option, buf);
	deliver_raw(s->to, buf, n, nseg, data, len);
}

/* A function of the loaded fake runtime (tests only). */
static inline void *fake_sym(const char *name)
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

static struct psl_kv_request *g_req[8];
static int g_nreq, g_done;

static inline void keep_handler(struct psl_kv_server *s, struct psl_kv_request *req, void *arg)
{
	(void)s;
	(void)arg;
	g_req[g_nreq++] = req;
}

static inline void done_cb(void *arg)
{
	(void)arg;
	g_done++;
}


#define T(f) cmocka_unit_test_teardown(f, teardown)

/* A push from worker 9 (rank 0) of key with vals, as a batch message (the
 * meta names the key). lend: let the van ask where the values go first. */
static inline void push_batch_msg(uint64_t key, const void *vals, size_t len, bool lend,
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

#endif
