/*
 * pslite: the ps-lite parameter server, in C.
 *
 * One process is one node: a scheduler, a server or a worker, chosen and
 * configured by ps-lite's environment variables (DMLC_ROLE, DMLC_PS_ROOT_URI,
 * DMLC_PS_ROOT_PORT, DMLC_NUM_WORKER, DMLC_NUM_SERVER, ...). The transport is
 * a plugin ("van") picked with DMLC_ENABLE_RDMA.
 *
 * Every function returns 0 (or a non-negative value) on success and a negative
 * errno on failure; psl_strerror() explains any of them. Nothing here aborts
 * the process on bad input or on a peer's fault.
 *
 * The equivalents of ps-lite's C++ API:
 *   ps::StartPS / Finalize          psl_start / psl_finalize
 *   ps::MyRank, NumWorkers, ...     psl_my_rank, psl_num_workers, ...
 *   Postoffice::Barrier             psl_barrier
 *   KVWorker<Val>                   struct psl_kv_worker (psl_kv_push, _pull, ...)
 *   KVServer<Val>                   struct psl_kv_server (handler + psl_kv_respond)
 *   SimpleApp                       struct psl_simple_app
 *   StepMesh's AFTensorWorker       psl_kv_batch_pushpull (ZBatchPushPull)
 *   StepMesh's AFTensorServer       struct psl_kv_batch_server (get_batch:
 *                                   psl_kv_batch_next; respond:
 *                                   psl_kv_batch_respond)
 */
#ifndef PSLITE_H
#define PSLITE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define PSL_EXPORT __attribute__((visibility("default")))
#else
#define PSL_EXPORT
#endif

#define PSL_VERSION_MAJOR 0
#define PSL_VERSION_MINOR 1
#define PSL_VERSION_PATCH 0
#define PSL_VERSION_STRING "0.1.0"

/* ---------------------------------------------------------------- nodes -- */

enum psl_role {
	PSL_SERVER = 0,
	PSL_WORKER = 1,
	PSL_SCHEDULER = 2,
	/* DMLC_ROLE=joint: a server and a worker in one process (two nodes) */
	PSL_JOINT = 3,
};

/* Node groups (ps-lite's kScheduler, kServerGroup, kWorkerGroup), or-able. */
#define PSL_GROUP_SCHEDULER 1
#define PSL_GROUP_SERVERS 2
#define PSL_GROUP_WORKERS 4
#define PSL_GROUP_ALL 7

/* Start this node: read the environment, load the van, register with the
 * scheduler and (if do_barrier) wait until every node has started.
 * customer_id is ps-lite's Start() customer id, normally 0. */
PSL_EXPORT int psl_start(int customer_id, bool do_barrier);

/* Instances of one role that one process may run (psl_start_group). */
#define PSL_MAX_GROUP 32

/* ps-lite's StartPS with DMLC_GROUP_SIZE = G > 1: this process runs a whole
 * instance group, G nodes of its role (DMLC_ROLE=joint: G servers and G
 * workers), at most PSL_MAX_GROUP. DMLC_RANK (else DMLC_NODE_RANK) is the
 * process's group rank r, as StartPS's rank: instance i has rank r x G + i,
 * and listens on DMLC_PORT + i (a joint process's workers on DMLC_PORT + G +
 * i; DMLC_PORT unset: each picks a free port). Each instance is a node of
 * its own (own van, id, rank and threads) and registers with the scheduler
 * as a process of one instance would (docs/wire.md section 3); processes
 * started either way mix in one job. With do_barrier, returns after the
 * start-up barrier, which every instance of the process passes. Choose the
 * instance the calls below act on with psl_use_instance. With G = 1, or as
 * the scheduler, it is psl_start. psl_finalize stops every instance. */
PSL_EXPORT int psl_start_group(int customer_id, bool do_barrier);

/* Stop this node: (if do_barrier) wait until every node has called finalize,
 * then close every connection and unload the van. Safe to call after a failed
 * psl_start. */
PSL_EXPORT int psl_finalize(int customer_id, bool do_barrier);

/* Whether this node's job lost a node: 0 if every node of the job stayed
 * (as far as this node heard), else the first loss this node knew of:
 * -ENOLINK if it lost the scheduler, otherwise the error the lost node's
 * requests failed with (-ECONNRESET: its connection was lost, -ETIMEDOUT:
 * its heartbeats stopped, ...), and one line in why (len bytes, may be
 * NULL) naming the node and the reason ("lost worker 0 (id 9, host:port):
 * connection lost ..."). A server or worker also hears of the nodes the
 * scheduler lost. Nodes that leave after the final barrier are no loss.
 * Valid from psl_start until the next psl_start, after psl_finalize too:
 * a program should exit non-zero when it is not 0 (pslite-bench does), as
 * psl_finalize can succeed without the lost node. */
PSL_EXPORT int psl_job_lost(char *why, size_t len);

