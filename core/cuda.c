/* The core's CUDA work: checks of GPU buffers and copies (the runtime:
 * cuda_lib.c; devices and marks of the caller's streams: cuda_dev.c;
 * pinned buffers: cuda_pool.c).
 *
 * Ordering with the caller's CUDA work: a GPU buffer belongs to a stream
 * of the caller's (the legacy default stream unless the caller said
 * another). Before pslite reads or writes the buffer on its own stream it
 * records an event on the caller's stream and makes its stream wait for it
 * (cudaStreamWaitEvent); after writing it, the caller's stream waits for
 * an event recorded after pslite's copy in turn. No device-wide
 * synchronisation. pslite's streams: one per device and direction (copies
 * to the GPU, copies from it); the thread that makes a copy waits for that
 * copy's event, not for the other threads' copies on the stream, and a
 * pull's copy into a named stream's GPU memory is not waited for at all
 * (psl__cuda_copy_in: its pinned buffer goes back to the pool after it).
 *
 * Devices: every call runs on the buffer's device and gives the thread its
 * device back, but only when the thread had one (cuCtxGetCurrent): a
 * thread that never chose a device never gets a context on device 0.
 * Errors pslite handles are cleared from the thread's last-error slot
 * (cudaGetLastError), so they do not surface later in the caller's code.
 */
#include "config.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda.h"
#include "cuda_abi.h"
#include "cuda_lib.h"
#include "env.h"
#include "log.h"
#include "postoffice.h"
#include "pslite.h"
#include "pslite/van.h"

/* Per device: two core streams, one for each direction of copy (a GPU has
 * a copy engine for each), each queued under its own lock: a copy to the
 * GPU that waits for a caller's slow work does not hold up a copy from it.
 * Lock order: a stream's, then the device's (cuda_dev.c). */
enum { Q_TO_GPU, Q_FROM_GPU, NQ }; /* (device to device: Q_FROM_GPU) */
static struct {
	struct {
		pthread_mutex_t mu;
		cu_stream s;
		bool made;
	} q[NQ];
} streams[PSL__CU_MAX_DEV];
static pthread_once_t streams_once = PTHREAD_ONCE_INIT;

static void streams_init(void)
{
	int i, q;
	for (i = 0; i < PSL__CU_MAX_DEV; i++) {
		for (q = 0; q < NQ; q++)
			pthread_mutex_init(&streams[i].q[q].mu, NULL);
	}
}

int psl__cuda_check(const char *what, const void *ptr, size_t len, int32_t mem, int32_t dev)
{
	struct cu_ptr_attr a;
	int rc, e, prev;

	if (mem == PSL_MEM_HOST)
		return 0;
	if (mem != PSL_MEM_CUDA) {
		return PSL_FAIL(-EINVAL, PSL_LOG_WARN,
				"%s: memory type %d is neither PSL_MEM_HOST (0) nor PSL_MEM_CUDA (1)",
				what, (int)mem);
	}
	if ((rc = psl__cu_load())) {
		return PSL_FAIL(rc, PSL_LOG_WARN, "%s is CUDA memory, but %s", what, psl__cu.why);
	}
	if (!psl__cu_dev_ok(dev)) {
		return PSL_FAIL(-ENODEV, PSL_LOG_WARN,
				"%s: CUDA device %d does not exist (this machine has %d: 0 to %d)",
				what, (int)dev, psl__cu.ndev, psl__cu.ndev - 1);
	}
	if (!len)
		return 0;
	memset(&a, 0, sizeof(a));
	if ((rc = psl__cu_dev_set(dev, &prev)))
		return rc;
	if ((e = psl__cu.ptr_attr(&a, ptr)))
		psl__cu_clear();
	psl__cu_dev_restore(dev, prev);
	if (e || (a.type != CU_MEMTYPE_DEVICE && a.type != CU_MEMTYPE_MANAGED)) {
		return PSL_FAIL(-EINVAL, PSL_LOG_WARN,
				"%s (%p) is said to be CUDA memory of device %d, but the CUDA "
				"runtime says it is not device memory (%s): pass PSL_MEM_HOST for "
				"host buffers",
				what, ptr, (int)dev, e ? psl__cu_err(e) : "host or unregistered memory");
	}
	if (a.type == CU_MEMTYPE_DEVICE && a.device != dev) {
		return PSL_FAIL(-EINVAL, PSL_LOG_WARN,
				"%s (%p) is on CUDA device %d, not on device %d as said: pass dev = %d",
				what, ptr, a.device, (int)dev, a.device);
	}
	return 0;
}

/* Core stream q of device dev, created on first use, with its lock held and
 * the thread's device set to dev (*prev as above). 0 or -errno. */
