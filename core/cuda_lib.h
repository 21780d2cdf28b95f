/* The CUDA runtime as the core uses it (cuda_lib.c loads it; cuda.c and
 * cuda_pool.c use it). Internal to core/. */
#ifndef PSL_CORE_CUDA_LIB_H
#define PSL_CORE_CUDA_LIB_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>

#include "cuda_abi.h"

typedef void *cu_stream;
typedef void *cu_event;

/* Devices the core keeps streams for. */
#define PSL__CU_MAX_DEV 64

/* The runtime's functions (bound by name at load) and what the load found. */
struct psl__cu_lib {
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
};
extern struct psl__cu_lib psl__cu;

/* Loads the runtime once: 0, or -errno with psl__cu.why saying why. */
int psl__cu_load(void);
/* With psl__cu.mu held: unloads it; the next psl__cu_load tries again. */
void psl__cu_unload_locked(void);
/* The runtime's text for error e. */
const char *psl__cu_err(int e);
/* An error pslite handled: off the thread's last-error slot. */
void psl__cu_clear(void);
/* Logs what failed with CUDA error e, clears it: -ENOMEM or -EIO. */
int psl__cu_fail(const char *what, int e);

/* cuda_dev.c: dev is a device of this machine (the runtime loaded). */
bool psl__cu_dev_ok(int dev);
/* cuda_dev.c: makes dev the thread's device and takes the device's lock
 * (*prev: the device to give back, -1 none); 0 or -errno. Then leave. */
int psl__cu_dev_enter(int dev, int *prev);
void psl__cu_dev_leave(int dev, int prev);
/* cuda_dev.c: the same without the lock: set, then restore. */
int psl__cu_dev_set(int dev, int *prev);
void psl__cu_dev_restore(int dev, int prev);
/* cuda_dev.c: an event of device dev, kept or new (its lock held, or
 * taken by psl__cu_ev_get, which leaves *ev NULL on failure); CUDA error
 * or 0. Put it back for reuse with the lock held. */
int psl__cu_ev_get_locked(int dev, cu_event *ev);
int psl__cu_ev_get(int dev, cu_event *ev);
void psl__cu_ev_put_locked(int dev, cu_event ev);
/* cuda_dev.c: destroys the events kept for reuse (psl__cuda_reset). */
void psl__cu_events_reset(void);
/* cuda_pool.c: frees the pool's buffers, waiting for those a copy still
 * reads (psl__cuda_reset, before the runtime goes). */
void psl__cuda_pool_drain(void);

#endif
