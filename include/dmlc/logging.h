/*
 * ps-lite's logging and check macros (LOG, CHECK*, DCHECK*, LOG_IF, VLOG)
 * for programs built on pslite. Every line goes to pslite's log through
 * psl_log, so a program's lines and pslite's own come out in one format
 * and one stream: "[pslite 12:00:00.000 worker 0] INFO: file.cc:42: text".
 *
 * LOG(FATAL) and a failed CHECK log an ERROR line and then throw
 * dmlc::Error (DMLC_LOG_FATAL_THROW 1, the default) or abort (0).
 */
#ifndef DMLC_LOGGING_H_
#define DMLC_LOGGING_H_

#include <pslite.h>

#include <cstdlib>
#include <cstring>
#include <sstream>
#include <stdexcept>
#include <string>

#include "dmlc/base.h"

namespace dmlc {

/* What LOG(FATAL) and a failed CHECK throw. */
struct Error : public std::runtime_error {
	explicit Error(const std::string &s) : std::runtime_error(s) {}
};

/* ps-lite programs call it with argv[0]; pslite's log needs nothing. */
inline void InitLogging(const char *argv0) { (void)argv0; }

/* PS_VERBOSE, read once: what VLOG(n) and PS_VLOG(n) compare n with. */
inline int VerboseLevel()
{
	static const int level = [] {
		const char *v = std::getenv("PS_VERBOSE");
		return v ? std::atoi(v) : 0;
	}();
	return level;
}

/* One log line: collects what is streamed into it, writes it when the
 * statement ends. */
class LogMessage {
public:
	LogMessage(const char *file, int line, psl_log_level level) : level_(level)
	{
		const char *base = std::strrchr(file, '/');
		stream_ << (base ? base + 1 : file) << ":" << line << ": ";
	}
	~LogMessage() { psl_log(level_, stream_.str().c_str()); }
	std::ostringstream &stream() { return stream_; }

	LogMessage(const LogMessage &) = delete;
	LogMessage &operator=(const LogMessage &) = delete;

private:
	psl_log_level level_;
	std::ostringstream stream_;
};

/* LOG(FATAL): the line, then dmlc::Error (or abort). */
class LogMessageFatal {
public:
	LogMessageFatal(const char *file, int line)
	{
		const char *base = std::strrchr(file, '/');
		stream_ << (base ? base + 1 : file) << ":" << line << ": ";
	}
	~LogMessageFatal() noexcept(false)
	{
		std::string text = stream_.str();
		psl_log(PSL_LOG_LEVEL_ERROR, text.c_str());
#if DMLC_LOG_FATAL_THROW
		throw Error(text);
#else
		std::abort();
#endif
	}
	std::ostringstream &stream() { return stream_; }

	LogMessageFatal(const LogMessageFatal &) = delete;
	LogMessageFatal &operator=(const LogMessageFatal &) = delete;

private:
	std::ostringstream stream_;
};

/* Turns "stream << ..." into void, so that a macro can be one expression
 * (cond ? (void)0 : Voidify() & stream << ...) with no dangling else. */
class LogMessageVoidify {
public:
	void operator&(std::ostream &) {}
};

template <typename T>
inline T CheckNotNull(const char *file, int line, const char *what, T ptr)
{
	if (ptr == nullptr)
		LogMessageFatal(file, line).stream() << "Check notnull: " << what;
	return ptr;
}

} // namespace dmlc

#define LOG_INFO ::dmlc::LogMessage(__FILE__, __LINE__, PSL_LOG_LEVEL_INFO)
#define LOG_WARNING ::dmlc::LogMessage(__FILE__, __LINE__, PSL_LOG_LEVEL_WARN)
#define LOG_ERROR ::dmlc::LogMessage(__FILE__, __LINE__, PSL_LOG_LEVEL_ERROR)
#define LOG_FATAL ::dmlc::LogMessageFatal(__FILE__, __LINE__)
#define LOG_QFATAL LOG_FATAL
#define LOG(severity) LOG_##severity.stream()
#define LG LOG_INFO.stream()
#define LOG_IF(severity, condition) \
	!(condition) ? (void)0 : ::dmlc::LogMessageVoidify() & LOG(severity)
#define LOG_EVERY_N(severity, n) LOG(severity)
#define VLOG(x) LOG_IF(INFO, (x) <= ::dmlc::VerboseLevel())

#define CHECK(x)                                                        \
	(x) ? (void)0                                                   \
	    : ::dmlc::LogMessageVoidify() &                             \
		      ::dmlc::LogMessageFatal(__FILE__, __LINE__).stream() \
			      << "Check failed: " #x << ": "
#define CHECK_LT(x, y) CHECK((x) < (y))
#define CHECK_GT(x, y) CHECK((x) > (y))
#define CHECK_LE(x, y) CHECK((x) <= (y))
#define CHECK_GE(x, y) CHECK((x) >= (y))
#define CHECK_EQ(x, y) CHECK((x) == (y))
#define CHECK_NE(x, y) CHECK((x) != (y))
#define CHECK_NOTNULL(x) ::dmlc::CheckNotNull(__FILE__, __LINE__, #x, (x))

#ifdef NDEBUG
#define DCHECK(x) \
	while (false) \
	CHECK(x)
#define DLOG(severity) true ? (void)0 : ::dmlc::LogMessageVoidify() & LOG(severity)
#define DLOG_IF(severity, condition) \
	(true || !(condition)) ? (void)0 : ::dmlc::LogMessageVoidify() & LOG(severity)
#else
#define DCHECK(x) CHECK(x)
#define DLOG(severity) LOG(severity)
#define DLOG_IF(severity, condition) LOG_IF(severity, condition)
#endif
#define DCHECK_LT(x, y) DCHECK((x) < (y))
#define DCHECK_GT(x, y) DCHECK((x) > (y))
#define DCHECK_LE(x, y) DCHECK((x) <= (y))
#define DCHECK_GE(x, y) DCHECK((x) >= (y))
#define DCHECK_EQ(x, y) DCHECK((x) == (y))
#define DCHECK_NE(x, y) DCHECK((x) != (y))

#endif /* DMLC_LOGGING_H_ */
