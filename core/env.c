#include "config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <ifaddrs.h>
#include <limits.h>
#include <malloc.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "pslite.h"
#include "env.h"

int psl__role_from_string(const char *s)
{
	if (!s)
		return -1;
	if (!strcmp(s, "scheduler"))
		return PSL_SCHEDULER;
	if (!strcmp(s, "server"))
		return PSL_SERVER;
	if (!strcmp(s, "worker"))
		return PSL_WORKER;
	if (!strcmp(s, "joint"))
		return PSL_JOINT;
	return -1;
}

const char *psl__role_name(int role)
{
	switch (role) {
	case PSL_SCHEDULER:
		return "scheduler";
	case PSL_SERVER:
		return "server";
	case PSL_WORKER:
		return "worker";
	case PSL_JOINT:
		return "joint";
	default:
		return "unknown";
	}
}

int psl__parse_int(const char *name, const char *val, long min, long max, long *out, char *err,
		   size_t errlen)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(val, &end, 10);
	if (end == val) /* no digits at all (blanks only): not 0 */
		end = (char *)"x";
	while (end && (*end == ' ' || *end == '\t' || *end == '\n'))
		end++;
	if (!*val || errno || *end || v < min || v > max) {
		if (min == 1 && max == INT_MAX)
			snprintf(err, errlen, "%s=%s: expected a positive integer", name, val);
		else
			snprintf(err, errlen, "%s=%s: expected an integer from %ld to %ld", name,
				 val, min, max);
		return -EINVAL;
	}
	*out = v;
	return 0;
}

static const char *env_get(const char *name)
{
	const char *v = getenv(name);
	return (v && *v) ? v : NULL;
}

static int env_int(const char *name, long def, long min, long max, int *out, char *err,
		   size_t errlen)
{
	const char *v = env_get(name);
	long x = def;
	if (v) {
		int rc = psl__parse_int(name, v, min, max, &x, err, errlen);
		if (rc)
			return rc;
	}
	*out = (int)x;
	return 0;
}

static int env_required_int(const char *name, long min, long max, int *out, char *err,
			    size_t errlen)
{
	if (!env_get(name)) {
		snprintf(err, errlen, "%s is not set: expected %s", name,
			 min == 1 && max == INT_MAX ? "a positive integer"
						     : "an integer (a TCP port, 1 to 65535)");
		return -ENOENT;
	}
	return env_int(name, 0, min, max, out, err, errlen);
}

/*
 * Heartbeats are on by default (ps-lite has them off): a frozen node (stopped,
 * swapping for good, its host cut off) keeps its connections open, and
 * without heartbeats a job waits on it forever. The defaults
 * (PSL__HEARTBEAT_INTERVAL, PSL__HEARTBEAT_TIMEOUT) give a node ten missed
 * heartbeats before it is declared lost: long enough for a node that is only
 * slow (a long GC or page-in, a loaded machine), short enough that a frozen
 * one fails the job within half a minute. A shorter PS_HEARTBEAT_TIMEOUT
 * shortens the default interval with it (four heartbeats per timeout, at
 * least one a second). 0 set explicitly turns either off, as in ps-lite.
 * heartbeat_all: PS_HEARTBEAT_INTERVAL was set, so every node of the job
 * (C++ ones too) is taken to send heartbeats; otherwise a scheduler judges
 * only the nodes whose registration promised them (registration.c).
 */
static int heartbeat_env(struct psl__config *c, char *err, size_t errlen)
{
	int rc, def;
	if ((rc = env_int("PS_HEARTBEAT_TIMEOUT", PSL__HEARTBEAT_TIMEOUT, 0, 86400 * 7,
			  &c->heartbeat_timeout, err, errlen)))
		return rc;
	def = c->heartbeat_timeout ? c->heartbeat_timeout / 4 : PSL__HEARTBEAT_INTERVAL;
	def = def < 1 ? 1 : def > PSL__HEARTBEAT_INTERVAL ? PSL__HEARTBEAT_INTERVAL : def;
	if ((rc = env_int("PS_HEARTBEAT_INTERVAL", def, 0, 86400, &c->heartbeat_interval, err,
			  errlen)))
		return rc;
	c->heartbeat_all = env_get("PS_HEARTBEAT_INTERVAL") && c->heartbeat_interval > 0;
	return 0;
}

