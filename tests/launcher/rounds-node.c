/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * rounds-node.c -- one node of the launcher's live-change test (keep-going.sh): barrier rounds
 * under `loco-run --keep-going --control`, while the test adds and kills nodes.
 *
 *   rounds-node DIR    join channel "r" (LOCO_NODES nodes) with barrier "b", then run
 *                      rounds until DIR/stop exists
 *
 * Each passed round prints "round R peers P" (R counts this node's passed rounds, P is the
 * number of peers paired in "r" now); the test reads these lines to see that rounds go on
 * after each change. A node added to a running launch joins the same way: the barrier takes
 * it in from the episode the others are in. A wait that times out (a dead peer not yet
 * excluded) is retried; any other error is printed ("error ...") and counted. At DIR/stop it
 * prints "done rounds R errors E" and exits 0; alarm() bounds it (120 s).
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <loco.h>
#include <loco/barrier.h>

#define NS          1000000000LL
#define ROUND_PAUSE 20000000L /* ns between rounds: ~50 rounds/s, a few thousand lines a run */
#define MAX_ERRORS  1000

/* stop_asked -- whether DIR/stop exists. */
static int stop_asked(const char *dir)
{
	char path[4096];

	snprintf(path, sizeof(path), "%s/stop", dir);
	return access(path, F_OK) == 0;
}

int main(int argc, char **argv)
{
	const char *nodes_s = getenv("LOCO_NODES");
	struct timespec pause = {0, ROUND_PAUSE};
	unsigned long rounds = 0, errors = 0;
	loco_manager_t *m;
	loco_channel_t *ch;
	loco_barrier_t *b;
	uint32_t nodes;
	int ret;

	if (argc != 2 || nodes_s == NULL) {
		fprintf(stderr, "usage: rounds-node DIR (with LOCO_NODES, as loco-run sets it)\n");
		return 2;
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	alarm(120);
	nodes = (uint32_t)strtoul(nodes_s, NULL, 10);
	ret = loco_init(NULL, &m);
	if (ret) {
		fprintf(stderr, "loco_init: %s\n", loco_strerror(ret));
		return 1;
	}
	if ((ret = loco_channel_create(m, NULL, "r", nodes, &ch)) != 0 ||
	    (ret = loco_barrier_create(ch, "b", &b)) != 0 ||
	    (ret = loco_channel_join(ch, 30 * NS)) != 0) {
		fprintf(stderr, "set-up: %s\n", loco_strerror(ret));
		return 1;
	}
	printf("joined: view %llu, %d peer(s)\n", (unsigned long long)loco_manager_view(m),
	       loco_channel_peers(ch, NULL, 0));
	while (!stop_asked(argv[1]) && errors < MAX_ERRORS) {
		ret = loco_barrier_wait(b, NS / 10);
		if (ret == 0) {
			rounds++;
			printf("round %lu peers %d\n", rounds, loco_channel_peers(ch, NULL, 0));
			nanosleep(&pause, NULL);
		} else if (ret != -ETIMEDOUT && !stop_asked(argv[1])) {
			errors++;
			printf("error %d (%s) after round %lu\n", ret, loco_strerror(ret), rounds);
		}
	}
	printf("done rounds %lu errors %lu\n", rounds, errors);
	loco_barrier_destroy(b);
	loco_channel_destroy(ch);
	loco_fini(m);
	return errors < MAX_ERRORS ? 0 : 1;
}
