/*
 * dmlc/base.h for ps-lite programs built on pslite: the switches of the
 * logging header (dmlc/logging.h) and nothing else.
 */
#ifndef DMLC_BASE_H_
#define DMLC_BASE_H_

/* 1: LOG(FATAL) and a failed CHECK throw dmlc::Error after logging;
 * 0: they abort the process after logging. */
#ifndef DMLC_LOG_FATAL_THROW
#define DMLC_LOG_FATAL_THROW 1
#endif

#endif /* DMLC_BASE_H_ */