static int queue_enter(int dev, int q, int *prev)
{
	int e, rc;
	pthread_once(&streams_once, streams_init);
	pthread_mutex_lock(&streams[dev].q[q].mu);
	if ((rc = psl__cu_dev_set(dev, prev)))
		goto fail;
	if (!streams[dev].q[q].made) {
		if ((e = psl__cu.stream_create(&streams[dev].q[q].s, CU_STREAM_NON_BLOCKING))) {
			psl__cu_dev_restore(dev, *prev);
			rc = psl__cu_fail("cannot set up the core's CUDA stream", e);
			goto fail;
		}
		streams[dev].q[q].made = true;
	}
	return 0;
fail:
	pthread_mutex_unlock(&streams[dev].q[q].mu);
	return rc;
}

/* A stream handle that names a stream from any thread (not "none", not
 * the calling thread's per-thread default stream). */
static bool nameable(void *stream)
{
	return stream != PSL_CUDA_STREAM_NONE && stream != PSL_CUDA_STREAM_PER_THREAD;
}

/* On core stream s of dev (its lock held): wait for after, copy, record
 * *done after the copy (what the copying thread waits for: its own copy,
 * not the others queued on the stream) and let then wait for it. CUDA
 * error or 0; *done NULL if none was recorded (a copy queued all the same
 * has then been waited for here, with the stream). */
static int enqueue_copy_locked(int dev, cu_stream s, void *dst, const void *src, size_t len,
			       int kind, void *after, void *then, cu_event *done)
{
	cu_event ev = NULL;
	int e;
	*done = NULL;
	if (after && (e = psl__cu.stream_wait_event(s, after, 0)))
		return e;
	if ((e = psl__cu.memcpy_async(dst, src, len, kind, s)))
		return e;
	if ((e = psl__cu_ev_get(dev, &ev)) || (e = psl__cu.event_record(ev, s))) {
		psl__cuda_mark_put(dev, ev);
		if (psl__cu.stream_sync(s)) /* (the copy is queued: wait for it so) */
			psl__cu_clear();
		return e;
	}
	*done = ev;
	return nameable(then) ? psl__cu.stream_wait_event(then, ev, 0) : 0;
}

static const char *copy_what(int kind)
{
	return kind == CU_H2D	? "copy to the GPU"
	       : kind == CU_D2H ? "copy from the GPU"
				: "copy between GPU buffers";
}

/* psl__cuda_copy_on; with out, not waited for: *out is the copy's
 * completion (NULL: nothing was queued, or it was waited for here). */
static int copy_queued(void *dst, int32_t dst_mem, int32_t dst_dev, const void *src,
		       int32_t src_mem, int32_t src_dev, size_t len, void *after, void *then,
		       void **out)
{
	int kind, dev, prev, rc, e, q;
	cu_event done;

	if (out)
		*out = NULL;
	if (!len)
		return 0;
	if (dst_mem == PSL_MEM_HOST && src_mem == PSL_MEM_HOST) {
		memcpy(dst, src, len);
		return 0;
	}
	if ((rc = psl__cu_load()))
		return rc;
	kind = dst_mem == PSL_MEM_CUDA ? (src_mem == PSL_MEM_CUDA ? CU_D2D : CU_H2D) : CU_D2H;
	dev = src_mem == PSL_MEM_CUDA ? src_dev : dst_dev;
	if (!psl__cu_dev_ok(dev))
		return -ENODEV;
	q = kind == CU_H2D ? Q_TO_GPU : Q_FROM_GPU;
	if ((rc = queue_enter(dev, q, &prev)))
		return rc;
	e = enqueue_copy_locked(dev, streams[dev].q[q].s, dst, src, len, kind, after, then, &done);
	/* the wait (for the caller's earlier work, too) without the lock, and
	 * for this copy only: other threads queue theirs meanwhile, and this
	 * one does not wait for them */
	pthread_mutex_unlock(&streams[dev].q[q].mu);
	if (out && !e) {
		*out = done; /* (the caller's to wait for: psl__cuda_done_wait) */
		done = NULL;
	} else if (done && (rc = psl__cu.event_sync(done)) && !e) {
		e = rc;
	}
	psl__cu_dev_restore(dev, prev);
	psl__cuda_mark_put(dev, done);
	return e ? psl__cu_fail(copy_what(kind), e) : 0;
}

int psl__cuda_copy_on(void *dst, int32_t dst_mem, int32_t dst_dev, const void *src,
		      int32_t src_mem, int32_t src_dev, size_t len, void *after, void *then)
{
	return copy_queued(dst, dst_mem, dst_dev, src, src_mem, src_dev, len, after, then, NULL);
}

