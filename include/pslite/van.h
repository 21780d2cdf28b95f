/*
 * pslite van plugin ABI.
 *
 * This is the only header a van author needs. A van is a shared object named
 * van_<name>.so that exports one symbol, PSL_VAN_ENTRY (psl_van_entry_v1),
 * returning a table of operations. The van never links libpslite: logging,
 * parameters and message delivery come through the psl_van_host table that the
 * core passes to init().
 *
 * Versioning: the major version is part of the entry symbol's name; within a
 * major version the structures below only ever grow at their end (append-only),
 * and every structure starts with its size so that either side can tell which
 * fields the other one knows.
 *
 * What a van does: it moves one opaque meta blob plus N data segments from this
 * node to a node id, in order per peer, and hands what arrives to the core. It
 * knows nothing of keys, roles or commands.
 */
#ifndef PSLITE_VAN_H
#define PSLITE_VAN_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define PSL_VAN_ABI_MAJOR 1
#define PSL_VAN_ABI_MINOR 3
#define PSL_VAN_ABI_MAKE(maj, min) ((((uint32_t)(maj)) << 16) | (uint32_t)(min))
#define PSL_VAN_ABI_VERSION PSL_VAN_ABI_MAKE(PSL_VAN_ABI_MAJOR, PSL_VAN_ABI_MINOR)
#define PSL_VAN_ABI_MAJOR_OF(v) ((uint32_t)(v) >> 16)
#define PSL_VAN_ABI_MINOR_OF(v) ((uint32_t)(v)&0xffffu)

/* The entry symbol. A van defines it with PSL_VAN_DEFINE_ENTRY or by hand. */
#define PSL_VAN_ENTRY psl_van_entry_v1
#define PSL_VAN_ENTRY_NAME "psl_van_entry_v1"

/* Node id used before the scheduler assigns one (ps-lite's kEmpty). */
#define PSL_VAN_ID_NONE 32767
/* The scheduler's node id. */
#define PSL_VAN_ID_SCHEDULER 1
/* Largest van address carried in the node list (ps-lite's endpoint_name). */
#define PSL_VAN_ADDR_MAX 64

/*
 * Telling vans apart. A van that listens on a TCP port of its own (for its
 * bootstrap, say) writes PSL_VAN_GREETING, its name and '\n' first on every
 * connection it accepts ("PSLVAN1 ucx\n"), so that a node started with
 * another van can say which van it reached. A ZeroMQ peer (van zmq, or a C++
 * ps-lite node) instead starts with the ZMTP signature: 0xFF, 8 bytes, 0x7F.
 * A van that reaches a peer speaking something else reports
 * PSL_VAN_PEER_MISMATCH with a detail naming both vans.
 */
#define PSL_VAN_GREETING "PSLVAN1 "

/* Memory types of a segment: said explicitly, never sniffed from a pointer. */
#ifndef PSL_MEM_TYPE_DEFINED /* (pslite.h defines it too) */
#define PSL_MEM_TYPE_DEFINED
enum psl_mem_type {
	PSL_MEM_HOST = 0,
	PSL_MEM_CUDA = 1,
};
#endif

/* Log levels passed to psl_van_host.vlog. PS_VERBOSE=1 shows DEBUG, 2 TRACE. */
enum psl_van_log_level {
	PSL_VAN_LOG_ERROR = 0,
	PSL_VAN_LOG_WARN = 1,
	PSL_VAN_LOG_INFO = 2,
	PSL_VAN_LOG_DEBUG = 3,
	PSL_VAN_LOG_TRACE = 4,
};

/* Capability flags (psl_van_caps.flags). */
#define PSL_VAN_CAP_ZC_SEND (1u << 0)  /* data segments are sent without a copy */
#define PSL_VAN_CAP_ZC_RECV (1u << 1)  /* received data is handed over without a copy */
#define PSL_VAN_CAP_NEEDS_MR (1u << 2) /* buffers must be registered (reg_mem) first */
#define PSL_VAN_CAP_MEM_HOST (1u << 3) /* host memory segments */
#define PSL_VAN_CAP_MEM_CUDA (1u << 4) /* CUDA device memory segments */
#define PSL_VAN_CAP_PSLITE_WIRE (1u << 5) /* speaks ps-lite's own wire protocol */

