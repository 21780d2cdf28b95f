/* Roles, host lists and host files for pslite-run (launch.h). */
#define _GNU_SOURCE 1
#include "launch.h"

#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_HOSTS 65536

static int lfail(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
	return -1;
}

const char *psl_launch_role_name(int role)
{
	return role == PSL_LAUNCH_SCHEDULER ? "scheduler"
	       : role == PSL_LAUNCH_SERVER  ? "server"
	       : role == PSL_LAUNCH_JOINT   ? "joint"
					    : "worker";
}

int psl_launch_map(const struct psl_launch_job *job, struct psl_launch_place *out, char *err,
		   size_t errlen)
{
	long g = job->task, n = job->ntasks, S, i, base = 0, node = -1, sbefore = 0;

	if (n < 3)
		return lfail(err, errlen,
			    "%ld task%s: a job needs at least 3 (a scheduler, a server and a "
			    "worker); start more tasks",
			    n, n == 1 ? "" : "s");
	if (g < 0 || g >= n)
		return lfail(err, errlen, "task %ld is outside the job's %ld tasks (0..%ld)", g, n,
			    n - 1);
	out->rank = 0;
	if (job->servers_per_node <= 0) {
		S = job->servers > 0 ? job->servers : (n - 1) / 2;
		if (S > n - 2)
			return lfail(err, errlen,
				    "%ld servers leave no worker among %ld tasks: ask for at most "
				    "%ld servers or start more tasks",
				    S, n, n - 2);
		out->nserver = S;
		out->nworker = n - 1 - S;
		out->role = g == 0   ? PSL_LAUNCH_SCHEDULER
			    : g <= S ? PSL_LAUNCH_SERVER
				     : PSL_LAUNCH_WORKER;
		out->rank = g == 0 ? 0 : g <= S ? g - 1 : g - 1 - S;
		return 0;
	}
	if (job->nnodes <= 0 || !job->per_node)
		return lfail(err, errlen,
			    "--servers-per-node needs the tasks of every node, which the "
			    "launcher did not give; pass -s SERVERS instead");
	for (i = 0; i < job->nnodes; i++) {
		long c = job->per_node[i] - (i == 0);
		if (c < job->servers_per_node)
			return lfail(err, errlen,
				    "node %ld has %ld task%s%s, fewer than --servers-per-node %ld; "
				    "start more tasks per node or lower it",
				    i, c, c == 1 ? "" : "s", i == 0 ? " besides the scheduler" : "",
				    job->servers_per_node);
		if (node < 0 && g < base + job->per_node[i])
			node = i;
		base += job->per_node[i];
	}
	if (base != n)
		return lfail(err, errlen,
			    "the nodes' task counts add up to %ld, not to the job's %ld tasks",
			    base, n);
	S = job->servers_per_node * job->nnodes;
	if (S > n - 2)
		return lfail(err, errlen,
			    "--servers-per-node %ld on %ld nodes leaves no worker among %ld tasks",
			    job->servers_per_node, job->nnodes, n);
	out->nserver = S;
	out->nworker = n - 1 - S;
	if (g == 0) {
		out->role = PSL_LAUNCH_SCHEDULER;
		return 0;
	}
	/* the tasks of the nodes before, and this task's place on its node */
	for (i = 0, base = 0; i < node; i++)
		base += job->per_node[i];
	sbefore = job->servers_per_node * node;
	{
		long local = g - base - (node == 0); /* scheduler skipped */
		long wbefore = base - (node > 0) - sbefore;
		if (local < job->servers_per_node) {
			out->role = PSL_LAUNCH_SERVER;
			out->rank = sbefore + local;
		} else {
			out->role = PSL_LAUNCH_WORKER;
			out->rank = wbefore + local - job->servers_per_node;
		}
	}
	return 0;
}

/* ---------------------------------------------------------- host lists -- */

struct strv {
	char **v;
	size_t n, cap;
};

static int strv_push(struct strv *s, char *str)
{
	if (!str)
		return -1;
	if (s->n == s->cap) {
		size_t cap = s->cap ? 2 * s->cap : 16;
		char **v = realloc(s->v, cap * sizeof(*v));
		if (!v) {
			free(str);
			return -1;
		}
		s->v = v;
		s->cap = cap;
	}
	s->v[s->n++] = str;
	return 0;
}

