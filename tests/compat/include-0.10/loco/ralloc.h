/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * loco/ralloc.h -- remote allocation of registered memory.
 *
 * Every node of the channel that makes the allocator exports a heap of
 * registered memory (its size and NUMA node chosen at create). Any node
 * allocates a block on any node's heap with loco_ralloc_alloc(): it gets a
 * loco_rptr_t whose rref ({node, rkey, addr, len}) goes straight to
 * loco_read(), loco_write(), loco_cas() and loco_faa() (loco/channel.h),
 * bounded to the block; loco_ralloc_free() gives the block back.
 *
 * The heap is cut into slices (agreed by every node); a table on the host
 * says which node owns each slice. An allocating node claims free slices
 * with one remote CAS each, a batch at a time, and then allocates inside
 * its slices on its own (its "shadow" of the host's heap): the common
 * case is a local operation, with no round trip and no work by the host's
 * CPU. Empty slices are given back in batches. When an allocating node
 * leaves the view, its host resets that node's slices to free. The
 * heuristic, the failure rules and the mapping to {node, addr, rkey, len}
 * are in loco_ralloc(3).
 *
 * Thread safety: MT-safe (one mutex per allocator; a slow path that
 * claims slices waits without holding it). Appeared in loco 0.5.
 */
#ifndef LOCO_RALLOC_H
#define LOCO_RALLOC_H

#include <stddef.h>
#include <stdint.h>

#include <loco/channel.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct loco_ralloc loco_ralloc_t;

#define LOCO_RALLOC_SLICE_DEFAULT (64u << 10) /* bytes of a slice when the config says 0 */
#define LOCO_RALLOC_SLICE_MIN     (4u << 10)
#define LOCO_RALLOC_SLICE_MAX     (1u << 20)
#define LOCO_RALLOC_BLOCK_MIN     64u /* the smallest block (and alignment) */
#define LOCO_RALLOC_BATCH_DEFAULT 4u  /* slices claimed by one refill */
#define LOCO_RALLOC_BATCH_MAX     64u

/*
 * The allocator's parameters. heap_len and slice_len must be the same on
 * every node (agreed at pairing: loco_object_status() says
 * -LOCO_EMISMATCH otherwise); batch, keep and numa_node are each node's.
 */
typedef struct loco_ralloc_config {
	size_t heap_len;  /* bytes of this node's heap: a multiple of slice_len, >= 1 slice */
	size_t slice_len; /* 0: LOCO_RALLOC_SLICE_DEFAULT; a power of two in [MIN, MAX] */
	unsigned batch;   /* slices claimed per refill: 0: LOCO_RALLOC_BATCH_DEFAULT; <= MAX */
	unsigned keep;    /* empty slices kept per host before giving back: 0: 2 * batch */
	int numa_node;    /* -1: where LOCO puts registered memory; >= 0: bind the heap there */
} loco_ralloc_config_t;

/*
 * A block: @rref is the remote reference of exactly the block ({node,
 * rkey, addr of its first byte, len as asked}); pass &p.rref to
 * loco_read() and the rest with offsets in [0, len). @gen is private: the
 * shadow of the host's heap it came from.
 */
typedef struct loco_rptr {
	loco_rref_t rref;
	uint64_t gen;
} loco_rptr_t;

/* What an allocator did (loco_ralloc_stats()). */
typedef struct loco_ralloc_stats {
	uint64_t allocs;      /* allocations that succeeded */
	uint64_t frees;       /* frees that succeeded */
	uint64_t slow;        /* refills: allocations that had to claim slices (round trips) */
	uint64_t claimed;     /* slices claimed (CASes won) */
	uint64_t lost;        /* claim CASes lost to another node */
	uint64_t returned;    /* slices given back */
	uint64_t reclaimed;   /* this node's heap: slices of departed nodes reset to free */
	uint64_t host_used;   /* this node's heap: slices owned now (its table, read locally) */
	uint64_t host_slices; /* this node's heap: slices in all */
	int heap_numa;        /* the NUMA node of the heap's first page (-1: unknown) */
} loco_ralloc_stats_t;

/*
 * loco_ralloc_create -- allocator @name in @ch with a heap as @cfg says
 * (before or after loco_channel_join(); made after, peers need
 * loco_object_sync() before they allocate on it). Returns 0 and sets
 * *@out; -EINVAL (NULL, a bad size, a NUMA node this machine lacks),
 * -EEXIST, -ENOSPC, -ENOMEM, or the fabric's error.
 */
int loco_ralloc_create(loco_channel_t *ch, const char *name, const loco_ralloc_config_t *cfg,
                       loco_ralloc_t **out);

/*
 * loco_ralloc_destroy -- give back every slice this node holds (waiting
 * up to 5 s for the CASes), then free the allocator and its heap. Blocks
 * still allocated from it are forgotten. NULL-safe.
 */
void loco_ralloc_destroy(loco_ralloc_t *ra);

/*
 * loco_ralloc_alloc -- a block of @len bytes (> 0) on node @node's heap
 * (this node's own included), 64-byte aligned, its size rounded up to a
 * power of two (a run of whole slices above one slice). Needs no round
 * trip while this node's slices there have room; otherwise claims slices,
 * waiting up to @timeout_ns (< 0: forever). Returns 0 and sets *@out;
 * -EINVAL; -EMSGSIZE (@len above the heap); -ENOMEM (no free slice: the
 * heap is exhausted, or too fragmented for a run); -ENOENT (@node holds
 * no heap of this allocator yet: not paired, or it made none);
 * -ECONNRESET (@node left the view, or the link to it failed during a
 * claim); -ETIMEDOUT (a claim still in flight is settled by a later
 * call); -EAGAIN (the fabric's queue is full); -LOCO_EPARTITION;
 * -LOCO_ENOTJOINED, -LOCO_EMISMATCH.
 */
int loco_ralloc_alloc(loco_ralloc_t *ra, uint32_t node, size_t len, loco_rptr_t *out,
                      int64_t timeout_ns);

/*
 * loco_ralloc_free -- give block @p back (local bookkeeping: a slice that
 * becomes empty is given back to its host in a batch later). Returns 0;
 * -EINVAL (not a live block of this allocator: a double free is caught
 * unless the block was allocated again); -ECONNRESET (the host left the
 * view since: its blocks are forgotten, nothing to free).
 */
int loco_ralloc_free(loco_ralloc_t *ra, const loco_rptr_t *p);

/*
 * loco_ralloc_trim -- give back every empty slice this node keeps, on
 * every host, and wait up to @timeout_ns for the CASes. Returns 0;
 * -ETIMEDOUT; -EINVAL.
 */
int loco_ralloc_trim(loco_ralloc_t *ra, int64_t timeout_ns);

/* loco_ralloc_stats -- the counters of @ra and of this node's heap. Returns 0; -EINVAL. */
int loco_ralloc_stats(loco_ralloc_t *ra, loco_ralloc_stats_t *out);

#ifdef __cplusplus
}
#endif

#endif /* LOCO_RALLOC_H */