/* ps-lite's Postoffice::GetDeadNodes(t): the ids of the nodes this node
 * watches (the scheduler: every server and worker; a server or worker: the
 * scheduler) that were declared lost, or, where heartbeats run, have not
 * been heard from for more than t_s seconds. Fills ids with up to cap of
 * them (ascending) and returns how many there are (may be more than cap);
 * t_s 0 gives 0, as in ps-lite. Without heartbeats (PS_HEARTBEAT_INTERVAL
 * 0 on that node) a silent node is not counted, only a lost one (ps-lite
 * counts every node t_s seconds after its start). -ESHUTDOWN before
 * psl_start, -EINVAL for t_s < 0 or ids NULL with cap > 0. */
PSL_EXPORT int psl_dead_nodes(int t_s, int *ids, int cap);

/* True on a server or worker that took the place of a lost node of the
 * running job (ps-lite's is_recovery, docs/recovery.md): it has the lost
 * node's id, rank and key range, and psl_start skipped the start-up barrier
 * (the other nodes passed it long ago). False before psl_start. */
PSL_EXPORT bool psl_is_recovery(void);

/* Block until every node of group (PSL_GROUP_*) has called it. With
 * instance groups (DMLC_GROUP_SIZE > 1) every instance of the group's
 * members takes part (StepMesh's instance barrier); a process that runs
 * several (joint, psl_start_group) calls it once for all of them. */
PSL_EXPORT int psl_barrier(int customer_id, int group);

/* This process's role; PSL_JOINT for DMLC_ROLE=joint, where the process is
 * two nodes, a server and a worker, each with its own van, id and rank (as
 * in C++ ps-lite): psl_is_server() and psl_is_worker() are then both true,
 * KV and batch workers belong to the worker, KV and batch servers to the
 * server, psl_start, psl_finalize and psl_barrier act for both, and the
 * calls below that describe one node (rank, id, instance, van) describe the
 * server unless the calling thread chose with psl_use_role. */
PSL_EXPORT enum psl_role psl_my_role(void);
PSL_EXPORT bool psl_is_scheduler(void);
PSL_EXPORT bool psl_is_server(void);
PSL_EXPORT bool psl_is_worker(void);
/* Which of this process's nodes psl_my_rank, psl_my_id, psl_my_instance,
 * psl_my_instance_rank, psl_van_name and psl_simple_app_new mean on the
 * calling thread (a joint process: PSL_SERVER or PSL_WORKER; a group's
 * process: its first instance of role). 0, -ENOENT if the process has no
 * node of that role, -ESHUTDOWN before psl_start. */
PSL_EXPORT int psl_use_role(enum psl_role role);
/* The same for instance `instance` (0 to DMLC_GROUP_SIZE - 1) of role in a
 * process that runs a group (psl_start_group; ps-lite's
 * Postoffice::GetWorker(i) / GetServer(i)): from then on, on the calling
 * thread, psl_kv_worker_new, psl_kv_server_new (and the KV store, batch
 * servers and SimpleApps built on them) create their objects on that
 * instance, and psl_my_rank, psl_my_id, psl_my_instance,
 * psl_my_instance_rank and psl_van_name describe it. An object stays on the
 * instance it was created on. A process of one instance has instance
 * psl_my_instance() only. 0; -ENOENT (no such instance here, the message
 * says which there are), -EINVAL (instance < 0), -ESHUTDOWN before start. */
PSL_EXPORT int psl_use_instance(enum psl_role role, int instance);
/* Rank among the nodes of the same role (0-based), -1 before start. With
 * instance groups: the group's rank (ps::MyRank), instance rank / group size. */
PSL_EXPORT int psl_my_rank(void);
/* Node id assigned by the scheduler (1, 8, 9, 10, ...), -1 before start. */
PSL_EXPORT int psl_my_id(void);
/* The address the other nodes reach this node at (ps-lite's
 * Van::my_node().hostname and .port): its host, NUL-terminated, into host
 * (len bytes), its port into *port (port may be NULL). 0; -ESHUTDOWN before
 * psl_start; -ENOSPC where len is too small (the message says how much). */
PSL_EXPORT int psl_my_address(char *host, size_t len, int *port);
/* DMLC_NUM_WORKER and DMLC_NUM_SERVER: workers and servers, each a group of
 * psl_group_size() instances. */
PSL_EXPORT int psl_num_workers(void);
PSL_EXPORT int psl_num_servers(void);
/* Instance groups (StepMesh, ps-lite byteps branch): DMLC_GROUP_SIZE, 1 by
 * default. The node's index in its group (rank % group size) and its rank
 * among the instances of its role (ids follow it), -1 before start: the
 * process's instance (psl_start), or the one the calling thread chose with
 * psl_use_instance (psl_start_group; instance 0 by default). Worker instance
 * i talks to instance i of each server group. */
PSL_EXPORT int psl_group_size(void);
PSL_EXPORT int psl_my_instance(void);
PSL_EXPORT int psl_my_instance_rank(void);
/* ps-lite's id <-> rank mapping. */
PSL_EXPORT int psl_server_rank_to_id(int rank);
PSL_EXPORT int psl_worker_rank_to_id(int rank);
PSL_EXPORT int psl_id_to_rank(int id);