/* Expands one item (no top-level comma) with its bracket groups, prefix
 * already expanded in pre. */
static int expand_item(const char *pre, const char *item, struct strv *out, char *err,
		       size_t errlen)
{
	const char *lb = strchr(item, '['), *rb, *p;
	char *head;
	int rc = 0;

	if (!lb) {
		char *s;
		if (strchr(item, ']'))
			return lfail(err, errlen, "a ']' without '[' in '%s'", item);
		if (asprintf(&s, "%s%s", pre, item) < 0)
			return lfail(err, errlen, "out of memory");
		if (out->n >= MAX_HOSTS) {
			free(s);
			return lfail(err, errlen, "more than %d hosts", MAX_HOSTS);
		}
		return strv_push(out, s) ? lfail(err, errlen, "out of memory") : 0;
	}
	rb = strchr(lb, ']');
	if (!rb)
		return lfail(err, errlen, "a '[' without ']' in '%s'", item);
	if (asprintf(&head, "%s%.*s", pre, (int)(lb - item), item) < 0)
		return lfail(err, errlen, "out of memory");
	for (p = lb + 1; p < rb && !rc;) {
		char *end, *next;
		unsigned long lo, hi, v;
		int width = 0;
		const char *q = p;
		if (!isdigit((unsigned char)*p)) {
			rc = lfail(err, errlen, "'%.*s': expected numbers in the brackets",
				  (int)(rb - lb + 1), lb);
			break;
		}
		while (isdigit((unsigned char)*q))
			q++;
		width = (int)(q - p);
		errno = 0;
		lo = strtoul(p, &end, 10);
		hi = lo;
		if (*end == '-') {
			hi = strtoul(end + 1, &end, 10);
			if (!isdigit((unsigned char)end[-1]))
				hi = lo - 1;
		}
		if (errno || (end != rb && *end != ',') || hi < lo || hi - lo >= MAX_HOSTS) {
			rc = lfail(err, errlen, "'%.*s': expected ranges like [1-4,7] or [01-16]",
				  (int)(rb - lb + 1), lb);
			break;
		}
		for (v = lo; v <= hi && !rc; v++) {
			if (asprintf(&next, "%s%0*lu", head, width, v) < 0) {
				rc = lfail(err, errlen, "out of memory");
				break;
			}
			rc = expand_item(next, rb + 1, out, err, errlen);
			free(next);
		}
		p = *end == ',' ? end + 1 : end;
	}
	free(head);
	return rc;
}

void psl_hostlist_free(char **hosts, size_t n)
{
	size_t i;
	for (i = 0; i < n; i++)
		free(hosts[i]);
	free(hosts);
}

int psl_hostlist_expand(const char *list, char ***hosts, size_t *n, char *err, size_t errlen)
{
	struct strv out = {0};
	const char *p = list;
	char msg[200];

	*hosts = NULL;
	*n = 0;
	if (!list || !*list)
		return lfail(err, errlen, "the host list is empty");
	while (*p) {
		const char *q = p;
		int depth = 0;
		char *item;
		while (*q && (depth || *q != ',')) {
			depth += *q == '[' ? 1 : *q == ']' ? -1 : 0;
			q++;
		}
		if (q == p) {
			psl_hostlist_free(out.v, out.n);
			return lfail(err, errlen, "host list '%s': an empty entry", list);
		}
		item = strndup(p, (size_t)(q - p));
		if (!item || expand_item("", item, &out, msg, sizeof(msg))) {
			if (!item)
				snprintf(msg, sizeof(msg), "out of memory");
			free(item);
			psl_hostlist_free(out.v, out.n);
			return lfail(err, errlen, "host list '%s': %s", list, msg);
		}
		free(item);
		p = *q ? q + 1 : q;
	}
	*hosts = out.v;
	*n = out.n;
	return 0;
}

