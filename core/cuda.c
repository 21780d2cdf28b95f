/* The CUDA runtime, loaded at run time: libpslite and the vans have no
 * link-time CUDA dependency, so one build runs on machines with and without
 * GPUs. Only the functions below are used; their prototypes are declared
 * here (the C ABI of libcudart since CUDA 10), so building needs no CUDA
 * headers either.
 *
 * Where the runtime is looked for: PS_CUDA_LIB (a file or a library name),
 * else a libcudart already loaded in the process (PyTorch's: one runtime,
 * not two), else libcudart.so and its versioned names on the loader's path,
 * else $CUDA_HOME/lib64 and lib, then those of the folder configure's
 * --with-cuda gave (/usr/local/cuda by default). A candidate that needs a
 * newer driver than the machine has is passed over for the next.
 *
 * Ordering with the caller's CUDA work: a GPU buffer belongs to a stream
 * of the caller's (the legacy default stream unless the caller said
 * another). Before pslite reads or writes the buffer on its own stream it
 * records an event on the caller's stream and makes its stream wait for it
 * (cudaStreamWaitEvent); after writing it, the caller's stream waits for
 * pslite's in turn. No device-wide synchronisation.
 *
 * Devices: every call runs on the buffer's device and gives the thread its
 * device back, but only when the thread had one (cuCtxGetCurrent): a
 * thread that never chose a device never gets a context on device 0.
 * Errors pslite handles are cleared from the thread's last-error slot
 * (cudaGetLastError), so they do not surface later in the caller's code.
 */
#define _GNU_SOURCE 1 /* dl_iterate_phdr */
#include "config.h"

#include <dlfcn.h>
#include <errno.h>
#include <link.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda.h"
#include "cuda_abi.h"
#include "env.h"
#include "log.h"
#include "postoffice.h"
#include "pslite.h"
#include "pslite/van.h"

#ifndef PSL_CUDA_HOME
#define PSL_CUDA_HOME "/usr/local/cuda"
#endif

typedef void *cu_stream;
typedef void *cu_event;

static struct {
	pthread_mutex_t mu;
	bool tried;
	int err; /* 0 loaded, else -errno of the failed load */
	char why[1024];
	char path[256];
	void *lib;
	void *driver; /* libcuda.so.1, when cuCtxGetCurrent came from there */
	int ndev;
	int (*get_device_count)(int *);
	int (*get_device)(int *);
	int (*set_device)(int);
	int (*stream_create)(cu_stream *, unsigned);
	int (*stream_sync)(cu_stream);
	int (*stream_destroy)(cu_stream);
	int (*memcpy_async)(void *, const void *, size_t, int, cu_stream);
	int (*host_alloc)(void **, size_t, unsigned);
	int (*free_host)(void *);
	int (*dmalloc)(void **, size_t);
	int (*dfree)(void *);
	int (*ptr_attr)(struct cu_ptr_attr *, const void *);
	const char *(*error_string)(int);
	int (*runtime_version)(int *);
	int (*driver_version)(int *);
	int (*pci_bus_id)(char *, int, int);
	int (*device_props)(void *, int);
	int (*event_create)(cu_event *, unsigned);
	int (*event_destroy)(cu_event);
	int (*event_record)(cu_event, cu_stream);
	int (*event_sync)(cu_event);
	int (*event_query)(cu_event);
	int (*stream_wait_event)(cu_stream, cu_event, unsigned);
	int (*get_last_error)(void);
	int (*ctx_current)(void **); /* the driver's cuCtxGetCurrent, or NULL */
} cu = {.mu = PTHREAD_MUTEX_INITIALIZER};

/* One stream per device, each used under its own lock, with the events
 * that mark points of callers' streams (kept for reuse). */
#define MAX_DEV 64
#define EV_KEEP 32
static struct {
	pthread_mutex_t mu;
	cu_stream s;
	bool made;
	int nev;
	cu_event ev[EV_KEEP];
} streams[MAX_DEV];
static pthread_once_t streams_once = PTHREAD_ONCE_INIT;

static void streams_init(void)
{
	int i;
	for (i = 0; i < MAX_DEV; i++)
		pthread_mutex_init(&streams[i].mu, NULL);
}