/* The key range [*begin, *end) that server `rank` holds, as ps-lite splits
 * the 64-bit key space: q = (2^64-1) / num_servers, server i holds
 * [q*i, q*(i+1)). Small integer keys therefore all land on server 0. */
PSL_EXPORT int psl_server_key_range(int rank, uint64_t *begin, uint64_t *end);

/* Text for an error code returned by any psl_ function. */
PSL_EXPORT const char *psl_strerror(int err);

/* Why the last psl_ call that failed on this thread failed, in the words of
 * the WARN or ERROR line that names what to change ("DMLC_NUM_SERVER=2 at
 * the server at 10.0.0.2:9001, but 1 at the scheduler", "request rejected:
 * keys must be sorted ascending, ..."): set by every public function that
 * returns an error (start-up, KV, batch, server, store, SimpleApp, barrier
 * and query calls; where no line names the cause, "<call>: <psl_strerror>"),
 * emptied at the start of those calls, kept until then. A psl_kv_wait
 * that fails names the request and, where a node of the job was lost, the
 * loss (the request's own reason is in its WARN line). The text belongs to the calling thread; it stays valid until its next psl_
 * call. (pslite addition; ps-lite aborts with the reason instead.) */
PSL_EXPORT const char *psl_last_error(void);

/* pslite's log levels for psl_log (PS_VERBOSE=1 lets DEBUG through). */
enum psl_log_level {
	PSL_LOG_LEVEL_ERROR = 0,
	PSL_LOG_LEVEL_WARN = 1,
	PSL_LOG_LEVEL_INFO = 2,
	PSL_LOG_LEVEL_DEBUG = 3,
};

/* Writes text as one line of pslite's log (stderr, "[pslite 12:00:00.000
 * worker 0] INFO: text"), if the level is shown (ERROR, WARN and INFO
 * always; DEBUG with PS_VERBOSE >= 1). For a program or a language layer
 * that logs beside pslite: the C++ headers' LOG() and CHECK report through
 * it. Any thread, before psl_start too. */
PSL_EXPORT void psl_log(enum psl_log_level level, const char *text);

/* Name of the van this node runs on ("zmq", "ucx", ...), NULL before start. */
PSL_EXPORT const char *psl_van_name(void);

/* ---------------------------------------------------------------- vans -- */

/* What psl_van_probe found about one van_<name>.so. */
struct psl_van_info {
	const char *name;	 /* from the file name */
	const char *path;
	int status;		 /* 0: loads and starts here; else why not (-errno) */
	const char *error;	 /* one line saying why not, or "" */
	const char *version;	 /* the van's own version string, or "" */
	const char *description;
	unsigned abi_major, abi_minor;
	uint32_t caps;		 /* PSL_VAN_CAP_* from pslite/van.h */
	uint64_t max_msg_size;	 /* 0 = no limit */
	const char *transports;	 /* what the van found on this machine */
	bool shadowed;		 /* an earlier folder of the search path has this van */
};

typedef void (*psl_van_info_cb)(const struct psl_van_info *info, void *arg);

/* Loads, starts and queries every van_*.so on the van search path (without
 * joining a job) and reports each to cb. Returns how many were found. */
PSL_EXPORT int psl_van_probe(psl_van_info_cb cb, void *arg);
/* The van search path, folders separated by ':' (PS_VAN_PATH first). */
PSL_EXPORT const char *psl_van_search_path(void);

/* --------------------------------------------------------------- memory -- */

/*
 * Where a buffer lives. Every value buffer of the KV and batch calls says it
 * explicitly (the `mem` and `dev` fields; zero, the default, is host
 * memory): pslite never guesses from a pointer. Keys and lens are always
 * host memory.
 *
 * CUDA memory needs the CUDA runtime, which pslite loads when a device
 * buffer first needs it (PS_CUDA_LIB, else libcudart.so as the loader finds
 * it, else $CUDA_HOME/lib64 and configure's --with-cuda folder): pslite
 * itself links no CUDA library. A van that can move device memory gets it
 * as it is (pslite-info: "memory: host, cuda"); for the others pslite
 * stages it through pinned host buffers, one copy each way, on its own
 * CUDA stream (PS_CUDA_DIRECT=0 stages for every van).
 */
#ifndef PSL_MEM_TYPE_DEFINED
#define PSL_MEM_TYPE_DEFINED
enum psl_mem_type {
	PSL_MEM_HOST = 0,
	PSL_MEM_CUDA = 1,
};
#endif

