/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * log.c -- the level and the time format are process-wide configuration, written once (the
 * start time when the library is loaded, the rest under log_once).
 */
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include <loco/log.h>

#include "log.h"
#include "log_time.h"

static pthread_once_t log_once = PTHREAD_ONCE_INIT;
static int log_level = LC_LOG_WARN;                  /* written once under log_once */
static enum lc_log_time log_time = LC_LOG_TIME_MONO; /* written once under log_once */
static struct timespec log_start;                    /* written once, at load, before any thread */

/* log_note_start -- the origin of "mono" times: when liboco was loaded, about process start. */
__attribute__((constructor)) static void log_note_start(void)
{
	clock_gettime(CLOCK_MONOTONIC, &log_start);
}

static void log_init(void)
{
	static const char *const names[] = {"error", "warn", "info", "debug"};
	const char *env;

	log_time = lc_log_time_parse(getenv("LOCO_LOG_TIME"));
	env = getenv("LOCO_LOG");

	if (env == NULL || *env == '\0')
		return;
	for (int i = 0; i < 4; i++) {
		if (strcasecmp(env, names[i]) == 0) {
			log_level = i;
			return;
		}
	}
	if (strcasecmp(env, "none") == 0 || strcasecmp(env, "off") == 0)
		log_level = -1;
}

int lc_log_enabled(enum lc_log_level level)
{
	pthread_once(&log_once, log_init);
	return (int)level <= log_level;
}

/* log_line -- one line at @level: the prefix, then @fmt with @ap; one write(2). */
static void log_line(enum lc_log_level level, const char *fmt, va_list ap)
{
	static const char *const tags[] = {"error", "warn", "info", "debug"};
	char line[512], t[40];
	int n;

	lc_log_time_str(log_time, &log_start, t, sizeof(t));
	n = snprintf(line, sizeof(line), "loco[%d]%s %s: ", (int)getpid(), t, tags[level]);
	vsnprintf(line + n, sizeof(line) - (size_t)n - 1, fmt, ap);
	n = (int)strlen(line);
	if (n > 0 && line[n - 1] == '\n')
		n--; /* an object author's line may end in one: print one, not two */
	line[n++] = '\n';
	/* one write(2) per line so lines of concurrent threads do not mix */
	if (write(STDERR_FILENO, line, (size_t)n) < 0)
		return;
}

void lc_log(enum lc_log_level level, const char *fmt, ...)
{
	va_list ap;

	if (!lc_log_enabled(level))
		return;
	va_start(ap, fmt);
	log_line(level, fmt, ap);
	va_end(ap);
}

/* the public levels are the internal ones, for object authors (loco/log.h) */
_Static_assert((int)LOCO_LOG_ERR == (int)LC_LOG_ERROR && (int)LOCO_LOG_WARN == (int)LC_LOG_WARN &&
                   (int)LOCO_LOG_INFO == (int)LC_LOG_INFO &&
                   (int)LOCO_LOG_DEBUG == (int)LC_LOG_DEBUG,
               "loco_log_level and lc_log_level agree");

int loco_log_enabled(enum loco_log_level level)
{
	if ((int)level < (int)LOCO_LOG_ERR || (int)level > (int)LOCO_LOG_DEBUG)
		return 0;
	return lc_log_enabled((enum lc_log_level)level);
}

void loco_log(enum loco_log_level level, const char *fmt, ...)
{
	va_list ap;

	if (fmt == NULL || !loco_log_enabled(level))
		return;
	va_start(ap, fmt);
	log_line((enum lc_log_level)level, fmt, ap);
	va_end(ap);
}
