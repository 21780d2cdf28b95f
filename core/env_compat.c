/*
 * Variables of ps-lite (byteps branch), BytePS and StepMesh that pslite does
 * not implement: none is ignored silently. At start the core logs one WARN
 * for each that is set, naming it, its value and what pslite does instead.
 * The variables pslite implements are read where they are used (env.c, the
 * vans, server/); those of programs (ps-lite's tests, BytePS's worker side,
 * which BytePS reads itself) are not listed.
 *
 * A variable the loaded van read through its host (psl_van_host.param) is
 * the van's: it is not warned about, whatever this table says.
 */
#include "config.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pslite.h"
#include "env.h"
#include "log.h"

#define ALL ((1u << PSL_SCHEDULER) | (1u << PSL_SERVER) | (1u << PSL_WORKER))
#define SCHED (1u << PSL_SCHEDULER)
#define SERVER (1u << PSL_SERVER)
#define WORKER (1u << PSL_WORKER)

#define ONE_INSTANCE                                                                      \
	"ignored: each pslite process is one instance; its index in the group is its rank "    \
	"modulo DMLC_GROUP_SIZE"
#define NO_IPC "ignored: pslite's IPC (BYTEPS_ENABLE_IPC=1) copies on the calling thread, into one shared-memory ring per local peer"
#define BPS_NUMA                                                                          \
	"ignored: BytePS's launcher binds workers only, and pslite pins its threads only with " \
	"StepMesh's STEPMESH_BIND_CPU_CORE: bind the process with taskset or numactl"
#define ONE_CONN "ignored: each pslite van keeps one connection per peer (no QPs to split or add)"
#define RDMA_DEPTH                                                                        \
	"ignored: queue depths are the van's own settings (van fabric: PS_FABRIC_RX_DEPTH; "   \
	"van ucx: UCX's variables)"
#define NODE_RANK                                                                         \
	"not read by pslite with DMLC_GROUP_SIZE=1: the scheduler gives ranks in order of "   \
	"registration; DMLC_RANK asks for one"
#define NO_GPU_BACKEND                                                                    \
	"ignored: each pslite buffer says in the API whether it is GPU memory (mem, dev); a "   \
	"van that takes GPU memory gets it, otherwise pslite stages it through pinned host "    \
	"memory (docs/gpu.md)"
#define NOT_GROUPED                                                                       \
	"not read by pslite with DMLC_GROUP_SIZE=1: it places an instance in its group "       \
	"(set DMLC_GROUP_SIZE)"

