#include "config.h"

#define _GNU_SOURCE 1
#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "log.h"
#include "van_loader.h"

#ifndef PSL_VANDIR
#define PSL_VANDIR "/usr/local/lib/pslite"
#endif

/* The size of struct psl_van_ops in ABI 1.0: every field up to dereg_mem. */
#define OPS_SIZE_1_0 (offsetof(struct psl_van_ops, dereg_mem) + sizeof(void *))

static int add_dir(char (*dirs)[PATH_MAX], int n, int max, const char *d, size_t len)
{
	int i;
	if (n >= max || len == 0 || len >= PATH_MAX)
		return n;
	for (i = 0; i < n; i++)
		if (strlen(dirs[i]) == len && !strncmp(dirs[i], d, len))
			return n;
	memcpy(dirs[n], d, len);
	dirs[n][len] = 0;
	return n + 1;
}

int psl__van_dirs(char (*dirs)[PATH_MAX], int max)
{
	const char *env = getenv("PS_VAN_PATH");
	Dl_info info;
	int n = 0;

	if (env) {
		const char *p = env;
		while (*p) {
			const char *c = strchr(p, ':');
			size_t len = c ? (size_t)(c - p) : strlen(p);
			n = add_dir(dirs, n, max, p, len);
			p += len;
			if (*p == ':')
				p++;
		}
	}
	if (dladdr((void *)psl__van_dirs, &info) && info.dli_fname) {
		char buf[PATH_MAX];
		const char *slash = strrchr(info.dli_fname, '/');
		if (slash) {
			int k = snprintf(buf, sizeof(buf), "%.*s/pslite",
					 (int)(slash - info.dli_fname), info.dli_fname);
			if (k > 0 && k < (int)sizeof(buf))
				n = add_dir(dirs, n, max, buf, (size_t)k);
		}
	}
	n = add_dir(dirs, n, max, PSL_VANDIR, strlen(PSL_VANDIR));
	return n;
}

static const char *base_name(const char *path)
{
	const char *s = strrchr(path, '/');
	return s ? s + 1 : path;
}

/* van_<name>.so -> name */
static int name_from_file(const char *path, char *name, size_t len)
{
	const char *b = base_name(path);
	size_t bl = strlen(b);
	if (bl < 8 || strncmp(b, "van_", 4) || strcmp(b + bl - 3, ".so"))
		return -1;
	if (bl - 7 >= len)
		return -1;
	memcpy(name, b + 4, bl - 7);
	name[bl - 7] = 0;
	return 0;
}

int psl__van_open_path(const char *path, const char *expect_name, struct psl__van_lib *lib,
		       char *err, size_t errlen)
{
	char expect[64];
	psl_van_entry_fn entry;
	const struct psl_van_ops *ops;
	void *dl;
	int major;

	memset(lib, 0, sizeof(*lib));
	if (!expect_name) {
		if (name_from_file(path, expect, sizeof(expect))) {
			snprintf(err, errlen, "%s: expected a file named van_<name>.so", path);
			return -EINVAL;
		}
		expect_name = expect;
	}
	dlerror();
	dl = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (!dl) {
		const char *e = dlerror();
		snprintf(err, errlen, "%s: cannot be loaded: %s", path, e ? e : "unknown error");
		return -ENOEXEC;
	}
	*(void **)&entry = dlsym(dl, PSL_VAN_ENTRY_NAME);
	if (!entry) {
		/* tell a van built for another ABI major from something that is no van */
		for (major = 0; major < 10; major++) {
			char sym[32];
			if (major == PSL_VAN_ABI_MAJOR)
				continue;
			snprintf(sym, sizeof(sym), "psl_van_entry_v%d", major);
			if (dlsym(dl, sym)) {
				snprintf(err, errlen,
					 "%s: built for van ABI %d (exports %s), but this pslite "
					 "loads van ABI %d (%s): rebuild the van against this "
					 "pslite's pslite/van.h",
					 path, major, sym, PSL_VAN_ABI_MAJOR, PSL_VAN_ENTRY_NAME);
				dlclose(dl);
				return -EPROTO;
			}
		}
		snprintf(err, errlen,
			 "%s: does not export %s: expected a pslite van built against "
			 "pslite/van.h ABI %d",
			 path, PSL_VAN_ENTRY_NAME, PSL_VAN_ABI_MAJOR);
		dlclose(dl);
		return -ENOEXEC;
	}
	ops = entry(PSL_VAN_ABI_VERSION);
	if (!ops) {
		snprintf(err, errlen, "%s: %s(%u.%u) returned no operations table", path,
			 PSL_VAN_ENTRY_NAME, PSL_VAN_ABI_MAJOR, PSL_VAN_ABI_MINOR);
		dlclose(dl);
		return -ENOEXEC;
	}
	if (PSL_VAN_ABI_MAJOR_OF(ops->abi_version) != PSL_VAN_ABI_MAJOR) {
		snprintf(err, errlen,
			 "%s: built for van ABI %u.%u, expected ABI %u.x: rebuild the van "
			 "against this pslite's pslite/van.h",
			 path, PSL_VAN_ABI_MAJOR_OF(ops->abi_version),
			 PSL_VAN_ABI_MINOR_OF(ops->abi_version), PSL_VAN_ABI_MAJOR);
		dlclose(dl);
		return -EPROTO;
	}
	if (ops->size < OPS_SIZE_1_0) {
		snprintf(err, errlen,
			 "%s: its operations table is %u bytes, expected at least %zu (van ABI "
			 "1.0)",
			 path, ops->size, OPS_SIZE_1_0);
		dlclose(dl);
		return -EPROTO;
	}
	if (!ops->name || strcmp(ops->name, expect_name)) {
		snprintf(err, errlen,
			 "%s: the van calls itself '%s', expected '%s' (its file name is "
			 "van_%s.so)",
			 path, ops->name ? ops->name : "(null)", expect_name, expect_name);
		dlclose(dl);
		return -EPROTO;
	}
	if (!ops->init || !ops->fini || !ops->query || !ops->bind || !ops->connect ||
	    !ops->send) {
		snprintf(err, errlen,
			 "%s: missing mandatory operation%s%s%s%s%s%s (init, fini, query, bind, "
			 "connect and send are required)",
			 path, ops->init ? "" : " init", ops->fini ? "" : " fini",
			 ops->query ? "" : " query", ops->bind ? "" : " bind",
			 ops->connect ? "" : " connect", ops->send ? "" : " send");
		dlclose(dl);
		return -EPROTO;
	}
	lib->dl = dl;
	lib->ops = ops;
	snprintf(lib->path, sizeof(lib->path), "%s", path);
	return 0;
}

