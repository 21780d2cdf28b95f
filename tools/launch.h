/*
 * What pslite-run needs to start a job across machines, as pure functions
 * (tests/unit/test_launch.c): which role and rank a task of a launcher
 * (Slurm, MPI, Kubernetes) takes, Slurm's host lists and task counts, the
 * host file of --hostfile and where its processes go, and shell quoting for
 * ssh. docs/launch.md describes the rules.
 */
#ifndef PSL_TOOLS_LAUNCH_H
#define PSL_TOOLS_LAUNCH_H

#include <stdbool.h>
#include <stddef.h>

/* (PSL_LAUNCH_JOINT: pslite-run --joint, on one machine) */
enum { PSL_LAUNCH_SCHEDULER, PSL_LAUNCH_SERVER, PSL_LAUNCH_WORKER, PSL_LAUNCH_JOINT };

/* The role of one task. */
struct psl_launch_place {
	int role;      /* PSL_LAUNCH_* */
	long rank;     /* among its role (0 for the scheduler) */
	long nserver;  /* servers in the job */
	long nworker;  /* workers in the job */
};

/* The job's shape, from the launcher. */
struct psl_launch_job {
	long task;             /* this task's global rank, 0..ntasks-1 */
	long ntasks;           /* tasks in the job, scheduler included */
	long servers;          /* servers in the job; 0: the default rule */
	long servers_per_node; /* > 0: this many servers on every node */
	const long *per_node;  /* tasks on each node, in node order (block order) */
	long nnodes;           /* entries of per_node; 0: not known */
};

/*
 * Maps a task to its role. Task 0 is the scheduler. Without
 * servers_per_node, tasks 1..S are servers 0..S-1 and the rest workers,
 * where S is job->servers or, when 0, (ntasks - 1) / 2. With it, tasks are
 * taken to be placed in blocks (node 0 holds tasks 0..per_node[0]-1, ...):
 * on every node the first servers_per_node tasks (after the scheduler on
 * node 0) are servers, the others workers, ranked in task order. Returns 0,
 * or -1 with one line in err.
 */
int psl_launch_map(const struct psl_launch_job *job, struct psl_launch_place *out, char *err,
		   size_t errlen);

const char *psl_launch_role_name(int role);

/* Expands a Slurm host list ("node[01-03,7],gpu-a[1-2]-x") into a malloc'd
 * array of malloc'd names; *n its length. Returns 0, or -1 with err. */
int psl_hostlist_expand(const char *list, char ***hosts, size_t *n, char *err, size_t errlen);
void psl_hostlist_free(char **hosts, size_t n);

/* Parses SLURM_TASKS_PER_NODE ("2(x3),1"): a malloc'd array of counts, one
 * per node. Returns 0, or -1 with err. */
int psl_tasks_per_node(const char *spec, long **counts, long *n, char *err, size_t errlen);

/* The ordinal at the end of a StatefulSet pod's host name ("ps-worker-3":
 * 3), or -1 when it does not end in -DIGITS. */
long psl_k8s_ordinal(const char *hostname);

/* One line of a host file. */
struct psl_host {
	char name[256];
	char addr[64];  /* addr=: DMLC_NODE_HOST of its processes */
	char iface[64]; /* interface=: DMLC_INTERFACE of its processes */
	long slots;     /* processes it takes (slots=, default 1) */
	unsigned roles; /* 1 << PSL_LAUNCH_*: roles it takes (roles=, default all) */
	long used;
};

/*
 * Reads a host file: one host a line,
 *   HOST [slots=N] [roles=scheduler,server,worker] [addr=IP] [interface=NAME]
 * '#' starts a comment, blank lines are skipped. *hosts is malloc'd.
 * Returns 0, or -1 with one line (FILE:LINE: what is wrong) in err.
 */
int psl_hostfile_read(const char *path, struct psl_host **hosts, size_t *n, char *err,
		      size_t errlen);
/* Parses one line (no newline) into h; returns 0 for a host, 1 for a blank
 * or comment line, -1 with err. */
int psl_hostfile_line(const char *line, struct psl_host *h, char *err, size_t errlen);

/*
 * Places a scheduler, S servers and W workers (in that order) on the hosts:
 * one host cursor goes round the hosts, each process taking the next host
 * that takes its role and has a free slot, so that servers and workers
 * spread over the machines. where[i] is the host of process i (0: the
 * scheduler, 1..S servers, then workers). Returns 0, or -1 with err.
 */
int psl_hostfile_place(struct psl_host *hosts, size_t n, long S, long W, size_t *where, char *err,
		       size_t errlen);

/* Appends s to buf (capacity cap, NUL-terminated) as one word for a POSIX
 * shell ('...' with ' as '\''). Returns 0, or -1 when it does not fit. */
int psl_shell_quote(char *buf, size_t cap, const char *s);

/* Whether environment variable NAME (the part before '=') goes to the
 * processes pslite-run starts over ssh: DMLC_*, PS_*, BYTEPS_*,
 * STEPMESH_*, and the vans' UCX_*, FI_*, ZMQ_*. */
bool psl_launch_env_passed(const char *name_eq_value);

#endif
