/* The environment a node is configured by: ps-lite's variables, validated. */
#ifndef PSL_CORE_ENV_H
#define PSL_CORE_ENV_H

#include <stdbool.h>
#include <stddef.h>

#define PSL_HOST_MAX 64 /* ps-lite's RawNode.hostname, NUL included */
/* heartbeat defaults, seconds (env.c says why) */
#define PSL__HEARTBEAT_INTERVAL 2
#define PSL__HEARTBEAT_TIMEOUT 20

struct psl__config {
	int role;		     /* enum psl_role: this node's (a joint process's: server or worker) */
	bool joint;		     /* DMLC_ROLE=joint: the process is a server and a worker */
	char root_uri[PSL_HOST_MAX]; /* DMLC_PS_ROOT_URI */
	int root_port;		     /* DMLC_PS_ROOT_PORT */
	int num_workers;	     /* worker instances: DMLC_NUM_WORKER x group_size */
	int num_servers;	     /* server instances: DMLC_NUM_SERVER x group_size */
	int worker_groups;	     /* DMLC_NUM_WORKER (ps-lite's num_workers()) */
	int server_groups;	     /* DMLC_NUM_SERVER: the key ranges */
	int group_size;		     /* DMLC_GROUP_SIZE: instances per worker or server */
	int instance;		     /* this node's index in its group: rank % group_size */
	char node_host[PSL_HOST_MAX]; /* resolved advertised host (servers, workers) */
	int port;		     /* DMLC_PORT, 0 = let the system choose */
	char van[64];		     /* van name from DMLC_ENABLE_RDMA / DMLC_PS_VAN_TYPE */
	const char *van_var;	     /* which variable chose it, for messages */
	char van_raw[64];	     /* that variable's value as given */
	int verbose;		     /* PS_VERBOSE */
	int heartbeat_interval;	     /* PS_HEARTBEAT_INTERVAL, seconds, 0 = off */
	int heartbeat_timeout;	     /* PS_HEARTBEAT_TIMEOUT, seconds, 0 = off */
	bool heartbeat_all;	     /* PS_HEARTBEAT_INTERVAL set: every node sends them */
	bool resend;		     /* PS_RESEND */
	int resend_timeout_ms;	     /* PS_RESEND_TIMEOUT */
	int drop_rate;		     /* PS_DROP_MSG: percent of received messages dropped (tests) */
	bool caller_progress;	     /* PS_CALLER_PROGRESS: waiting callers drive the van (progress.c) */
	int preferred_rank;	     /* DMLC_RANK, -1 = any; with groups the instance's rank */
	int connect_timeout_s;	     /* PS_CONNECT_TIMEOUT */
	int start_timeout_s;	     /* PS_START_TIMEOUT */
	int barrier_warn_s;	     /* PS_BARRIER_WARN_S, 0 = off */
	int request_timeout_s;	     /* PS_REQUEST_TIMEOUT: KV workers' default, 0 = off */
	bool recovery;		     /* PS_RECOVERY (scheduler): a node started again
				      * takes a lost node's place (recovery.c) */
	int recovery_wait_s;	     /* PS_RECOVERY_WAIT: a request to a lost node
				      * waits this long for its replacement, 0 = fails */
	int held_timeout_s;	     /* PS_HELD_TIMEOUT: a message held for a missing
				      * customer fails back after it, 0 = held until
				      * finalize */
	bool mixed_mode;	     /* BYTEPS_ENABLE_MIXED_MODE */
	bool ipc;		     /* BYTEPS_ENABLE_IPC: shared memory with local peers */
	int ipc_buf_mb;		     /* PS_IPC_BUF_MB: each ring to a local peer */
	int ipc_min_bytes;	     /* PS_IPC_MIN_BYTES: smaller messages take the van */
	bool bind;		     /* STEPMESH_BIND_CPU_CORE=1 with STEPMESH_GPU: */
	int bind_cpu;		     /* the CPU the van's receive thread is bound to
				      * (psl__stepmesh_cpu), -1 none */
	bool malloc_tune;	     /* PS_MALLOC_TUNE: psl__malloc_tune at start */
	char ordered_hosts[1024];    /* BYTEPS_ORDERED_HOSTS */
	/* PS_JOB_SECRET, or the content of PS_JOB_SECRET_FILE (a final newline
	 * dropped); secret_len 0 = no secret (ps-lite's behaviour and wire) */
	unsigned char secret[256];
	size_t secret_len;
};

