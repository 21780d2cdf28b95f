/* ps::Key and the node group numbers (ps-lite's ps/base.h). */
#ifndef PS_BASE_H_
#define PS_BASE_H_

#include <cstdint>
#include <limits>

#include <pslite.h>

#include "ps/internal/utils.h"

namespace ps {

using Key = uint64_t;
static const Key kMaxKey = std::numeric_limits<Key>::max();
/* node groups, or-able (pslite's PSL_GROUP_*) */
static const int kScheduler = PSL_GROUP_SCHEDULER;
static const int kServerGroup = PSL_GROUP_SERVERS;
static const int kWorkerGroup = PSL_GROUP_WORKERS;

} // namespace ps

#endif /* PS_BASE_H_ */