int psl__cuda_done_wait(int dev, void *done)
{
	int prev, e;
	bool set;
	if (!done)
		return 0;
	/* on the copy's device: a thread that never chose one (pslite's)
	 * keeps it, and gets no context on device 0 */
	set = psl__cu_dev_set(dev, &prev) == 0;
	e = psl__cu.event_sync(done); /* (the copy is over, even without the device) */
	if (set)
		psl__cu_dev_restore(dev, prev);
	psl__cuda_mark_put(dev, done);
	if (!e)
		return 0;
	return psl__cu_fail("waiting for the GPU before a send (a copy from it, or the "
			    "caller's work)", e);
}

/* A pinned buffer from the pool holding a copy of len bytes of host memory
 * src (the van's own receive buffer), NULL if the pool has none (or would
 * allocate one for this value alone: larger than those it keeps). */
static void *restage(const void *src, size_t len, int dev)
{
	int err;
	void *buf = len <= PSL__CUDA_STAGE_KEPT ? psl__cuda_stage_get(len, dev, &err) : NULL;
	if (buf)
		memcpy(buf, src, len);
	return buf;
}

int psl__cuda_copy_in(void *dst, int32_t dev, const void *src, size_t len, void *after,
		      void *then, void **stage)
{
	int prev, rc, e;
	void *buf = *stage == src ? *stage : NULL;
	cu_event done;

	if (!nameable(then) || !len || !psl__cu_dev_ok(dev) ||
	    (!buf && !(buf = restage(src, len, dev))))
		return psl__cuda_copy_on(dst, PSL_MEM_CUDA, dev, src, PSL_MEM_HOST, -1, len,
					 after, then);
	if (buf == *stage)
		*stage = NULL; /* (the pool's again, below or when the copy is done) */
	if ((rc = queue_enter(dev, Q_TO_GPU, &prev))) {
		psl__cuda_stage_put(buf);
		return rc;
	}
	e = enqueue_copy_locked(dev, streams[dev].q[Q_TO_GPU].s, dst, buf, len, CU_H2D, after,
				then, &done);
	pthread_mutex_unlock(&streams[dev].q[Q_TO_GPU].mu);
	if (e && done && psl__cu.event_sync(done))
		psl__cu_clear();
	psl__cu_dev_restore(dev, prev);
	if (e) {
		psl__cuda_mark_put(dev, done);
		psl__cuda_stage_put(buf);
		return psl__cu_fail(copy_what(CU_H2D), e);
	}
	/* nobody waits: then's later work comes after the copy, and the pool
	 * lends buf again only once the copy has read it */
	psl__cuda_stage_put_after(buf, dev, done);
	return 0;
}

int psl__cuda_copy_answer(void *dst, int32_t dst_mem, int32_t dst_dev,
			  const struct psl_van_rseg *v, void *after, void *then, void **stage)
{
	if (dst_mem == PSL_MEM_CUDA && v->mem_type == PSL_MEM_HOST)
		return psl__cuda_copy_in(dst, dst_dev, v->data, v->len, after, then, stage);
	return psl__cuda_copy_on(dst, dst_mem, dst_dev, v->data, v->mem_type, v->dev_id, v->len,
				 after, then);
}

/* psl__cuda_copy_after; with out, not waited for (copy_queued). */
static int copy_marked(void *dst, int32_t dst_mem, int32_t dst_dev, const void *src,
		       int32_t src_mem, int32_t src_dev, size_t len, void *stream, void **out)
{
	int dev = src_mem == PSL_MEM_CUDA ? src_dev : dst_dev, rc;
	void *mark = NULL;
	if (out)
		*out = NULL;
	if (len && (src_mem == PSL_MEM_CUDA || dst_mem == PSL_MEM_CUDA) &&
	    (rc = psl__cuda_mark(stream, dev, &mark)))
		return rc;
	/* (a queued copy's wait for the mark is queued too: it goes back now) */
	rc = copy_queued(dst, dst_mem, dst_dev, src, src_mem, src_dev, len, mark,
			 PSL_CUDA_STREAM_NONE, out);
	psl__cuda_mark_put(dev, mark);
	return rc;
}

int psl__cuda_copy_after(void *dst, int32_t dst_mem, int32_t dst_dev, const void *src,
			 int32_t src_mem, int32_t src_dev, size_t len, void *stream)
{
	return copy_marked(dst, dst_mem, dst_dev, src, src_mem, src_dev, len, stream, NULL);
}

int psl__cuda_copy_out(void *dst, const void *src, int32_t dev, size_t len, void *stream,
		       void **done)
{
	return copy_marked(dst, PSL_MEM_HOST, -1, src, PSL_MEM_CUDA, dev, len, stream, done);
}