const struct psl__env_compat psl__env_compat_table[] = {
	/* ps-lite, byteps branch: the library */
	{"DMLC_NUM_PORTS", ALL, "1",
	 "ignored: pslite gives a node one port and its van one connection per peer "
	 "(ps-lite's multi-port van is not implemented)"},
	{"DMLC_LOCAL", ALL, "0",
	 "ignored: van zmq always connects over TCP (loopback between nodes of one host), "
	 "never ipc://"},
	{"DMLC_USE_KUBERNETES", SCHED, "0",
	 "ignored: the scheduler listens on DMLC_PS_ROOT_URI's address only, not on 0.0.0.0"},
	{"DMLC_LOCKLESS_QUEUE", ALL, "0",
	 "ignored: pslite's queues take a lock; PS_BUSY_POLL=1 makes the vans poll instead of "
	 "sleeping"},
	{"DMLC_POLLING_IN_NANOSECOND", ALL, NULL,
	 "ignored: the vans' poll window is PS_BUSY_POLL_US (microseconds, with PS_BUSY_POLL=1)"},
	{"DMLC_NUM_CPU_DEV", ALL, NULL, NO_GPU_BACKEND},
	{"DMLC_NUM_GPU_DEV", ALL, NULL, NO_GPU_BACKEND},
	{"BYTEPS_IPC_COPY_NUM_THREADS", ALL, NULL, NO_IPC},
	{"BYTEPS_IPC_ENABLE_ASYNC_COPY", ALL, "0", NO_IPC},
	{"BYTEPS_PCIE_SWITCH_SIZE", SCHED | SERVER, NULL, NO_IPC},
	{"BYTEPS_ADDRESS_POOL_SIZE", ALL, NULL,
	 "ignored: pslite's vans have no fixed pool of message addresses"},
	{"BYTEPS_PRINT_RDMA_LOG", ALL, "0",
	 "ignored: PS_VERBOSE=1 logs each van's set-up and connections, PS_VERBOSE=2 every "
	 "message"},
	{"BYTEPS_RDMA_MAX_CONCURR_WR", ALL, NULL, RDMA_DEPTH},
	{"BYTEPS_RDMA_RX_DEPTH", ALL, NULL, RDMA_DEPTH},
	{"BYTEPS_RDMA_START_DEPTH", ALL, NULL, RDMA_DEPTH},
	{"BYTEPS_UCX_ERRH_ENABLE", ALL, NULL,
	 "ignored: van ucx handles peer errors with PS_UCX_ERR_MODE=peer"},
	{"BYTEPS_UCX_FORCE_REQ_ORDER", ALL, NULL,
	 "ignored: van ucx always delivers in order per connection"},
	{"BYTEPS_UCX_QUEUE_SENDS", ALL, NULL,
	 "ignored: van ucx queues what UCX cannot take yet by itself; PS_UCX_BATCH_KB joins "
	 "small sends"},
	{"BYTEPS_UCX_RECONNECT_TMO", ALL, NULL,
	 "ignored: van ucx does not reconnect; PS_CONNECT_TIMEOUT bounds connecting"},
	{"BYTEPS_UCX_SHORT_THRESH", ALL, NULL,
	 "ignored: van ucx sends data up to PS_UCX_INLINE bytes with the header"},
	{"PSLITE_UCX_IB_TRAFFIC_CLASS", ALL, NULL,
	 "ignored: set UCX_IB_TRAFFIC_CLASS, which UCX reads itself"},
	{"PSLITE_UCX_RNDV_THRESH", ALL, NULL, "ignored: set UCX_RNDV_THRESH, which UCX reads itself"},
	{"PSLITE_UCX_SOCKADDR_CM_ENABLE", ALL, NULL,
	 "ignored: van ucx connects through a TCP bootstrap of its own, not UCX's sockaddr"},
	{"PSLITE_UCX_USE_MT_MUTEX", ALL, NULL,
	 "ignored: set UCX_USE_MT_MUTEX, which UCX reads itself"},

	/* StepMesh */
	{"DMLC_SPLIT_QP_LAG", ALL, "0", ONE_CONN},
	{"STEPMESH_SPLIT_QP_LAG", ALL, "0", ONE_CONN},
	{"STEPAF_QP_NUM", ALL, NULL, ONE_CONN},
	{"STEPAF_BUSY_POLL_ENABLE", ALL, "0",
	 "ignored: PS_BUSY_POLL=1 makes the vans poll instead of sleeping"},
	{"DMLC_NODE_RANK", ALL, NULL, NODE_RANK},
	{"DMLC_RANK_OFFSET", ALL, NULL, NOT_GROUPED},
	{"DMLC_INSTANCE_ID", ALL, NULL, ONE_INSTANCE},
	{"DMLC_PS_UV_NTHREADS", ALL, NULL, "ignored: pslite has no tensorpipe van"},
	{"DMLC_USE_RECVCTX", ALL, NULL, "ignored: pslite has no tensorpipe van"},
	{"BYTEPS_ENCODING_SCHEME_VERSION", ALL, NULL,
	 "ignored: no pslite van has StepMesh's RDMA encoding schemes"},
	{"BYTEPS_JOB_ID", ALL, NULL,
	 "ignored: it names StepMesh's shared memory; pslite's IPC rings are named by process and node id"},
	{"STEPMESH_BAKCEND", ALL, NULL, NO_GPU_BACKEND},
	{"STEPMESH_GPU", ALL, NULL, NOT_GROUPED},
	{"STEPMESH_MEM_SYNC", ALL, NULL, NO_GPU_BACKEND},

	/* BytePS: the worker's id, its server, its launcher */
	{"DMLC_WORKER_ID", WORKER, NULL, NODE_RANK},
	{"BYTEPS_SERVER_DEBUG", SERVER, "0",
	 "ignored: pslite-server has no debug dump; PS_KEY_LOG=1 logs keys, PS_VERBOSE=2 every "
	 "message"},
	{"BYTEPS_SERVER_DEBUG_KEY", SERVER, NULL,
	 "ignored: pslite-server has no debug dump; PS_KEY_LOG=1 logs keys, PS_VERBOSE=2 every "
	 "message"},
	{"BYTEPS_LOG_LEVEL", SERVER | SCHED, NULL, "ignored: pslite logs at PS_VERBOSE's level"},
	{"BYTEPS_NUMA_ON", SERVER | SCHED, "0", BPS_NUMA},
	{"BYTEPS_NUMA_DEFAULT_QUOTA", SERVER | SCHED, NULL, BPS_NUMA},
	{"BYTEPS_NUMA_ROOT_QUOTA", SERVER | SCHED, NULL, BPS_NUMA},
	{"BYTEPS_CPU_BLACKLIST", SERVER | SCHED, NULL, BPS_NUMA},
	{"BYTEPS_VISIBLE_CPU_CORES", SERVER | SCHED, NULL, BPS_NUMA},
	{"BYTEPS_MULTITHREADED_CPU", SERVER | SCHED, NULL, BPS_NUMA},
	{NULL, 0, NULL, NULL},
};