struct psl_van_caps {
	uint32_t size;	/* sizeof(struct psl_van_caps) of the caller */
	uint32_t flags; /* PSL_VAN_CAP_* */
	uint64_t max_msg_size; /* largest segment the van can carry, 0 = no limit */
	/* Human-readable description of what the van found on this machine:
	 * transports, providers, devices ("tcp lo,eth0; posix; cma"). */
	char transports[256];
};

/* One data segment to send. */
struct psl_van_seg {
	const void *data;
	size_t len;
	int32_t mem_type; /* enum psl_mem_type */
	int32_t dev_id;	  /* device ordinal for PSL_MEM_CUDA, -1 for host */
	void *mr;	  /* handle from reg_mem, or NULL */
};

/* One received data segment. */
struct psl_van_rseg {
	void *data;
	size_t len;
	int32_t mem_type;
	int32_t dev_id;
};

/*
 * A received message. The van fills it and passes ownership to the core with
 * psl_van_host.recv; the core calls release(msg) exactly once, from any
 * thread, when it no longer needs meta or any segment. Until then the memory
 * stays valid (this is how data is received without a copy).
 */
struct psl_van_rmsg {
	int32_t sender; /* node id of the sender as the transport saw it, or
			   PSL_VAN_ID_NONE for a peer that has none yet */
	uint32_t nseg;
	const void *meta;
	size_t meta_len;
	struct psl_van_rseg *segs;
	void (*release)(struct psl_van_rmsg *msg);
};

/*
 * Where the core wants a large received segment to go (ABI 1.1, see
 * psl_van_host.recv_dest): the buffer a worker's pull answer is for, or a
 * server's receive buffer registered for a push's key, so that the data is
 * not copied once more after it arrived. mem_type may be PSL_MEM_CUDA only
 * for a van that declares PSL_VAN_CAP_MEM_CUDA.
 */
struct psl_van_dest {
	void *data;	  /* write the segment here (at least len bytes) */
	int32_t mem_type; /* enum psl_mem_type of data */
	int32_t dev_id;	  /* device ordinal for PSL_MEM_CUDA, -1 for host */
	void *loan;	  /* hand back with recv_dest_put, exactly once */
};

/* Peer events (psl_van_host.peer_event). */
enum psl_van_peer_event {
	PSL_VAN_PEER_UP = 1,	   /* the transport reached the peer */
	PSL_VAN_PEER_DOWN = 2,	   /* an established connection to the peer was lost */
	PSL_VAN_PEER_MISMATCH = 3, /* the peer answered but speaks another van
				    * (err -EPROTO), or runs this van with
				    * settings that cannot reach it (any other
				    * err, e.g. -EHOSTUNREACH; detail says what
				    * to change) */
};

/*
 * Services that the core hands to the van. All callbacks are thread-safe and
 * may be called from any van thread.
 */
struct psl_van_host {
	uint32_t abi_version; /* PSL_VAN_ABI_VERSION of the core */
	uint32_t size;	      /* sizeof(struct psl_van_host) of the core */
	void *ctx;	      /* first argument of every callback */
	int log_level;	      /* messages above this level are not printed */
	void (*vlog)(void *ctx, int level, const char *van, const char *fmt, va_list ap);
	/* Parameter lookup (the process environment, as the core sees it). */
	const char *(*param)(void *ctx, const char *name);
	/* Deliver one received message; ownership passes to the core. Messages
	 * from one sender are delivered in the order they were sent. */
	void (*recv)(void *ctx, struct psl_van_rmsg *msg);
	/* A send that was given a non-NULL cookie no longer references its
	 * segments: called exactly once per such send. status is 0 or -errno. */
	void (*send_done)(void *ctx, void *cookie, int status);
	/* Something happened to the connection to node_id; err is 0 or -errno.
	 * detail is a human-readable string or NULL. */
	void (*peer_event)(void *ctx, int32_t node_id, int event, int err, const char *detail);

