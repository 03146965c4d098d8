/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * launch-node.c -- one node of the launcher tests (mpirun.sh, slurm.sh): started by mpirun,
 * srun or by hand, with no LOCO_* variable needed under PMIx.
 *
 *   launch-node [--dir DIR] [--extra K] [--die ID | --leave ID] ROUNDS
 *
 * It calls loco_init(NULL), prints "node N rank R size S" (R is PMIX_RANK, or -1), and checks
 * that under PMIx its id is rank + 1 (unless LOCO_NODE_ID is set). The job has
 * loco_manager_job_size() + K nodes (K nodes join from outside the launcher). With --dir it writes
 * its control-plane address to DIR/addr.N, so that the test can start such nodes. It joins
 * channel "r" of that many nodes, checks that loco_manager_members() counts them all, and runs
 * ROUNDS barrier rounds. With --die ID, node ID kills itself (SIGKILL) after ROUNDS / 2
 * rounds, and the others go on: a round that times out while the dead node is still in the
 * view is retried (bounded), and at the end node ID must be missing from loco_manager_members()
 * ("node N: member ID gone after T ms"). With --leave ID, node ID instead leaves gracefully
 * there (loco_fini(), exit 0), and the same holds for the others: every round returns 0 (a
 * push that crossed the leaver's destroy lands harmlessly), and the leave, a view change
 * the last rounds may outrun, must be seen within 10 s. Each node prints "node N: done R rounds, M
 * members" and exits 0 when every check held, 1 otherwise; a last barrier round before loco_fini()
 * keeps the others' counts from seeing it leave. alarm() bounds it (150 s).
 */
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <loco.h>
#include <loco/barrier.h>

#define NS        1000000000LL
#define MAX_NODES 64
#define MAX_RETRY 200 /* timed-out rounds in a row (0.1 s each) before giving up */

static int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* has -- whether @id is among the current members. */
static int has(loco_manager_t *m, uint32_t id)
{
	uint32_t ids[MAX_NODES];
	int n = loco_manager_members(m, ids, MAX_NODES);

	for (int i = 0; i < n && i < MAX_NODES; i++)
		if (ids[i] == id)
			return 1;
	return 0;
}

/* write_addr -- DIR/addr.ID holds loco_manager_addr(), written whole (rename). */
static int write_addr(const char *dir, loco_manager_t *m)
{
	char tmp[4096], path[4096];
	FILE *f;

	snprintf(tmp, sizeof(tmp), "%s/.addr.%u", dir, loco_manager_node_id(m));
	snprintf(path, sizeof(path), "%s/addr.%u", dir, loco_manager_node_id(m));
	f = fopen(tmp, "w");
	if (f == NULL || fprintf(f, "%s\n", loco_manager_addr(m)) < 0 || fclose(f) != 0)
		return -1;
	return rename(tmp, path);
}

int main(int argc, char **argv)
{
	const char *dir = NULL, *rank_s = getenv("PMIX_RANK");
	uint32_t extra = 0, die = 0, nodes, me, want;
	int leave = 0;
	long rounds = -1, done = 0, retries = 0;
	int bad = 0, ret, members;
	int64_t gone_at = -1, died_at = -1;
	loco_manager_t *m;
	loco_channel_t *ch;
	loco_barrier_t *b;

	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--dir") == 0 && i + 1 < argc)
			dir = argv[++i];
		else if (strcmp(argv[i], "--extra") == 0 && i + 1 < argc)
			extra = (uint32_t)strtoul(argv[++i], NULL, 10);
		else if ((strcmp(argv[i], "--die") == 0 || strcmp(argv[i], "--leave") == 0) &&
		         i + 1 < argc) {
			leave = strcmp(argv[i], "--leave") == 0;
			die = (uint32_t)strtoul(argv[++i], NULL, 10);
		} else
			rounds = strtol(argv[i], NULL, 10);
	}
	if (rounds < 1) {
		fprintf(stderr,
		        "usage: launch-node [--dir DIR] [--extra K] [--die ID | --leave ID] "
		        "ROUNDS\n");
		return 2;
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	alarm(150);
	ret = loco_init(NULL, &m);
	if (ret) {
		fprintf(stderr, "loco_init: %s\n", loco_strerror(ret));
		return 1;
	}
	me = loco_manager_node_id(m);
	nodes = loco_manager_job_size(m) + extra;
	printf("node %u rank %s size %u addr %s\n", me, rank_s ? rank_s : "-1",
	       loco_manager_job_size(m), loco_manager_addr(m));
	if (rank_s != NULL && getenv("LOCO_NODE_ID") == NULL &&
	    me != (uint32_t)strtoul(rank_s, NULL, 10) + 1) {
		printf("FAIL node %u: PMIx rank %s, expected node id rank + 1\n", me, rank_s);
		bad++;
	}
	if (dir != NULL && write_addr(dir, m) != 0) {
		perror("write address");
		bad++;
	}
	if ((ret = loco_channel_create(m, NULL, "r", nodes, &ch)) != 0 ||
	    (ret = loco_barrier_create(ch, "b", &b)) != 0 ||
	    (ret = loco_channel_join(ch, 60 * NS)) != 0) {
		fprintf(stderr, "node %u: set-up: %s\n", me, loco_strerror(ret));
		return 1;
	}
	members = loco_manager_members(m, NULL, 0);
	if ((uint32_t)members != nodes) {
		printf("FAIL node %u: %d members after the join, expected %u\n", me, members,
		       nodes);
		bad++;
	}
	want = nodes;
	while (done < rounds && retries < MAX_RETRY) {
		if (die != 0 && done == rounds / 2 && died_at < 0) {
			if (me == die && leave) {
				printf("node %u: leaving after %ld rounds\n", me, done);
				loco_barrier_destroy(b);
				loco_channel_destroy(ch);
				loco_fini(m);
				return 0;
			}
			if (me == die) {
				printf("node %u: killing myself after %ld rounds\n", me, done);
				raise(SIGKILL);
			}
			died_at = now_ms();
			want = nodes - 1;
		}
		ret = loco_barrier_wait(b, NS / 10);
		if (ret == -ETIMEDOUT) {
			retries++; /* the dead node not excluded yet */
			continue;
		}
		if (ret != 0) {
			printf("FAIL node %u: barrier round %ld: %s\n", me, done + 1,
			       loco_strerror(ret));
			bad++;
			break;
		}
		retries = 0;
		done++;
		if (died_at >= 0 && gone_at < 0 && !has(m, die))
			gone_at = now_ms();
		/* the round where a node leaves or dies may end with it gone already */
		if ((die == 0 || done < rounds / 2) &&
		    (uint32_t)loco_channel_peers(ch, NULL, 0) + 1 != nodes) {
			printf("FAIL node %u: round %ld with %d peers, expected %u\n", me, done,
			       loco_channel_peers(ch, NULL, 0), nodes - 1);
			bad++;
		}
	}
	if (done < rounds) {
		printf("FAIL node %u: %ld of %ld rounds\n", me, done, rounds);
		bad++;
	}
	/*
	 * A graceful leave is a view change, which the others' last rounds may
	 * outrun (they pass as soon as the leaver's row is gone from the
	 * channel): give it the time a view change takes, bounded.
	 */
	for (int64_t dl = now_ms() + 10000; die != 0 && has(m, die) && now_ms() < dl;)
		usleep(1000);
	if (die != 0 && gone_at < 0 && !has(m, die))
		gone_at = now_ms();
	members = loco_manager_members(m, NULL, 0);
	if (die != 0) {
		if (has(m, die)) {
			printf("FAIL node %u: node %u still a member\n", me, die);
			bad++;
		} else {
			printf("node %u: member %u gone after %lld ms\n", me, die,
			       (long long)(gone_at >= 0 ? gone_at - died_at : -1));
		}
	}
	if ((uint32_t)members != want) {
		printf("FAIL node %u: %d members at the end, expected %u\n", me, members, want);
		bad++;
	}
	printf("node %u: done %ld rounds, %d members%s\n", me, done, members,
	       bad ? ", FAILED" : "");
	/* one more round before leaving: nobody leaves while another still counts the members */
	for (int i = 0; i < 50 && loco_barrier_wait(b, NS / 10) == -ETIMEDOUT; i++)
		;
	loco_barrier_destroy(b);
	loco_channel_destroy(ch);
	loco_fini(m);
	return bad ? 1 : 0;
}
