/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * object-log.c -- loco_log() (loco/log.h) as an object author sees it:
 * built on the public headers only, linked to the shared library. Each
 * case runs in a child (LOCO_LOG is read once per process) whose stderr
 * goes to a file, which the parent reads: a line at an enabled level
 * appears once, tagged with its level; below the level, nothing.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <loco/channel.h>

/* in_child -- run @fn with LOCO_LOG=@level (NULL: unset) and stderr into a file; its stderr text */
static char *in_child(const char *level, void (*fn)(void))
{
	char path[] = "/tmp/loco-object-log-XXXXXX";
	static char text[1 << 16];
	int fd = mkstemp(path), st;
	pid_t pid;
	ssize_t n;

	assert_true(fd >= 0);
	unlink(path);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		if (level != NULL)
			setenv("LOCO_LOG", level, 1);
		else
			unsetenv("LOCO_LOG");
		setenv("LOCO_LOG_TIME", "none", 1);
		dup2(fd, STDERR_FILENO);
		fn();
		_exit(0);
	}
	assert_int_equal(waitpid(pid, &st, 0), pid);
	assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	n = pread(fd, text, sizeof(text) - 1, 0);
	close(fd);
	assert_true(n >= 0);
	text[n] = '\0';
	return text;
}

static void every_level(void)
{
	loco_log(LOCO_LOG_ERR, "obj x: an error %d", 1);
	loco_log(LOCO_LOG_WARN, "obj x: a warning %s", "w");
	loco_log(LOCO_LOG_INFO, "obj x: some info\n"); /* a newline of its own: one line still */
	loco_log(LOCO_LOG_DEBUG, "obj x: debugging");
	loco_log((enum loco_log_level)7, "obj x: no such level");
	loco_log((enum loco_log_level) - 1, "obj x: no such level either");
}

/* count -- how many lines of @text end in "@tag: @msg" */
static int count(const char *text, const char *tag, const char *msg)
{
	char want[256];
	int n = 0;

	snprintf(want, sizeof(want), " %s: %s\n", tag, msg);
	for (const char *p = text; (p = strstr(p, want)) != NULL; p++)
		n++;
	return n;
}

static int lines(const char *text)
{
	int n = 0;

	for (; *text; text++)
		n += *text == '\n';
	return n;
}

static void log__default_level_is_warn(void **state)
{
	const char *t = in_child(NULL, every_level);

	(void)state;
	assert_int_equal(count(t, "error", "obj x: an error 1"), 1);
	assert_int_equal(count(t, "warn", "obj x: a warning w"), 1);
	assert_null(strstr(t, "some info"));
	assert_null(strstr(t, "debugging"));
	assert_null(strstr(t, "no such level"));
	assert_int_equal(lines(t), 2);
	assert_true(strncmp(t, "loco[", 5) == 0); /* the library's own prefix */
}

static void log__info_prints_info_not_debug(void **state)
{
	const char *t = in_child("info", every_level);

	(void)state;
	assert_int_equal(count(t, "error", "obj x: an error 1"), 1);
	assert_int_equal(count(t, "warn", "obj x: a warning w"), 1);
	assert_int_equal(count(t, "info", "obj x: some info"), 1);
	assert_null(strstr(t, "debugging"));
	assert_int_equal(lines(t), 3);
}

static void log__debug_prints_all_none_nothing(void **state)
{
	const char *t = in_child("debug", every_level);

	(void)state;
	assert_int_equal(count(t, "debug", "obj x: debugging"), 1);
	assert_int_equal(lines(t), 4);
	t = in_child("none", every_level);
	assert_string_equal(t, "");
	t = in_child("error", every_level);
	assert_int_equal(lines(t), 1);
	assert_int_equal(count(t, "error", "obj x: an error 1"), 1);
}

static void enabled_info(void)
{
	if (!loco_log_enabled(LOCO_LOG_ERR) || !loco_log_enabled(LOCO_LOG_INFO) ||
	    loco_log_enabled(LOCO_LOG_DEBUG) || loco_log_enabled((enum loco_log_level)9))
		_exit(1);
}

static void log__enabled_follows_level(void **state)
{
	(void)state;
	in_child("info", enabled_info); /* the child exits 1 on a wrong answer */
}

/* many threads' lines do not mix: each is one write */
static void *log_many(void *arg)
{
	for (int i = 0; i < 200; i++)
		loco_log(LOCO_LOG_WARN, "obj t%ld: line %03d of a thread's lines",
		         (long)(intptr_t)arg, i);
	return NULL;
}

static void threads_log(void)
{
	pthread_t t[4];

	for (intptr_t i = 0; i < 4; i++)
		pthread_create(&t[i], NULL, log_many, (void *)i);
	for (int i = 0; i < 4; i++)
		pthread_join(t[i], NULL);
}

static void log__threads_lines_whole(void **state)
{
	static char copy[1 << 16];
	const char *t;
	int n = 0;

	(void)state;
	t = in_child(NULL, threads_log); /* 800 lines of ~70 bytes */
	snprintf(copy, sizeof(copy), "%s", t);
	for (char *line = strtok(copy, "\n"); line != NULL; line = strtok(NULL, "\n")) {
		assert_non_null(strstr(line, " warn: obj t"));
		assert_non_null(strstr(line, " of a thread's lines"));
		n++;
	}
	assert_int_equal(n, 800);
}

static void log__due_powers_of_two(void **state)
{
	int due = 0;

	(void)state;
	assert_false(loco_log_due(0));
	assert_true(loco_log_due(1));
	assert_true(loco_log_due(2));
	assert_false(loco_log_due(3));
	assert_true(loco_log_due(4));
	assert_true(loco_log_due(UINT64_C(1) << 63));
	for (uint64_t i = 1; i <= 1000000; i++)
		due += loco_log_due(i);
	assert_int_equal(due, 20); /* 1, 2, 4 ... 2^19 */
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(log__default_level_is_warn),
	    cmocka_unit_test(log__info_prints_info_not_debug),
	    cmocka_unit_test(log__debug_prints_all_none_nothing),
	    cmocka_unit_test(log__enabled_follows_level),
	    cmocka_unit_test(log__threads_lines_whole),
	    cmocka_unit_test(log__due_powers_of_two),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