static int copy_host(const char *name, const char *v, char *dst, char *err, size_t errlen)
{
	/* it goes into tcp:// endpoints and node lists: letters, digits and the
	 * punctuation of names and IPv4/IPv6 addresses only */
	if (strspn(v, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-_:%[]") !=
	    strlen(v)) {
		snprintf(err, errlen,
			 "%s=%s: expected a host name or address (letters, digits, '.', '-', "
			 "'_', ':')",
			 name, v);
		return -EINVAL;
	}
	if (strlen(v) >= PSL_HOST_MAX) {
		snprintf(err, errlen, "%s=%s: expected a host name or address of at most %d bytes",
			 name, v, PSL_HOST_MAX - 1);
		return -EINVAL;
	}
	strcpy(dst, v);
	return 0;
}

int psl__resolve_host(const char *node_host, const char *iface, char *out, size_t outlen,
		      char *err, size_t errlen)
{
	struct ifaddrs *ifa, *p;
	int found = 0;

	if (node_host && *node_host) {
		snprintf(out, outlen, "%s", node_host);
		return 0;
	}
	if (getifaddrs(&ifa) != 0) {
		snprintf(err, errlen, "cannot list network interfaces (%s): set DMLC_NODE_HOST",
			 strerror(errno));
		return -errno;
	}
	for (p = ifa; p && !found; p = p->ifa_next) {
		if (!p->ifa_addr || p->ifa_addr->sa_family != AF_INET || !p->ifa_name)
			continue;
		if (iface && *iface) {
			if (strncmp(p->ifa_name, iface, strlen(iface)) != 0)
				continue;
		} else if (p->ifa_flags & IFF_LOOPBACK) {
			continue;
		}
		if (inet_ntop(AF_INET, &((struct sockaddr_in *)p->ifa_addr)->sin_addr, out,
			      (socklen_t)outlen))
			found = 1;
	}
	freeifaddrs(ifa);
	if (found)
		return 0;
	if (iface && *iface) {
		snprintf(err, errlen,
			 "DMLC_INTERFACE=%s: no interface whose name starts with it has an IPv4 "
			 "address; set DMLC_INTERFACE to one that has (see 'ip addr') or set "
			 "DMLC_NODE_HOST",
			 iface);
		return -ENODEV;
	}
	snprintf(out, outlen, "127.0.0.1");
	return 0;
}

int psl__route_host(const char *host, int port, char *out, size_t outlen, char *err,
		    size_t errlen)
{
	struct addrinfo hints = {.ai_family = AF_INET, .ai_socktype = SOCK_DGRAM}, *ai = NULL;
	struct sockaddr_in me;
	socklen_t len = sizeof(me);
	char svc[16];
	int fd, rc, e = 0;

	snprintf(svc, sizeof(svc), "%d", port);
	if ((rc = getaddrinfo(host, svc, &hints, &ai)) != 0) {
		snprintf(err, errlen,
			 "DMLC_INTERFACE=auto: cannot resolve the scheduler's host '%s' (%s); set "
			 "DMLC_PS_ROOT_URI to its address, or DMLC_INTERFACE or DMLC_NODE_HOST",
			 host, gai_strerror(rc));
		return -EHOSTUNREACH;
	}
	fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0 || connect(fd, ai->ai_addr, ai->ai_addrlen) != 0 ||
	    getsockname(fd, (struct sockaddr *)&me, &len) != 0)
		e = errno;
	if (fd >= 0)
		close(fd);
	freeaddrinfo(ai);
	if (e || !inet_ntop(AF_INET, &me.sin_addr, out, (socklen_t)outlen)) {
		snprintf(err, errlen,
			 "DMLC_INTERFACE=auto: no route from this machine to the scheduler %s:%d "
			 "(%s); set DMLC_INTERFACE to the interface that reaches it, or "
			 "DMLC_NODE_HOST",
			 host, port, strerror(e ? e : EINVAL));
		return -EHOSTUNREACH;
	}
	return 0;
}

const char *psl__van_choice(const struct psl__config *c, char *buf, size_t len)
{
	if (!strcmp(c->van_var, "default"))
		snprintf(buf, len, "DMLC_ENABLE_RDMA unset: %s", c->van);
	else if (strcmp(c->van_raw, c->van))
		snprintf(buf, len, "%s=%s (%s)", c->van_var, c->van_raw, c->van);
	else
		snprintf(buf, len, "%s=%s", c->van_var, c->van);
	return buf;
}

