/*
 * What the C++ layer needs from pslite's C API beside the calls
 * themselves: an error's text, the value type of a Val, where an SArray's
 * memory lives, and the one-instance-per-process rule.
 */
#ifndef PS_INTERNAL_PSLITE_BRIDGE_H_
#define PS_INTERNAL_PSLITE_BRIDGE_H_

#include <pslite.h>

#include <cstdlib>
#include <cstring>
#include <string>
#include <type_traits>

#include "dmlc/logging.h"
#include "ps/sarray.h"

namespace ps {
namespace detail {

/* Why a psl_ call failed with rc: its reason if it gave one, else the
 * error's text. */
inline std::string Reason(int rc)
{
	const char *why = psl_last_error();
	return why && why[0] ? std::string(why) : std::string(psl_strerror(rc));
}

/* PS_VERBOSE, read once (ps-lite's Postoffice::verbose()). In ps/, not
 * in dmlc/logging.h: a program may take dmlc/ from elsewhere (MXNet). */
inline int Verbose()
{
	static const int level = [] {
		const char *v = std::getenv("PS_VERBOSE");
		return v ? std::atoi(v) : 0;
	}();
	return level;
}

/* Whether this process runs its whole instance group (ps-lite's model:
 * DMLC_GROUP_SIZE > 1), or is one instance of it (StepMesh's model):
 * PS_GROUP_IN_PROCESS=1 or 0 says; unset, the group runs here unless
 * STEPMESH_GPU or DMLC_NODE_RANK name one instance of it (pslite-run, which
 * starts a process per instance, sets 0). */
inline bool GroupInProcess()
{
	const char *g = std::getenv("DMLC_GROUP_SIZE"), *in = std::getenv("PS_GROUP_IN_PROCESS");
	if (!g || std::atoi(g) <= 1)
		return false;
	if (in && *in) {
		CHECK(!std::strcmp(in, "0") || !std::strcmp(in, "1"))
			<< "PS_GROUP_IN_PROCESS=" << in << ": expected 1 (run the whole "
			<< "DMLC_GROUP_SIZE group in this process) or 0 (this process is one "
			<< "instance of it)";
		return in[0] == '1';
	}
	return !std::getenv("STEPMESH_GPU") && !std::getenv("DMLC_NODE_RANK");
}

/* A process of one instance (StepMesh's launch model) has that instance at
 * index 0 of ps-lite's instance groups. */
inline void CheckInstance(const char *what, int instance_idx)
{
	CHECK(instance_idx == 0)
		<< what << " for instance " << instance_idx
		<< ": pslite runs one instance per process; set DMLC_GROUP_SIZE=1, or start "
		<< "one process per instance (DMLC_GROUP_SIZE processes with the same "
		<< "role, as StepMesh does) and use instance 0 in each, or run the whole "
		<< "group in this process (DMLC_GROUP_SIZE > 1 with PS_GROUP_IN_PROCESS=1)";
}

/* The wire's value type of Val: its number type, plain char as bytes
 * (ps-lite's OTHER). */
template <typename Val>
inline psl_dtype DType()
{
	using V = typename std::remove_cv<Val>::type;
	static_assert(std::is_arithmetic<V>::value && sizeof(V) <= 8,
		      "pslite's KVWorker and KVServer take number types (char, int8_t ... "
		      "uint64_t, float, double) as Val");
	if (std::is_same<V, char>::value)
		return PSL_BYTES;
	if (std::is_floating_point<V>::value)
		return sizeof(V) == 4 ? PSL_FLOAT32 : PSL_FLOAT64;
	static const psl_dtype s[] = {PSL_INT8, PSL_INT16, PSL_INT32, PSL_INT64};
	static const psl_dtype u[] = {PSL_UINT8, PSL_UINT16, PSL_UINT32, PSL_UINT64};
	int i = sizeof(V) == 1 ? 0 : sizeof(V) == 2 ? 1 : sizeof(V) == 4 ? 2 : 3;
	return std::is_signed<V>::value ? s[i] : u[i];
}

inline psl_mem_type Mem(DeviceType t) { return t == GPU ? PSL_MEM_CUDA : PSL_MEM_HOST; }
inline int Dev(DeviceType t, int id) { return t == GPU ? id : 0; }

/* Selects the node of a joint process (a server and a worker) that the
 * calling thread's node queries describe. */
inline void UseRole(psl_role role)
{
	if (psl_my_role() == PSL_JOINT && (role == PSL_SERVER || role == PSL_WORKER))
		psl_use_role(role);
}

} // namespace detail
} // namespace ps

#endif /* PS_INTERNAL_PSLITE_BRIDGE_H_ */
