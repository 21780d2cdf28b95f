/*
 * ps-lite's key-value API on pslite: KVPairs, KVMeta, KVWorker<Val> (push,
 * pull and push-pull of sorted keys, zero-copy forms on SArrays, callbacks,
 * Wait, custom slicers) and KVServer<Val> (a request handle answering with
 * Response, registered receive buffers, KVServerDefaultHandle).
 */
#ifndef PS_KV_APP_H_
#define PS_KV_APP_H_

#include "ps/base.h"
#include "ps/internal/kv_pairs.h"
#include "ps/internal/kv_server.h"
#include "ps/internal/kv_worker.h"
#include "ps/simple_app.h"

#endif /* PS_KV_APP_H_ */
