/* Which GPU a thread works on, and events: the core's CUDA work runs on a
 * buffer's device (psl__cu_dev_enter/_set) and gives the thread its device
 * back only when it had one (cuCtxGetCurrent), so a thread that never chose
 * a device never gets a context on device 0. Events mark points of the
 * callers' streams and of the core's (psl__cuda_mark and the copies'
 * completions); each device keeps spent ones for reuse, under its lock.
 * Above it: cuda_pool.c (pinned buffers) and cuda.c (checks and copies). */
#include "config.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>

#include "cuda.h"
#include "cuda_abi.h"
#include "cuda_lib.h"
#include "log.h"
#include "pslite.h"

#define EV_KEEP 32
static struct {
	pthread_mutex_t mu;
	int nev;
	cu_event ev[EV_KEEP];
} devs[PSL__CU_MAX_DEV];
static pthread_once_t devs_once = PTHREAD_ONCE_INIT;

static void devs_init(void)
{
	for (int i = 0; i < PSL__CU_MAX_DEV; i++)
		pthread_mutex_init(&devs[i].mu, NULL);
}

/* dev is a device of this machine (the runtime loaded) */
bool psl__cu_dev_ok(int dev)
{
	return dev >= 0 && dev < psl__cu.ndev && dev < PSL__CU_MAX_DEV;
}

/* The calling thread's device, -1 if it has none (no current context:
 * it never chose one, and giving it one of device 0 back would create a
 * context there). */
static int thread_device(void)
{
	void *ctx = NULL;
	int d;
	if (psl__cu.ctx_current && (psl__cu.ctx_current(&ctx) != 0 || !ctx))
		return -1;
	if (psl__cu.get_device(&d)) {
		psl__cu_clear();
		return -1;
	}
	return d;
}

/* Makes dev the thread's device (*prev: what to give back, -1 nothing). */
int psl__cu_dev_set(int dev, int *prev)
{
	int e;
	*prev = thread_device();
	if (*prev == dev || !(e = psl__cu.set_device(dev)))
		return 0;
	*prev = -1;
	return psl__cu_fail("cannot make the buffer's GPU the current device", e);
}

void psl__cu_dev_restore(int dev, int prev)
{
	if (prev >= 0 && prev != dev && psl__cu.set_device(prev))
		psl__cu_clear();
}

/* Device dev's lock held and the calling thread's current device set to
 * dev (*prev: what it was, -1 if nothing is to be given back). */
int psl__cu_dev_enter(int dev, int *prev)
{
	int rc;
	pthread_once(&devs_once, devs_init);
	pthread_mutex_lock(&devs[dev].mu);
	if ((rc = psl__cu_dev_set(dev, prev)))
		pthread_mutex_unlock(&devs[dev].mu);
	return rc;
}

void psl__cu_dev_leave(int dev, int prev)
{
	psl__cu_dev_restore(dev, prev);
	pthread_mutex_unlock(&devs[dev].mu);
}

/* An event of device dev (its lock held): a kept one, or new. */
int psl__cu_ev_get_locked(int dev, cu_event *ev)
{
	if (devs[dev].nev > 0) {
		*ev = devs[dev].ev[--devs[dev].nev];
		return 0;
	}
	return psl__cu.event_create(ev, CU_EVENT_DISABLE_TIMING);
}

void psl__cu_ev_put_locked(int dev, cu_event ev)
{
	if (devs[dev].nev < EV_KEEP)
		devs[dev].ev[devs[dev].nev++] = ev;
	else
		psl__cu.event_destroy(ev);
}

/* An event of device dev for the core's own marks (NULL on failure). CUDA
 * error or 0. */
int psl__cu_ev_get(int dev, cu_event *ev)
{
	int e;
	pthread_mutex_lock(&devs[dev].mu);
	if ((e = psl__cu_ev_get_locked(dev, ev)))
		*ev = NULL;
	pthread_mutex_unlock(&devs[dev].mu);
	return e;
}

int psl__cuda_mark(void *stream, int dev, void **mark)
{
	cu_event ev = NULL;
	int rc, prev, e;

	*mark = NULL;
	if (stream == PSL_CUDA_STREAM_NONE)
		return 0;
	if ((rc = psl__cu_load()))
		return rc;
	if (!psl__cu_dev_ok(dev))
		return -ENODEV;
	if ((rc = psl__cu_dev_enter(dev, &prev)))
		return rc;
	if (!(e = psl__cu_ev_get_locked(dev, &ev)) && (e = psl__cu.event_record(ev, stream)))
		psl__cu_ev_put_locked(dev, ev);
	psl__cu_dev_leave(dev, prev);
	if (e) {
		PSL_WARN("cannot order a GPU buffer of device %d after the work queued on CUDA "
			 "stream %p (set the stream of the device's buffers with "
			 "psl_kv_worker_set_cuda_stream or psl_kv_server_set_cuda_stream)",
			 dev, stream);
		return psl__cu_fail("cudaEventRecord", e);
	}
	*mark = ev;
	return 0;
}

void psl__cuda_mark_put(int dev, void *mark)
{
	if (!mark || !psl__cu_dev_ok(dev))
		return;
	pthread_mutex_lock(&devs[dev].mu);
	psl__cu_ev_put_locked(dev, mark);
	pthread_mutex_unlock(&devs[dev].mu);
}

bool psl__cuda_mark_ready(void *mark)
{
	return !mark || psl__cu.event_query(mark) == CU_OK;
}

void psl__cu_events_reset(void)
{
	pthread_once(&devs_once, devs_init);
	for (int i = 0; i < PSL__CU_MAX_DEV; i++) {
		pthread_mutex_lock(&devs[i].mu);
		while (devs[i].nev > 0)
			psl__cu.event_destroy(devs[i].ev[--devs[i].nev]);
		pthread_mutex_unlock(&devs[i].mu);
	}
}
