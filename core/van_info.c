/* psl_van_probe: what pslite-info shows about every van it can find. */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "pslite.h"
#include "van_loader.h"

static void probe_vlog(void *ctx, int level, const char *van, const char *fmt, va_list ap)
{
	(void)ctx;
	if (level <= PSL_LOG_WARN && level <= psl__log_level)
		psl__vlog(level, van, fmt, ap);
}

static const char *probe_param(void *ctx, const char *name)
{
	(void)ctx;
	return getenv(name);
}

static void probe_recv(void *ctx, struct psl_van_rmsg *msg)
{
	(void)ctx;
	msg->release(msg);
}

static void probe_send_done(void *ctx, void *cookie, int status)
{
	(void)ctx;
	(void)cookie;
	(void)status;
}

static void probe_peer_event(void *ctx, int32_t id, int ev, int err, const char *detail)
{
	(void)ctx;
	(void)id;
	(void)ev;
	(void)err;
	(void)detail;
}

static void probe_one(const char *path, const char *name, bool shadowed, psl_van_info_cb cb,
		      void *arg)
{
	struct psl_van_host host = {
		.abi_version = PSL_VAN_ABI_VERSION,
		.size = sizeof(host),
		.log_level = PSL_LOG_WARN,
		.vlog = probe_vlog,
		.param = probe_param,
		.recv = probe_recv,
		.send_done = probe_send_done,
		.peer_event = probe_peer_event,
	};
	struct psl__van_lib lib;
	struct psl_van_info info;
	struct psl_van_caps caps;
	struct psl_van *van = NULL;
	char err[1024] = "";
	int rc;

	memset(&info, 0, sizeof(info));
	memset(&caps, 0, sizeof(caps));
	caps.size = sizeof(caps);
	info.name = name;
	info.path = path;
	info.shadowed = shadowed;
	info.version = "";
	info.description = "";
	info.transports = "";
	rc = psl__van_open_path(path, name, &lib, err, sizeof(err));
	if (!rc) {
		info.version = lib.ops->version ? lib.ops->version : "";
		info.description = lib.ops->description ? lib.ops->description : "";
		info.abi_major = PSL_VAN_ABI_MAJOR_OF(lib.ops->abi_version);
		info.abi_minor = PSL_VAN_ABI_MINOR_OF(lib.ops->abi_version);
		rc = lib.ops->init(&host, &van);
		if (rc == -ENODEV)
			snprintf(err, sizeof(err), "no device this van can use on this machine");
		else if (rc)
			snprintf(err, sizeof(err), "init failed: %s", psl_strerror(rc));
		else {
			lib.ops->query(van, &caps);
			info.caps = caps.flags;
			info.max_msg_size = caps.max_msg_size;
			info.transports = caps.transports;
		}
	}
	info.status = rc;
	info.error = err;
	cb(&info, arg);
	if (van)
		lib.ops->fini(van);
	if (!rc || lib.dl)
		psl__van_close(&lib);
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

int psl_van_probe(psl_van_info_cb cb, void *arg)
{
	char dirs[8][PATH_MAX];
	char seen[64][64];
	int nseen = 0, found = 0, n, i, j;

	if (!cb)
		return -EINVAL;
	n = psl__van_dirs(dirs, 8);
	for (i = 0; i < n; i++) {
		DIR *d = opendir(dirs[i]);
		struct dirent *e;
		char *names[256];
		int nn = 0;
		if (!d)
			continue;
		while ((e = readdir(d)) && nn < 256) {
			size_t l = strlen(e->d_name);
			if (l > 7 && !strncmp(e->d_name, "van_", 4) &&
			    !strcmp(e->d_name + l - 3, ".so") && (names[nn] = strdup(e->d_name)))
				nn++;
		}
		closedir(d);
		qsort(names, (size_t)nn, sizeof(char *), cmp_str);
		for (j = 0; j < nn; j++) {
			char path[PATH_MAX + 300], name[64];
			size_t l = strlen(names[j]);
			bool shadowed = false;
			int k;
			if (l - 7 >= sizeof(name)) {
				free(names[j]);
				continue;
			}
			memcpy(name, names[j] + 4, l - 7);
			name[l - 7] = 0;
			for (k = 0; k < nseen; k++)
				if (!strcmp(seen[k], name))
					shadowed = true;
			if (!shadowed && nseen < 64)
				snprintf(seen[nseen++], sizeof(seen[0]), "%s", name);
			snprintf(path, sizeof(path), "%.4000s/%.255s", dirs[i], names[j]);
			probe_one(path, name, shadowed, cb, arg);
			found++;
			free(names[j]);
		}
	}
	return found;
}

const char *psl_van_search_path(void)
{
	static char buf[8 * (PATH_MAX + 1)];
	char dirs[8][PATH_MAX];
	int n = psl__van_dirs(dirs, 8), i;
	size_t off = 0;
	buf[0] = 0;
	for (i = 0; i < n && off < sizeof(buf); i++) {
		int k = snprintf(buf + off, sizeof(buf) - off, "%s%s", i ? ":" : "", dirs[i]);
		if (k > 0)
			off += (size_t)k;
	}
	return buf;
}