/* StepMesh's rule (STEPMESH_BIND_CPU_CORE) for the CPU of a thread of the
 * node serving GPU gpu: slot offset (clamped below cores_per_gpu) of the GPU's
 * block of cores_per_gpu cores from start, GPUs 2-3, 4-5 and 6-7 shifted onto
 * the next half-sockets of cores_per_socket cores. */
int psl__stepmesh_cpu(int gpu, int offset, int cores_per_gpu, int cores_per_socket, int start);

/* PS_MALLOC_TUNE=1 (the default): glibc's malloc keeps freed memory for
 * reuse (messages of up to 32 MiB from the heap, up to 64 MiB free kept at
 * the top of each arena) instead of giving it back to the kernel and
 * faulting it in again for the next message; once per process, and not
 * where the user tuned malloc (MALLOC_TRIM_THRESHOLD_, MALLOC_MMAP_THRESHOLD_,
 * or malloc's GLIBC_TUNABLES). Returns whether it changed malloc. */
bool psl__malloc_tune(void);
/* Whether the environment tunes malloc's trim or mmap threshold itself. */
bool psl__malloc_user_tuned(void);

/* Parses and validates the environment. On error returns -EINVAL (or
 * -ENOENT for a missing variable) and writes one line naming the variable,
 * its value and what was expected into err. */
int psl__config_load(struct psl__config *c, char *err, size_t errlen);
/* The same for one node of a DMLC_ROLE=joint process: joint_role (PSL_SERVER
 * or PSL_WORKER) is the node's role; the worker listens on DMLC_PORT + 1 when
 * DMLC_PORT is set. Without joint, joint_role is not used. */
int psl__config_load_as(struct psl__config *c, int joint_role, char *err, size_t errlen);
/* The same for instance `instance` of a group this process runs whole
 * (psl_start_group): DMLC_RANK is the group's rank, the instance's rank
 * DMLC_RANK x DMLC_GROUP_SIZE + instance, its port DMLC_PORT + instance (a
 * joint process's workers: + DMLC_GROUP_SIZE more). instance -1: as
 * psl__config_load_as (the process is one instance). */
int psl__config_load_inst(struct psl__config *c, int joint_role, int instance, char *err,
			  size_t errlen);

/* Parses an integer variable value; name is only used in the message. */
int psl__parse_int(const char *name, const char *val, long min, long max, long *out, char *err,
		   size_t errlen);

/* How the van was chosen, for messages: "DMLC_ENABLE_RDMA=ucx", or
 * "DMLC_ENABLE_RDMA unset: zmq". */
const char *psl__van_choice(const struct psl__config *c, char *buf, size_t len);

/* The role named by s ("scheduler", "server", "worker"), or -1. */
int psl__role_from_string(const char *s);
const char *psl__role_name(int role);

/* Finds the host to advertise: DMLC_NODE_HOST, else the first IPv4 address of
 * the interface DMLC_INTERFACE names (a prefix, as ps-lite matches it), else
 * the first non-loopback IPv4 address. */
int psl__resolve_host(const char *node_host, const char *iface, char *out, size_t outlen,
		      char *err, size_t errlen);

/* DMLC_INTERFACE=auto (StepMesh): the IPv4 address this machine sends from
 * to reach host:port (the scheduler), as the routing table picks it; no
 * packet is sent. */
int psl__route_host(const char *host, int port, char *out, size_t outlen, char *err,
		    size_t errlen);

/* ---------------------------------------------------- env_compat.c -- */

/* A variable of ps-lite, BytePS or StepMesh that pslite does not implement. */
struct psl__env_compat {
	const char *var;   /* its name */
	unsigned roles;	   /* 1 << enum psl_role: the roles it is warned about in */
	const char *quiet; /* a value that asks for what pslite does anyway, or NULL */
	const char *what;  /* what pslite does instead ("ignored: ...") */
};

/* The table, ended by an entry whose var is NULL. */
extern const struct psl__env_compat psl__env_compat_table[];

/* Logs one WARN "VAR=value: what" for each variable of the table that is set
 * (not empty, not its quiet value) for a node of this role, unless the
 * loaded van read it (psl__env_note_read). Returns how many. */
int psl__env_compat_warn(int role);

/* Notes that the van asked its host for setting name (van_host.c). */
void psl__env_note_read(const char *name);
/* Forgets them (a new van). */
void psl__env_reads_clear(void);

#endif
