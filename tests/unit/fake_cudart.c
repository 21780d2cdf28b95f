/*
 * A fake CUDA runtime for the tests (make check has no GPU): the functions of
 * libcudart that pslite loads (core/cuda.c), with "device memory" that the
 * host cannot touch, and failures on demand.
 *
 * Device memory lives in an address range reserved with PROT_NONE: a
 * pointer cudaMalloc returns is never readable or writable from the host,
 * so pslite code that memcpy's a device buffer crashes here as it would on
 * a GPU. Its bytes are kept in a shadow mapping that only this runtime's
 * copies use. A copy checks its direction against the pointers (a host
 * pointer passed as device memory, or a device range overrun, is
 * cudaErrorInvalidValue), as the real runtime does.
 *
 * Environment:
 *   FAKE_CUDA_DEVICES=N   devices (default 1; 0: cudaErrorNoDevice)
 *   FAKE_CUDA_FAIL=LIST   comma-separated NAME@N (the N-th call fails) or
 *                         NAME@N+ (that call and every later one), NAME one
 *                         of malloc, hostalloc, copy, stream, sync
 *   FAKE_CUDA_STATS=1     print at exit (stderr) one line of what is still
 *                         allocated: "fake_cuda: pinned blocks N bytes B ..."
 * fake_cuda_stats() (dlsym) tells the tests the same.
 */
#define _GNU_SOURCE 1
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#define EXPORT __attribute__((visibility("default")))

enum {
	OK = 0,
	ERR_INVALID_VALUE = 1,
	ERR_MEMORY = 2,
	ERR_INVALID_DEVICE = 101,
	ERR_NO_DEVICE = 100,
	ERR_INVALID_HANDLE = 400,
	ERR_LAUNCH_FAILURE = 719,
};

#define SPACE (1ull << 32) /* 4 GiB of "device" addresses */
#define MAXA 4096

struct alloc {
	uint64_t off, len;
	int dev;
	int used;
};

static struct {
	pthread_mutex_t mu;
	int inited;
	int ndev;
	char *base;   /* PROT_NONE */
	char *shadow; /* the bytes */
	uint64_t top;
	struct alloc a[MAXA];
	long calls[5];
	long fail_at[5];
	int fail_on[5]; /* 1: from fail_at on */
	long host_allocs, host_bytes, streams;
} f = {.mu = PTHREAD_MUTEX_INITIALIZER};

static __thread int cur_dev;

enum { F_MALLOC, F_HOSTALLOC, F_COPY, F_STREAM, F_SYNC };
static const char *const fnames[] = {"malloc", "hostalloc", "copy", "stream", "sync"};

