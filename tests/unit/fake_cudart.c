/*
 * A fake CUDA runtime for the tests (make check has no GPU): the functions of
 * libcudart that pslite loads (core/cuda.c), with "device memory" that the
 * host cannot touch, work that runs later, and failures on demand.
 *
 * Device memory lives in an address range reserved with PROT_NONE: a
 * pointer cudaMalloc returns is never readable or writable from the host,
 * so pslite code that memcpy's a device buffer crashes here as it would on
 * a GPU. Its bytes are kept in a shadow mapping that only this runtime's
 * copies use. A copy checks its direction against the pointers (a host
 * pointer passed as device memory, or a device range overrun, is
 * cudaErrorInvalidValue), as the real runtime does.
 *
 * Asynchrony, as pslite meets it on a GPU:
 * - Every stream has a worker thread that runs its queued work in order,
 *   later than the call that queued it: copies, waits on events, and the
 *   test-only kernels fake_kernel_fill (writes a value after a delay) and
 *   fake_kernel_copy (reads a buffer after a delay, like a queued clone).
 * - The legacy default stream (NULL, cudaStreamLegacy) of each device waits
 *   for the work queued before on the device's blocking streams (created
 *   without cudaStreamNonBlocking), and they wait for its earlier work; a
 *   non-blocking stream (pslite's) waits for nothing but its own queue.
 *   cudaStreamPerThread is a blocking stream of the calling thread.
 * - Events: cudaEventRecord marks a point of a stream; Synchronize, Query
 *   and cudaStreamWaitEvent wait for it. An event and the stream it is
 *   recorded on must be of one device (else cudaErrorInvalidResourceHandle).
 * - cudaMemcpyAsync with pinned host memory (cudaHostAlloc) is queued and
 *   returns; with pageable host memory it returns only when the copy is done
 *   (host-synchronous), and it is slower: FAKE_CUDA_PAGEABLE_NS_PER_KB
 *   (default 200) against FAKE_CUDA_PINNED_NS_PER_KB (default 0), slept
 *   when 20 us or more.
 * - Each thread has its last-error slot: a failing call sets it,
 *   cudaGetLastError returns and clears it, cudaPeekAtLastError returns it.
 * - Devices and contexts: each thread has its current device, none until it
 *   calls cudaSetDevice (which creates that device's context, as CUDA 12
 *   does) or a call that needs a context (allocation, stream, event, copy,
 *   pointer query), which creates device 0's. cudaGetDevice says 0 in a
 *   thread without one and creates nothing; cuCtxGetCurrent (the driver's,
 *   exported here too) says NULL there.
 *
 * Environment:
 *   FAKE_CUDA_DEVICES=N   devices (default 1; 0: cudaErrorNoDevice)
 *   FAKE_CUDA_FAIL=LIST   comma-separated NAME@N (the N-th call fails) or
 *                         NAME@N+ (that call and every later one), NAME one
 *                         of malloc, hostalloc, copy, stream, sync (stream
 *                         or event synchronisation)
 *   FAKE_CUDA_OLD_DRIVER=S a copy of this library whose path contains S
 *                         says cudaErrorInsufficientDriver (35), as a
 *                         runtime newer than the driver does
 *   FAKE_CUDA_STATS=1     print at exit (stderr) one line of what is still
 *                         allocated: "fake_cuda: pinned blocks N bytes B ..."
 * fake_cuda_stats() and fake_cuda_query() (dlsym) tell the tests more;
 * fake_cuda_set_sync_delay(us) makes every cudaStreamSynchronize and
 * cudaEventSynchronize sleep us before it looks at the queue (a host thread
 * descheduled between queueing work and waiting for it), so that a test can
 * queue work of another thread's in between.
 */
#define _GNU_SOURCE 1
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#define EXPORT __attribute__((visibility("default")))