	/* ABI 1.1; a van checks size >= PSL_VAN_HOST_SIZE_1_1 before using
	 * these. A van that can place a segment where it likes before the data
	 * moves (UCX rendezvous, RDMA) may ask where segment seg (len bytes) of
	 * a message from sender should go, once it has the message's meta.
	 * Returns 0 and fills *dest, or -errno (the van uses its own buffer).
	 * A granted destination is a loan: the van writes only there, then
	 * calls recv_dest_put(ctx, dest->loan, status) exactly once, after the
	 * transport stopped writing into it: status 0 right before it delivers
	 * the message (whose segment seg then points at dest->data), -errno if
	 * the data did not arrive and the message is dropped. The core keeps
	 * the memory valid until then (the request it belongs to cannot
	 * complete). Both may be called from any van thread. */
	int (*recv_dest)(void *ctx, int32_t sender, const void *meta, size_t meta_len,
			 uint32_t seg, size_t len, struct psl_van_dest *dest);
	void (*recv_dest_put)(void *ctx, void *loan, int status);

	/* ABI 1.2; a van checks size >= PSL_VAN_HOST_SIZE_1_2 before using
	 * these. The job secret (PS_JOB_SECRET, docs/security.md): a van proves
	 * on each connection it opens that its node knows the secret, and
	 * checks the proof on each connection it accepts, without ever sending
	 * the secret. proof() writes HMAC-SHA256(secret, msg) into mac and
	 * returns 0, or returns -ENOENT when the job has no secret: the van
	 * then speaks exactly as without these (ps-lite's wire). proof_check()
	 * returns 0 when mac is msg's proof, -EACCES when it is not, -ENOENT
	 * without a secret. What msg holds is the van's own affair; it should
	 * hold a fresh random nonce of the connection, the sender's node id and
	 * the van's name, so that a proof is worth nothing elsewhere. */
	int (*proof)(void *ctx, const void *msg, size_t len, uint8_t mac[32]);
	int (*proof_check)(void *ctx, const void *msg, size_t len, const uint8_t mac[32]);
};

#define PSL_VAN_HOST_SIZE_1_1 (offsetof(struct psl_van_host, recv_dest_put) + sizeof(void *))
#define PSL_VAN_HOST_SIZE_1_2 (offsetof(struct psl_van_host, proof_check) + sizeof(void *))

/* A peer to connect to, as it appears in the node list. */
struct psl_van_peer {
	uint32_t size;	  /* sizeof(struct psl_van_peer) of the core */
	int32_t id;	  /* node id, PSL_VAN_ID_SCHEDULER for the scheduler */
	int32_t role;	  /* 0 server, 1 worker, 2 scheduler */
	const char *host; /* advertised host */
	int32_t port;	  /* advertised port */
	const void *addr; /* van address from the peer's bind(), may be empty */
	size_t addr_len;
};

/* What to listen on. */
struct psl_van_bind_req {
	uint32_t size;	  /* sizeof(struct psl_van_bind_req) of the core */
	int32_t role;	  /* 0 server, 1 worker, 2 scheduler */
	const char *host; /* address to bind and advertise */
	int32_t port;	  /* port to bind, 0 = let the system choose */
};

/* What bind() got. */
struct psl_van_bind_res {
	int32_t port;			/* the port actually bound */
	uint32_t addr_len;		/* bytes of addr used, <= PSL_VAN_ADDR_MAX */
	uint8_t addr[PSL_VAN_ADDR_MAX]; /* van address advertised in the node list */
};

struct psl_van; /* a van instance, opaque to the core */

struct psl_van_ops {
	uint32_t abi_version; /* PSL_VAN_ABI_VERSION the van was built with */
	uint32_t size;	      /* sizeof(struct psl_van_ops) the van was built with */
	const char *name;     /* must match the file name van_<name>.so */
	const char *version;  /* the van's own version, with its library's */
	const char *description;