int psl__cuda_copy(void *dst, int32_t dst_mem, int32_t dst_dev, const void *src,
		   int32_t src_mem, int32_t src_dev, size_t len)
{
	return psl__cuda_copy_on(dst, dst_mem, dst_dev, src, src_mem, src_dev, len, NULL,
				 PSL_CUDA_STREAM_NONE);
}

static atomic_int direct_env = -1; /* PS_CUDA_DIRECT: -1 not read yet */

bool psl__cuda_direct(const struct psl__office *o)
{
	int d = atomic_load(&direct_env);
	if (d < 0) {
		const char *v = getenv("PS_CUDA_DIRECT");
		d = !(v && !strcmp(v, "0"));
		atomic_store(&direct_env, d);
	}
	return d && (o->caps.flags & PSL_VAN_CAP_MEM_CUDA) != 0;
}

static atomic_llong spin_env = -1; /* PS_CUDA_SPIN_US in ns: -1 not read yet */

int64_t psl__cuda_spin_ns(void)
{
	long long ns = atomic_load(&spin_env);
	if (ns < 0) {
		const char *v = getenv("PS_CUDA_SPIN_US");
		long us = PSL__CUDA_SPIN_US;
		char err[160];
		if (v && psl__parse_int("PS_CUDA_SPIN_US", v, 0, 1000000, &us, err, sizeof(err))) {
			PSL_WARN("%s; waiting the default %d us", err, PSL__CUDA_SPIN_US);
			us = PSL__CUDA_SPIN_US;
		}
		ns = (long long)us * 1000;
		atomic_store(&spin_env, ns);
	}
	return ns;
}

void psl__cuda_spin_reread(void)
{
	atomic_store(&spin_env, -1);
}

static void streams_reset(void)
{
	int i, q;
	pthread_once(&streams_once, streams_init);
	pthread_mutex_lock(&psl__cu.mu);
	for (i = 0; i < PSL__CU_MAX_DEV; i++) {
		for (q = 0; q < NQ; q++) {
			if (streams[i].q[q].made && psl__cu.stream_destroy)
				psl__cu.stream_destroy(streams[i].q[q].s);
			streams[i].q[q].made = false;
		}
	}
	psl__cu_events_reset();
	psl__cu_unload_locked();
	atomic_store(&direct_env, -1);
	psl__cuda_spin_reread();
	pthread_mutex_unlock(&psl__cu.mu);
}

void psl__cuda_reset(void)
{
	psl__cuda_pool_drain(); /* (its buffers first: the runtime frees them) */
	streams_reset();
}

/* ------------------------------------------------------- public calls -- */

int psl_mem_alloc(enum psl_mem_type mem, int dev, size_t len, void **out)
{
	int rc, prev, e;
	if (!out)
		return -EINVAL;
	*out = NULL;
	if (mem == PSL_MEM_HOST) {
		*out = malloc(len ? len : 1);
		return *out ? 0 : -ENOMEM;
	}
	if (mem != PSL_MEM_CUDA)
		return -EINVAL;
	if ((rc = psl__cu_load())) {
		PSL_WARN("psl_mem_alloc: %s", psl__cu.why);
		return rc;
	}
	if (!psl__cu_dev_ok(dev))
		return -ENODEV;
	if ((rc = psl__cu_dev_enter(dev, &prev)))
		return rc;
	e = psl__cu.dmalloc(out, len ? len : 1);
	psl__cu_dev_leave(dev, prev);
	if (e) {
		*out = NULL;
		return psl__cu_fail("psl_mem_alloc", e);
	}
	return 0;
}

void psl_mem_free(enum psl_mem_type mem, int dev, void *p)
{
	int prev;
	if (!p)
		return;
	if (mem == PSL_MEM_HOST) {
		free(p);
		return;
	}
	if (mem != PSL_MEM_CUDA || psl__cu_load() || !psl__cu_dev_ok(dev) ||
	    psl__cu_dev_enter(dev, &prev))
		return;
	psl__cu.dfree(p);
	psl__cu_dev_leave(dev, prev);
}

int psl_mem_copy(void *dst, enum psl_mem_type dst_mem, int dst_dev, const void *src,
		 enum psl_mem_type src_mem, int src_dev, size_t len)
{
	int rc;
	if (!len)
		return 0;
	if (!dst || !src)
		return -EINVAL;
	if ((rc = psl__cuda_check("psl_mem_copy: dst", dst, len, dst_mem, dst_dev)) ||
	    (rc = psl__cuda_check("psl_mem_copy: src", src, len, src_mem, src_dev)))
		return rc;
	/* as cudaMemcpy: after the work queued on the legacy default stream */
	return psl__cuda_copy_after(dst, dst_mem, dst_dev, src, src_mem, src_dev, len,
				    PSL_CUDA_STREAM_LEGACY);
}