enum {
	OK = 0,
	ERR_INVALID_VALUE = 1,
	ERR_MEMORY = 2,
	ERR_INSUFFICIENT_DRIVER = 35,
	ERR_INVALID_DEVICE = 101,
	ERR_NO_DEVICE = 100,
	ERR_INVALID_HANDLE = 400,
	ERR_NOT_READY = 600,
	ERR_LAUNCH_FAILURE = 719,
};

#define SPACE (1ull << 32) /* 4 GiB of "device" addresses */
#define MAXA 4096
#define MAXDEV 8
#define MAXPIN 4096

struct alloc {
	uint64_t off, len;
	int dev;
	int used;
};

static struct {
	pthread_mutex_t mu;
	int inited;
	int ndev;
	int old_driver;
	char *base;   /* PROT_NONE */
	char *shadow; /* the bytes */
	uint64_t top;
	struct alloc a[MAXA];
	long calls[5];
	long fail_at[5];
	int fail_on[5]; /* 1: from fail_at on */
	long host_allocs, host_bytes, streams, events;
	long pageable_copies, pinned_copies, device_syncs;
	long pageable_ns, pinned_ns;
	int ctx[MAXDEV]; /* a context was created on the device */
	struct {
		char *p;
		size_t len;
	} pin[MAXPIN];
} f = {.mu = PTHREAD_MUTEX_INITIALIZER};

static __thread int cur_dev = -1; /* -1: the thread chose none */
static __thread int last_err;

/* Every failing call goes through here: the thread's last error. */
static int fail_with(int e)
{
	if (e != OK && e != ERR_NOT_READY)
		last_err = e;
	return e;
}

enum { F_MALLOC, F_HOSTALLOC, F_COPY, F_STREAM, F_SYNC };
static const char *const fnames[] = {"malloc", "hostalloc", "copy", "stream", "sync"};

static long env_long(const char *name, long dflt)
{
	const char *v = getenv(name);
	return v && *v ? strtol(v, NULL, 10) : dflt;
}

/* FAKE_CUDA_OLD_DRIVER: this copy of the library plays a runtime that
 * needs a newer driver. */
static int is_old_driver(void)
{
	const char *s = getenv("FAKE_CUDA_OLD_DRIVER");
	Dl_info di;
	if (!s || !*s || !dladdr((void *)is_old_driver, &di) || !di.dli_fname)
		return 0;
	return strstr(di.dli_fname, s) != NULL;
}

