/* ps::KVPairs (keys with their values) and ps::KVMeta (a request as a
 * server's handle sees it). */
#ifndef PS_INTERNAL_KV_PAIRS_H_
#define PS_INTERNAL_KV_PAIRS_H_

#include <cstdint>

#include "ps/base.h"
#include "ps/sarray.h"

namespace ps {

/* keys sorted ascending; lens empty (every key has vals.size() /
 * keys.size() values) or one count per key */
template <typename Val>
struct KVPairs {
	SArray<Key> keys;
	SArray<Val> vals;
	SArray<int> lens;
};

struct KVMeta {
	int cmd;	 /* the worker's cmd */
	bool push;	 /* a push (else a pull) */
	int sender;	 /* the worker's node id; with instance groups its
			    group's id, WorkerRankToID(group rank) */
	int timestamp;	 /* the worker's request */
	int customer_id; /* the worker's customer */
	Key key;	 /* echoed as they came */
	uint64_t addr;
	int val_len;
	int option;
};

} // namespace ps

#endif /* PS_INTERNAL_KV_PAIRS_H_ */
