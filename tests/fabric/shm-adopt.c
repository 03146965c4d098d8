/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * shm-adopt.c -- registering private memory on shm moves it into a memfd
 * mapped at the same address (loco-fabric-shm(7), "Registered memory").
 *
 * A 2 MiB chunk made as the core makes its arenas (2 MiB aligned,
 * MADV_HUGEPAGE). Region A (local access only) is registered first: the
 * whole chunk is then a memfd mapping (/proc/self/maps). Then
 * a thread increments a counter in A (plain read-modify-write, bounded)
 * while region B (remote access) of the same chunk is registered. No
 * increment may be lost: the chunk was adopted with A, before anybody
 * wrote it, so B's registration copies nothing. (Before the chunk was
 * adopted at its first region, B's copy ran under the writer and could
 * lose its increments; on a busy machine the writer may not run during
 * the copy, so the maps check is what fails then.) Then a peer's WRITE into B lands in the chunk,
 * and A's bytes and pointers are what they were. Skipped where the kernel does not take
 * MADV_HUGEPAGE.
 */
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>

#include "helpers.h"

#define CHUNK (2u << 20)

static volatile uint64_t *counter;
static uint64_t done; /* increments made */
static int stop;      /* atomic */

static void *writer(void *arg)
{
	(void)arg;
	/* bounded: at most 2^27 increments, or until told to stop */
	for (uint64_t i = 0; i < (1ull << 27) && !__atomic_load_n(&stop, __ATOMIC_ACQUIRE); i++) {
		*counter = *counter + 1;
		done++;
	}
	return NULL;
}

/* mapped_from -- whether the mapping at @p is of a file whose name has @what (/proc/self/maps). */
static bool mapped_from(const void *p, const char *what)
{
	FILE *fp = fopen("/proc/self/maps", "re");
	char line[512];
	bool yes = false;

	T_ASSERT(fp != NULL);
	while (fgets(line, sizeof(line), fp) != NULL) {
		unsigned long s, e;

		if (sscanf(line, "%lx-%lx", &s, &e) == 2 && (uintptr_t)p >= s && (uintptr_t)p < e) {
			yes = strstr(line, what) != NULL;
			break;
		}
	}
	fclose(fp);
	return yes;
}

/* chunk -- 2 MiB, 2 MiB aligned, advised for huge pages (liboco/mem.c's map_aligned()). */
static uint8_t *chunk(void)
{
	uint8_t *raw =
	    mmap(NULL, 2 * CHUNK, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	uint8_t *p;

	T_ASSERT(raw != MAP_FAILED);
	p = (uint8_t *)(((uintptr_t)raw + CHUNK - 1) & ~(uintptr_t)(CHUNK - 1));
	if (p > raw)
		munmap(raw, (size_t)(p - raw));
	if (raw + 2 * CHUNK > p + CHUNK)
		munmap(p + CHUNK, (size_t)(raw + 2 * CHUNK - (p + CHUNK)));
	if (madvise(p, CHUNK, MADV_HUGEPAGE) != 0)
		t_skip("madvise(MADV_HUGEPAGE): %s", strerror(errno));
	return p;
}

int main(void)
{
	struct fab *a, *b;
	struct fab_mr *amr, *bmr, *lmr;
	struct fab_link *la, *lb;
	struct fab_wr wr;
	pthread_t th;
	uint8_t *c, *loc;

	t_init("shm-adopt", 60);
	if (strcmp(t_provider(), "shm") != 0)
		t_skip("shm only");
	a = t_fab_open(NULL);
	b = t_fab_open(NULL);
	c = chunk();
	memset(c, 0x3c, 4096);
	counter = (volatile uint64_t *)(c + 64);
	*counter = 0;
	/* A: local access only, first in the chunk */
	amr = t_mr_reg(b, c, 4096, FAB_ACCESS_LOCAL_WRITE);
	if (!mapped_from(c, "memfd:loco-shm") || !mapped_from(c + CHUNK - 1, "memfd:loco-shm"))
		T_FAIL("the chunk was not adopted whole at its first (local) region");
	printf("adopt: the chunk is a memfd mapping from its first region on: ok\n");
	T_ASSERT_OK(pthread_create(&th, NULL, writer, NULL));
	t_sleep_ms(5);
	/* B: remote access, while the writer runs */
	bmr = t_mr_reg(b, c + 65536, 65536,
	               FAB_ACCESS_LOCAL_WRITE | FAB_ACCESS_REMOTE_READ | FAB_ACCESS_REMOTE_WRITE);
	t_sleep_ms(5);
	__atomic_store_n(&stop, 1, __ATOMIC_RELEASE);
	T_ASSERT_OK(pthread_join(th, NULL));
	printf("adopt: %llu increments while B was registered, counter %llu\n",
	       (unsigned long long)done, (unsigned long long)*counter);
	if (*counter != done)
		T_FAIL("%llu increments lost: the chunk was copied under a writer",
		       (unsigned long long)(done - *counter));
	T_ASSERT_EQ(c[0], 0x3c);
	T_ASSERT_EQ(c[4095], 0x3c);

	/* a peer's WRITE into B lands in the chunk */
	loc = t_alloc(4096);
	memset(loc, 0x5a, 4096);
	lmr = t_mr_reg(a, loc, 4096, FAB_ACCESS_LOCAL_WRITE);
	t_pair(a, b, 1, 2, &la, &lb);
	wr = t_wr_rdma(FAB_OP_WRITE, 1, 0, loc, 4096, lmr->lkey, (uintptr_t)(c + 65536), bmr->rkey);
	T_ASSERT_OK(t_run(la, &wr));
	T_ASSERT_EQ(c[65536], 0x5a);
	T_ASSERT_EQ(c[65536 + 4095], 0x5a);
	T_ASSERT_EQ(c[65536 + 4096], 0);
	printf("adopt: a peer's WRITE into B is in the chunk; A's bytes unchanged: ok\n");

	T_ASSERT_OK(fab_link_close(la));
	T_ASSERT_OK(fab_link_close(lb));
	T_ASSERT_OK(fab_mr_dereg(amr));
	T_ASSERT_OK(fab_mr_dereg(bmr));
	T_ASSERT_OK(fab_mr_dereg(lmr));
	fab_close(a);
	fab_close(b);
	munmap(c, CHUNK);
	t_free(loc, 4096);
	printf("shm-adopt: PASS\n");
	return T_EXIT_PASS;
}
