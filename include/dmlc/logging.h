/*
 * ps-lite's logging and check macros (LOG, CHECK*, DCHECK*, LOG_IF, VLOG)
 * for programs built on pslite. Every line goes to pslite's log through
 * psl_log, so a program's lines and pslite's own come out in one format
 * and one stream: "[pslite 12:00:00.000 worker 0] INFO: file.cc:42: text".
 *
 * LOG(FATAL) and a failed CHECK log an ERROR line and then throw
 * dmlc::Error (DMLC_LOG_FATAL_THROW 1, the default) or abort (0); uncaught,
 * the throw ends the process with SIGABRT, as with dmlc-core. What a failed
 * check says follows dmlc-core: "Check failed: x " then the streamed text;
 * the comparisons (CHECK_EQ, _NE, _LT, _LE, _GT, _GE) name both operands and
 * their values, "Check failed: a == b (3 vs. 4) text". Each operand is
 * evaluated once; one that cannot be written to a stream prints as
 * "(unprintable)" instead of failing to compile.
 */
#ifndef DMLC_LOGGING_H_
#define DMLC_LOGGING_H_

#include <pslite.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <ostream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>

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
	/* (dmlc's form, file and line: an INFO line) */
	LogMessage(const char *file, int line) : LogMessage(file, line, PSL_LOG_LEVEL_INFO) {}
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

/* The comparison checks' parts: whether a value can be written to an
 * ostream, how it is written, and the comparisons themselves. */
namespace check_detail {

template <typename T, typename = void>
struct Printable : std::false_type {};
template <typename T>
struct Printable<T, decltype(void(std::declval<std::ostream &>() << std::declval<const T &>()))>
	: std::true_type {};

template <typename T>
inline typename std::enable_if<Printable<T>::value>::type Print(std::ostream &os, const T &v)
{
	os << v;
}
/* an enum class: its number */
template <typename T>
inline typename std::enable_if<!Printable<T>::value && std::is_enum<T>::value>::type
Print(std::ostream &os, const T &v)
{
	os << static_cast<typename std::underlying_type<T>::type>(v);
}
template <typename T>
inline typename std::enable_if<!Printable<T>::value && !std::is_enum<T>::value>::type
Print(std::ostream &os, const T &)
{
	os << "(unprintable)";
}
inline void Print(std::ostream &os, std::nullptr_t) { os << "nullptr"; }

/* nullptr if the check holds, else " (x vs. y) " for the message */
template <typename X, typename Y>
inline std::unique_ptr<std::string> Failed(const X &x, const Y &y)
{
	std::ostringstream os;
	os << " (";
	Print(os, x);
	os << " vs. ";
	Print(os, y);
	os << ") ";
	return std::unique_ptr<std::string>(new std::string(os.str()));
}

/* A pointer against an integer (CHECK_EQ(p, NULL), CHECK_NE(p, 0)): the
 * integer as an address, as the comparison written out would take it. */
template <typename X, typename Y>
struct PointerVsInteger
	: std::integral_constant<bool, (std::is_pointer<X>::value && std::is_integral<Y>::value) ||
					       (std::is_integral<X>::value && std::is_pointer<Y>::value)> {};
template <typename T>
inline typename std::enable_if<!std::is_integral<T>::value, const T &>::type Operand(const T &v)
{
	return v;
}
template <typename T>
inline typename std::enable_if<std::is_integral<T>::value, const void *>::type Operand(const T &v)
{
	return reinterpret_cast<const void *>(static_cast<std::uintptr_t>(v));
}

/* (-Wsign-compare off: CHECK_EQ(v.size(), n) with an int n compares as
 * the expression written out would, without a warning inside this header) */
#if defined(__GNUC__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wsign-compare"
#endif
#define PSL_DMLC_CHECK_OP(name, op)                                                           \
	template <typename X, typename Y>                                                     \
	inline typename std::enable_if<!PointerVsInteger<X, Y>::value,                        \
				       std::unique_ptr<std::string>>::type                     \
	name(const X &x, const Y &y)                                                          \
	{                                                                                     \
		if (x op y)                                                                   \
			return nullptr;                                                       \
		return Failed(x, y);                                                          \
	}                                                                                     \
	template <typename X, typename Y>                                                     \
	inline typename std::enable_if<PointerVsInteger<X, Y>::value,                         \
				       std::unique_ptr<std::string>>::type                     \
	name(const X &x, const Y &y)                                                          \
	{                                                                                     \
		if (Operand(x) op Operand(y))                                                 \
			return nullptr;                                                       \
		return Failed(x, y);                                                          \
	}
PSL_DMLC_CHECK_OP(EQ, ==)
PSL_DMLC_CHECK_OP(NE, !=)
PSL_DMLC_CHECK_OP(LT, <)
PSL_DMLC_CHECK_OP(LE, <=)
PSL_DMLC_CHECK_OP(GT, >)
PSL_DMLC_CHECK_OP(GE, >=)
#undef PSL_DMLC_CHECK_OP
#if defined(__GNUC__)
#pragma GCC diagnostic pop
#endif

} // namespace check_detail

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
			      << "Check failed: " #x << ' '
