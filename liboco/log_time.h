/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * log_time.h -- the time on a log line (LOCO_LOG_TIME), shared by liboco's
 * log (log.c) and loco-run's own messages, which must read the same way.
 * Header-only: loco-run does not link liboco.
 *
 * Thread safety: MT-safe (no state).
 */
#ifndef LC_LOG_TIME_H
#define LC_LOG_TIME_H

#include <inttypes.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <strings.h>
#include <time.h>

enum lc_log_time {
	LC_LOG_TIME_MONO, /* seconds since @start (the default, also for unknown values) */
	LC_LOG_TIME_WALL, /* UTC date and time */
	LC_LOG_TIME_NONE, /* no time (the format before loco 0.4) */
};

/* lc_log_time_parse -- the kind LOCO_LOG_TIME's value @s names (NULL: the default). */
static inline enum lc_log_time lc_log_time_parse(const char *s)
{
	if (s != NULL && strcasecmp(s, "wall") == 0)
		return LC_LOG_TIME_WALL;
	if (s != NULL && strcasecmp(s, "none") == 0)
		return LC_LOG_TIME_NONE;
	return LC_LOG_TIME_MONO;
}

/*
 * lc_log_time_str -- " 12.345678" (seconds since @start, CLOCK_MONOTONIC),
 * " 2026-11-25T23:20:26.123456Z" (UTC) or "" into @buf (>= 40 bytes).
 */
static inline void lc_log_time_str(enum lc_log_time kind, const struct timespec *start, char *buf,
                                   size_t len)
{
	struct timespec ts;
	struct tm tm;
	int64_t ns;
	size_t k;

	buf[0] = '\0';
	if (kind == LC_LOG_TIME_MONO) {
		clock_gettime(CLOCK_MONOTONIC, &ts);
		ns = (int64_t)(ts.tv_sec - start->tv_sec) * 1000000000 +
		     (ts.tv_nsec - start->tv_nsec);
		snprintf(buf, len, " %" PRId64 ".%06" PRId64, ns / 1000000000,
		         ns % 1000000000 / 1000);
	} else if (kind == LC_LOG_TIME_WALL) {
		clock_gettime(CLOCK_REALTIME, &ts);
		gmtime_r(&ts.tv_sec, &tm);
		k = strftime(buf, len, " %Y-%m-%dT%H:%M:%S", &tm);
		snprintf(buf + k, len - k, ".%06ldZ", ts.tv_nsec / 1000);
	}
}

#endif /* LC_LOG_TIME_H */