int psl_tasks_per_node(const char *spec, long **counts, long *n, char *err, size_t errlen)
{
	long *c = NULL, cnt = 0;
	const char *p = spec;

	*counts = NULL;
	*n = 0;
	if (!spec || !*spec)
		return lfail(err, errlen, "the tasks per node are empty");
	while (*p) {
		char *end;
		long v, rep = 1, k;
		long *nc;
		errno = 0;
		v = strtol(p, &end, 10);
		if (errno || end == p || v < 0)
			goto bad;
		if (*end == '(') {
			if (end[1] != 'x')
				goto bad;
			rep = strtol(end + 2, &end, 10);
			if (errno || rep < 1 || *end != ')')
				goto bad;
			end++;
		}
		if ((*end && *end != ',') || cnt + rep > MAX_HOSTS)
			goto bad;
		nc = realloc(c, (size_t)(cnt + rep) * sizeof(*c));
		if (!nc)
			goto bad;
		c = nc;
		for (k = 0; k < rep; k++)
			c[cnt++] = v;
		p = *end ? end + 1 : end;
		if (*end && !*p)
			goto bad;
	}
	*counts = c;
	*n = cnt;
	return 0;
bad:
	free(c);
	return lfail(err, errlen, "tasks per node '%s': expected counts like 2(x3),1", spec);
}

long psl_k8s_ordinal(const char *hostname)
{
	const char *dash, *p;
	char *end;
	long v;
	if (!hostname || !(dash = strrchr(hostname, '-')) || !dash[1])
		return -1;
	for (p = dash + 1; *p; p++)
		if (!isdigit((unsigned char)*p))
			return -1;
	errno = 0;
	v = strtol(dash + 1, &end, 10);
	return errno ? -1 : v;
}

/* ---------------------------------------------------------- host files -- */

static int parse_roles(const char *v, unsigned *roles)
{
	char buf[128], *save = NULL, *tok;
	snprintf(buf, sizeof(buf), "%s", v);
	*roles = 0;
	for (tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		if (!strcmp(tok, "scheduler"))
			*roles |= 1u << PSL_LAUNCH_SCHEDULER;
		else if (!strcmp(tok, "server"))
			*roles |= 1u << PSL_LAUNCH_SERVER;
		else if (!strcmp(tok, "worker"))
			*roles |= 1u << PSL_LAUNCH_WORKER;
		else
			return -1;
	}
	return *roles ? 0 : -1;
}

int psl_hostfile_line(const char *line, struct psl_host *h, char *err, size_t errlen)
{
	char buf[1024], *save = NULL, *tok;
	char *hash;

	if (strlen(line) >= sizeof(buf))
		return lfail(err, errlen, "line too long");
	snprintf(buf, sizeof(buf), "%s", line);
	if ((hash = strchr(buf, '#')))
		*hash = 0;
	memset(h, 0, sizeof(*h));
	h->slots = 1;
	h->roles = 7;
	tok = strtok_r(buf, " \t\r", &save);
	if (!tok)
		return 1;
	if (strchr(tok, '=') || strlen(tok) >= sizeof(h->name) || *tok == '-')
		return lfail(err, errlen, "'%s' is not a host name; expected HOST [slots=N] "
					 "[roles=scheduler,server,worker] [addr=IP] [interface=NAME]",
			    tok);
	snprintf(h->name, sizeof(h->name), "%s", tok);
	while ((tok = strtok_r(NULL, " \t\r", &save))) {
		char *eq = strchr(tok, '='), *end;
		const char *v = eq ? eq + 1 : "";
		if (eq)
			*eq = 0;
		if (eq && !strcmp(tok, "slots")) {
			errno = 0;
			h->slots = strtol(v, &end, 10);
			if (errno || end == v || *end || h->slots < 1 || h->slots > 100000)
				return lfail(err, errlen, "slots=%s: expected an integer from 1 to 100000",
					    v);
		} else if (eq && !strcmp(tok, "roles")) {
			if (parse_roles(v, &h->roles))
				return lfail(err, errlen,
					    "roles=%s: expected a comma list of scheduler, server, "
					    "worker",
					    v);
		} else if (eq && !strcmp(tok, "addr") && *v && strlen(v) < sizeof(h->addr)) {
			snprintf(h->addr, sizeof(h->addr), "%s", v);
		} else if (eq && !strcmp(tok, "interface") && *v && strlen(v) < sizeof(h->iface)) {
			snprintf(h->iface, sizeof(h->iface), "%s", v);
		} else {
			return lfail(err, errlen,
				    "'%s%s%s': expected slots=N, roles=LIST, addr=IP or "
				    "interface=NAME",
				    tok, eq ? "=" : "", v);
		}
	}
	return 0;
}

