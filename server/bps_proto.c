/*
 * The BytePS protocol facts that a worker and the server share: how cmd packs
 * the request type and the data type, and the data types' sizes.
 *
 * BytePS (byteps/common/common.cc GetCommandType, byteps/server/server.h
 * DepairDataHandleType) packs them with the Cantor pairing function:
 * cmd = (r + d)(r + d + 1) / 2 + d.
 */
#include "config.h"

#include <errno.h>
#include <limits.h>

#include "pslite/server.h"

int psl_byteps_cmd(int request_type, int dtype)
{
	long long s;
	if (request_type < 0 || dtype < 0 || request_type > 0xffff || dtype > 0xffff)
		return -EINVAL;
	s = (long long)request_type + dtype;
	s = s * (s + 1) / 2 + dtype;
	return s > INT_MAX ? -EINVAL : (int)s;
}

int psl_byteps_cmd_parse(int cmd, int *request_type, int *dtype)
{
	long long w = 0, step;
	if (cmd < 0)
		return -EINVAL;
	/* the largest w with w(w+1)/2 <= cmd, by binary search on integers */
	for (step = 1LL << 16; step; step >>= 1)
		if ((w + step) * (w + step + 1) / 2 <= cmd)
			w += step;
	if (dtype)
		*dtype = (int)(cmd - w * (w + 1) / 2);
	if (request_type)
		*request_type = (int)(w - (cmd - w * (w + 1) / 2));
	return 0;
}

size_t psl_byteps_dtype_size(int dtype)
{
	switch (dtype) {
	case PSL_BYTEPS_FLOAT32:
	case PSL_BYTEPS_INT32:
		return 4;
	case PSL_BYTEPS_FLOAT64:
	case PSL_BYTEPS_INT64:
		return 8;
	case PSL_BYTEPS_FLOAT16:
	case PSL_BYTEPS_BFLOAT16:
		return 2;
	case PSL_BYTEPS_UINT8:
	case PSL_BYTEPS_INT8:
		return 1;
	default:
		return 0;
	}
}

const char *psl_byteps_dtype_name(int dtype)
{
	switch (dtype) {
	case PSL_BYTEPS_FLOAT32:
		return "float32";
	case PSL_BYTEPS_FLOAT64:
		return "float64";
	case PSL_BYTEPS_FLOAT16:
		return "float16";
	case PSL_BYTEPS_UINT8:
		return "uint8";
	case PSL_BYTEPS_INT32:
		return "int32";
	case PSL_BYTEPS_INT8:
		return "int8";
	case PSL_BYTEPS_INT64:
		return "int64";
	case PSL_BYTEPS_BFLOAT16:
		return "bfloat16";
	default:
		return "unknown";
	}
}