/*
 * Ordering with the caller's CUDA work. A GPU buffer given to pslite
 * belongs to a CUDA stream of the caller's (a cudaStream_t, passed as
 * void *): pslite reads a pushed (or a server's answered) buffer only after
 * the work queued on that stream before the call, and writes a pulled one
 * only after it too; the caller's work queued on that stream after the
 * request completes sees the pulled values (pslite's own stream waits for
 * the caller's through events, never a device-wide synchronisation). The
 * stream of a worker's or a server's buffers is set with
 * psl_kv_worker_set_cuda_stream, psl_kv_server_set_cuda_stream or
 * psl_kv_batch_server_set_cuda_stream and holds for the calls made after
 * it; by default it is the legacy default stream (PSL_CUDA_STREAM_LEGACY),
 * which also orders after every blocking stream's work. With PyTorch pass
 * torch.cuda.current_stream().cuda_stream (the Python layer does).
 * PSL_CUDA_STREAM_PER_THREAD is the calling thread's per-thread default
 * stream (cudaStreamPerThread); PSL_CUDA_STREAM_NONE orders nothing: the
 * caller promises the data is ready (StepMesh's need_event = false). A
 * stream must be of the buffer's device. Who waits: a copying push
 * (psl_kv_push, psl_kv_pushpull) returns once its copy of the GPU buffer
 * is made; a z-form push returns at once (its buffer stays the caller's
 * until completion), and its messages, with the worker's requests made
 * after it, are sent by a pslite thread once its data is ready (copied
 * to pinned memory, or, for a van that reads GPU memory itself, the
 * caller's work done); so are an AF batch's (psl_kv_batch_pushpull)
 * and a z-form response (psl_kv_zrespond, psl_kv_batch_zrespond), while
 * the handler goes on; a pull
 * into GPU memory with a stream named completes before its copy has run,
 * ordered before that stream's later work (docs/gpu.md, "Who waits").
 */
#define PSL_CUDA_STREAM_LEGACY ((void *)0)
#define PSL_CUDA_STREAM_PER_THREAD ((void *)2)
#define PSL_CUDA_STREAM_NONE ((void *)-1)

/* One line about the CUDA runtime and its devices in buf ("runtime 12.4
 * (libcudart.so.12), driver 12.6, 1 device; 0: NVIDIA H100 ...") and the
 * number of devices, or a negative errno with buf saying why there is
 * none and what to do. */
PSL_EXPORT int psl_cuda_describe(char *buf, size_t len);
/* Allocate, free and copy memory of either kind (cudaMalloc, cudaFree,
 * cudaMemcpy through the loaded runtime; host: malloc, free, memcpy). */
PSL_EXPORT int psl_mem_alloc(enum psl_mem_type mem, int dev, size_t len, void **out);
PSL_EXPORT void psl_mem_free(enum psl_mem_type mem, int dev, void *p);
PSL_EXPORT int psl_mem_copy(void *dst, enum psl_mem_type dst_mem, int dst_dev, const void *src,
			    enum psl_mem_type src_mem, int src_dev, size_t len);

/* ------------------------------------------------------------ key-value -- */

/* Value types (the wire's DataType numbers). */
enum psl_dtype {
	PSL_INT8 = 1,
	PSL_INT16 = 2,
	PSL_INT32 = 3,
	PSL_INT64 = 4,
	PSL_UINT8 = 5,
	PSL_UINT16 = 6,
	PSL_UINT32 = 7,
	PSL_UINT64 = 8,
	PSL_FLOAT32 = 9,
	PSL_FLOAT64 = 10,
	PSL_BYTES = 11, /* char / opaque bytes: ps-lite's OTHER */
	/* pslite's own numbers (C++ ps-lite has none for them): a batch
	 * tensor's element type (struct psl_kv_tensor's dtype) */
	PSL_FLOAT16 = 12,
	PSL_BFLOAT16 = 13,
	PSL_BOOL = 14,
};

/* Size in bytes of one value of type dt, 0 if dt is unknown. */
PSL_EXPORT size_t psl_dtype_size(enum psl_dtype dt);

/* A list of keys (sorted ascending) with their values. Without lens, every key
 * has num_vals / num_keys values; with lens, key i has lens[i] values. */
struct psl_kv {
	const uint64_t *keys;
	size_t num_keys;
	void *vals;	 /* num_vals values of the worker's or server's dtype */
	size_t num_vals;
	int *lens;	 /* NULL, or num_keys counts */
	enum psl_mem_type mem; /* where vals lives (0: host) */
	int dev;	 /* its CUDA device ordinal for PSL_MEM_CUDA */
};

/* Where a pull puts what it receives. vals has room for cap values; on
 * completion num_vals holds how many arrived (if more than cap arrived, the
 * request fails with -EMSGSIZE and num_vals says how many were needed). lens,
 * if not NULL, receives one count per key. */
struct psl_kv_out {
	void *vals;
	size_t cap;
	size_t num_vals;
	int *lens;
	enum psl_mem_type mem; /* where vals lives (0: host) */
	int dev;	 /* its CUDA device ordinal for PSL_MEM_CUDA */
};

/* Completion callback: ts is the request's timestamp, status 0 or -errno.
 * Runs on a pslite receive thread: it may start new requests but must not
 * wait for one. */