static int parse_van(struct psl__config *c, char *err, size_t errlen)
{
	const char *v = env_get("DMLC_ENABLE_RDMA");
	int ucx = 0, rc;
	c->van_var = "DMLC_ENABLE_RDMA";
	/* ps-lite (byteps branch): DMLC_ENABLE_UCX=1 takes van ucx, whatever
	 * DMLC_ENABLE_RDMA says */
	if ((rc = env_int("DMLC_ENABLE_UCX", 0, 0, 1, &ucx, err, errlen)))
		return rc;
	if (ucx) {
		c->van_var = "DMLC_ENABLE_UCX";
		strcpy(c->van_raw, "1");
		strcpy(c->van, "ucx");
		return 0;
	}
	if (!v) {
		/* ps-lite 1f763c2: DMLC_PS_VAN_TYPE chooses when DMLC_ENABLE_RDMA is unset */
		v = env_get("DMLC_PS_VAN_TYPE");
		c->van_var = v ? "DMLC_PS_VAN_TYPE" : "default";
	}
	if (v)
		snprintf(c->van_raw, sizeof(c->van_raw), "%.63s", v);
	if (!v || !strcmp(v, "0"))
		v = "zmq";
	else if (!strcmp(v, "1"))
		v = "ibverbs";
	if (strlen(v) >= sizeof(c->van) || strspn(v, "abcdefghijklmnopqrstuvwxyz"
						   "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-") !=
						   strlen(v)) {
		snprintf(err, errlen,
			 "%s=%s: expected 0 (zmq), 1 (ibverbs) or a van name such as zmq, ucx, "
			 "fabric (letters, digits, '_', '-')",
			 c->van_var, v);
		return -EINVAL;
	}
	strcpy(c->van, v);
	return 0;
}

static int config_load(struct psl__config *c, int joint_role, int instance, char *err,
		       size_t errlen);

/* PS_JOB_SECRET or PS_JOB_SECRET_FILE (not both). */
static int load_secret(struct psl__config *c, char *err, size_t errlen)
{
	const char *v = env_get("PS_JOB_SECRET"), *f = env_get("PS_JOB_SECRET_FILE");
	size_t n;
	c->secret_len = 0;
	if (v && f) {
		snprintf(err, errlen, "PS_JOB_SECRET and PS_JOB_SECRET_FILE are both set: expected "
				      "one of them");
		return -EINVAL;
	}
	if (v) {
		n = strlen(v);
		if (n < 8 || n > sizeof(c->secret)) {
			snprintf(err, errlen, "PS_JOB_SECRET: %zu bytes, expected 8 to %zu", n,
				 sizeof(c->secret));
			return -EINVAL;
		}
		memcpy(c->secret, v, n);
		c->secret_len = n;
	} else if (f) {
		FILE *fp = fopen(f, "rb");
		int e;
		if (!fp) {
			e = errno;
			snprintf(err, errlen, "PS_JOB_SECRET_FILE=%s: cannot open it: %s", f,
				 strerror(e));
			return -e;
		}
		n = fread(c->secret, 1, sizeof(c->secret), fp);
		e = fgetc(fp) != EOF;
		fclose(fp);
		while (n && (c->secret[n - 1] == '\n' || c->secret[n - 1] == '\r'))
			n--;
		if (e || n < 8) {
			snprintf(err, errlen, "PS_JOB_SECRET_FILE=%s: expected 8 to %zu bytes of "
					      "secret in it",
				 f, sizeof(c->secret) - 1);
			return -EINVAL;
		}
		c->secret_len = n;
	}
	return 0;
}

int psl__stepmesh_cpu(int gpu, int offset, int cores_per_gpu, int cores_per_socket, int start)
{
	int base;
	if (offset >= cores_per_gpu)
		offset = cores_per_gpu - 1;
	base = gpu * cores_per_gpu + start + offset;
	if (gpu < 2)
		return base;
	if (gpu < 4)
		return base + cores_per_socket / 2 - cores_per_gpu * 2;
	if (gpu < 6)
		return base + cores_per_socket - cores_per_gpu * 4;
	return base + cores_per_socket / 2 * 3 - cores_per_gpu * 6;
}