static void init_locked(void)
{
	const char *v = getenv("FAKE_CUDA_DEVICES"), *fl = getenv("FAKE_CUDA_FAIL");
	if (f.inited)
		return;
	f.inited = 1;
	f.ndev = v ? atoi(v) : 1;
	f.base = mmap(NULL, SPACE, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	f.shadow = mmap(NULL, SPACE, PROT_READ | PROT_WRITE,
			MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (f.base == MAP_FAILED || f.shadow == MAP_FAILED) {
		f.base = f.shadow = NULL;
		f.ndev = 0;
	}
	f.top = 4096;
	while (fl && *fl) {
		int i;
		for (i = 0; i < 5; i++) {
			size_t n = strlen(fnames[i]);
			if (!strncmp(fl, fnames[i], n) && fl[n] == '@') {
				char *end;
				f.fail_at[i] = strtol(fl + n + 1, &end, 10);
				f.fail_on[i] = *end == '+';
				break;
			}
		}
		fl = strchr(fl, ',');
		if (fl)
			fl++;
	}
}

/* Counts a call of kind k; true if it must fail. */
static int fail(int k)
{
	long n;
	int r;
	pthread_mutex_lock(&f.mu);
	init_locked();
	n = ++f.calls[k];
	r = f.fail_at[k] && (n == f.fail_at[k] || (f.fail_on[k] && n > f.fail_at[k]));
	pthread_mutex_unlock(&f.mu);
	return r;
}

static int ndev(void)
{
	int n;
	pthread_mutex_lock(&f.mu);
	init_locked();
	n = f.ndev;
	pthread_mutex_unlock(&f.mu);
	return n;
}

/* The allocation holding [p, p+len), or NULL (f.mu held). */
static struct alloc *find_locked(const void *p, size_t len)
{
	uint64_t off;
	int i;
	if (!f.base || (const char *)p < f.base || (const char *)p >= f.base + SPACE)
		return NULL;
	off = (uint64_t)((const char *)p - f.base);
	for (i = 0; i < MAXA; i++)
		if (f.a[i].used && off >= f.a[i].off && off + len <= f.a[i].off + f.a[i].len)
			return &f.a[i];
	return NULL;
}

static int in_space(const void *p)
{
	return f.base && (const char *)p >= f.base && (const char *)p < f.base + SPACE;
}

EXPORT int cudaGetDeviceCount(int *n)
{
	*n = ndev();
	return *n > 0 ? OK : ERR_NO_DEVICE;
}

EXPORT int cudaGetDevice(int *d)
{
	*d = cur_dev;
	return OK;
}

EXPORT int cudaSetDevice(int d)
{
	if (d < 0 || d >= ndev())
		return ERR_INVALID_DEVICE;
	cur_dev = d;
	return OK;
}

EXPORT int cudaMalloc(void **p, size_t len)
{
	int i;
	if (fail(F_MALLOC))
		return ERR_MEMORY;
	pthread_mutex_lock(&f.mu);
	init_locked();
	len = (len + 255) & ~(size_t)255;
	for (i = 0; i < MAXA; i++) /* a freed allocation that fits */
		if (!f.a[i].used && f.a[i].len >= len && f.a[i].len)
			break;
	if (i == MAXA) {
		for (i = 0; i < MAXA && f.a[i].len; i++)
			;
		if (i == MAXA || !f.base || f.top + len > SPACE) {
			pthread_mutex_unlock(&f.mu);
			return ERR_MEMORY;
		}
		f.a[i].off = f.top;
		f.a[i].len = len;
		f.top += len + 4096; /* a gap: overruns are no other buffer */
	}
	f.a[i].used = 1;
	f.a[i].dev = cur_dev;
	*p = f.base + f.a[i].off;
	pthread_mutex_unlock(&f.mu);
	return OK;
}

EXPORT int cudaFree(void *p)
{
	struct alloc *a;
	if (!p)
		return OK;
	pthread_mutex_lock(&f.mu);
	a = find_locked(p, 0);
	if (a && f.base + a->off == (char *)p)
		a->used = 0;
	pthread_mutex_unlock(&f.mu);
	return a ? OK : ERR_INVALID_VALUE;
}

EXPORT int cudaHostAlloc(void **p, size_t len, unsigned flags)
{
	(void)flags;
	if (fail(F_HOSTALLOC))
		return ERR_MEMORY;
	/* a size word before the block, for the statistics */
	char *b = malloc(len + 16);
	if (!b)
		return ERR_MEMORY;
	memcpy(b, &len, sizeof(len));
	pthread_mutex_lock(&f.mu);
	f.host_allocs++;
	f.host_bytes += (long)len;
	pthread_mutex_unlock(&f.mu);
	*p = b + 16;
	return OK;
}

EXPORT int cudaFreeHost(void *p)
{
	size_t len;
	char *b;
	if (!p)
		return OK;
	b = (char *)p - 16;
	memcpy(&len, b, sizeof(len));
	pthread_mutex_lock(&f.mu);
	f.host_allocs--;
	f.host_bytes -= (long)len;
	pthread_mutex_unlock(&f.mu);
	free(b);
	return OK;
}

struct stream {
	uint32_t magic;
	int dev;
	int err; /* a failed operation, reported by the next sync */
};
#define STREAM_MAGIC 0x5354524du

EXPORT int cudaStreamCreateWithFlags(void **s, unsigned flags)
{
	struct stream *st;
	(void)flags;
	if (fail(F_STREAM))
		return ERR_MEMORY;
	st = calloc(1, sizeof(*st));
	if (!st)
		return ERR_MEMORY;
	st->magic = STREAM_MAGIC;
	st->dev = cur_dev;
	pthread_mutex_lock(&f.mu);
	f.streams++;
	pthread_mutex_unlock(&f.mu);
	*s = st;
	return OK;
}

EXPORT int cudaStreamDestroy(void *s)
{
	struct stream *st = s;
	if (!st || st->magic != STREAM_MAGIC)
		return ERR_INVALID_HANDLE;
	st->magic = 0;
	pthread_mutex_lock(&f.mu);
	f.streams--;
	pthread_mutex_unlock(&f.mu);
	free(st);
	return OK;
}

EXPORT int cudaStreamSynchronize(void *s)
{
	struct stream *st = s;
	int e;
	if (st && st->magic != STREAM_MAGIC)
		return ERR_INVALID_HANDLE;
	if (fail(F_SYNC))
		return ERR_LAUNCH_FAILURE;
	e = st ? st->err : OK;
	if (st)
		st->err = OK;
	return e;
}

/* Host address of p: the shadow of device memory, p itself for host. */
static int resolve(const void *p, size_t len, int want_dev, char **out)
{
	struct alloc *a;
	int rc = OK;
	pthread_mutex_lock(&f.mu);
	init_locked();
	if (in_space(p)) {
		a = find_locked(p, len);
		if (!a || !want_dev)
			rc = ERR_INVALID_VALUE; /* overrun, freed, or device as host */
		else
			*out = f.shadow + ((const char *)p - f.base);
	} else if (want_dev) {
		rc = ERR_INVALID_VALUE; /* host memory passed as device memory */
	} else {
		*out = (char *)p;
	}
	pthread_mutex_unlock(&f.mu);
	return rc;
}

EXPORT int cudaMemcpyAsync(void *dst, const void *src, size_t len, int kind, void *s)
{
	struct stream *st = s;
	char *d, *sr;
	int rc;
	if (st && st->magic != STREAM_MAGIC)
		return ERR_INVALID_HANDLE;
	if (fail(F_COPY))
		return ERR_LAUNCH_FAILURE;
	if (kind == 4) { /* cudaMemcpyDefault: from the pointers */
		pthread_mutex_lock(&f.mu);
		init_locked();
		kind = (in_space(src) ? 2 : 0) | (in_space(dst) ? 1 : 0);
		kind = kind == 3 ? 3 : kind == 2 ? 2 : kind == 1 ? 1 : 0;
		pthread_mutex_unlock(&f.mu);
	}
	if (kind < 0 || kind > 3)
		return ERR_INVALID_VALUE;
	if ((rc = resolve(dst, len, kind == 1 || kind == 3, &d)) ||
	    (rc = resolve(src, len, kind == 2 || kind == 3, &sr)))
		return rc;
	memmove(d, sr, len);
	return OK;
}

EXPORT int cudaMemcpy(void *dst, const void *src, size_t len, int kind)
{
	return cudaMemcpyAsync(dst, src, len, kind, NULL);
}

struct ptr_attr {
	int type;
	int device;
	void *dev_ptr;
	void *host_ptr;
};

EXPORT int cudaPointerGetAttributes(struct ptr_attr *a, const void *p)
{
	struct alloc *al;
	memset(a, 0, sizeof(*a));
	pthread_mutex_lock(&f.mu);
	init_locked();
	al = find_locked(p, 1);
	if (al) {
		a->type = 2;
		a->device = al->dev;
		a->dev_ptr = (void *)p;
	} else if (in_space(p)) {
		pthread_mutex_unlock(&f.mu);
		return ERR_INVALID_VALUE;
	}
	pthread_mutex_unlock(&f.mu);
	return OK;
}

EXPORT const char *cudaGetErrorString(int e)
{
	switch (e) {
	case OK:
		return "no error";
	case ERR_INVALID_VALUE:
		return "invalid argument";
	case ERR_MEMORY:
		return "out of memory";
	case ERR_NO_DEVICE:
		return "no CUDA-capable device is detected";
	case ERR_INVALID_DEVICE:
		return "invalid device ordinal";
	case ERR_INVALID_HANDLE:
		return "invalid resource handle";
	case ERR_LAUNCH_FAILURE:
		return "unspecified launch failure (injected by FAKE_CUDA_FAIL)";
	}
	return "unknown error";
}

EXPORT int cudaRuntimeGetVersion(int *v)
{
	*v = 12040;
	return OK;
}

EXPORT int cudaDriverGetVersion(int *v)
{
	*v = 12060;
	return OK;
}

EXPORT int cudaDeviceGetPCIBusId(char *buf, int len, int dev)
{
	if (dev < 0 || dev >= ndev())
		return ERR_INVALID_DEVICE;
	snprintf(buf, (size_t)len, "0000:%02x:00.0", dev + 0x10);
	return OK;
}

EXPORT int cudaGetDeviceProperties(void *props, int dev)
{
	if (dev < 0 || dev >= ndev())
		return ERR_INVALID_DEVICE;
	snprintf(props, 256, "Fake GPU %d (tests/unit/fake_cudart.c)", dev);
	return OK;
}

/* For the tests: pinned blocks and bytes held, streams alive, copies made. */
EXPORT void fake_cuda_stats(long *host_allocs, long *host_bytes, long *streams, long *copies)
{
	pthread_mutex_lock(&f.mu);
	*host_allocs = f.host_allocs;
	*host_bytes = f.host_bytes;
	*streams = f.streams;
	*copies = f.calls[F_COPY];
	pthread_mutex_unlock(&f.mu);
}

__attribute__((destructor)) static void print_stats(void)
{
	const char *v = getenv("FAKE_CUDA_STATS");
	if (v && *v == '1')
		fprintf(stderr,
			"fake_cuda: pinned blocks %ld bytes %ld, streams %ld, copies %ld, "
			"device bytes %llu reserved\n",
			f.host_allocs, f.host_bytes, f.streams, f.calls[F_COPY],
			(unsigned long long)f.top);
}
