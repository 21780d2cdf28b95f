#include "config.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "log.h"
#include "pslite.h"

/* this thread's last failure reason (psl_last_error) */
static __thread char last_error[1024];

const char *psl_strerror(int err)
{
	if (err > 0)
		err = -err;
	switch (err) {
	case 0:
		return "success";
	case -ESHUTDOWN:
		return "pslite is not started on this node (or is finalizing)";
	case -EHOSTDOWN:
		return "the node this request needs was lost earlier";
	case -ENOLINK:
		return "this node lost the scheduler: the job cannot go on";
	case -ECONNRESET:
		return "the connection to a node was lost";
	case -ETIMEDOUT:
		return "timed out";
	case -EPROTO:
		return "protocol error: a peer sent something that does not fit this node's "
		       "view of the job (DMLC_NUM_SERVER, DMLC_NUM_WORKER, the node list) or of "
		       "the protocol; psl_last_error() and the log say which";
	case -EBADMSG:
		return "malformed message";
	case -EMSGSIZE:
		return "the pulled values do not fit the output buffer";
	case -ECONNABORTED:
		return "the job stopped: a control message could not be delivered (the log says "
		       "which, to whom and why)";
	case -ENOEXEC:
		return "not a loadable van plugin";
	}
	return strerror(-err);
}

const char *psl_last_error(void)
{
	return last_error;
}

void psl__clear_error(void)
{
	last_error[0] = 0;
}

void psl__set_error(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(last_error, sizeof(last_error), fmt, ap);
	va_end(ap);
}

int psl__ret(const char *call, int rc)
{
	if (rc < 0 && !last_error[0])
		snprintf(last_error, sizeof(last_error), "%s: %s", call, psl_strerror(rc));
	return rc;
}

int psl__fail(struct psl__ratelimit *rl, int err, int level, const char *fmt, ...)
{
	int saved = errno;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(last_error, sizeof(last_error), fmt, ap);
	va_end(ap);
	if (level <= psl__log_level) {
		if (level == PSL_LOG_WARN)
			psl__log_limited(rl, level, "%s", last_error);
		else
			psl__log(level, "%s", last_error);
	}
	errno = saved;
	return err;
}