typedef void (*psl_kv_cb)(int ts, int status, void *arg);

struct psl_kv_worker;

/* ps-lite's KVWorker<Val>(app_id, customer_id). */
PSL_EXPORT int psl_kv_worker_new(int app_id, int customer_id, enum psl_dtype dtype,
				 struct psl_kv_worker **out);
/* Waits for the worker's outstanding requests, then frees it. The wait is
 * bounded by their deadline (psl_kv_worker_set_timeout); requests for which
 * psl_kv_wait_timeout returned -ETIMEDOUT are cancelled at once (their
 * callbacks run with -ECANCELED). A response that arrives later is dropped.
 * Not from one of its own callbacks (whose thread still uses it): there
 * it logs an error and frees nothing. The same holds for the free calls of
 * a server (from its handler) and a SimpleApp (from its handlers).
 * A failed request still completes only once the van let go of its buffers
 * (a van does so at once for a peer that is lost; a frozen peer's
 * connection may hold them until it is lost or reads again). */
PSL_EXPORT void psl_kv_worker_free(struct psl_kv_worker *w);

/*
 * Requests. Each returns the request's timestamp (>= 0), or a negative errno
 * if it could not be sent at all (then the callback is not called).
 * Completion is reported once, through cb (may be NULL) and psl_kv_wait.
 *
 * push/pull/pushpull copy the keys, values and lens before returning. The
 * z-forms (zero-copy) use the caller's memory directly: it must stay valid
 * and unchanged until the request completes. A request, succeeded or failed
 * (a server lost, a deadline), completes only once no van holds any of its
 * buffers any more: they may be freed or reused as soon as it has.
 * For pulls, `out` (and its buffers) must stay valid until completion in both
 * forms. cmd is the application's command, carried as the meta's head.
 */
PSL_EXPORT int psl_kv_push(struct psl_kv_worker *w, const struct psl_kv *kv, int cmd,
			   psl_kv_cb cb, void *arg);
PSL_EXPORT int psl_kv_zpush(struct psl_kv_worker *w, const struct psl_kv *kv, int cmd,
			    psl_kv_cb cb, void *arg);
PSL_EXPORT int psl_kv_pull(struct psl_kv_worker *w, const uint64_t *keys, size_t num_keys,
			   struct psl_kv_out *out, int cmd, psl_kv_cb cb, void *arg);
PSL_EXPORT int psl_kv_zpull(struct psl_kv_worker *w, const uint64_t *keys, size_t num_keys,
			    struct psl_kv_out *out, int cmd, psl_kv_cb cb, void *arg);
/* Push kv, then pull the same keys into out, as one request: both messages
 * leave at once and the request completes when both are answered. */
PSL_EXPORT int psl_kv_pushpull(struct psl_kv_worker *w, const struct psl_kv *kv,
			       struct psl_kv_out *out, int cmd, psl_kv_cb cb, void *arg);
PSL_EXPORT int psl_kv_zpushpull(struct psl_kv_worker *w, const struct psl_kv *kv,
				struct psl_kv_out *out, int cmd, psl_kv_cb cb, void *arg);
/* The CUDA stream the worker's GPU buffers belong to, for the requests
 * made after this call (see "Ordering with the caller's CUDA work" above;
 * default PSL_CUDA_STREAM_LEGACY). 0, or -EINVAL for w NULL. */
PSL_EXPORT int psl_kv_worker_set_cuda_stream(struct psl_kv_worker *w, void *stream);
/* Wait for request ts; returns its status (0, or the error it failed with). A
 * timestamp that completed long ago returns 0. Errors of note: -EHOSTDOWN or
 * -ECONNRESET or -ETIMEDOUT (a server it needs was lost), -ENOLINK (this node
 * lost the scheduler: every request fails from then on; finalize and exit). */
PSL_EXPORT int psl_kv_wait(struct psl_kv_worker *w, int ts);
/* psl_kv_wait for at most timeout_ms (< 0: no limit): -ETIMEDOUT when
 * request ts is still pending then. The request goes on (its buffers must
 * stay valid): wait for it again, or finalize. Batches too. */
PSL_EXPORT int psl_kv_wait_timeout(struct psl_kv_worker *w, int ts, int timeout_ms);

/* What a server's handler sees of a request. */
struct psl_kv_meta {
	int cmd;	 /* the worker's cmd (meta head) */
	bool push;	 /* push request (data in kv) */
	bool pull;	 /* pull request (answer with data) */
	int sender;	 /* the worker's node id; with instance groups
			    (DMLC_GROUP_SIZE > 1) its group's id,
			    psl_worker_rank_to_id(group rank), as C++
			    ps-lite's KVMeta gives it (docs/wire.md §3) */
	int timestamp;
	int app_id;
	int customer_id;
	uint64_t key, addr; /* echoed as they came */
	int val_len, option;
};

struct psl_kv_request {
	struct psl_kv_meta meta;
	struct psl_kv kv; /* the request's keys, values and lens (pull: keys only);
			     valid until the request is answered */
};