/* STEPMESH_BIND_CPU_CORE=1 with STEPMESH_GPU: StepMesh binds its van's
 * receive thread (its slot 2) to one core of the GPU's block; pslite binds
 * the thread that delivers the van's messages (van_host.c). Instance i of a
 * group this process runs whole (local >= 0) serves GPU i. */
static int bind_cpu(struct psl__config *c, int local, char *err, size_t errlen)
{
	int on, gpu, cpg, cps, start, rc;
	c->bind_cpu = -1;
	c->bind = false;
	if ((rc = env_int("STEPMESH_BIND_CPU_CORE", 0, 0, 1, &on, err, errlen)) || !on)
		return rc;
	if ((rc = env_int("STEPMESH_GPU", -1, -1, 1023, &gpu, err, errlen)) ||
	    (rc = env_int("STEPMESH_CPU_CORES_PER_GPU", 5, 1, 4096, &cpg, err, errlen)) ||
	    (rc = env_int("STEPMESH_CPU_CORES_PER_SOCKET", 48, 1, 65536, &cps, err, errlen)) ||
	    (rc = env_int("STEPMESH_CPU_START_OFFSET", 10, 0, 65536, &start, err, errlen)))
		return rc;
	if (local >= 0 && c->group_size > 1 && c->role != PSL_SCHEDULER)
		gpu = local;
	if (gpu >= 0)
		c->bind_cpu = psl__stepmesh_cpu(gpu, 2, cpg, cps, start);
	if (c->bind_cpu < 0)
		c->bind_cpu = -1;
	c->bind = c->bind_cpu >= 0;
	return 0;
}

/* Measured (docs/performance.md, "Freed memory kept"): libzmq allocates
 * each received message and the van frees it after delivery; with glibc's
 * defaults the freed top of the heap went back to the kernel (a trim above
 * 128 KiB free) and the next message faulted its pages in again, zeroed:
 * 2-3 page faults per 64 KiB push-pull. The values are the ones glibc's own
 * dynamic rule would reach after freeing a 32 MiB block. */
#define MALLOC_MMAP_KEEP (32 << 20)
#define MALLOC_TRIM_KEEP (64 << 20)

bool psl__malloc_user_tuned(void)
{
	const char *t = getenv("GLIBC_TUNABLES");
	return getenv("MALLOC_TRIM_THRESHOLD_") || getenv("MALLOC_MMAP_THRESHOLD_") ||
	       (t && (strstr(t, "malloc.trim_threshold") || strstr(t, "malloc.mmap_threshold")));
}

bool psl__malloc_tune(void)
{
#if defined(__GLIBC__) && defined(M_TRIM_THRESHOLD) && defined(M_MMAP_THRESHOLD)
	static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
	static bool done;
	bool changed = false;

	pthread_mutex_lock(&mu);
	if (!done && !psl__malloc_user_tuned()) {
		changed = mallopt(M_MMAP_THRESHOLD, MALLOC_MMAP_KEEP) == 1 &&
			  mallopt(M_TRIM_THRESHOLD, MALLOC_TRIM_KEEP) == 1;
	}
	done = true;
	pthread_mutex_unlock(&mu);
	return changed;
#else
	return false;
#endif
}

int psl__config_load(struct psl__config *c, char *err, size_t errlen)
{
	return psl__config_load_as(c, PSL_SERVER, err, errlen);
}

int psl__config_load_as(struct psl__config *c, int joint_role, char *err, size_t errlen)
{
	return psl__config_load_inst(c, joint_role, -1, err, errlen);
}

int psl__config_load_inst(struct psl__config *c, int joint_role, int instance, char *err,
			  size_t errlen)
{
	int rc = config_load(c, joint_role, instance, err, errlen);
	char *p;
	/* the message quotes values: keep it one printable line */
	for (p = err; rc && *p; p++)
		if ((unsigned char)*p < 0x20 || *p == 0x7f)
			*p = '?';
	return rc;
}

/* DMLC_PORT for this process's node: a joint process's worker listens on
 * the port after its server's; instance i of a group this process runs whole
 * (instance >= 0) on DMLC_PORT + i (a joint process's workers after its
 * servers). 0 stays 0: each picks a free port. */