/* x op y, each evaluated once; the loop body runs at most once (it throws
 * or aborts), and a while, unlike an if, leaves an else after the macro to
 * the caller's if. */
#define PSL_DMLC_CHECK_BINARY(name, op, x, y)                                        \
	while (::std::unique_ptr<::std::string> psl_check_failed_ =                  \
		       ::dmlc::check_detail::name((x), (y)))                          \
	::dmlc::LogMessageFatal(__FILE__, __LINE__).stream()                           \
		<< "Check failed: " #x " " #op " " #y << *psl_check_failed_
#define CHECK_EQ(x, y) PSL_DMLC_CHECK_BINARY(EQ, ==, x, y)
#define CHECK_NE(x, y) PSL_DMLC_CHECK_BINARY(NE, !=, x, y)
#define CHECK_LT(x, y) PSL_DMLC_CHECK_BINARY(LT, <, x, y)
#define CHECK_LE(x, y) PSL_DMLC_CHECK_BINARY(LE, <=, x, y)
#define CHECK_GT(x, y) PSL_DMLC_CHECK_BINARY(GT, >, x, y)
#define CHECK_GE(x, y) PSL_DMLC_CHECK_BINARY(GE, >=, x, y)
#define CHECK_NOTNULL(x) ::dmlc::CheckNotNull(__FILE__, __LINE__, #x, (x))

/* The D forms: checked without NDEBUG, compiled but never run with it
 * (their operands are not evaluated). LOG_DFATAL / DFATAL: FATAL, or
 * ERROR with NDEBUG. */
#ifdef NDEBUG
#define PSL_DMLC_DEBUG_ONLY while (false)
#define DLOG(severity) true ? (void)0 : ::dmlc::LogMessageVoidify() & LOG(severity)
#define DLOG_IF(severity, condition) \
	(true || !(condition)) ? (void)0 : ::dmlc::LogMessageVoidify() & LOG(severity)
#define LOG_DFATAL LOG_ERROR
#define DFATAL ERROR
#else
#define PSL_DMLC_DEBUG_ONLY
#define DLOG(severity) LOG(severity)
#define DLOG_IF(severity, condition) LOG_IF(severity, condition)
#define LOG_DFATAL LOG_FATAL
#define DFATAL FATAL
#endif
#define DCHECK(x) PSL_DMLC_DEBUG_ONLY CHECK(x)
#define DCHECK_EQ(x, y) PSL_DMLC_DEBUG_ONLY CHECK_EQ(x, y)
#define DCHECK_NE(x, y) PSL_DMLC_DEBUG_ONLY CHECK_NE(x, y)
#define DCHECK_LT(x, y) PSL_DMLC_DEBUG_ONLY CHECK_LT(x, y)
#define DCHECK_LE(x, y) PSL_DMLC_DEBUG_ONLY CHECK_LE(x, y)
#define DCHECK_GT(x, y) PSL_DMLC_DEBUG_ONLY CHECK_GT(x, y)
#define DCHECK_GE(x, y) PSL_DMLC_DEBUG_ONLY CHECK_GE(x, y)

#endif /* DMLC_LOGGING_H_ */
