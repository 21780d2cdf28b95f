/* The CUDA runtime, loaded at run time: libpslite and the vans have no
 * link-time CUDA dependency, so one build runs on machines with and without
 * GPUs. Only the functions below are used; their prototypes are declared
 * here (the C ABI of libcudart since CUDA 10), so building needs no CUDA
 * headers either.
 *
 * Where the runtime is looked for: PS_CUDA_LIB (a file or a library name),
 * else libcudart.so and its versioned names on the loader's path, else
 * $CUDA_HOME/lib64 and lib, then those of the folder configure's
 * --with-cuda gave (/usr/local/cuda by default).
 */
#include "config.h"

#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
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

static struct {
	pthread_mutex_t mu;
	bool tried;
	int err; /* 0 loaded, else -errno of the failed load */
	char why[1024];
	char path[256];
	void *lib;
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
} cu = {.mu = PTHREAD_MUTEX_INITIALIZER};

/* One stream per device, each used under its own lock. */
#define MAX_DEV 64
static struct {
	pthread_mutex_t mu;
	cu_stream s;
	bool made;
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

static int open_lib(void)
{
	const char *env = getenv("PS_CUDA_LIB"), *home = getenv("CUDA_HOME");
	static const char *const names[] = {"libcudart.so", "libcudart.so.13", "libcudart.so.12",
					    "libcudart.so.11.0"};
	char tried[640] = "", p[256];
	size_t i;

	if (env && *env) {
		snprintf(cu.path, sizeof(cu.path), "%s", env);
		cu.lib = dlopen(env, RTLD_NOW | RTLD_LOCAL);
		if (!cu.lib) {
			snprintf(cu.why, sizeof(cu.why), "PS_CUDA_LIB=%s cannot be loaded: %s", env,
				 dlerror());
			return -ENOENT;
		}
		return 0;
	}
	for (i = 0; i < sizeof(names) / sizeof(names[0]) && !cu.lib; i++) {
		snprintf(cu.path, sizeof(cu.path), "%s", names[i]);
		cu.lib = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
	}
	for (i = 0; i < 4 && !cu.lib; i++) {
		const char *dir = i < 2 ? home : PSL_CUDA_HOME;
		if (!dir || !*dir)
			continue;
		snprintf(p, sizeof(p), "%s/%s/libcudart.so", dir, i % 2 ? "lib" : "lib64");
		snprintf(cu.path, sizeof(cu.path), "%s", p);
		cu.lib = dlopen(p, RTLD_NOW | RTLD_LOCAL);
		snprintf(tried + strlen(tried), sizeof(tried) - strlen(tried), ", %s", p);
	}
	if (!cu.lib) {
		snprintf(cu.why, sizeof(cu.why), "no CUDA runtime found (libcudart.so on the loader's "
			 "path%s): install CUDA, or set PS_CUDA_LIB to the path of libcudart.so",
			 tried);
		return -ENOENT;
	}
	return 0;
}

static int load_locked(void)
{
	int rc, e, n = 0;

	if (cu.tried)
		return cu.err;
	cu.tried = true;
	rc = open_lib();
	if (!rc)
		rc = sym("cudaGetDeviceCount", &cu.get_device_count);
	if (!rc)
		rc = sym("cudaGetDevice", &cu.get_device);
	if (!rc)
		rc = sym("cudaSetDevice", &cu.set_device);
	if (!rc)
		rc = sym("cudaStreamCreateWithFlags", &cu.stream_create);
	if (!rc)
		rc = sym("cudaStreamSynchronize", &cu.stream_sync);
	if (!rc)
		rc = sym("cudaStreamDestroy", &cu.stream_destroy);
	if (!rc)
		rc = sym("cudaMemcpyAsync", &cu.memcpy_async);
	if (!rc)
		rc = sym("cudaHostAlloc", &cu.host_alloc);
	if (!rc)
		rc = sym("cudaFreeHost", &cu.free_host);
	if (!rc)
		rc = sym("cudaMalloc", &cu.dmalloc);
	if (!rc)
		rc = sym("cudaFree", &cu.dfree);
	if (!rc)
		rc = sym("cudaPointerGetAttributes", &cu.ptr_attr);
	if (!rc)
		rc = sym("cudaGetErrorString", &cu.error_string);
	if (!rc)
		rc = sym("cudaRuntimeGetVersion", &cu.runtime_version);
	if (!rc)
		rc = sym("cudaDriverGetVersion", &cu.driver_version);
	if (!rc)
		rc = sym("cudaDeviceGetPCIBusId", &cu.pci_bus_id);
	if (!rc)
		rc = sym("cudaGetDeviceProperties", &cu.device_props);
	if (!rc) {
		e = cu.get_device_count(&n);
		if (e == CU_ERR_NO_DRIVER) {
			snprintf(cu.why, sizeof(cu.why), "the CUDA runtime (%s) finds no NVIDIA driver "
				 "new enough for it on this machine (%s)", cu.path, cu_err(e));
			rc = -ENODEV;
		} else if (e == CU_ERR_NO_DEVICE || (e == CU_OK && n <= 0)) {
			snprintf(cu.why, sizeof(cu.why), "the CUDA runtime (%s) finds no GPU on this "
				 "machine (%s)", cu.path, e ? cu_err(e) : "0 devices");
			rc = -ENODEV;
		} else if (e) {
			snprintf(cu.why, sizeof(cu.why), "the CUDA runtime (%s) cannot count the GPUs: "
				 "%s (is the NVIDIA driver loaded?)", cu.path, cu_err(e));
			rc = -ENODEV;
		}
	}
	if (rc) {
		if (cu.lib)
			dlclose(cu.lib);
		cu.lib = NULL;
		cu.err = rc;
		return rc;
	}
	cu.ndev = n;
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
	return e == CU_ERR_MEMORY ? -ENOMEM : -EIO;
}

/* dev is a device of this machine (the runtime loaded) */
static bool dev_ok(int dev)
{
	return dev >= 0 && dev < cu.ndev && dev < MAX_DEV;
}

int psl__cuda_check(const char *what, const void *ptr, size_t len, int32_t mem, int32_t dev)
{
	struct cu_ptr_attr a;
	int rc, e;

	if (mem == PSL_MEM_HOST)
		return 0;
	if (mem != PSL_MEM_CUDA) {
		PSL_WARN("%s: memory type %d is neither PSL_MEM_HOST (0) nor PSL_MEM_CUDA (1)", what,
			 (int)mem);
		return -EINVAL;
	}
	if ((rc = load())) {
		PSL_WARN("%s is CUDA memory, but %s", what, cu.why);
		return rc;
	}
	if (!dev_ok(dev)) {
		PSL_WARN("%s: CUDA device %d does not exist (this machine has %d: 0 to %d)", what,
			 (int)dev, cu.ndev, cu.ndev - 1);
		return -ENODEV;
	}
	if (!len)
		return 0;
	memset(&a, 0, sizeof(a));
	e = cu.ptr_attr(&a, ptr);
	if (e || (a.type != CU_MEMTYPE_DEVICE && a.type != CU_MEMTYPE_MANAGED)) {
		PSL_WARN("%s (%p) is said to be CUDA memory of device %d, but the CUDA runtime "
			 "says it is not device memory (%s): pass PSL_MEM_HOST for host buffers",
			 what, ptr, (int)dev, e ? cu_err(e) : "host or unregistered memory");
		return -EINVAL;
	}
	if (a.type == CU_MEMTYPE_DEVICE && a.device != dev) {
		PSL_WARN("%s (%p) is on CUDA device %d, not on device %d as said: pass dev = %d",
			 what, ptr, a.device, (int)dev, a.device);
		return -EINVAL;
	}
	return 0;
}

/* The stream of device dev, created on first use, with its lock held and
 * the calling thread's current device set to dev (*prev: what it was). */
static int stream_enter(int dev, int *prev)
{
	int e;
	pthread_once(&streams_once, streams_init);
	pthread_mutex_lock(&streams[dev].mu);
	if ((e = cu.get_device(prev)))
		*prev = -1;
	if ((e = cu.set_device(dev)))
		goto fail;
	if (!streams[dev].made) {
		if ((e = cu.stream_create(&streams[dev].s, CU_STREAM_NON_BLOCKING)))
			goto fail;
		streams[dev].made = true;
	}
	return 0;
fail:
	pthread_mutex_unlock(&streams[dev].mu);
	return cu_fail("cannot set up the core's CUDA stream", e);
}

static void stream_leave(int dev, int prev)
{
	if (prev >= 0 && prev != dev)
		cu.set_device(prev);
	pthread_mutex_unlock(&streams[dev].mu);
}

int psl__cuda_copy(void *dst, int32_t dst_mem, int32_t dst_dev, const void *src,
		   int32_t src_mem, int32_t src_dev, size_t len)
{
	int kind, dev, prev, rc, e;

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
	e = cu.memcpy_async(dst, src, len, kind, streams[dev].s);
	if (!e)
		e = cu.stream_sync(streams[dev].s);
	stream_leave(dev, prev);
	if (e)
		return cu_fail(kind == CU_H2D	? "copy to the GPU"
			       : kind == CU_D2H ? "copy from the GPU"
						: "copy between GPU buffers",
			       e);
	return 0;
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

void *psl__cuda_stage_get(size_t len, int *err)
{
	struct stage_hdr *h = NULL;
	int cls = 0, e;
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
	e = cu.host_alloc(&p, bytes + HDR, 0);
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
	}
	if (cu.lib)
		dlclose(cu.lib);
	cu.lib = NULL;
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
	return psl__cuda_copy(dst, dst_mem, dst_dev, src, src_mem, src_dev, len);
}