static int local_port(struct psl__config *c, int instance, char *err, size_t errlen)
{
	int g = instance >= 0 && c->role != PSL_SCHEDULER ? c->group_size : 1;
	int ports = c->joint ? 2 * g : g, rc;

	if ((rc = env_int("DMLC_PORT", 0, 0, 65536 - ports, &c->port, err, errlen)))
		return rc;
	if (!c->port)
		return 0;
	if (instance > 0)
		c->port += instance;
	if (c->joint && c->role == PSL_WORKER)
		c->port += g; /* the servers have the ports before */
	return 0;
}

/* Instance i of a group this process runs whole (psl_start_group, ps-lite's
 * StartPS): DMLC_RANK (else DMLC_NODE_RANK) is the group's rank r, the
 * instance's rank r x DMLC_GROUP_SIZE + i; 0 without either where the role
 * has one group. */
static int local_group_rank(struct psl__config *c, int i, char *err, size_t errlen)
{
	int r = c->preferred_rank, rc, n = c->role == PSL_SERVER ? c->num_servers : c->num_workers;
	const char *var = "DMLC_RANK";

	if (c->group_size > PSL_MAX_GROUP) {
		snprintf(err, errlen,
			 "DMLC_GROUP_SIZE=%d: one process runs at most %d instances of a role "
			 "(psl_start_group); start one process per instance (psl_start) instead",
			 c->group_size, PSL_MAX_GROUP);
		return -EINVAL;
	}
	if (r < 0) {
		if ((rc = env_int("DMLC_NODE_RANK", -1, -1, INT_MAX, &r, err, errlen)))
			return rc;
		var = "DMLC_NODE_RANK";
	}
	if (r < 0 && n / c->group_size == 1)
		r = 0; /* the role's only group: no choice to make */
	if (r < 0) {
		snprintf(err, errlen,
			 "DMLC_GROUP_SIZE=%d with psl_start_group: set DMLC_RANK (this process's "
			 "%s group rank, 0 to %d)",
			 c->group_size, psl__role_name(c->role), n / c->group_size - 1);
		return -EINVAL;
	}
	if (r >= n / c->group_size) {
		snprintf(err, errlen,
			 "%s=%d with psl_start_group and DMLC_GROUP_SIZE=%d: expected a %s group "
			 "rank, 0 to %d (DMLC_NUM_%s - 1)",
			 var, r, c->group_size, psl__role_name(c->role), n / c->group_size - 1,
			 c->role == PSL_SERVER ? "SERVER" : "WORKER");
		return -EINVAL;
	}
	c->preferred_rank = r * c->group_size + i;
	c->instance = i;
	return 0;
}

/* Instance groups (DMLC_GROUP_SIZE > 1, StepMesh's rule): each process is
 * one instance, of rank DMLC_NODE_RANK x DMLC_GROUP_SIZE + STEPMESH_GPU +
 * DMLC_RANK_OFFSET unless DMLC_RANK gives the instance's rank; its index in
 * the group is rank % DMLC_GROUP_SIZE. */
static int group_rank(struct psl__config *c, int local, char *err, size_t errlen)
{
	int node_rank, gpu, offset, rc, n;
	long r;

	c->instance = 0;
	if (c->group_size == 1 || c->role == PSL_SCHEDULER)
		return 0;
	if (local >= 0)
		return local_group_rank(c, local, err, errlen);
	n = c->role == PSL_SERVER ? c->num_servers : c->num_workers;
	if ((rc = env_int("DMLC_NODE_RANK", -1, -1, INT_MAX, &node_rank, err, errlen)) ||
	    (rc = env_int("STEPMESH_GPU", 0, 0, INT_MAX, &gpu, err, errlen)) ||
	    (rc = env_int("DMLC_RANK_OFFSET", 0, 0, INT_MAX, &offset, err, errlen)))
		return rc;
	if (c->preferred_rank < 0) {
		if (node_rank < 0) {
			snprintf(err, errlen,
				 "DMLC_GROUP_SIZE=%d: set DMLC_NODE_RANK (this %s's rank among the "
				 "%ss, 0 to %d) and STEPMESH_GPU (the instance, 0 to %d), or "
				 "DMLC_RANK (the instance's rank, 0 to %d)",
				 c->group_size, psl__role_name(c->role), psl__role_name(c->role),
				 n / c->group_size - 1, c->group_size - 1, n - 1);
			return -EINVAL;
		}
		r = (long)node_rank * c->group_size + gpu + offset;
		if (r >= n) {
			snprintf(err, errlen,
				 "DMLC_NODE_RANK=%d, STEPMESH_GPU=%d, DMLC_RANK_OFFSET=%d, "
				 "DMLC_GROUP_SIZE=%d: the instance's rank %ld is not below the %d %s "
				 "instances (DMLC_NUM_%s x DMLC_GROUP_SIZE)",
				 node_rank, gpu, offset, c->group_size, r, n, psl__role_name(c->role),
				 c->role == PSL_SERVER ? "SERVER" : "WORKER");
			return -EINVAL;
		}
		c->preferred_rank = (int)r;
	} else if (c->preferred_rank >= n) {
		snprintf(err, errlen,
			 "DMLC_RANK=%d with DMLC_GROUP_SIZE=%d: expected an instance's rank, 0 to %d "
			 "(DMLC_NUM_%s x DMLC_GROUP_SIZE - 1)",
			 c->preferred_rank, c->group_size, n - 1,
			 c->role == PSL_SERVER ? "SERVER" : "WORKER");
		return -EINVAL;
	}
	c->instance = c->preferred_rank % c->group_size;
	return 0;
}

