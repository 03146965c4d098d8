/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * sec.h -- helpers of the security tests (tests/security): real nodes in
 * this process, a stranger with its own fabric, the node's log.
 *
 * A stranger knows everything a scan could find (the region's address and
 * remote key, read here from the node's internals: the worst case) but
 * not the cluster secret.
 */
#ifndef LOCO_TESTS_SEC_H
#define LOCO_TESTS_SEC_H

#include <stddef.h>
#include <stdint.h>

#include <loco.h>

#include "helpers.h"

/* sec_log_start -- tee this process's stderr through a pipe, keeping lines for sec_log_count(). */
void sec_log_start(void);

/* sec_log_count -- how many log lines so far contain @needle. */
unsigned sec_log_count(const char *needle);

/*
 * sec_node -- a node of this process: id @id, cluster secret @secret,
 * joining @join (NULL: alone), on side A's address (LOCO_TEST_ADDR_A).
 * Fails the test when it does not start.
 */
loco_manager_t *sec_node(uint32_t id, const char *join, const char *secret);

/* sec_fab_addr -- where @m's data links come in; sec_node_inc -- its incarnation. */
const char *sec_fab_addr(loco_manager_t *m);
uint64_t sec_node_inc(loco_manager_t *m);

/*
 * sec_region -- a channel @chan of @nodes nodes on @m with one object and
 * one @len-byte region with every remote access right, filled by t_fill
 * with @seed; the channel is not joined. Its address and remote key:
 */
struct sec_region {
	loco_channel_t *ch;
	loco_object_t *obj;
	loco_region_t *r;
	uint64_t addr;
	uint32_t rkey;
	size_t len;
	uint64_t seed;
};
void sec_region(loco_manager_t *m, const char *chan, uint32_t nodes, size_t len, uint64_t seed,
                struct sec_region *out);

/* sec_region_intact -- whether the region still holds exactly what sec_region() put there. */
int sec_region_intact(const struct sec_region *s);

/* sec_region_free -- destroy the object and the channel. */
void sec_region_free(struct sec_region *s);

/* A stranger: its own fabric (side B) and a buffer registered in it. */
struct sec_stranger {
	struct fab *fab;
	struct fab_mr *mr;
	uint8_t *buf; /* 64 KiB */
};
void sec_stranger_open(struct sec_stranger *st);
void sec_stranger_close(struct sec_stranger *st);

/*
 * sec_stranger_link -- fab_connect() to @addr with @priv (3 s bound).
 * 0 and *@out, or the connect's error.
 */
int sec_stranger_link(struct sec_stranger *st, const char *addr, const void *priv, size_t len,
                      struct fab_link **out);

/*
 * sec_stranger_access -- on @link, try to READ @len bytes at @addr/@rkey,
 * WRITE over them and FAA the first word, each waited up to 2 s.
 * Returns how many of the three succeeded; *@leaked: bytes of the READ
 * that equal the region's content (0 when the READ failed).
 */
int sec_stranger_access(struct sec_stranger *st, struct fab_link *link, const struct sec_region *s,
                        size_t *leaked);

/*
 * sec_attempt -- connect to @addr with @priv (@what names it in the
 * output); if it connects, try every access (sec_stranger_access()),
 * adding what was served to *@served and the bytes read to *@leaked.
 * Returns the connect's result.
 */
int sec_attempt(struct sec_stranger *st, const char *addr, const struct sec_region *s,
                const char *what, const void *priv, size_t len, int *served, size_t *leaked);

/* sec_random -- @len random bytes. */
void sec_random(void *buf, size_t len);

/* sec_rss_kb / sec_fd_count -- this process's resident memory and open file descriptors. */
long sec_rss_kb(void);
int sec_fd_count(void);

#endif /* LOCO_TESTS_SEC_H */
