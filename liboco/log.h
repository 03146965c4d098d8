/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * log.h -- liboco's internal logging (UCX LoggingStyle: lowercase, exact
 * cause, "node %u", syscall text included). The level comes from LOCO_LOG
 * (error, warn, info, debug; default warn), the time in front of each line
 * from LOCO_LOG_TIME (mono: seconds since the library was loaded, the
 * default; wall: UTC; none), both read once per process. Thread-safe.
 */
#ifndef LOCO_LC_LOG_H
#define LOCO_LC_LOG_H

enum lc_log_level {
	LC_LOG_ERROR = 0,
	LC_LOG_WARN,
	LC_LOG_INFO,
	LC_LOG_DEBUG,
};

/* lc_log_enabled -- whether messages at @level are printed. */
int lc_log_enabled(enum lc_log_level level);

/* lc_log -- print one line "loco[pid] 12.345678 level: message" to stderr. */
void lc_log(enum lc_log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#define lc_log_err(...)   lc_log(LC_LOG_ERROR, __VA_ARGS__)
#define lc_log_warn(...)  lc_log(LC_LOG_WARN, __VA_ARGS__)
#define lc_log_info(...)  lc_log(LC_LOG_INFO, __VA_ARGS__)
#define lc_log_debug(...) lc_log(LC_LOG_DEBUG, __VA_ARGS__)

#endif /* LOCO_LC_LOG_H */
