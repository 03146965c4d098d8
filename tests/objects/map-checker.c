/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * map-checker.c -- the linearizability checker of the map tests
 * (map-check.h) against crafted histories: linearizable ones pass,
 * non-linearizable ones (a stale read, a read of a value never written,
 * a lost delete, a read from the future) fail, so that map-linear's
 * check can fail. Also a long random sequential history with overlap
 * (linearizable by construction) passes within the memo.
 */
#include <stdio.h>
#include <stdlib.h>

#include "map-check.h"

static int failures;

static void expect(const char *what, const struct mc_op *ops, size_t n, int want)
{
	size_t ex = 0;
	int got = mc_check(ops, n, &ex);

	printf("%-44s %s (%zu states explored)\n", what,
	       got == MC_OK                 ? "linearizable"
	       : got == MC_NOT_LINEARIZABLE ? "NOT linearizable"
	                                    : "too big",
	       ex);
	if (got != want) {
		printf("  FAIL: wanted %d, got %d\n", want, got);
		failures++;
	}
}

int main(void)
{
	/* {inv, resp, kind, val} */
	const struct mc_op seq[] = {{0, 10, MC_PUT, 1, 0},
	                            {20, 30, MC_GET, 1, 0},
	                            {40, 50, MC_DEL, 0, 0},
	                            {60, 70, MC_GET, 0, 0},
	                            {80, 90, MC_DEL_ENOENT, 0, 0}};
	const struct mc_op overlap[] = {
	    {0, 100, MC_PUT, 1, 0}, {10, 20, MC_GET, 1, 0}, {30, 40, MC_GET, 1, 0}};
	const struct mc_op overlap0[] = {
	    {0, 100, MC_PUT, 1, 0}, {10, 20, MC_GET, 0, 0}, {30, 40, MC_GET, 1, 0}};
	const struct mc_op flicker[] = {
	    {0, 100, MC_PUT, 1, 0}, {10, 20, MC_GET, 1, 0}, {30, 40, MC_GET, 0, 0}};
	const struct mc_op stale[] = {
	    {0, 10, MC_PUT, 1, 0}, {20, 30, MC_PUT, 2, 0}, {40, 50, MC_GET, 1, 0}};
	const struct mc_op lost[] = {{0, 10, MC_PUT, 1, 0}, {20, 30, MC_GET, 0, 0}};
	const struct mc_op never[] = {{0, 10, MC_PUT, 1, 0}, {20, 30, MC_GET, 7, 0}};
	const struct mc_op future[] = {{0, 10, MC_GET, 1, 0}, {20, 30, MC_PUT, 1, 0}};
	const struct mc_op undel[] = {
	    {0, 10, MC_PUT, 1, 0}, {20, 30, MC_DEL, 0, 0}, {40, 50, MC_GET, 1, 0}};
	const struct mc_op twodel[] = {
	    {0, 10, MC_PUT, 1, 0}, {20, 50, MC_DEL, 0, 0}, {30, 60, MC_DEL, 0, 0}};
	const struct mc_op twodel1[] = {
	    {0, 10, MC_PUT, 1, 0}, {20, 50, MC_DEL, 0, 0}, {30, 60, MC_DEL_ENOENT, 0, 0}};
	const struct mc_op maybe[] = {{0, 10, MC_PUT, 1, 0},
	                              {20, 30, MC_PUT_MAYBE, 2, 0},
	                              {40, 50, MC_GET, 1, 0},
	                              {60, 70, MC_GET, 2, 0}};
	const struct mc_op maybe_back[] = {{0, 10, MC_PUT, 1, 0},
	                                   {20, 30, MC_PUT_MAYBE, 2, 0},
	                                   {40, 50, MC_GET, 2, 0},
	                                   {60, 70, MC_GET, 1, 0}};
	/* three writers and a reader that sees 3, then 1 after all writes returned */
	const struct mc_op order[] = {{0, 50, MC_PUT, 1, 0},  {0, 50, MC_PUT, 2, 0},
	                              {0, 50, MC_PUT, 3, 0},  {10, 60, MC_GET, 3, 0},
	                              {70, 80, MC_GET, 1, 0}, {90, 95, MC_GET, 1, 0}};
	const struct mc_op order_bad[] = {{0, 50, MC_PUT, 1, 0},  {0, 50, MC_PUT, 2, 0},
	                                  {0, 50, MC_PUT, 3, 0},  {10, 60, MC_GET, 3, 0},
	                                  {70, 80, MC_GET, 1, 0}, {90, 95, MC_GET, 3, 0}};
	/* versions and compare-and-set: {inv, resp, kind, val, ver} */
	const struct mc_op vers[] = {{0, 10, MC_PUT, 1, 1},  {20, 30, MC_GET, 1, 1},
	                             {40, 50, MC_DEL, 0, 0}, {60, 70, MC_PUT, 2, 3},
	                             {80, 90, MC_CAS, 3, 3}, {100, 110, MC_GET, 3, 4}};
	const struct mc_op badver[] = {{0, 10, MC_PUT, 1, 1}, {20, 30, MC_GET, 1, 2}};
	const struct mc_op putver[] = {{0, 10, MC_PUT, 1, 1}, {20, 30, MC_PUT, 2, 1}};
	const struct mc_op twocas[] = {
	    {0, 10, MC_PUT, 1, 1}, {20, 50, MC_CAS, 2, 1}, {30, 60, MC_CAS, 3, 1}};
	const struct mc_op onecas[] = {
	    {0, 10, MC_PUT, 1, 1}, {20, 50, MC_CAS, 2, 1}, {30, 60, MC_CAS_FAIL, 3, 1}};
	const struct mc_op casfail[] = {{0, 10, MC_PUT, 1, 1}, {20, 30, MC_CAS_FAIL, 2, 1}};
	const struct mc_op cas0[] = {{0, 10, MC_CAS, 1, 0},
	                             {20, 30, MC_CAS_FAIL, 2, 0},
	                             {40, 50, MC_DEL, 0, 0},
	                             {60, 70, MC_CAS, 3, 0},
	                             {80, 90, MC_GET, 3, 3}};
	struct mc_op *big;
	size_t nb = 600;
	unsigned seed = 1;
	uint64_t cur = 0;

	expect("sequential put/get/del/get/del", seq, 5, MC_OK);
	expect("read overlapping a put sees it", overlap, 3, MC_OK);
	expect("read before, read after (overlapping put)", overlap0, 3, MC_OK);
	expect("value appears then vanishes", flicker, 3, MC_NOT_LINEARIZABLE);
	expect("stale read after a newer put returned", stale, 3, MC_NOT_LINEARIZABLE);
	expect("acknowledged put lost", lost, 2, MC_NOT_LINEARIZABLE);
	expect("read of a value never written", never, 2, MC_NOT_LINEARIZABLE);
	expect("read from the future", future, 2, MC_NOT_LINEARIZABLE);
	expect("deleted key comes back", undel, 3, MC_NOT_LINEARIZABLE);
	expect("two concurrent deletes both succeed", twodel, 3, MC_NOT_LINEARIZABLE);
	expect("two concurrent deletes, one ENOENT", twodel1, 3, MC_OK);
	expect("unknown put taken later", maybe, 4, MC_OK);
	expect("unknown put seen, then undone", maybe_back, 4, MC_NOT_LINEARIZABLE);
	expect("concurrent puts, reads settle on one", order, 6, MC_OK);
	expect("concurrent puts, reads flip back", order_bad, 6, MC_NOT_LINEARIZABLE);
	expect("versions through put, del, put, cas", vers, 6, MC_OK);
	expect("a read with a version never written", badver, 2, MC_NOT_LINEARIZABLE);
	expect("a second put with the same version", putver, 2, MC_NOT_LINEARIZABLE);
	expect("two concurrent cas on one version succeed", twocas, 3, MC_NOT_LINEARIZABLE);
	expect("two concurrent cas, one fails", onecas, 3, MC_OK);
	expect("a cas of the current version fails", casfail, 2, MC_NOT_LINEARIZABLE);
	expect("cas 0 on absent, on present, after a del", cas0, 5, MC_OK);

	/* a long history of a real register with 4 overlapping clients: linearizable */
	big = calloc(nb, sizeof(*big));
	for (size_t i = 0; i < nb; i++) {
		int64_t lp = (int64_t)i * 100; /* the linearization point of op i */
		int k = rand_r(&seed) % 3;

		big[i].inv = lp - rand_r(&seed) % 150;
		big[i].resp = lp + rand_r(&seed) % 150;
		if (k == 0) {
			cur = i + 1;
			big[i].kind = MC_PUT;
			big[i].val = cur;
		} else if (k == 1) {
			big[i].kind = MC_GET;
			big[i].val = cur;
		} else {
			big[i].kind = cur ? MC_DEL : MC_DEL_ENOENT;
			cur = 0;
		}
	}
	expect("600 ops, overlapping, from a real register", big, nb, MC_OK);
	/* the same with one read changed to a stale value */
	for (size_t i = nb / 2; i < nb; i++)
		if (big[i].kind == MC_GET && big[i].val != 0) {
			for (size_t j = i; j-- > 0;)
				if (big[j].kind == MC_PUT && big[j].val != big[i].val &&
				    big[j].resp < big[i].inv - 1000) {
					big[i].val = big[j].val;
					break;
				}
			break;
		}
	expect("the same, one read made stale", big, nb, MC_NOT_LINEARIZABLE);
	free(big);
	printf("%d failure(s)\n", failures);
	return failures ? 1 : 0;
}
