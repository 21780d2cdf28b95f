/* Small helpers ps-lite programs use: GetEnv, LL, DISALLOW_COPY_AND_ASSIGN. */
#ifndef PS_INTERNAL_UTILS_H_
#define PS_INTERNAL_UTILS_H_

#include <cinttypes>
#include <cstdlib>

#include "dmlc/logging.h"
#include "ps/internal/env.h"

namespace ps {

/* The setting key as a V built from its text, or default_val if unset. */
template <typename V>
inline V GetEnv(const char *key, V default_val)
{
	const char *val = Environment::Get()->find(key);
	return val ? V(val) : default_val;
}

inline int GetEnv(const char *key, int default_val)
{
	const char *val = Environment::Get()->find(key);
	return val ? std::atoi(val) : default_val;
}

#ifndef DISALLOW_COPY_AND_ASSIGN
#define DISALLOW_COPY_AND_ASSIGN(TypeName) \
	TypeName(const TypeName &);        \
	void operator=(const TypeName &)
#endif

/* ps-lite's shorthand for an always-shown line */
#define LL LOG(ERROR)

} // namespace ps

#endif /* PS_INTERNAL_UTILS_H_ */