static const char *cu_err(int e)
{
	const char *s = cu.error_string ? cu.error_string(e) : NULL;
	return s ? s : "unknown CUDA error";
}

/* An error pslite has handled: off the thread's last-error slot. */
static void cu_clear(void)
{
	if (cu.get_last_error)
		cu.get_last_error();
}

static int sym(const char *name, void *slot)
{
	void *f = dlsym(cu.lib, name);
	if (!f) {
		snprintf(cu.why, sizeof(cu.why), "%s has no %s: not a CUDA runtime (set PS_CUDA_LIB "
			 "to libcudart.so of CUDA 11 or later)", cu.path, name);
		return -ENOSYS;
	}
	memcpy(slot, &f, sizeof(f));
	return 0;
}

static int bind_syms(void)
{
	static const struct {
		const char *name;
		size_t off;
	} t[] = {
#define S(n, f) {n, offsetof(__typeof__(cu), f)}
		S("cudaGetDeviceCount", get_device_count), S("cudaGetDevice", get_device),
		S("cudaSetDevice", set_device), S("cudaStreamCreateWithFlags", stream_create),
		S("cudaStreamSynchronize", stream_sync), S("cudaStreamDestroy", stream_destroy),
		S("cudaMemcpyAsync", memcpy_async), S("cudaHostAlloc", host_alloc),
		S("cudaFreeHost", free_host), S("cudaMalloc", dmalloc), S("cudaFree", dfree),
		S("cudaPointerGetAttributes", ptr_attr), S("cudaGetErrorString", error_string),
		S("cudaRuntimeGetVersion", runtime_version),
		S("cudaDriverGetVersion", driver_version), S("cudaDeviceGetPCIBusId", pci_bus_id),
		S("cudaGetDeviceProperties", device_props),
		S("cudaEventCreateWithFlags", event_create), S("cudaEventDestroy", event_destroy),
		S("cudaEventRecord", event_record), S("cudaEventSynchronize", event_sync),
		S("cudaEventQuery", event_query), S("cudaStreamWaitEvent", stream_wait_event),
		S("cudaGetLastError", get_last_error),
#undef S
	};
	size_t i;
	int rc;
	for (i = 0; i < sizeof(t) / sizeof(t[0]); i++)
		if ((rc = sym(t[i].name, (char *)&cu + t[i].off)))
			return rc;
	return 0;
}

/* cuCtxGetCurrent, to tell a thread that chose a device from one that
 * never did (cudaGetDevice says 0 for both): from the runtime's library if
 * it has it, else from the driver the runtime loaded. */
static void bind_driver(void)
{
	void *f = dlsym(cu.lib, "cuCtxGetCurrent");
	if (!f && (cu.driver = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD)))
		f = dlsym(cu.driver, "cuCtxGetCurrent");
	memcpy(&cu.ctx_current, &f, sizeof(f));
}

static int count_devices(void)
{
	int e, n = 0;
	e = cu.get_device_count(&n);
	if (e)
		cu_clear();
	if (e == CU_ERR_NO_DRIVER) {
		snprintf(cu.why, sizeof(cu.why), "the CUDA runtime (%s) finds no NVIDIA driver "
			 "new enough for it on this machine (%s)", cu.path, cu_err(e));
		return -EPROTO; /* (the next candidate may do) */
	}
	if (e == CU_ERR_NO_DEVICE || (e == CU_OK && n <= 0)) {
		snprintf(cu.why, sizeof(cu.why), "the CUDA runtime (%s) finds no GPU on this "
			 "machine (%s)", cu.path, e ? cu_err(e) : "0 devices");
		return -ENODEV;
	}
	if (e) {
		snprintf(cu.why, sizeof(cu.why), "the CUDA runtime (%s) cannot count the GPUs: "
			 "%s (is the NVIDIA driver loaded?)", cu.path, cu_err(e));
		return -ENODEV;
	}
	cu.ndev = n;
	return 0;
}

static void close_lib(void)
{
	if (cu.driver)
		dlclose(cu.driver);
	if (cu.lib)
		dlclose(cu.lib);
	cu.driver = cu.lib = NULL;
	cu.ctx_current = NULL;
	cu.get_last_error = NULL;
}