static int config_load(struct psl__config *c, int joint_role, int instance, char *err,
		       size_t errlen)
{
	const char *v;
	int rc, gs, rs;

	memset(c, 0, sizeof(*c));
	err[0] = 0;

	/* PS_VERBOSE first, so that everything after it is logged at its level */
	if ((rc = env_int("PS_VERBOSE", 0, 0, 1000, &c->verbose, err, errlen)))
		return rc;

	v = env_get("DMLC_ROLE");
	if (!v) {
		snprintf(err, errlen,
			 "DMLC_ROLE is not set: expected scheduler, server, worker or joint");
		return -ENOENT;
	}
	c->role = psl__role_from_string(v);
	if (c->role < 0) {
		snprintf(err, errlen, "DMLC_ROLE=%s: expected scheduler, server, worker or joint",
			 v);
		return -EINVAL;
	}
	if (c->role == PSL_JOINT) { /* this process's server, or its worker */
		c->joint = true;
		c->role = joint_role == PSL_WORKER ? PSL_WORKER : PSL_SERVER;
	}

	v = env_get("DMLC_PS_ROOT_URI");
	if (!v) {
		snprintf(err, errlen,
			 "DMLC_PS_ROOT_URI is not set: expected the scheduler's host name or IP "
			 "address");
		return -ENOENT;
	}
	if ((rc = copy_host("DMLC_PS_ROOT_URI", v, c->root_uri, err, errlen)))
		return rc;
	if ((rc = env_required_int("DMLC_PS_ROOT_PORT", 1, 65535, &c->root_port, err, errlen)))
		return rc;
	if ((rc = env_required_int("DMLC_NUM_WORKER", 1, INT_MAX, &c->worker_groups, err, errlen)))
		return rc;
	if ((rc = env_required_int("DMLC_NUM_SERVER", 1, INT_MAX, &c->server_groups, err, errlen)))
		return rc;
	if ((rc = env_int("DMLC_GROUP_SIZE", 1, 1, 16000, &c->group_size, err, errlen)))
		return rc;
	if ((long)c->worker_groups * c->group_size > 16000 ||
	    (long)c->server_groups * c->group_size > 16000) {
		snprintf(err, errlen,
			 "DMLC_NUM_WORKER=%d, DMLC_NUM_SERVER=%d, DMLC_GROUP_SIZE=%d: expected at "
			 "most 16000 worker and 16000 server instances (node ids must stay below "
			 "32767)",
			 c->worker_groups, c->server_groups, c->group_size);
		return -EINVAL;
	}
	c->num_workers = c->worker_groups * c->group_size;
	c->num_servers = c->server_groups * c->group_size;
	/* more than one: a WARN (env_compat.c), one port is used */
	if ((rc = env_int("DMLC_NUM_PORTS", 1, 1, INT_MAX, &gs, err, errlen)))
		return rc;
	if ((rc = local_port(c, instance, err, errlen)))
		return rc;
	if ((rc = env_int("DMLC_RANK", -1, -1, INT_MAX, &c->preferred_rank, err, errlen)))
		return rc;
	if ((rc = group_rank(c, instance, err, errlen)))
		return rc;
	if ((rc = bind_cpu(c, instance, err, errlen)))
		return rc;
	if ((rc = env_int("PS_MALLOC_TUNE", 1, 0, 1, &gs, err, errlen)))
		return rc;
	c->malloc_tune = gs != 0;
	if ((rc = heartbeat_env(c, err, errlen)))
		return rc;
	if ((rc = env_int("PS_RESEND", 0, 0, INT_MAX, &rs, err, errlen)))
		return rc;
	c->resend = rs != 0;
	if ((rc = env_int("PS_RESEND_TIMEOUT", 1000, 1, 3600 * 1000, &c->resend_timeout_ms, err,
			  errlen)))
		return rc;
	if ((rc = env_int("PS_DROP_MSG", 0, 0, 100, &c->drop_rate, err, errlen)))
		return rc;
	if ((rc = env_int("PS_CALLER_PROGRESS", 0, 0, 1, &rs, err, errlen)))
		return rc;
	c->caller_progress = rs != 0;
	if ((rc = env_int("PS_CONNECT_TIMEOUT", 60, 1, 86400, &c->connect_timeout_s, err,
			  errlen)))
		return rc;
	if ((rc = env_int("PS_START_TIMEOUT", 300, 1, 86400 * 7, &c->start_timeout_s, err,
			  errlen)))
		return rc;
	if ((rc = env_int("PS_BARRIER_WARN_S", 30, 0, 86400 * 7, &c->barrier_warn_s, err,
			  errlen)))
		return rc;
	if ((rc = env_int("PS_REQUEST_TIMEOUT", 300, 0, 86400 * 7, &c->request_timeout_s, err,
			  errlen)))
		return rc;
	if ((rc = env_int("PS_HELD_TIMEOUT", 30, 0, 86400 * 7, &c->held_timeout_s, err,
			  errlen)))
		return rc;
	if ((rc = env_int("PS_RECOVERY", 0, 0, 1, &rs, err, errlen)))
		return rc;
	c->recovery = rs != 0;
	if ((rc = env_int("PS_RECOVERY_WAIT", 0, 0, 86400 * 7, &c->recovery_wait_s, err, errlen)))
		return rc;
	if ((rc = env_int("BYTEPS_ENABLE_MIXED_MODE", 0, 0, 1, &rs, err, errlen)))
		return rc;
	c->mixed_mode = rs != 0;
	if ((rc = env_int("BYTEPS_ENABLE_IPC", 0, 0, 1, &rs, err, errlen)))
		return rc;
	c->ipc = rs != 0;
	if ((rc = env_int("PS_IPC_BUF_MB", 64, 1, 65536, &c->ipc_buf_mb, err, errlen)))
		return rc;
	if ((rc = env_int("PS_IPC_MIN_BYTES", 16384, 0, INT_MAX, &c->ipc_min_bytes, err, errlen)))
		return rc;
	v = env_get("BYTEPS_ORDERED_HOSTS");
	if (v) {
		if (strlen(v) >= sizeof(c->ordered_hosts)) {
			snprintf(err, errlen, "BYTEPS_ORDERED_HOSTS: expected at most %zu bytes",
				 sizeof(c->ordered_hosts) - 1);
			return -EINVAL;
		}
		strcpy(c->ordered_hosts, v);
	}
	if ((rc = parse_van(c, err, errlen)))
		return rc;
	if ((rc = load_secret(c, err, errlen)))
		return rc;

	if (c->role == PSL_SCHEDULER) {
		strcpy(c->node_host, c->root_uri);
		c->port = c->root_port;
	} else {
		v = env_get("DMLC_NODE_HOST");
		if (v && (rc = copy_host("DMLC_NODE_HOST", v, c->node_host, err, errlen)))
			return rc;
		const char *iface = env_get("DMLC_INTERFACE");
		if ((!v || !*v) && iface && !strcmp(iface, "auto"))
			rc = psl__route_host(c->root_uri, c->root_port, c->node_host,
					     sizeof(c->node_host), err, errlen);
		else
			rc = psl__resolve_host(v, iface, c->node_host, sizeof(c->node_host), err,
					       errlen);
		if (rc)
			return rc;
	}
	return 0;
}