/* The settings the loaded van asked its host for. */
#define READS_MAX 128
static pthread_mutex_t reads_mu = PTHREAD_MUTEX_INITIALIZER;
static char reads[READS_MAX][48];
static int nreads;

void psl__env_note_read(const char *name)
{
	int i;
	if (!name || strlen(name) >= sizeof(reads[0]))
		return;
	pthread_mutex_lock(&reads_mu);
	for (i = 0; i < nreads && strcmp(reads[i], name); i++)
		;
	if (i == nreads && nreads < READS_MAX)
		strcpy(reads[nreads++], name);
	pthread_mutex_unlock(&reads_mu);
}

static bool van_read(const char *name)
{
	bool found = false;
	int i;
	pthread_mutex_lock(&reads_mu);
	for (i = 0; i < nreads && !found; i++)
		found = !strcmp(reads[i], name);
	pthread_mutex_unlock(&reads_mu);
	return found;
}

void psl__env_reads_clear(void)
{
	pthread_mutex_lock(&reads_mu);
	nreads = 0;
	pthread_mutex_unlock(&reads_mu);
}

/* v as one printable line of at most 64 bytes, for the log */
static const char *one_line(const char *v, char *buf, size_t len)
{
	char *p;
	snprintf(buf, len, "%.64s", v);
	for (p = buf; *p; p++)
		if ((unsigned char)*p < 0x20 || *p == 0x7f)
			*p = '?';
	return buf;
}

/* DMLC_GROUP_SIZE > 1: instance groups, whose placement variables are read */
static bool grouped(void)
{
	const char *v = getenv("DMLC_GROUP_SIZE");
	return v && atoi(v) > 1;
}

int psl__env_compat_warn(int role)
{
	const struct psl__env_compat *e;
	char buf[68];
	int n = 0;

	if (role < 0 || role > PSL_SCHEDULER)
		return 0;
	for (e = psl__env_compat_table; e->var; e++) {
		const char *v = getenv(e->var);
		if (!v || !*v || !(e->roles & (1u << role)))
			continue;
		if (e->quiet && !strcmp(v, e->quiet))
			continue; /* what pslite does anyway */
		if (van_read(e->var))
			continue; /* the van's own setting */
		if (grouped() && (!strcmp(e->var, "DMLC_NODE_RANK") ||
				  !strcmp(e->var, "STEPMESH_GPU") ||
				  !strcmp(e->var, "DMLC_RANK_OFFSET")))
			continue; /* an instance's place (env.c: group_rank) */
		if (!strcmp(e->var, "STEPMESH_GPU") && getenv("STEPMESH_BIND_CPU_CORE") &&
		    !strcmp(getenv("STEPMESH_BIND_CPU_CORE"), "1"))
			continue; /* which cores to bind to (env.c: bind_cpu) */
		PSL_LOG(PSL_LOG_WARN, "%s=%s: %s", e->var, one_line(v, buf, sizeof(buf)), e->what);
		n++;
	}
	return n;
}
