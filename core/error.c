#include "config.h"

#include <errno.h>
#include <string.h>

#include "pslite.h"

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
		return "protocol error: a peer sent something inconsistent, or speaks another van";
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
