/* SPDX-License-Identifier: BSD-2-Clause */
/* replay.c -- feed every file of a corpus to a fuzz target, without libFuzzer */
/*
 *   replay [--expect-coverage] PATH...
 *
 * Each PATH is a file or a directory (its regular files, in name order).
 * Each input's name is printed before it runs, so a crash names its file.
 * With --expect-coverage, the target must define fuzz_replay_summary()
 * and it must return 0 (the seeds still reach the paths they were
 * written for).
 * Exit 0 when every input ran, 1 on an error or when no input was found.
 */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define REPLAY_MAX_INPUT (1 << 20) /* larger files are an error: seeds are small */
#define REPLAY_MAX_FILES 100000

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int fuzz_replay_summary(void) __attribute__((weak)); /* optional, see the header */

/* run_file -- feed one file to the target. 0, or -1 when it cannot be read. */
static int run_file(const char *path)
{
	FILE *fp = fopen(path, "rb");
	struct stat st;
	uint8_t *buf;
	size_t n;

	if (fp == NULL || fstat(fileno(fp), &st) != 0 || st.st_size > REPLAY_MAX_INPUT) {
		fprintf(stderr, "replay: %s: cannot read, or larger than 1 MiB\n", path);
		if (fp != NULL)
			fclose(fp);
		return -1;
	}
	/* exactly the input's size, so ASan sees reads past its end */
	n = (size_t)st.st_size;
	buf = malloc(n ? n : 1);
	if (buf == NULL || fread(buf, 1, n, fp) != n) {
		fprintf(stderr, "replay: %s: short read\n", path);
		free(buf);
		fclose(fp);
		return -1;
	}
	fclose(fp);
	fprintf(stderr, "replay: %s (%zu bytes)\n", path, n);
	LLVMFuzzerTestOneInput(buf, n);
	free(buf);
	return 0;
}

static int is_regular(const char *path)
{
	struct stat st;

	return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

/* run_path -- a file, or every regular file of a directory. Adds the count to *@count. */
static int run_path(const char *path, unsigned long *count)
{
	struct dirent **ents;
	int n, ret = 0;

	if (is_regular(path)) {
		(*count)++;
		return run_file(path);
	}
	n = scandir(path, &ents, NULL, alphasort);
	if (n < 0) {
		perror(path);
		return -1;
	}
	for (int i = 0; i < n && i < REPLAY_MAX_FILES; i++) {
		char full[4096];

		if (ents[i]->d_name[0] != '.' &&
		    (size_t)snprintf(full, sizeof(full), "%s/%s", path, ents[i]->d_name) <
		        sizeof(full) &&
		    is_regular(full)) {
			(*count)++;
			if (run_file(full) != 0)
				ret = -1;
		}
		free(ents[i]);
	}
	for (int i = REPLAY_MAX_FILES; i < n; i++)
		free(ents[i]);
	free(ents);
	return ret;
}

int main(int argc, char **argv)
{
	unsigned long count = 0;
	int expect = 0, ret = 0;

	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--expect-coverage") == 0)
			expect = 1;
		else if (run_path(argv[i], &count) != 0)
			ret = 1;
	}
	fprintf(stderr, "replay: %lu inputs\n", count);
	if (count == 0) {
		fprintf(stderr, "replay: no input found\n");
		return 1;
	}
	if (expect && (fuzz_replay_summary == NULL || fuzz_replay_summary() != 0)) {
		if (fuzz_replay_summary == NULL)
			fprintf(stderr, "replay: --expect-coverage, but the target has no "
			                "fuzz_replay_summary()\n");
		ret = 1;
	}
	return ret;
}
