/* The CUDA runtime, loaded at run time: libpslite and the vans have no
 * link-time CUDA dependency, so one build runs on machines with and without
 * GPUs. Only the functions bound below (struct psl__cu_lib, cuda_lib.h) are
 * used; their prototypes are declared there and in cuda_abi.h (the C ABI of
 * libcudart since CUDA 10), so building needs no CUDA headers either.
 *
 * Where the runtime is looked for: PS_CUDA_LIB (a file or a library name),
 * else a libcudart already loaded in the process (PyTorch's: one runtime,
 * not two), else libcudart.so and its versioned names on the loader's path,
 * else $CUDA_HOME/lib64 and lib, then those of the folder configure's
 * --with-cuda gave (/usr/local/cuda by default). A candidate that needs a
 * newer driver than the machine has is passed over for the next.
 */
#define _GNU_SOURCE 1 /* dl_iterate_phdr */
#include "config.h"

#include <dlfcn.h>
#include <errno.h>
#include <link.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda.h"
#include "cuda_lib.h"
#include "log.h"
#include "pslite.h"

#ifndef PSL_CUDA_HOME
#define PSL_CUDA_HOME "/usr/local/cuda"
#endif

struct psl__cu_lib psl__cu = {.mu = PTHREAD_MUTEX_INITIALIZER};

const char *psl__cu_err(int e)
{
	const char *s = psl__cu.error_string ? psl__cu.error_string(e) : NULL;
	return s ? s : "unknown CUDA error";
}

void psl__cu_clear(void)
{
	if (psl__cu.get_last_error)
		psl__cu.get_last_error();
}

static int sym(const char *name, void *slot)
{
	void *f = dlsym(psl__cu.lib, name);
	if (!f) {
		snprintf(psl__cu.why, sizeof(psl__cu.why), "%s has no %s: not a CUDA runtime (set PS_CUDA_LIB "
			 "to libcudart.so of CUDA 11 or later)", psl__cu.path, name);
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
#define S(n, f) {n, offsetof(__typeof__(psl__cu), f)}
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
		if ((rc = sym(t[i].name, (char *)&psl__cu + t[i].off)))
			return rc;
	return 0;
}

/* cuCtxGetCurrent, to tell a thread that chose a device from one that
 * never did (cudaGetDevice says 0 for both): from the runtime's library if
 * it has it, else from the driver the runtime loaded. */
static void bind_driver(void)
{
	void *f = dlsym(psl__cu.lib, "cuCtxGetCurrent");
	if (!f && (psl__cu.driver = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD)))
		f = dlsym(psl__cu.driver, "cuCtxGetCurrent");
	memcpy(&psl__cu.ctx_current, &f, sizeof(f));
}

static int count_devices(void)
{
	int e, n = 0;
	e = psl__cu.get_device_count(&n);
	if (e)
		psl__cu_clear();
	if (e == CU_ERR_NO_DRIVER) {
		snprintf(psl__cu.why, sizeof(psl__cu.why), "the CUDA runtime (%s) finds no NVIDIA driver "
			 "new enough for it on this machine (%s)", psl__cu.path, psl__cu_err(e));
		return -EPROTO; /* (the next candidate may do) */
	}
	if (e == CU_ERR_NO_DEVICE || (e == CU_OK && n <= 0)) {
		snprintf(psl__cu.why, sizeof(psl__cu.why), "the CUDA runtime (%s) finds no GPU on this "
			 "machine (%s)", psl__cu.path, e ? psl__cu_err(e) : "0 devices");
		return -ENODEV;
	}
	if (e) {
		snprintf(psl__cu.why, sizeof(psl__cu.why), "the CUDA runtime (%s) cannot count the GPUs: "
			 "%s (is the NVIDIA driver loaded?)", psl__cu.path, psl__cu_err(e));
		return -ENODEV;
	}
	psl__cu.ndev = n;
	return 0;
}

static void close_lib(void)
{
	if (psl__cu.driver)
		dlclose(psl__cu.driver);
	if (psl__cu.lib)
		dlclose(psl__cu.lib);
	psl__cu.driver = psl__cu.lib = NULL;
	psl__cu.ctx_current = NULL;
	psl__cu.get_last_error = NULL;
}

