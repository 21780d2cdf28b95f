/*
 * dmlc/base.h for ps-lite programs built on pslite: the switches of the
 * logging header (dmlc/logging.h), the feature macros ps-lite's copy of
 * dmlc's base.h defines that a program may test, and dmlc::BeginPtr.
 */
#ifndef DMLC_BASE_H_
#define DMLC_BASE_H_

#include <string>
#include <vector>

/* 1: LOG(FATAL) and a failed CHECK throw dmlc::Error after logging;
 * 0: they abort the process after logging. */
#ifndef DMLC_LOG_FATAL_THROW
#define DMLC_LOG_FATAL_THROW 1
#endif

/* What this dmlc/ is: C++11 or later, no glog (pslite's log), no stack
 * trace in a fatal line, none of dmlc-core's I/O back ends. */
#ifndef DMLC_USE_CXX11
#define DMLC_USE_CXX11 1
#endif
#ifndef DMLC_USE_GLOG
#define DMLC_USE_GLOG 0
#endif
#ifndef DMLC_LOG_STACK_TRACE
#define DMLC_LOG_STACK_TRACE 0
#endif
#ifndef DMLC_USE_HDFS
#define DMLC_USE_HDFS 0
#endif
#ifndef DMLC_USE_S3
#define DMLC_USE_S3 0
#endif

namespace dmlc {

/* The address of the first element, or nullptr when there is none. */
template <typename T>
inline T *BeginPtr(std::vector<T> &v)
{
	return v.empty() ? nullptr : v.data();
}
template <typename T>
inline const T *BeginPtr(const std::vector<T> &v)
{
	return v.empty() ? nullptr : v.data();
}
inline char *BeginPtr(std::string &s) { return s.empty() ? nullptr : &s[0]; }
inline const char *BeginPtr(const std::string &s) { return s.empty() ? nullptr : s.data(); }

} // namespace dmlc

#endif /* DMLC_BASE_H_ */