static void parse_fail(const char *fl)
{
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

static void init_locked(void)
{
	if (f.inited)
		return;
	f.inited = 1;
	f.ndev = (int)env_long("FAKE_CUDA_DEVICES", 1);
	if (f.ndev > MAXDEV)
		f.ndev = MAXDEV;
	f.old_driver = is_old_driver();
	f.pageable_ns = env_long("FAKE_CUDA_PAGEABLE_NS_PER_KB", 200);
	f.pinned_ns = env_long("FAKE_CUDA_PINNED_NS_PER_KB", 0);
	f.base = mmap(NULL, SPACE, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	f.shadow = mmap(NULL, SPACE, PROT_READ | PROT_WRITE,
			MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (f.base == MAP_FAILED || f.shadow == MAP_FAILED) {
		f.base = f.shadow = NULL;
		f.ndev = 0;
	}
	f.top = 4096;
	parse_fail(getenv("FAKE_CUDA_FAIL"));
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

/* A call that needs a context: the thread's device (0 if it chose none,
 * which then becomes its device) gets one. Returns the device. */
static int ctx_use(void)
{
	if (cur_dev < 0)
		cur_dev = 0;
	pthread_mutex_lock(&f.mu);
	f.ctx[cur_dev] = 1;
	pthread_mutex_unlock(&f.mu);
	return cur_dev;
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

/* [p, p+len) lies in one cudaHostAlloc block (f.mu held). */
static int pinned_locked(const void *p, size_t len)
{
	int i;
	for (i = 0; i < MAXPIN; i++)
		if (f.pin[i].p && (const char *)p >= f.pin[i].p &&
		    (const char *)p + len <= f.pin[i].p + f.pin[i].len)
			return 1;
	return 0;
}

/* ---------------------------------------------------------- devices -- */

EXPORT int cudaGetDeviceCount(int *n)
{
	int old;
	*n = ndev();
	pthread_mutex_lock(&f.mu);
	old = f.old_driver;
	pthread_mutex_unlock(&f.mu);
	if (old) {
		*n = 0;
		return fail_with(ERR_INSUFFICIENT_DRIVER);
	}
	return *n > 0 ? OK : fail_with(ERR_NO_DEVICE);
}

EXPORT int cudaGetDevice(int *d)
{
	*d = cur_dev < 0 ? 0 : cur_dev;
	return OK;
}

EXPORT int cudaSetDevice(int d)
{
	if (d < 0 || d >= ndev())
		return fail_with(ERR_INVALID_DEVICE);
	cur_dev = d;
	ctx_use();
	return OK;
}

/* The driver API's current context: NULL in a thread that has none. */
EXPORT int cuCtxGetCurrent(void **ctx)
{
	*ctx = cur_dev < 0 ? NULL : (void *)(uintptr_t)(0x1000 + cur_dev);
	return 0;
}

EXPORT int cudaGetLastError(void)
{
	int e = last_err;
	last_err = OK;
	return e;
}

EXPORT int cudaPeekAtLastError(void)
{
	return last_err;
}

/* ----------------------------------------------------------- memory -- */

EXPORT int cudaMalloc(void **p, size_t len)
{
	int i, dev;
	if (fail(F_MALLOC))
		return fail_with(ERR_MEMORY);
	dev = ctx_use();
	pthread_mutex_lock(&f.mu);
	len = (len + 255) & ~(size_t)255;
	for (i = 0; i < MAXA; i++) /* a freed allocation that fits */
		if (!f.a[i].used && f.a[i].len >= len && f.a[i].len)
			break;
	if (i == MAXA) {
		for (i = 0; i < MAXA && f.a[i].len; i++)
			;
		if (i == MAXA || !f.base || f.top + len > SPACE) {
			pthread_mutex_unlock(&f.mu);
			return fail_with(ERR_MEMORY);
		}
		f.a[i].off = f.top;
		f.a[i].len = len;
		f.top += len + 4096; /* a gap: overruns are no other buffer */
	}
	f.a[i].used = 1;
	f.a[i].dev = dev;
	*p = f.base + f.a[i].off;
	pthread_mutex_unlock(&f.mu);
	return OK;
}

EXPORT int cudaFree(void *p)
{
	struct alloc *a;
	if (!p)
		return OK;
	ctx_use();
	pthread_mutex_lock(&f.mu);
	a = find_locked(p, 0);
	if (a && f.base + a->off == (char *)p)
		a->used = 0;
	pthread_mutex_unlock(&f.mu);
	return a ? OK : fail_with(ERR_INVALID_VALUE);
}

EXPORT int cudaHostAlloc(void **p, size_t len, unsigned flags)
{
	char *b;
	int i;
	(void)flags;
	if (fail(F_HOSTALLOC))
		return fail_with(ERR_MEMORY);
	ctx_use();
	/* a size word before the block, for the statistics */
	if (!(b = malloc(len + 16)))
		return fail_with(ERR_MEMORY);
	memcpy(b, &len, sizeof(len));
	pthread_mutex_lock(&f.mu);
	for (i = 0; i < MAXPIN && f.pin[i].p; i++)
		;
	if (i < MAXPIN) {
		f.pin[i].p = b + 16;
		f.pin[i].len = len;
	}
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
	int i;
	if (!p)
		return OK;
	b = (char *)p - 16;
	memcpy(&len, b, sizeof(len));
	pthread_mutex_lock(&f.mu);
	for (i = 0; i < MAXPIN; i++)
		if (f.pin[i].p == p)
			f.pin[i].p = NULL;
	f.host_allocs--;
	f.host_bytes -= (long)len;
	pthread_mutex_unlock(&f.mu);
	free(b);
	return OK;
}

/* ---------------------------------------------------------- streams -- */

enum { OP_NOP, OP_COPY, OP_FILL, OP_WAIT };

struct stream;

struct op {
	int kind;
	char *dst;
	const char *src;
	size_t len;	 /* bytes (copy), words (fill) */
	uint32_t val;	 /* fill */
	long delay_us;	 /* before it acts */
	struct stream *other; /* wait: until other->done >= seq */
	uint64_t seq;
	struct op *next;
};

struct stream {
	uint32_t magic;
	int dev;
	int blocking; /* synchronises with the legacy stream */
	int legacy;
	int err;      /* a failed operation, reported by the next sync */
	int stop;
	uint64_t enq, done;
	struct op *head, *tail;
	pthread_t th;
	struct stream *next_all;
};
#define STREAM_MAGIC 0x5354524du

/* One lock and one condition for every queue: few streams, simple. */
static pthread_mutex_t qmu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t qcv = PTHREAD_COND_INITIALIZER;
static struct stream *all_streams;
static struct stream *legacy[MAXDEV];
static __thread struct stream *per_thread[MAXDEV];

static void sleep_us(long us)
{
	struct timespec ts = {us / 1000000, (us % 1000000) * 1000};
	if (us > 0)
		nanosleep(&ts, NULL);
}

static long sync_delay; /* us, fake_cuda_set_sync_delay (under qmu) */

EXPORT void fake_cuda_set_sync_delay(long us)
{
	pthread_mutex_lock(&qmu);
	sync_delay = us;
	pthread_mutex_unlock(&qmu);
}

/* The host's delay before a synchronising call looks at the queue. */
static void sync_pause(void)
{
	long us;
	pthread_mutex_lock(&qmu);
	us = sync_delay;
	pthread_mutex_unlock(&qmu);
	sleep_us(us);
}

static void run_op(struct op *o)
{
	size_t i;
	sleep_us(o->delay_us);
	if (o->kind == OP_COPY)
		memmove(o->dst, o->src, o->len);
	else if (o->kind == OP_FILL)
		for (i = 0; i < o->len; i++)
			memcpy(o->dst + 4 * i, &o->val, 4);
}

static void *stream_main(void *arg)
{
	struct stream *s = arg;
	struct op *o;
	pthread_mutex_lock(&qmu);
	for (;;) {
		while (!s->head && !s->stop)
			pthread_cond_wait(&qcv, &qmu);
		if (!s->head)
			break;
		o = s->head;
		if (o->kind == OP_WAIT) {
			while (o->other->done < o->seq)
				pthread_cond_wait(&qcv, &qmu);
		} else if (o->kind != OP_NOP) {
			pthread_mutex_unlock(&qmu);
			run_op(o);
			pthread_mutex_lock(&qmu);
		}
		s->head = o->next;
		if (!s->head)
			s->tail = NULL;
		s->done++;
		free(o);
		pthread_cond_broadcast(&qcv);
	}
	pthread_mutex_unlock(&qmu);
	return NULL;
}

/* A new stream with its thread (qmu held). */
static struct stream *stream_new_locked(int dev, int blocking, int is_legacy)
{
	struct stream *s = calloc(1, sizeof(*s));
	if (!s)
		return NULL;
	s->magic = STREAM_MAGIC;
	s->dev = dev;
	s->blocking = blocking;
	s->legacy = is_legacy;
	if (pthread_create(&s->th, NULL, stream_main, s)) {
		free(s);
		return NULL;
	}
	s->next_all = all_streams;
	all_streams = s;
	return s;
}

/* The stream a handle means for the calling thread (qmu held): NULL and
 * cudaStreamLegacy (1) the legacy stream of its device, cudaStreamPerThread
 * (2) its own, else the handle. NULL if it is no stream. */
static struct stream *resolve_stream_locked(void *h)
{
	int dev;
	if ((uintptr_t)h > 2) {
		struct stream *s = h;
		return s->magic == STREAM_MAGIC ? s : NULL;
	}
	dev = ctx_use();
	if ((uintptr_t)h == 2) {
		if (!per_thread[dev])
			per_thread[dev] = stream_new_locked(dev, 1, 0);
		return per_thread[dev];
	}
	if (!legacy[dev])
		legacy[dev] = stream_new_locked(dev, 1, 1);
	return legacy[dev];
}

static int push_op_locked(struct stream *s, struct op *o)
{
	struct op *n = malloc(sizeof(*n));
	if (!n)
		return ERR_MEMORY;
	*n = *o;
	n->next = NULL;
	if (s->tail)
		s->tail->next = n;
	else
		s->head = n;
	s->tail = n;
	s->enq++;
	return OK;
}

static int push_wait_locked(struct stream *s, struct stream *other, uint64_t seq)
{
	struct op w = {.kind = OP_WAIT, .other = other, .seq = seq};
	return other == s || other->done >= seq ? OK : push_op_locked(s, &w);
}

/* Queues o on s with the legacy stream's implicit waits; returns the
 * sequence number that marks o done, 0 on error (qmu held). */
static uint64_t enqueue_locked(struct stream *s, struct op *o)
{
	struct stream *b;
	if (s->legacy) {
		for (b = all_streams; b; b = b->next_all)
			if (b != s && b->blocking && b->dev == s->dev && !b->stop)
				push_wait_locked(s, b, b->enq);
	} else if (s->blocking && legacy[s->dev]) {
		push_wait_locked(s, legacy[s->dev], legacy[s->dev]->enq);
	}
	if (o->kind == OP_NOP && !s->head)
		return s->enq ? s->enq : (uint64_t)-1; /* an idle stream: marked done */
	if (push_op_locked(s, o))
		return 0;
	pthread_cond_broadcast(&qcv);
	return s->enq;
}

static void wait_seq_locked(struct stream *s, uint64_t seq)
{
	while (s->done < seq)
		pthread_cond_wait(&qcv, &qmu);
}

EXPORT int cudaStreamCreateWithFlags(void **s, unsigned flags)
{
	struct stream *st;
	int dev;
	if (fail(F_STREAM))
		return fail_with(ERR_MEMORY);
	dev = ctx_use();
	pthread_mutex_lock(&qmu);
	st = stream_new_locked(dev, !(flags & 1), 0);
	pthread_mutex_unlock(&qmu);
	if (!st)
		return fail_with(ERR_MEMORY);
	pthread_mutex_lock(&f.mu);
	f.streams++;
	pthread_mutex_unlock(&f.mu);
	*s = st;
	return OK;
}

EXPORT int cudaStreamCreate(void **s)
{
	return cudaStreamCreateWithFlags(s, 0);
}

/* Stops s once its queue is empty, joins its thread, frees it. */
static void stream_end(struct stream *s)
{
	struct stream **pp;
	pthread_mutex_lock(&qmu);
	s->stop = 1;
	pthread_cond_broadcast(&qcv);
	pthread_mutex_unlock(&qmu);
	pthread_join(s->th, NULL);
	pthread_mutex_lock(&qmu);
	for (pp = &all_streams; *pp; pp = &(*pp)->next_all)
		if (*pp == s) {
			*pp = s->next_all;
			break;
		}
	s->magic = 0;
	pthread_mutex_unlock(&qmu);
	free(s);
}

EXPORT int cudaStreamDestroy(void *s)
{
	struct stream *st = s;
	if ((uintptr_t)s <= 2 || st->magic != STREAM_MAGIC)
		return fail_with(ERR_INVALID_HANDLE);
	stream_end(st);
	pthread_mutex_lock(&f.mu);
	f.streams--;
	pthread_mutex_unlock(&f.mu);
	return OK;
}

EXPORT int cudaStreamSynchronize(void *s)
{
	struct stream *st;
	int e;
	if (fail(F_SYNC))
		return fail_with(ERR_LAUNCH_FAILURE);
	sync_pause();
	pthread_mutex_lock(&qmu);
	if (!(st = resolve_stream_locked(s))) {
		pthread_mutex_unlock(&qmu);
		return fail_with(ERR_INVALID_HANDLE);
	}
	wait_seq_locked(st, st->enq);
	e = st->err;
	st->err = OK;
	pthread_mutex_unlock(&qmu);
	return fail_with(e);
}

EXPORT int cudaDeviceSynchronize(void)
{
	struct stream *s;
	int dev = ctx_use();
	pthread_mutex_lock(&f.mu);
	f.device_syncs++;
	pthread_mutex_unlock(&f.mu);
	pthread_mutex_lock(&qmu);
	for (s = all_streams; s; s = s->next_all)
		if (s->dev == dev)
			wait_seq_locked(s, s->enq);
	pthread_mutex_unlock(&qmu);
	return OK;
}

/* ----------------------------------------------------------- events -- */

struct event {
	uint32_t magic;
	int dev;
	struct stream *s; /* NULL: never recorded (complete) */
	uint64_t seq;
};
#define EVENT_MAGIC 0x45564e54u

EXPORT int cudaEventCreateWithFlags(void **e, unsigned flags)
{
	struct event *ev;
	(void)flags;
	if (!(ev = calloc(1, sizeof(*ev))))
		return fail_with(ERR_MEMORY);
	ev->magic = EVENT_MAGIC;
	ev->dev = ctx_use();
	pthread_mutex_lock(&f.mu);
	f.events++;
	pthread_mutex_unlock(&f.mu);
	*e = ev;
	return OK;
}

EXPORT int cudaEventCreate(void **e)
{
	return cudaEventCreateWithFlags(e, 0);
}

EXPORT int cudaEventDestroy(void *e)
{
	struct event *ev = e;
	if (!ev || ev->magic != EVENT_MAGIC)
		return fail_with(ERR_INVALID_HANDLE);
	ev->magic = 0;
	free(ev);
	pthread_mutex_lock(&f.mu);
	f.events--;
	pthread_mutex_unlock(&f.mu);
	return OK;
}

EXPORT int cudaEventRecord(void *e, void *s)
{
	struct event *ev = e;
	struct stream *st;
	struct op nop = {.kind = OP_NOP};
	int rc = OK;
	if (!ev || ev->magic != EVENT_MAGIC)
		return fail_with(ERR_INVALID_HANDLE);
	pthread_mutex_lock(&qmu);
	st = resolve_stream_locked(s);
	if (!st || st->dev != ev->dev) {
		rc = ERR_INVALID_HANDLE; /* no stream, or one of another device */
	} else {
		ev->seq = enqueue_locked(st, &nop);
		rc = ev->seq ? OK : ERR_MEMORY;
		ev->s = ev->seq && ev->seq != (uint64_t)-1 ? st : NULL; /* NULL: done */
	}
	pthread_mutex_unlock(&qmu);
	return fail_with(rc);
}

EXPORT int cudaEventSynchronize(void *e)
{
	struct event *ev = e;
	if (!ev || ev->magic != EVENT_MAGIC)
		return fail_with(ERR_INVALID_HANDLE);
	if (fail(F_SYNC))
		return fail_with(ERR_LAUNCH_FAILURE);
	sync_pause();
	pthread_mutex_lock(&qmu);
	if (ev->s)
		wait_seq_locked(ev->s, ev->seq);
	pthread_mutex_unlock(&qmu);
	return OK;
}

EXPORT int cudaEventQuery(void *e)
{
	struct event *ev = e;
	int done;
	if (!ev || ev->magic != EVENT_MAGIC)
		return fail_with(ERR_INVALID_HANDLE);
	pthread_mutex_lock(&qmu);
	done = !ev->s || ev->s->done >= ev->seq;
	pthread_mutex_unlock(&qmu);
	return done ? OK : ERR_NOT_READY;
}

EXPORT int cudaStreamWaitEvent(void *s, void *e, unsigned flags)
{
	struct event *ev = e;
	struct stream *st;
	int rc = OK;
	(void)flags;
	if (!ev || ev->magic != EVENT_MAGIC)
		return fail_with(ERR_INVALID_HANDLE);
	pthread_mutex_lock(&qmu);
	if (!(st = resolve_stream_locked(s)))
		rc = ERR_INVALID_HANDLE;
	else if (ev->s && push_wait_locked(st, ev->s, ev->seq) == OK)
		pthread_cond_broadcast(&qcv);
	pthread_mutex_unlock(&qmu);
	return fail_with(rc);
}

/* ------------------------------------------------------------ copies -- */

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

static int copy_kind(const void *dst, const void *src, int kind)
{
	if (kind != 4) /* cudaMemcpyDefault: from the pointers */
		return kind;
	pthread_mutex_lock(&f.mu);
	init_locked();
	kind = (in_space(src) ? 2 : 0) | (in_space(dst) ? 1 : 0);
	pthread_mutex_unlock(&f.mu);
	return kind;
}

/* Is the host side of a copy pageable; counts it, gives its delay. */
static int pageable_copy(const void *dst, const void *src, size_t len, int kind, long *us)
{
	const void *host = kind == 1 ? src : dst;
	int pg;
	pthread_mutex_lock(&f.mu);
	pg = (kind == 1 || kind == 2) && !pinned_locked(host, len);
	if (kind == 1 || kind == 2) {
		*us = (long)(len / 1024) * (pg ? f.pageable_ns : f.pinned_ns) / 1000;
		if (pg)
			f.pageable_copies++;
		else
			f.pinned_copies++;
	}
	pthread_mutex_unlock(&f.mu);
	if (*us < 20)
		*us = 0;
	return pg;
}

/* Queues op o on stream handle s; wait: return only when it is done. */
static int submit(void *s, struct op *o, int wait)
{
	struct stream *st;
	uint64_t seq;
	pthread_mutex_lock(&qmu);
	if (!(st = resolve_stream_locked(s))) {
		pthread_mutex_unlock(&qmu);
		return fail_with(ERR_INVALID_HANDLE);
	}
	seq = enqueue_locked(st, o);
	if (seq && wait)
		wait_seq_locked(st, seq);
	pthread_mutex_unlock(&qmu);
	return seq ? OK : fail_with(ERR_MEMORY);
}

static int memcpy_on(void *dst, const void *src, size_t len, int kind, void *s, int sync)
{
	struct op o = {.kind = OP_COPY, .len = len};
	char *d, *sr;
	int rc, pg;
	if ((uintptr_t)s > 2 && ((struct stream *)s)->magic != STREAM_MAGIC)
		return fail_with(ERR_INVALID_HANDLE);
	if (fail(F_COPY))
		return fail_with(ERR_LAUNCH_FAILURE);
	ctx_use();
	kind = copy_kind(dst, src, kind);
	if (kind < 0 || kind > 3)
		return fail_with(ERR_INVALID_VALUE);
	if ((rc = resolve(dst, len, kind == 1 || kind == 3, &d)) ||
	    (rc = resolve(src, len, kind == 2 || kind == 3, &sr)))
		return fail_with(rc);
	pg = pageable_copy(dst, src, len, kind, &o.delay_us);
	o.dst = d;
	o.src = sr;
	return submit(s, &o, sync || pg || kind == 0);
}

EXPORT int cudaMemcpyAsync(void *dst, const void *src, size_t len, int kind, void *s)
{
	return memcpy_on(dst, src, len, kind, s, 0);
}

EXPORT int cudaMemcpy(void *dst, const void *src, size_t len, int kind)
{
	return memcpy_on(dst, src, len, kind, NULL, 1);
}

/* ------------------------------------------------- test-only kernels -- */

/* A kernel on stream s that, delay_us after it starts, writes val into
 * nwords 32-bit words at device address dptr. */
EXPORT int fake_kernel_fill(void *dptr, uint32_t val, size_t nwords, unsigned delay_us, void *s)
{
	struct op o = {.kind = OP_FILL, .len = nwords, .val = val, .delay_us = delay_us};
	int rc;
	ctx_use();
	if ((rc = resolve(dptr, nwords * 4, 1, &o.dst)))
		return fail_with(rc);
	return submit(s, &o, 0);
}

/* A kernel on stream s that, delay_us after it starts, copies len bytes of
 * device memory src to device memory dst (a queued reader: y = x.clone()). */
EXPORT int fake_kernel_copy(void *dst, const void *src, size_t len, unsigned delay_us, void *s)
{
	struct op o = {.kind = OP_COPY, .len = len, .delay_us = delay_us};
	char *sr;
	int rc;
	ctx_use();
	if ((rc = resolve(dst, len, 1, &o.dst)) || (rc = resolve(src, len, 1, &sr)))
		return fail_with(rc);
	o.src = sr;
	return submit(s, &o, 0);
}

/* ---------------------------------------------------------- queries -- */

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
	ctx_use();
	pthread_mutex_lock(&f.mu);
	al = find_locked(p, 1);
	if (al) {
		a->type = 2;
		a->device = al->dev;
		a->dev_ptr = (void *)p;
	} else if (in_space(p)) {
		pthread_mutex_unlock(&f.mu);
		return fail_with(ERR_INVALID_VALUE);
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
	case ERR_INSUFFICIENT_DRIVER:
		return "CUDA driver version is insufficient for CUDA runtime version";
	case ERR_NO_DEVICE:
		return "no CUDA-capable device is detected";
	case ERR_INVALID_DEVICE:
		return "invalid device ordinal";
	case ERR_INVALID_HANDLE:
		return "invalid resource handle";
	case ERR_NOT_READY:
		return "device not ready";
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
		return fail_with(ERR_INVALID_DEVICE);
	snprintf(buf, (size_t)len, "0000:%02x:00.0", dev + 0x10);
	return OK;
}

EXPORT int cudaGetDeviceProperties(void *props, int dev)
{
	if (dev < 0 || dev >= ndev())
		return fail_with(ERR_INVALID_DEVICE);
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

/* For the tests, by name: "contexts" (bit d: device d got a context),
 * "pageable_copies", "pinned_copies" (host <-> device), "device_syncs"
 * (cudaDeviceSynchronize calls), "events" (alive), "streams" (created
 * alive), "copies" (calls); -1 for another name. */
EXPORT long fake_cuda_query(const char *what)
{
	long v = -1;
	int i;
	pthread_mutex_lock(&f.mu);
	if (!strcmp(what, "contexts"))
		for (i = 0, v = 0; i < MAXDEV; i++)
			v |= (long)f.ctx[i] << i;
	else if (!strcmp(what, "pageable_copies"))
		v = f.pageable_copies;
	else if (!strcmp(what, "pinned_copies"))
		v = f.pinned_copies;
	else if (!strcmp(what, "device_syncs"))
		v = f.device_syncs;
	else if (!strcmp(what, "events"))
		v = f.events;
	else if (!strcmp(what, "streams"))
		v = f.streams;
	else if (!strcmp(what, "copies"))
		v = f.calls[F_COPY];
	pthread_mutex_unlock(&f.mu);
	return v;
}

__attribute__((destructor)) static void fini(void)
{
	const char *v = getenv("FAKE_CUDA_STATS");
	if (v && *v == '1')
		fprintf(stderr,
			"fake_cuda: pinned blocks %ld bytes %ld, streams %ld, copies %ld, "
			"device bytes %llu reserved\n",
			f.host_allocs, f.host_bytes, f.streams, f.calls[F_COPY],
			(unsigned long long)f.top);
	/* the library may be unloaded (dlclose): no thread may run its code */
	while (all_streams)
		stream_end(all_streams);
	if (f.base) {
		munmap(f.base, SPACE);
		munmap(f.shadow, SPACE);
	}
}