int psl__van_open(const char *name, struct psl__van_lib *lib, char *err, size_t errlen)
{
	char dirs[8][PATH_MAX];
	char tried[2048] = "";
	char path[PATH_MAX + 64];
	int n = psl__van_dirs(dirs, 8);
	int i;
	size_t off = 0;
	struct stat st;

	for (i = 0; i < n; i++) {
		snprintf(path, sizeof(path), "%.4000s/van_%.40s.so", dirs[i], name);
		if (stat(path, &st) == 0)
			return psl__van_open_path(path, name, lib, err, errlen);
		if (off < sizeof(tried)) {
			int k = snprintf(tried + off, sizeof(tried) - off, "%s%s", off ? ", " : "",
					 path);
			if (k > 0)
				off += (size_t)k;
		}
	}
	if (!strcmp(name, "ibverbs"))
		/* DMLC_ENABLE_RDMA=1 or ibverbs: pslite's own van, built when configure
		 * finds libibverbs and librdmacm */
		snprintf(err, errlen,
			 "van_ibverbs is not built or not installed here (configure found no "
			 "libibverbs/librdmacm, or it was built with --enable-van-ibverbs=no): "
			 "looked for %s. Install libibverbs-dev and librdmacm-dev and rebuild, or "
			 "choose another van with DMLC_ENABLE_RDMA (pslite-info lists them)",
			 tried);
	else if (!strcmp(name, "zmq") || !strcmp(name, "ucx") || !strcmp(name, "fabric"))
		snprintf(err, errlen,
			 "van '%s' not found: looked for %s. Build it (./configure "
			 "--enable-van-%s=yes, then make install), set PS_VAN_PATH to the folder "
			 "that holds van_%s.so, or choose another van with DMLC_ENABLE_RDMA (see "
			 "pslite-info)",
			 name, tried, name, name);
	else
		snprintf(err, errlen,
			 "van '%s' not found: looked for %s. pslite builds the vans zmq, ucx and "
			 "fabric; for another van set PS_VAN_PATH to the folder that holds "
			 "van_%s.so, or choose a van pslite-info lists",
			 name, tried, name);
	return -ENOENT;
}

void psl__van_close(struct psl__van_lib *lib)
{
	/* A van stays loaded once loaded (no dlclose): the libraries it
	 * brought in (UCX, libfabric, rdma-core) keep threads and state of
	 * their own that an unload would cut from under them. Under
	 * LeakSanitizer an unload also made what UCX's async thread held look
	 * leaked (ucx_tcp_server_leftover.sh failed in CI that way), and left
	 * leak reports without the van's function names. A later psl_start
	 * finds the same library. */
	memset(lib, 0, sizeof(*lib));
}