/* One candidate: 0 loaded, -ENOENT (cannot be opened: cu.why untouched
 * unless explicit), -EPROTO (needs a newer driver), other -errno. */
static int try_lib(const char *path, int flags, bool explicit)
{
	int rc;
	snprintf(cu.path, sizeof(cu.path), "%s", path);
	cu.lib = dlopen(path, RTLD_NOW | RTLD_LOCAL | flags);
	if (!cu.lib) {
		if (explicit)
			snprintf(cu.why, sizeof(cu.why), "PS_CUDA_LIB=%s cannot be loaded: %s", path,
				 dlerror());
		return -ENOENT;
	}
	rc = bind_syms();
	if (!rc)
		rc = count_devices();
	if (rc)
		close_lib();
	else
		bind_driver();
	return rc;
}

/* dl_iterate_phdr: the first object whose file name is libcudart*.so* */
static int find_loaded(struct dl_phdr_info *info, size_t size, void *arg)
{
	const char *n = info->dlpi_name, *base;
	(void)size;
	if (!n || !*n)
		return 0;
	base = strrchr(n, '/');
	base = base ? base + 1 : n;
	if (strncmp(base, "libcudart", 9) || !strstr(base, ".so"))
		return 0;
	snprintf(arg, 256, "%s", n);
	return 1;
}

/* A candidate tried: 0 (the one), or whether to go on; the first reason
 * other than "not found" is the one reported. */
static bool try_next(const char *path, int flags, int *rc, int *why_rc, char *why)
{
	*rc = try_lib(path, flags, false);
	if (!*rc)
		return false;
	if (*rc != -ENOENT && !*why_rc) {
		*why_rc = *rc;
		snprintf(why, sizeof(cu.why), "%s", cu.why);
	}
	return *rc == -ENOENT || *rc == -EPROTO || *rc == -ENOSYS;
}

