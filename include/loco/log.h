/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * loco/log.h -- logging for object authors: one line on stderr through
 * the library's own logger, so LOCO_LOG (error, warn, info, debug, none;
 * default warn) and LOCO_LOG_TIME apply to it as to the library's lines.
 * See loco_log(3). <loco/channel.h> includes this header.
 *
 * An object logs what it would otherwise only count: the first time, and
 * then ever more rarely (loco_log_due()), keeping the counter.
 *
 * Thread safety: MT-safe (not async-signal-safe). loco_log() allocates
 * nothing (the line is formatted on the stack, at most 511 bytes, and
 * written with one write(2), so lines of concurrent threads do not mix):
 * it may be called from object callbacks, pollers and the data path.
 * Appeared in loco 0.11.
 */
#ifndef LOCO_LOG_H
#define LOCO_LOG_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The levels, most severe first; LOCO_LOG=<name> prints its level and those above it. */
enum loco_log_level {
	LOCO_LOG_ERR = 0,   /* "error": an operation failed */
	LOCO_LOG_WARN = 1,  /* "warn" (the default): something is wrong, the object carries on */
	LOCO_LOG_INFO = 2,  /* "info": a notable event (a peer gone, a message dropped) */
	LOCO_LOG_DEBUG = 3, /* "debug": for whoever debugs the object */
};

/*
 * loco_log -- print "loco[pid] time level: " and the printf-style message
 * @fmt to stderr, as one line (a trailing newline is not needed; a line
 * is cut at 511 bytes), when @level is enabled. Lowercase, the exact
 * cause, the object's name first ("map kv: ..."). An unknown @level
 * prints nothing.
 */
void loco_log(enum loco_log_level level, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* loco_log_enabled -- 1 when @level is printed (LOCO_LOG), else 0: to skip a costly message. */
int loco_log_enabled(enum loco_log_level level);

/*
 * loco_log_due -- 1 when the @n-th occurrence of an event (counting from
 * 1) is worth a line: the 1st, 2nd, 4th, 8th... (powers of two), so a
 * recurring error logs once at once and then ever more rarely. Inline.
 */
static inline int loco_log_due(uint64_t n)
{
	return n != 0 && (n & (n - 1)) == 0;
}

#ifdef __cplusplus
}
#endif

#endif /* LOCO_LOG_H */
