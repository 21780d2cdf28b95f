/*
 * What ps-lite programs use of ps-lite's message types: the value types
 * (DataType, GetDataType) and Node with its roles. The messages themselves
 * (Meta, Message, Control) are pslite's business and not part of this API.
 */
#ifndef PS_INTERNAL_MESSAGE_H_
#define PS_INTERNAL_MESSAGE_H_

#include <cstdint>
#include <limits>
#include <sstream>
#include <string>
#include <type_traits>

#include "ps/sarray.h"

namespace ps {

enum DataType { CHAR, INT8, INT16, INT32, INT64, UINT8, UINT16, UINT32, UINT64, FLOAT, DOUBLE, OTHER };

static const char *const DataTypeName[] = {"CHAR",   "INT8",   "INT16",  "INT32",
					   "INT64",  "UINT8",  "UINT16", "UINT32",
					   "UINT64", "FLOAT",  "DOUBLE", "OTHER"};

template <typename V, typename W>
inline bool SameType()
{
	return std::is_same<typename std::remove_cv<V>::type, W>::value;
}

template <typename V>
DataType GetDataType()
{
	return SameType<V, int8_t>()	 ? INT8
	       : SameType<V, int16_t>()	 ? INT16
	       : SameType<V, int32_t>()	 ? INT32
	       : SameType<V, int64_t>()	 ? INT64
	       : SameType<V, uint8_t>()	 ? UINT8
	       : SameType<V, uint16_t>() ? UINT16
	       : SameType<V, uint32_t>() ? UINT32
	       : SameType<V, uint64_t>() ? UINT64
	       : SameType<V, float>()	 ? FLOAT
	       : SameType<V, double>()	 ? DOUBLE
					 : OTHER;
}

/* (a template only so that kEmpty can be defined in a header) */
template <typename Unused = void>
struct NodeConstants {
	static const int kEmpty;
};
template <typename Unused>
const int NodeConstants<Unused>::kEmpty = std::numeric_limits<int>::max();

/* A node of the job as ps-lite describes it. */
struct Node : NodeConstants<> {
	enum Role { SERVER, WORKER, SCHEDULER, JOINT };

	Node() : role(SCHEDULER), id(kEmpty), customer_id(0), port(kEmpty), is_recovery(false) {}

	std::string DebugString() const
	{
		std::stringstream ss;
		ss << "[role=" << RoleName() << (id != kEmpty ? ", id=" + std::to_string(id) : "")
		   << ", ip=" << hostname << ", port=" << port << ", is_recovery=" << is_recovery
		   << "]";
		return ss.str();
	}
	std::string ShortDebugString() const
	{
		std::string s = role == SERVER ? "S" : role == WORKER ? "W" : "H";
		if (id != kEmpty)
			s += "[" + std::to_string(id) + "]";
		return s;
	}

	Role role;
	int id;
	int customer_id;
	std::string hostname;
	int port;
	bool is_recovery;

private:
	const char *RoleName() const
	{
		return role == SERVER ? "server" : role == WORKER ? "worker" : "scheduler";
	}
};

} // namespace ps

#endif /* PS_INTERNAL_MESSAGE_H_ */