struct psl_kv_server;

/* Called for each request, on a pslite receive thread. The handler (or any
 * thread it hands req to) must answer with exactly one psl_kv_respond* call,
 * which frees req. */
typedef void (*psl_kv_handler)(struct psl_kv_server *s, struct psl_kv_request *req, void *arg);

/* ps-lite's KVServer<Val>(app_id) with its request handler set at once. */
PSL_EXPORT int psl_kv_server_new(int app_id, enum psl_dtype dtype, psl_kv_handler handler,
				 void *arg, struct psl_kv_server **out);
/* Not from its own handler (see psl_kv_worker_free). */
PSL_EXPORT void psl_kv_server_free(struct psl_kv_server *s);
/* cb(s, arg) runs once in psl_finalize, after the final barrier and before
 * the van stops, on the thread that called psl_finalize. A server that still
 * holds requests (waiting for other workers, say) must answer them there
 * (psl_kv_respond_error(req, -ESHUTDOWN)): their data goes away with the van.
 * cb NULL removes it. Set it before requests can arrive. */
PSL_EXPORT int psl_kv_server_on_finalize(struct psl_kv_server *s,
					 void (*cb)(struct psl_kv_server *s, void *arg),
					 void *arg);

/* The CUDA stream the server's GPU buffers belong to (responses from GPU
 * memory, registered GPU receive buffers), for the calls made after this
 * one; default PSL_CUDA_STREAM_LEGACY. 0, or -EINVAL for s NULL. */
PSL_EXPORT int psl_kv_server_set_cuda_stream(struct psl_kv_server *s, void *stream);

/* Answer req. res is NULL for a push; for a pull, the keys, values and
 * (optional) lens to send back, copied before return. Frees req. */
PSL_EXPORT int psl_kv_respond(struct psl_kv_request *req, const struct psl_kv *res);
/* Same without copying res: its memory must stay valid until done(done_arg)
 * is called (from any thread). */
PSL_EXPORT int psl_kv_zrespond(struct psl_kv_request *req, const struct psl_kv *res,
			       void (*done)(void *done_arg), void *done_arg);
/* Answer req with an error (a negative errno) instead of data: a pslite
 * worker's request fails with it. Frees req. */
PSL_EXPORT int psl_kv_respond_error(struct psl_kv_request *req, int err);

/* ps-lite's (StepMesh's) registered receive buffers: the values of each
 * one-key push of `key` from the worker of rank worker_rank are put into buf
 * (len bytes, host or CUDA memory), and the handler gets them there
 * (req->kv.vals, .mem, .dev). A van that places data where it is told (van
 * ucx, fabric, ibverbs) receives batch pushes (whose meta names the key)
 * straight into buf; otherwise they are copied there once on arrival
 * (into GPU memory: after the work queued so far on the server's CUDA
 * stream, which waits for the copy; the handler does not). A
 * later push of the same key overwrites it; a push larger than len is
 * answered with -EMSGSIZE. buf must stay valid while the server exists; buf
 * NULL unregisters. -EBUSY while a van is writing into the old buffer. */
PSL_EXPORT int psl_kv_server_recv_buffer(struct psl_kv_server *s, int worker_rank, uint64_t key,
					 void *buf, size_t len, enum psl_mem_type mem, int dev);

/* Keep req (its meta, keys, values and lens) after it is answered: the
 * psl_kv_respond* call that answers it then sends the response without
 * freeing req, and psl_kv_request_release frees it. This lets a server
 * acknowledge a push at once and read its data later without copying it.
 * Each hold needs one release; req is still answered exactly once. */
PSL_EXPORT int psl_kv_request_hold(struct psl_kv_request *req);
PSL_EXPORT void psl_kv_request_release(struct psl_kv_request *req);

/* ps-lite's KVServerDefaultHandle as a ready server: a push stores its values
 * per key (PSL_KV_STORE_SUM: added to what the key holds, element by
 * element, the first push of a key stored as it is; PSL_KV_STORE_OVERWRITE:
 * replaces it), a pull answers each key's values (with lens where keys hold
 * different counts). A pull of a key never pushed fails with -ENOENT, a sum
 * of another length than the key holds with -EINVAL (both logged, naming the
 * key). SUM takes the integer and float32/64 dtypes. */
enum psl_kv_store_mode { PSL_KV_STORE_SUM = 0, PSL_KV_STORE_OVERWRITE = 1 };
struct psl_kv_store;
PSL_EXPORT int psl_kv_store_new(int app_id, enum psl_dtype dtype, enum psl_kv_store_mode mode,
				struct psl_kv_store **out);
/* Stops serving (psl_kv_server_free: after psl_finalize, as for any
 * server) and frees what it stored. */
PSL_EXPORT void psl_kv_store_free(struct psl_kv_store *st);

/* ------------------------------------------------------- batch (AF) -- */