/* One candidate: 0 loaded, -ENOENT (cannot be opened: psl__cu.why untouched
 * unless explicit), -EPROTO (needs a newer driver), other -errno. */
static int try_lib(const char *path, int flags, bool explicit)
{
	int rc;
	snprintf(psl__cu.path, sizeof(psl__cu.path), "%s", path);
	psl__cu.lib = dlopen(path, RTLD_NOW | RTLD_LOCAL | flags);
	if (!psl__cu.lib) {
		if (explicit)
			snprintf(psl__cu.why, sizeof(psl__cu.why), "PS_CUDA_LIB=%s cannot be loaded: %s", path,
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
		snprintf(why, sizeof(psl__cu.why), "%s", psl__cu.why);
	}
	return *rc == -ENOENT || *rc == -EPROTO || *rc == -ENOSYS;
}

static int open_lib(void)
{
	const char *env = getenv("PS_CUDA_LIB"), *home = getenv("CUDA_HOME");
	static const char *const names[] = {"libcudart.so", "libcudart.so.13", "libcudart.so.12",
					    "libcudart.so.11.0"};
	char tried[640] = "", p[256] = "", why[sizeof(psl__cu.why)] = "";
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
		snprintf(psl__cu.why, sizeof(psl__cu.why), "%s", why);
		return why_rc == -EPROTO ? -ENODEV : why_rc;
	}
	snprintf(psl__cu.why, sizeof(psl__cu.why), "no CUDA runtime found (libcudart.so on the loader's "
		 "path%s): install CUDA, or set PS_CUDA_LIB to the path of libcudart.so", tried);
	return -ENOENT;
}

static int load_locked(void)
{
	int rc;

	if (psl__cu.tried)
		return psl__cu.err;
	psl__cu.tried = true;
	rc = open_lib();
	if (rc) {
		close_lib();
		psl__cu.err = rc;
		return rc;
	}
	psl__cu.err = 0;
	return 0;
}

int psl__cu_load(void)
{
	int rc;
	pthread_mutex_lock(&psl__cu.mu);
	rc = load_locked();
	pthread_mutex_unlock(&psl__cu.mu);
	return rc;
}

void psl__cu_unload_locked(void)
{
	close_lib();
	psl__cu.tried = false;
	psl__cu.err = 0;
	psl__cu.ndev = 0;
	psl__cu.why[0] = 0;
}

int psl__cu_fail(const char *what, int e)
{
	PSL_WARN("%s: CUDA error %d: %s", what, e, psl__cu_err(e));
	psl__cu_clear();
	return e == CU_ERR_MEMORY ? -ENOMEM : -EIO;
}

/* ------------------------------------------------------- public calls -- */

int psl_cuda_describe(char *buf, size_t len)
{
	int rc = psl__cu_load(), rt = 0, drv = 0, i;
	size_t used;

	if (!buf || !len)
		return rc ? rc : psl__cu.ndev;
	if (rc) {
		snprintf(buf, len, "%s", psl__cu.why);
		return rc;
	}
	psl__cu.runtime_version(&rt);
	psl__cu.driver_version(&drv);
	snprintf(buf, len, "runtime %d.%d (%s), driver %d.%d, %d device%s", rt / 1000,
		 rt % 1000 / 10, psl__cu.path, drv / 1000, drv % 1000 / 10, psl__cu.ndev,
		 psl__cu.ndev == 1 ? "" : "s");
	for (i = 0; i < psl__cu.ndev && i < PSL__CU_MAX_DEV; i++) {
		/* cudaDeviceProp starts with the name (char[256]); the rest of its
		 * layout changes between versions: room for any of them */
		char *props = calloc(1, 16384), bus[32] = "?";
		psl__cu.pci_bus_id(bus, sizeof(bus), i);
		if (props && psl__cu.device_props(props, i) == CU_OK)
			props[255] = 0;
		used = strlen(buf);
		snprintf(buf + used, len - used, "; %d: %s (%s)", i,
			 props && props[0] ? props : "?", bus);
		free(props);
	}
	return psl__cu.ndev;
}