	/* Mandatory. Create an instance. Return -ENODEV when the hardware or
	 * library support this van needs is not present (the core reports it at
	 * INFO and stops), another -errno on failure. */
	int (*init)(const struct psl_van_host *host, struct psl_van **van);
	/* Mandatory. Stop every thread, close every connection. After fini
	 * returns, no host callback is running or will run (send_done included:
	 * sends still in flight complete with an error before fini returns). */
	void (*fini)(struct psl_van *van);
	/* Mandatory. What this van can do on this machine. */
	int (*query)(struct psl_van *van, struct psl_van_caps *caps);
	/* Mandatory. Listen, and start delivering received messages. */
	int (*bind)(struct psl_van *van, const struct psl_van_bind_req *req,
		    struct psl_van_bind_res *res);
	/* Mandatory. Open (or replace) the connection to peer->id. my_id is this
	 * node's own id, PSL_VAN_ID_NONE before the scheduler assigned one. */
	int (*connect)(struct psl_van *van, const struct psl_van_peer *peer, int32_t my_id);
	/* Optional. Close the connection to a node id. */
	int (*disconnect)(struct psl_van *van, int32_t node_id);
	/* Mandatory. Send meta (copied before return) plus nseg segments (not
	 * copied) to node_id. Thread-safe. On 0, and if cookie is non-NULL,
	 * host->send_done(cookie) follows exactly once; on error, never. */
	int (*send)(struct psl_van *van, int32_t node_id, const void *meta, size_t meta_len,
		    const struct psl_van_seg *segs, uint32_t nseg, void *cookie);
	/* Optional. Register memory for vans with PSL_VAN_CAP_NEEDS_MR; a van
	 * may cache registrations, so registering the same buffer twice is cheap. */
	int (*reg_mem)(struct psl_van *van, void *addr, size_t len, int32_t mem_type,
		       int32_t dev_id, void **mr);
	int (*dereg_mem)(struct psl_van *van, void *mr);

	/* ABI 1.3, optional (the core checks size >= PSL_VAN_OPS_SIZE_1_3 and
	 * a non-NULL entry). Caller-driven progress: a thread that waits for a
	 * message (the core's psl_kv_wait with PS_CALLER_PROGRESS=1) lends
	 * itself to the transport for up to timeout_us microseconds (0: one
	 * pass that does not block). What arrives or completes meanwhile is
	 * handed to the host (recv, send_done, recv_dest, peer_event) on the
	 * calling thread, so that a reply completes there without waking
	 * another thread. The call returns as soon as it delivered or
	 * completed anything: > 0 then, 0 when nothing happened before
	 * timeout_us passed. The van's own threads keep progress going when
	 * nobody calls, and must not leave a message undelivered because a
	 * caller stopped calling (they may step aside while callers come
	 * often, for at most a millisecond or so after the last call).
	 * Thread-safe; only one thread progresses the transport at a time.
	 * Returns -EBUSY when another thread kept the transport for the whole
	 * timeout (the caller waits as it would without this entry), -EDEADLK
	 * when called from a host callback of this van (a callback that waits
	 * would progress inside a progress), -ESHUTDOWN after fini began,
	 * another -errno on failure. Never called after fini returned. */
	int (*progress)(struct psl_van *van, int timeout_us);
};

#define PSL_VAN_OPS_SIZE_1_3 (offsetof(struct psl_van_ops, progress) + sizeof(void *))

/* The entry point: host_abi_version is the core's PSL_VAN_ABI_VERSION. */
typedef const struct psl_van_ops *(*psl_van_entry_fn)(uint32_t host_abi_version);

#if defined(__GNUC__)
#define PSL_VAN_EXPORT __attribute__((visibility("default")))
#else
#define PSL_VAN_EXPORT
#endif

/* Defines the entry symbol returning &ops. */
#define PSL_VAN_DEFINE_ENTRY(ops)                                                   \
	PSL_VAN_EXPORT const struct psl_van_ops *PSL_VAN_ENTRY(uint32_t host_abi); \
	const struct psl_van_ops *PSL_VAN_ENTRY(uint32_t host_abi)                \
	{                                                                          \
		(void)host_abi;                                                    \
		return &(ops);                                                     \
	}

/* Logging helper for vans: checks the level before formatting. */
static inline void psl_van_log(const struct psl_van_host *host, int level, const char *van,
			       const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
static inline void psl_van_log(const struct psl_van_host *host, int level, const char *van,
			       const char *fmt, ...)
{
	va_list ap;
	if (!host || level > host->log_level)
		return;
	va_start(ap, fmt);
	host->vlog(host->ctx, level, van, fmt, ap);
	va_end(ap);
}

#ifdef __cplusplus
}
#endif

#endif /* PSLITE_VAN_H */