/*
 * Batch push-pull for Attention-FFN serving (StepMesh's ZBatchPushPull): one
 * call sends several tensors to the servers and completes once, when every
 * answer is in place. Zero-copy both ways: pushed values are sent from the
 * caller's buffers, answers are received into the caller's pull buffers
 * (straight from the van where it can, else copied once on completion).
 *
 * On the wire a batch is ordinary ps-lite KV requests, one per tensor and
 * server, all with the batch's timestamp: a push carries keys [key] and the
 * tensor's values; a pull carries keys [key] and no values (meta addr and
 * val_len give the room the worker has). The meta's option marks the batch:
 * PSL_KV_BATCH_OPTION(count, index) where count is the number of messages
 * this server gets for the batch and index the message's place among them;
 * servers echo it in their answers.
 *
 * Routing (flags):
 *   0                     each tensor goes to the server whose key range
 *                         (psl_server_key_range) holds its key;
 *   PSL_KV_BATCH_BROADCAST StepMesh's routing: every push tensor goes to every
 *                         server, and the pull tensors are split in
 *                         num_servers equal groups, group i pulled from
 *                         server rank i (npull must be a multiple of
 *                         num_servers).
 */

/* Most dimensions a batch tensor's shape carries. */
#define PSL_KV_MAX_DIMS 8

/* One tensor: a key and len values of the worker's (or server's) dtype.
 * dtype and shape describe the tensor (StepMesh carries them in the meta):
 * a push's and an answer's travel with it, and a server's push tensors and a
 * worker's pull tensors (on completion) have the sender's. dtype 0: the
 * worker's (server's) dtype; ndim 0: flat. A shape must cover exactly
 * len values of the worker's dtype (-EINVAL otherwise). */
struct psl_kv_tensor {
	uint64_t key;
	void *vals;
	size_t len;	  /* values: to send (push) or room for (pull) */
	size_t received;  /* pull: how many values arrived (set on completion) */
	enum psl_mem_type mem; /* where vals lives (0: host) */
	int dev;	  /* its CUDA device ordinal for PSL_MEM_CUDA */
	enum psl_dtype dtype;	/* element type, 0: the worker's or server's */
	int ndim;		/* dimensions in shape, 0 to PSL_KV_MAX_DIMS */
	int64_t shape[PSL_KV_MAX_DIMS];
};

/* Monotonic nanosecond timestamps (CLOCK_MONOTONIC) of one batch. */
struct psl_kv_batch_times {
	uint64_t submit_ns;    /* the call started */
	uint64_t sent_ns;      /* every message was handed to the van */
	uint64_t answered_ns;  /* the last answer arrived */
	uint64_t completed_ns; /* the answers are in place, just before cb */
};

/* A batch as the worker describes it. The descriptor, its tensor arrays and
 * their buffers must stay valid (push values unchanged) until completion;
 * pull[i].received and times are written before cb runs or psl_kv_wait
 * returns. */
struct psl_kv_batch {
	const struct psl_kv_tensor *push;
	size_t npush;
	struct psl_kv_tensor *pull;
	size_t npull;
	struct psl_kv_batch_times times;
};

#define PSL_KV_BATCH_BROADCAST 1
/* Most messages one server gets for one batch (count in the option). */
#define PSL_KV_BATCH_MAX 16384
#define PSL_KV_BATCH_OPTION(count, index) (0x40000000 | ((count) << 15) | (index))

/* Sends batch b (see above); returns the request's timestamp for
 * psl_kv_wait, or a negative errno: -EINVAL (bad descriptor, pull count not
 * a multiple of the servers with BROADCAST, key beyond the last server),
 * -E2BIG (more than PSL_KV_BATCH_MAX messages for one server). The request
 * fails with -EMSGSIZE if an answer is larger than its pull buffer, -EPROTO
 * if it is not the tensor asked for, or with the server's error. A batch
 * with no tensors completes at once. */
PSL_EXPORT int psl_kv_batch_pushpull(struct psl_kv_worker *w, struct psl_kv_batch *b, int cmd,
				     int flags, psl_kv_cb cb, void *arg);

/* The server side: an FFN server receives whole batches, one worker's batch
 * at a time (a batch is the messages of one worker with one timestamp; it is
 * never mixed with another), holds them as long as it likes and answers each
 * once, in any order. */
struct psl_kv_batch_req {
	uint64_t id;	/* for psl_kv_batch_respond */
	int sender;	/* the worker's node id */
	int cmd;
	int timestamp;
	size_t npush;
	const struct psl_kv_tensor *push; /* received values (8-byte aligned);
					     valid until the batch is answered */
	size_t npull;
	const struct psl_kv_tensor *pull; /* keys asked for, len = the room the
					     worker has, vals NULL */
};

struct psl_kv_batch_server;

/* Called with each complete batch on a pslite receive thread. It may answer
 * at once or keep req and answer later from any thread. */
typedef void (*psl_kv_batch_cb)(struct psl_kv_batch_server *s,
				const struct psl_kv_batch_req *req, void *arg);