int psl_hostfile_read(const char *path, struct psl_host **hosts, size_t *n, char *err,
		      size_t errlen)
{
	FILE *f = fopen(path, "r");
	char *line = NULL, msg[512];
	size_t cap = 0, count = 0, alloc = 0;
	ssize_t len;
	long lineno = 0;
	struct psl_host *v = NULL, h;

	*hosts = NULL;
	*n = 0;
	if (!f)
		return lfail(err, errlen, "cannot read the host file %s: %s", path, strerror(errno));
	while ((len = getline(&line, &cap, f)) >= 0) {
		int rc;
		lineno++;
		if (len && line[len - 1] == '\n')
			line[len - 1] = 0;
		rc = psl_hostfile_line(line, &h, msg, sizeof(msg));
		if (rc < 0) {
			lfail(err, errlen, "%s:%ld: %s", path, lineno, msg);
			goto out;
		}
		if (rc)
			continue;
		if (count == alloc) {
			struct psl_host *nv;
			alloc = alloc ? 2 * alloc : 8;
			nv = realloc(v, alloc * sizeof(*v));
			if (!nv) {
				lfail(err, errlen, "out of memory");
				goto out;
			}
			v = nv;
		}
		v[count++] = h;
	}
	if (!count) {
		lfail(err, errlen, "the host file %s names no host: write one host a line", path);
		goto out;
	}
	free(line);
	fclose(f);
	*hosts = v;
	*n = count;
	return 0;
out:
	free(line);
	free(v);
	fclose(f);
	return -1;
}

int psl_hostfile_place(struct psl_host *hosts, size_t n, long S, long W, size_t *where, char *err,
		       size_t errlen)
{
	size_t cur = 0, i, k;
	long total = 1 + S + W, p, slots = 0;

	for (i = 0; i < n; i++) {
		hosts[i].used = 0;
		slots += hosts[i].slots;
	}
	if (slots < total)
		return lfail(err, errlen,
			    "too few slots: the job is %ld processes (1 scheduler, %ld servers, %ld "
			    "workers) and the host file has %ld slot%s; add hosts or slots=N",
			    total, S, W, slots, slots == 1 ? "" : "s");
	for (p = 0; p < total; p++) {
		int role = p == 0 ? PSL_LAUNCH_SCHEDULER
			   : p <= S ? PSL_LAUNCH_SERVER
				    : PSL_LAUNCH_WORKER;
		bool placed = false;
		for (k = 0; k < n && !placed; k++) {
			struct psl_host *h = &hosts[(cur + k) % n];
			if (!(h->roles & (1u << role)) || h->used >= h->slots)
				continue;
			where[p] = (cur + k) % n;
			h->used++;
			cur = (cur + k + 1) % n;
			placed = true;
		}
		if (!placed) {
			long free_slots = 0;
			for (i = 0; i < n; i++)
				if (hosts[i].roles & (1u << role))
					free_slots += hosts[i].slots;
			return lfail(err, errlen,
				    "too few slots: no free slot for %s %ld among the hosts that "
				    "take %ss (%ld slot%s); add hosts, slots=N or roles=",
				    psl_launch_role_name(role),
				    p == 0 ? 0L : p <= S ? p - 1 : p - 1 - S,
				    psl_launch_role_name(role), free_slots, free_slots == 1 ? "" : "s");
		}
	}
	return 0;
}

int psl_shell_quote(char *buf, size_t cap, const char *s)
{
	size_t len = strlen(buf), len0 = len;
	const char *p;
#define PUT(c)                                   \
	do {                                     \
		if (len + 1 >= cap) {            \
			buf[len0] = 0;           \
			return -1;               \
		}                                \
		buf[len++] = (c);                \
	} while (0)
	if (len && buf[len - 1] != ' ')
		PUT(' ');
	PUT('\'');
	for (p = s; *p; p++) {
		if (*p == '\'') {
			PUT('\'');
			PUT('\\');
			PUT('\'');
			PUT('\'');
		} else {
			PUT(*p);
		}
	}
	PUT('\'');
#undef PUT
	buf[len] = 0;
	return 0;
}

bool psl_launch_env_passed(const char *nv)
{
	static const char *const prefixes[] = {"DMLC_", "PS_", "BYTEPS_", "STEPMESH_",
					       "UCX_",  "FI_", "ZMQ_"};
	size_t i;
	for (i = 0; i < sizeof(prefixes) / sizeof(prefixes[0]); i++)
		if (!strncmp(nv, prefixes[i], strlen(prefixes[i])))
			return true;
	return false;
}
