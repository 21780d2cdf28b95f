/* The CUDA runtime, loaded with dlopen when a device buffer first needs it
 * (cuda.c): checks of device buffers, copies on the core's own streams, and
 * the pool of pinned host buffers that stages device data for vans that
 * move host memory only. */
#ifndef PSL_CORE_CUDA_H
#define PSL_CORE_CUDA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Checks a buffer's memory type (PSL_MEM_HOST or PSL_MEM_CUDA) and device
 * ordinal before a request uses it; for CUDA, loads the runtime and checks
 * that ptr..ptr+len is device memory of device dev. what names the buffer
 * in the error (e.g. "psl_kv_push: kv->vals"). 0 or -errno, logged with
 * what to change. */
int psl__cuda_check(const char *what, const void *ptr, size_t len, int32_t mem, int32_t dev);

/* Copies len bytes between any two of host and device memory, on the
 * core's stream of the device involved for that direction (to the GPU, or
 * from it), and waits for this copy alone. 0 or -errno
 * (-EIO for a CUDA error, logged with the runtime's words). */
int psl__cuda_copy(void *dst, int32_t dst_mem, int32_t dst_dev, const void *src,
		   int32_t src_mem, int32_t src_dev, size_t len);

/* The same, ordered with the caller's CUDA work (core/cuda.c): after the
 * event after (NULL: nothing to wait for), and with stream then waiting for
 * the copy (PSL_CUDA_STREAM_NONE: no stream; the per-thread default stream
 * cannot be named from another thread and is skipped: the copy is done
 * when this returns anyway). */
int psl__cuda_copy_on(void *dst, int32_t dst_mem, int32_t dst_dev, const void *src,
		      int32_t src_mem, int32_t src_dev, size_t len, void *after, void *then);
/* A pulled value's copy from host memory src to device memory dst of
 * device dev, after the event after, that does not wait when then names a
 * stream (not PSL_CUDA_STREAM_NONE nor the per-thread default stream):
 * then waits for the copy, made from a pinned buffer that the pool takes
 * back once the copy has read it: *stage (the pool's, the pull's) when src
 * is it (*stage is set to NULL: no longer the caller's), else one that src
 * is first copied into. Otherwise (or when the pool has no buffer) as
 * psl__cuda_copy_on, *stage left alone. 0 or -errno. */
int psl__cuda_copy_in(void *dst, int32_t dev, const void *src, size_t len, void *after,
		      void *then, void **stage);
/* An answer's received values v into dst (memory dst_mem of device
 * dst_dev): from host memory into GPU memory as psl__cuda_copy_in (stage:
 * the pinned buffer v was received in, or NULL), else psl__cuda_copy_on. */
struct psl_van_rseg;
int psl__cuda_copy_answer(void *dst, int32_t dst_mem, int32_t dst_dev,
			  const struct psl_van_rseg *v, void *after, void *then, void **stage);
/* A pushed value's copy from device memory src of device dev to host
 * memory dst (pinned), after the work queued so far on the caller's stream,
 * that is not waited for: *done is the copy's completion, to give to
 * psl__cuda_done_wait before dst is read or given back (NULL: the copy
 * was done here). 0 or -errno (nothing queued). */
int psl__cuda_copy_out(void *dst, const void *src, int32_t dev, size_t len, void *stream,
		       void **done);
/* Waits for a copy's completion done of device dev (or a mark,
 * psl__cuda_mark; on that device; NULL: nothing) and gives the event back.
 * 0 or -errno (logged). */
int psl__cuda_done_wait(int dev, void *done);
/* A copy that reads or writes the GPU only after the work queued so far on
 * the caller's stream (a mark recorded there first). */
int psl__cuda_copy_after(void *dst, int32_t dst_mem, int32_t dst_dev, const void *src,
			 int32_t src_mem, int32_t src_dev, size_t len, void *stream);

/* Marks (an event recorded now) the work queued so far on the caller's
 * stream of device dev: *mark NULL for PSL_CUDA_STREAM_NONE. 0 or -errno
 * (logged). Give it back with psl__cuda_mark_put. */
int psl__cuda_mark(void *stream, int dev, void **mark);
void psl__cuda_mark_put(int dev, void *mark);
/* Whether the marked work is done (true for NULL), without waiting. */
bool psl__cuda_mark_ready(void *mark);

/* True when segments in CUDA memory go to node o's van as they are (the
 * van declares PSL_VAN_CAP_MEM_CUDA and PS_CUDA_DIRECT is not 0); else the
 * core stages them through pinned host buffers. */
struct psl__office;
bool psl__cuda_direct(const struct psl__office *o);

#define PSL__CUDA_SPIN_US 30 /* (the default) */
/* PS_CUDA_SPIN_US in ns: how long a caller waits for its send's copy from
 * a GPU before handing the send to the core's CUDA thread (cuda_after.c). */
int64_t psl__cuda_spin_ns(void);
/* The next psl__cuda_spin_ns reads PS_CUDA_SPIN_US again (the tests). */
void psl__cuda_spin_reread(void);

/* A pinned host buffer of at least len bytes from the pool (NULL and
 * *err set if the runtime cannot give one), and its return. Buffers come in
 * power-of-two sizes and are reused: steady traffic allocates nothing.
 * dev: the GPU it is for (a new one is allocated there, portable). */
void *psl__cuda_stage_get(size_t len, int dev, int *err);
/* The largest buffer the pool keeps for reuse (1 GiB). */
#define PSL__CUDA_STAGE_KEPT ((size_t)1 << 30)
void psl__cuda_stage_put(void *buf);
/* Gives buf back once event ev of device dev (the core's, from a copy that
 * reads buf) is done; the event goes back to the core's then too. */
void psl__cuda_stage_put_after(void *buf, int dev, void *ev);
/* Pinned bytes the pool holds (in use or free), and buffers in use. */
size_t psl__cuda_stage_bytes(size_t *in_use);

/* Tests: forget the loaded runtime (frees the pinned pool, closes it;
 * PS_CUDA_LIB read again) (cuda_pool.c). */
void psl__cuda_reset(void);

#endif