/* A batch server for app app_id. cb NULL: batches queue for
 * psl_kv_batch_next. max_tensors (0: PSL_KV_BATCH_MAX) is the most tensors a
 * batch may have: a larger one is refused with -E2BIG to the worker. */
PSL_EXPORT int psl_kv_batch_server_new(int app_id, enum psl_dtype dtype, size_t max_tensors,
				       psl_kv_batch_cb cb, void *arg,
				       struct psl_kv_batch_server **out);
/* Answers what it still holds with -ESHUTDOWN, then frees it. */
PSL_EXPORT void psl_kv_batch_server_free(struct psl_kv_batch_server *s);
/* psl_kv_server_recv_buffer for a batch server: push tensors of key from
 * the worker of rank worker_rank arrive in buf (StepMesh's
 * RegisterRecvBuffer); a batch's push tensor then points there, with its
 * mem and dev. */
PSL_EXPORT int psl_kv_batch_server_recv_buffer(struct psl_kv_batch_server *s, int worker_rank,
					       uint64_t key, void *buf, size_t len,
					       enum psl_mem_type mem, int dev);
/* psl_kv_server_set_cuda_stream for a batch server: the stream its
 * answers from GPU tensors and its GPU receive buffers belong to. */
PSL_EXPORT int psl_kv_batch_server_set_cuda_stream(struct psl_kv_batch_server *s, void *stream);
/* Blocks until a batch is complete (queue mode): 0 and *req set, -ETIMEDOUT
 * after timeout_ms (< 0: no limit), -ESHUTDOWN once the node finalizes. */
PSL_EXPORT int psl_kv_batch_next(struct psl_kv_batch_server *s, int timeout_ms,
				 const struct psl_kv_batch_req **req);
/* Answers batch id: each pull tensor gets the output tensor with its key
 * (out[], matched in order; outputs are copied before return). Pushes are
 * acknowledged. Returns -ENOENT for an unknown or already answered batch,
 * -EINVAL (batch not answered) if a pull has no output with its key. After a
 * successful call req is gone. */
PSL_EXPORT int psl_kv_batch_respond(struct psl_kv_batch_server *s, uint64_t id,
				    const struct psl_kv_tensor *out, size_t nout);
/* Same without copying out: its buffers must stay valid until done(done_arg)
 * is called (once, from any thread). If the call fails before answering
 * (-ENOENT, -EINVAL), done is not called and out is not used. */
PSL_EXPORT int psl_kv_batch_zrespond(struct psl_kv_batch_server *s, uint64_t id,
				     const struct psl_kv_tensor *out, size_t nout,
				     void (*done)(void *done_arg), void *done_arg);
/* Fails batch id at its worker with err (a negative errno). */
PSL_EXPORT int psl_kv_batch_respond_error(struct psl_kv_batch_server *s, uint64_t id, int err);

/* ----------------------------------------------------------- simple app -- */

struct psl_simple_msg {
	int head;
	const char *body; /* not NUL-terminated */
	size_t body_len;
	int sender;
	int timestamp;
	int app_id;
	int customer_id;
	bool request;
};

struct psl_simple_app;

/* Runs on a receive thread; for a request, answer with psl_simple_respond
 * (before returning, or later with a copy of the message). */
typedef void (*psl_simple_handler)(struct psl_simple_app *app, const struct psl_simple_msg *msg,
				   void *arg);

/* ps-lite's SimpleApp(app_id, customer_id). Without a request handler,
 * requests are answered with an empty body (as ps-lite does). */
PSL_EXPORT int psl_simple_app_new(int app_id, int customer_id, psl_simple_handler on_request,
				  psl_simple_handler on_response, void *arg,
				  struct psl_simple_app **out);
PSL_EXPORT void psl_simple_app_free(struct psl_simple_app *app);
/* Send head/body to every node of recv_id (a node id or a PSL_GROUP_*;
 * with instance groups, from a server or worker: instance psl_my_instance()
 * of each member group, and the scheduler if in recv_id);
 * returns the timestamp to wait on. */
PSL_EXPORT int psl_simple_request(struct psl_simple_app *app, int head, const void *body,
				  size_t body_len, int recv_id);
PSL_EXPORT int psl_simple_respond(struct psl_simple_app *app, const struct psl_simple_msg *req,
				  const void *body, size_t body_len);
PSL_EXPORT int psl_simple_wait(struct psl_simple_app *app, int ts);

/* The deadline of w's requests from now on: a request (push, pull,
 * push-pull, batch) not complete timeout_ms after it was made fails with
 * -ETIMEDOUT through its callback and psl_kv_wait, with a WARN naming the
 * node that did not answer, once no van holds its buffers (later, while a
 * van still sends them). 0 = no deadline. The default is PS_REQUEST_TIMEOUT
 * (seconds, 300). 0, or -EINVAL for a negative timeout_ms. */
PSL_EXPORT int psl_kv_worker_set_timeout(struct psl_kv_worker *w, int timeout_ms);

#ifdef __cplusplus
}
#endif

#endif /* PSLITE_H */