static int open_lib(void)
{
	const char *env = getenv("PS_CUDA_LIB"), *home = getenv("CUDA_HOME");
	static const char *const names[] = {"libcudart.so", "libcudart.so.13", "libcudart.so.12",
					    "libcudart.so.11.0"};
	char tried[640] = "", p[256] = "", why[sizeof(cu.why)] = "";
	int rc = -ENOENT, why_rc = 0;
	size_t i;

	if (env && *env) {
		rc = try_lib(env, 0, true);
		return rc == -EPROTO ? -ENODEV : rc;
	}
	/* one already in the process (PyTorch's), then the loader's, then folders */
	if (dl_iterate_phdr(find_loaded, p) && !try_next(p, RTLD_NOLOAD, &rc, &why_rc, why))
		goto out;
	for (i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (!try_next(names[i], RTLD_NOLOAD, &rc, &why_rc, why))
			goto out;
	for (i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (!try_next(names[i], 0, &rc, &why_rc, why))
			goto out;
	for (i = 0; i < 4; i++) {
		const char *dir = i < 2 ? home : PSL_CUDA_HOME;
		if (!dir || !*dir)
			continue;
		snprintf(p, sizeof(p), "%s/%s/libcudart.so", dir, i % 2 ? "lib" : "lib64");
		snprintf(tried + strlen(tried), sizeof(tried) - strlen(tried), ", %s", p);
		if (!try_next(p, 0, &rc, &why_rc, why))
			goto out;
	}
out:
	if (!rc)
		return 0;
	if (why_rc) {
		snprintf(cu.why, sizeof(cu.why), "%s", why);
		return why_rc == -EPROTO ? -ENODEV : why_rc;
	}
	snprintf(cu.why, sizeof(cu.why), "no CUDA runtime found (libcudart.so on the loader's "
		 "path%s): install CUDA, or set PS_CUDA_LIB to the path of libcudart.so", tried);
	return -ENOENT;
}

static int load_locked(void)
{
	int rc;

	if (cu.tried)
		return cu.err;
	cu.tried = true;
	rc = open_lib();
	if (rc) {
		close_lib();
		cu.err = rc;
		return rc;
	}
	cu.err = 0;
	return 0;
}

static int load(void)
{
	int rc;
	pthread_mutex_lock(&cu.mu);
	rc = load_locked();
	pthread_mutex_unlock(&cu.mu);
	return rc;
}

static int cu_fail(const char *what, int e)
{
	PSL_WARN("%s: CUDA error %d: %s", what, e, cu_err(e));
	cu_clear();
	return e == CU_ERR_MEMORY ? -ENOMEM : -EIO;
}

/* dev is a device of this machine (the runtime loaded) */
static bool dev_ok(int dev)
{
	return dev >= 0 && dev < cu.ndev && dev < MAX_DEV;
}

/* The calling thread's device, -1 if it has none (no current context:
 * it never chose one, and giving it one of device 0 back would create a
 * context there). */
static int thread_device(void)
{
	void *ctx = NULL;
	int d;
	if (cu.ctx_current && (cu.ctx_current(&ctx) != 0 || !ctx))
		return -1;
	if (cu.get_device(&d)) {
		cu_clear();
		return -1;
	}
	return d;
}

/* Makes dev the thread's device (*prev: what to give back, -1 nothing). */
static int dev_enter(int dev, int *prev)
{
	int e;
	*prev = thread_device();
	if (*prev == dev || !(e = cu.set_device(dev)))
		return 0;
	*prev = -1;
	return cu_fail("cannot make the buffer's GPU the current device", e);
}

static void dev_leave(int dev, int prev)
{
	if (prev >= 0 && prev != dev && cu.set_device(prev))
		cu_clear();
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
	if ((rc = load())) {
		return PSL_FAIL(rc, PSL_LOG_WARN, "%s is CUDA memory, but %s", what, cu.why);
	}
	if (!dev_ok(dev)) {
		return PSL_FAIL(-ENODEV, PSL_LOG_WARN,
				"%s: CUDA device %d does not exist (this machine has %d: 0 to %d)",
				what, (int)dev, cu.ndev, cu.ndev - 1);
	}
	if (!len)
		return 0;
	memset(&a, 0, sizeof(a));
	if ((rc = dev_enter(dev, &prev)))
		return rc;
	if ((e = cu.ptr_attr(&a, ptr)))
		cu_clear();
	dev_leave(dev, prev);
	if (e || (a.type != CU_MEMTYPE_DEVICE && a.type != CU_MEMTYPE_MANAGED)) {
		return PSL_FAIL(-EINVAL, PSL_LOG_WARN,
				"%s (%p) is said to be CUDA memory of device %d, but the CUDA "
				"runtime says it is not device memory (%s): pass PSL_MEM_HOST for "
				"host buffers",
				what, ptr, (int)dev, e ? cu_err(e) : "host or unregistered memory");
	}
	if (a.type == CU_MEMTYPE_DEVICE && a.device != dev) {
		return PSL_FAIL(-EINVAL, PSL_LOG_WARN,
				"%s (%p) is on CUDA device %d, not on device %d as said: pass dev = %d",
				what, ptr, a.device, (int)dev, a.device);
	}
	return 0;
}

/* The stream of device dev, created on first use, with its lock held and
 * the calling thread's current device set to dev (*prev: what it was, -1
 * if nothing is to be given back). */
static int stream_enter(int dev, int *prev)
{
	int e, rc;
	pthread_once(&streams_once, streams_init);
	pthread_mutex_lock(&streams[dev].mu);
	if ((rc = dev_enter(dev, prev)))
		goto fail;
	if (!streams[dev].made) {
		if ((e = cu.stream_create(&streams[dev].s, CU_STREAM_NON_BLOCKING))) {
			dev_leave(dev, *prev);
			rc = cu_fail("cannot set up the core's CUDA stream", e);
			goto fail;
		}
		streams[dev].made = true;
	}
	return 0;
fail:
	pthread_mutex_unlock(&streams[dev].mu);
	return rc;
}

static void stream_leave(int dev, int prev)
{
	dev_leave(dev, prev);
	pthread_mutex_unlock(&streams[dev].mu);
}

/* An event of device dev (its stream's lock held): a kept one, or new. */
static int ev_get_locked(int dev, cu_event *ev)
{
	if (streams[dev].nev > 0) {
		*ev = streams[dev].ev[--streams[dev].nev];
		return 0;
	}
	return cu.event_create(ev, CU_EVENT_DISABLE_TIMING);
}

static void ev_put_locked(int dev, cu_event ev)
{
	if (streams[dev].nev < EV_KEEP)
		streams[dev].ev[streams[dev].nev++] = ev;
	else
		cu.event_destroy(ev);
}

/* A stream handle that names a stream from any thread (not "none", not
 * the calling thread's per-thread default stream). */
static bool nameable(void *stream)
{
	return stream != PSL_CUDA_STREAM_NONE && stream != PSL_CUDA_STREAM_PER_THREAD;
}

int psl__cuda_mark(void *stream, int dev, void **mark)
{
	cu_event ev = NULL;
	int rc, prev, e;

	*mark = NULL;
	if (stream == PSL_CUDA_STREAM_NONE)
		return 0;
	if ((rc = load()))
		return rc;
	if (!dev_ok(dev))
		return -ENODEV;
	if ((rc = stream_enter(dev, &prev)))
		return rc;
	if (!(e = ev_get_locked(dev, &ev)) && (e = cu.event_record(ev, stream)))
		ev_put_locked(dev, ev);
	stream_leave(dev, prev);
	if (e) {
		PSL_WARN("cannot order a GPU buffer of device %d after the work queued on CUDA "
			 "stream %p (set the stream of the device's buffers with "
			 "psl_kv_worker_set_cuda_stream or psl_kv_server_set_cuda_stream)",
			 dev, stream);
		return cu_fail("cudaEventRecord", e);
	}
	*mark = ev;
	return 0;
}

void psl__cuda_mark_put(int dev, void *mark)
{
	if (!mark || !dev_ok(dev))
		return;
	pthread_mutex_lock(&streams[dev].mu);
	ev_put_locked(dev, mark);
	pthread_mutex_unlock(&streams[dev].mu);
}

bool psl__cuda_mark_ready(void *mark)
{
	return !mark || cu.event_query(mark) == CU_OK;
}

int psl__cuda_mark_wait(void *mark)
{
	int e;
	if (!mark || !(e = cu.event_sync(mark)))
		return 0;
	return cu_fail("waiting for the caller's CUDA work", e);
}

/* On the core's stream of dev (lock held): wait for after, copy, and let
 * then wait for the copy. CUDA error or 0. */
static int enqueue_copy_locked(int dev, void *dst, const void *src, size_t len, int kind,
			       void *after, void *then)
{
	cu_stream s = streams[dev].s;
	cu_event done = NULL;
	int e = 0;
	if (after)
		e = cu.stream_wait_event(s, after, 0);
	if (!e)
		e = cu.memcpy_async(dst, src, len, kind, s);
	if (!e && nameable(then) && !(e = ev_get_locked(dev, &done))) {
		if (!(e = cu.event_record(done, s)))
			e = cu.stream_wait_event(then, done, 0);
		ev_put_locked(dev, done); /* (the wait took the event's state) */
	}
	return e;
}

int psl__cuda_copy_on(void *dst, int32_t dst_mem, int32_t dst_dev, const void *src,
		      int32_t src_mem, int32_t src_dev, size_t len, void *after, void *then)
{
	int kind, dev, prev, rc, e;
	cu_stream s;

	if (!len)
		return 0;
	if (dst_mem == PSL_MEM_HOST && src_mem == PSL_MEM_HOST) {
		memcpy(dst, src, len);
		return 0;
	}
	if ((rc = load()))
		return rc;
	kind = dst_mem == PSL_MEM_CUDA ? (src_mem == PSL_MEM_CUDA ? CU_D2D : CU_H2D) : CU_D2H;
	dev = src_mem == PSL_MEM_CUDA ? src_dev : dst_dev;
	if (!dev_ok(dev))
		return -ENODEV;
	if ((rc = stream_enter(dev, &prev)))
		return rc;
	s = streams[dev].s;
	e = enqueue_copy_locked(dev, dst, src, len, kind, after, then);
	/* the wait (for the caller's earlier work, too) without the lock: other
	 * threads queue their copies meanwhile */
	pthread_mutex_unlock(&streams[dev].mu);
	if (!e)
		e = cu.stream_sync(s);
	dev_leave(dev, prev);
	if (e)
		return cu_fail(kind == CU_H2D	? "copy to the GPU"
			       : kind == CU_D2H ? "copy from the GPU"
						: "copy between GPU buffers",
			       e);
	return 0;
}

int psl__cuda_copy_after(void *dst, int32_t dst_mem, int32_t dst_dev, const void *src,
			 int32_t src_mem, int32_t src_dev, size_t len, void *stream)
{
	int dev = src_mem == PSL_MEM_CUDA ? src_dev : dst_dev, rc;
	void *mark = NULL;
	if (len && (src_mem == PSL_MEM_CUDA || dst_mem == PSL_MEM_CUDA) &&
	    (rc = psl__cuda_mark(stream, dev, &mark)))
		return rc;
	rc = psl__cuda_copy_on(dst, dst_mem, dst_dev, src, src_mem, src_dev, len, mark,
			       PSL_CUDA_STREAM_NONE);
	psl__cuda_mark_put(dev, mark);
	return rc;
}

int psl__cuda_copy(void *dst, int32_t dst_mem, int32_t dst_dev, const void *src,
		   int32_t src_mem, int32_t src_dev, size_t len)
{
	return psl__cuda_copy_on(dst, dst_mem, dst_dev, src, src_mem, src_dev, len, NULL,
				 PSL_CUDA_STREAM_NONE);
}

static atomic_int direct_env = -1; /* PS_CUDA_DIRECT: -1 not read yet */

bool psl__cuda_direct(void)
{
	int d = atomic_load(&direct_env);
	if (d < 0) {
		const char *v = getenv("PS_CUDA_DIRECT");
		d = !(v && !strcmp(v, "0"));
		atomic_store(&direct_env, d);
	}
	return d && (psl__po.caps.flags & PSL_VAN_CAP_MEM_CUDA) != 0;
}

/* ----------------------------------------------------- the pinned pool -- */

/* Size classes 2^MIN_SHIFT .. 2^MAX_SHIFT; larger buffers are not kept. */
#define MIN_SHIFT 16
#define MAX_SHIFT 30
#define NCLASS (MAX_SHIFT - MIN_SHIFT + 1)
#define HDR 64 /* bytes before the buffer: its class */

struct stage_hdr {
	struct stage_hdr *next; /* in the free list */
	int cls;		/* -1: not kept */
	size_t bytes;
};

static struct {
	pthread_mutex_t mu;
	struct stage_hdr *free[NCLASS];
	size_t bytes, in_use;
} pool = {.mu = PTHREAD_MUTEX_INITIALIZER};

void *psl__cuda_stage_get(size_t len, int dev, int *err)
{
	struct stage_hdr *h = NULL;
	int cls = 0, e, prev;
	size_t bytes;
	void *p;

	*err = load();
	if (*err)
		return NULL;
	while (cls < NCLASS && ((size_t)1 << (MIN_SHIFT + cls)) < len)
		cls++;
	bytes = cls < NCLASS ? (size_t)1 << (MIN_SHIFT + cls) : len;
	pthread_mutex_lock(&pool.mu);
	if (cls < NCLASS && pool.free[cls]) {
		h = pool.free[cls];
		pool.free[cls] = h->next;
		pool.in_use++;
	}
	pthread_mutex_unlock(&pool.mu);
	if (h)
		return (char *)h + HDR;
	/* on the buffer's device (a context there, not on the thread's
	 * default), pinned for every device (portable) */
	if (!dev_ok(dev))
		dev = 0;
	if ((*err = stream_enter(dev, &prev)))
		return NULL;
	e = cu.host_alloc(&p, bytes + HDR, CU_HOST_ALLOC_PORTABLE);
	stream_leave(dev, prev);
	if (e) {
		*err = cu_fail("cannot allocate a pinned staging buffer", e);
		return NULL;
	}
	h = p;
	h->next = NULL;
	h->cls = cls < NCLASS ? cls : -1;
	h->bytes = bytes + HDR;
	pthread_mutex_lock(&pool.mu);
	pool.bytes += h->bytes;
	pool.in_use++;
	pthread_mutex_unlock(&pool.mu);
	return (char *)h + HDR;
}

void psl__cuda_stage_put(void *buf)
{
	struct stage_hdr *h;
	if (!buf)
		return;
	h = (struct stage_hdr *)(void *)((char *)buf - HDR);
	pthread_mutex_lock(&pool.mu);
	pool.in_use--;
	if (h->cls >= 0) {
		h->next = pool.free[h->cls];
		pool.free[h->cls] = h;
		h = NULL;
	} else {
		pool.bytes -= h->bytes;
	}
	pthread_mutex_unlock(&pool.mu);
	if (h)
		cu.free_host(h);
}

size_t psl__cuda_stage_bytes(size_t *in_use)
{
	size_t b;
	pthread_mutex_lock(&pool.mu);
	b = pool.bytes;
	if (in_use)
		*in_use = pool.in_use;
	pthread_mutex_unlock(&pool.mu);
	return b;
}

static void pool_drain(void)
{
	int i;
	pthread_mutex_lock(&pool.mu);
	for (i = 0; i < NCLASS; i++) {
		while (pool.free[i]) {
			struct stage_hdr *h = pool.free[i];
			pool.free[i] = h->next;
			pool.bytes -= h->bytes;
			if (cu.free_host)
				cu.free_host(h);
		}
	}
	pthread_mutex_unlock(&pool.mu);
}

void psl__cuda_reset(void)
{
	int i;
	pool_drain();
	pthread_once(&streams_once, streams_init);
	pthread_mutex_lock(&cu.mu);
	for (i = 0; i < MAX_DEV; i++) {
		if (streams[i].made && cu.stream_destroy)
			cu.stream_destroy(streams[i].s);
		streams[i].made = false;
		while (streams[i].nev > 0)
			cu.event_destroy(streams[i].ev[--streams[i].nev]);
	}
	close_lib();
	cu.tried = false;
	cu.err = 0;
	cu.ndev = 0;
	cu.why[0] = 0;
	atomic_store(&direct_env, -1);
	pthread_mutex_unlock(&cu.mu);
}

/* ------------------------------------------------------- public calls -- */

int psl_cuda_describe(char *buf, size_t len)
{
	int rc = load(), rt = 0, drv = 0, i;
	size_t used;

	if (!buf || !len)
		return rc ? rc : cu.ndev;
	if (rc) {
		snprintf(buf, len, "%s", cu.why);
		return rc;
	}
	cu.runtime_version(&rt);
	cu.driver_version(&drv);
	snprintf(buf, len, "runtime %d.%d (%s), driver %d.%d, %d device%s", rt / 1000,
		 rt % 1000 / 10, cu.path, drv / 1000, drv % 1000 / 10, cu.ndev,
		 cu.ndev == 1 ? "" : "s");
	for (i = 0; i < cu.ndev && i < MAX_DEV; i++) {
		/* cudaDeviceProp starts with the name (char[256]); the rest of its
		 * layout changes between versions: room for any of them */
		char *props = calloc(1, 16384), bus[32] = "?";
		cu.pci_bus_id(bus, sizeof(bus), i);
		if (props && cu.device_props(props, i) == CU_OK)
			props[255] = 0;
		used = strlen(buf);
		snprintf(buf + used, len - used, "; %d: %s (%s)", i,
			 props && props[0] ? props : "?", bus);
		free(props);
	}
	return cu.ndev;
}

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
	if ((rc = load())) {
		PSL_WARN("psl_mem_alloc: %s", cu.why);
		return rc;
	}
	if (!dev_ok(dev))
		return -ENODEV;
	if ((rc = stream_enter(dev, &prev)))
		return rc;
	e = cu.dmalloc(out, len ? len : 1);
	stream_leave(dev, prev);
	if (e) {
		*out = NULL;
		return cu_fail("psl_mem_alloc", e);
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
	if (mem != PSL_MEM_CUDA || load() || !dev_ok(dev) ||
	    stream_enter(dev, &prev))
		return;
	cu.dfree(p);
	stream_leave(dev, prev);
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
