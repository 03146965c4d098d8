/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * loco/rop.h -- registered regions and the remote operations on them:
 * WRITE, READ, CAS and FAA from a local region to a remote reference.
 * See loco_write(3). <loco/channel.h> includes this header.
 *
 * Thread safety: MT-safe. Remote operations and loco_region_remote() take
 * no lock; they may be called from object callbacks and pollers.
 */
#ifndef LOCO_ROP_H
#define LOCO_ROP_H

#include <stddef.h>
#include <stdint.h>

#include <loco/ack.h>
#include <loco/object.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct loco_region loco_region_t;

/* Remote access rights of a region (local access is always allowed), and how it is made known. */
enum loco_access {
	LOCO_ACCESS_READ = 1 << 0,
	LOCO_ACCESS_WRITE = 1 << 1,
	LOCO_ACCESS_ATOMIC = 1 << 2,
	/*
	 * Not announced: the channel's peers do not learn of the region
	 * (loco_region_remote() on them gives -ENOENT) and it takes no
	 * announced entry. Its owner gives its reference (loco_region_rref())
	 * to the peers it chooses, e.g. in an object message: per-peer state
	 * made on first use, without telling every member. Appeared in loco 0.10.
	 */
	LOCO_ACCESS_UNLISTED = 1 << 3,
};

/* A remote memory reference: usable by reads, writes and atomics. */
typedef struct loco_rref {
	uint32_t node;
	uint32_t rkey;
	uint64_t addr;
	uint64_t len;
} loco_rref_t;

/*
 * loco_region_create -- @len bytes of zeroed registered memory for @obj,
 * remotely accessible as @access says, announced to the channel's peers
 * under @name (unless LOCO_ACCESS_UNLISTED). Registration happens here,
 * never on the data path. A channel announces any number of regions and
 * parameters, up to 16384 (a bound against hostile peers, which size
 * their buffers by it, and what a control connection's queue holds at
 * once). Returns 0 and sets *@out; -EINVAL, -EEXIST, -ENOSPC (a listed
 * region, and the channel announces 16384 entries already), -ENOMEM, or
 * the fabric's error.
 */
int loco_region_create(loco_object_t *obj, const char *name, size_t len, unsigned access,
                       loco_region_t **out);

/*
 * loco_region_rref -- this node's own reference to @r (node: this node),
 * as a peer passes it to the remote operations: for handing an unlisted
 * region (LOCO_ACCESS_UNLISTED) to a chosen peer. Writes *@out; returns
 * 0, -EINVAL (NULL). Appeared in loco 0.10.
 */
int loco_region_rref(const loco_region_t *r, loco_rref_t *out);

/*
 * loco_region_register -- a region over @len bytes of this process's own
 * memory at @ptr (any mapping: heap, stack, mmap), for @obj, remotely
 * accessible as @access says, never announced (as LOCO_ACCESS_UNLISTED:
 * give its loco_region_rref() to the peers that may reach it). LOCO
 * neither zeroes nor frees the memory; the caller keeps it mapped until
 * loco_region_unregister() (or its object's destruction). Registration
 * costs a system call or a device's pinning: done once, not per
 * operation. Returns 0 and sets *@out; -EINVAL, -EFAULT (a page of the
 * range is not mapped), -ENOMEM, or the fabric's error. Since loco 0.11.
 */
int loco_region_register(loco_object_t *obj, void *ptr, size_t len, unsigned access,
                         loco_region_t **out);

/*
 * loco_region_unregister -- end a region of loco_region_register() at once
 * (a peer's later access to it fails with -EACCES, which on RDMA breaks
 * that peer's link: unregister once no peer reaches it any more). The
 * memory stays the caller's. Returns 0; -EINVAL (NULL, or a region of
 * loco_region_create()). Since loco 0.11.
 */
int loco_region_unregister(loco_region_t *r);

/*
 * loco_region_valid -- whether the memory of a registered region is still
 * there: -EFAULT once a page of it is unmapped (freed to the system,
 * munmap(2)), found with mincore(2); 0 otherwise, and always for regions
 * of loco_region_create(). Memory unmapped and mapped again at the same
 * address is not told apart. -EINVAL (NULL). Since loco 0.11.
 */
int loco_region_valid(const loco_region_t *r);

/* loco_region_ptr / loco_region_len -- the local memory of @r. */
void *loco_region_ptr(const loco_region_t *r);
size_t loco_region_len(const loco_region_t *r);

/*
 * loco_region_remote -- the region of the same object and name on peer
 * @node. Returns 0 and sets *@out; -ENOENT when that peer has none (yet);
 * -LOCO_ENOTJOINED and -LOCO_EMISMATCH as loco_object_status() (also for
 * this node's own copy).
 */
int loco_region_remote(const loco_region_t *r, uint32_t node, loco_rref_t *out);

/*
 * Remote operations. The local side is [@loff, @loff + @len) of @local
 * (which must be registered memory of this node); the remote side starts
 * at @roff in @remote. With @ack, the operation is attached to it and
 * loco_ack_wait(ack) reports its completion; without, it is fire-and-forget
 * and errors are only logged. Requests to one node execute there in order.
 * Return 0 when posted; -EINVAL (out of bounds, misaligned atomic),
 * -ENOTCONN (no link to that node), -EAGAIN (queue or ack key full).
 */
int loco_write(loco_region_t *local, size_t loff, const loco_rref_t *remote, size_t roff,
               size_t len, loco_ack_key_t *ack);
int loco_read(loco_region_t *local, size_t loff, const loco_rref_t *remote, size_t roff, size_t len,
              loco_ack_key_t *ack);

/*
 * loco_write_inline -- loco_write() whose payload is copied when the call
 * returns (as IBV_SEND_INLINE): [@loff, @loff + @len) may change at once,
 * before the completion. Returns as loco_write(); -EMSGSIZE when @len
 * exceeds what the fabric of the link to that node copies at post (256
 * bytes on tcp and shm; on verbs what the device takes inline), and then
 * nothing was posted: use loco_write() from a buffer that stays. On shm a
 * WRITE of any length is taken when it runs at post, that is when no
 * earlier request waits on the link (it has landed when the call
 * returns): above 256 bytes, -EMSGSIZE there means "not now". Appeared in
 * loco 0.7.
 */
int loco_write_inline(loco_region_t *local, size_t loff, const loco_rref_t *remote, size_t roff,
                      size_t len, loco_ack_key_t *ack);

/*
 * loco_write_acks -- loco_write() whose completion reaches every key of
 * @acks[0 .. @nacks) (at most LOCO_OP_ACKS_MAX; NULL entries are
 * skipped): e.g. a key that guards the source buffer's reuse and the
 * caller's key, with one WRITE. Returns as loco_write(); -EINVAL also for
 * @nacks > LOCO_OP_ACKS_MAX or keys of another manager.
 */
#define LOCO_OP_ACKS_MAX 2
int loco_write_acks(loco_region_t *local, size_t loff, const loco_rref_t *remote, size_t roff,
                    size_t len, loco_ack_key_t *const *acks, unsigned nacks);

/*
 * loco_cas / loco_faa -- 8-byte atomics on an 8-byte aligned remote word;
 * the old value lands at @loff of @local (8-byte aligned).
 */
int loco_cas(loco_region_t *local, size_t loff, const loco_rref_t *remote, size_t roff,
             uint64_t compare, uint64_t swap, loco_ack_key_t *ack);
int loco_faa(loco_region_t *local, size_t loff, const loco_rref_t *remote, size_t roff,
             uint64_t add, loco_ack_key_t *ack);

/*
 * A remote reference bound to its link, for the posts of a hot loop
 * (loco_rop_post()): @rref is the reference it was bound from (read it,
 * never write it); the rest is liboco's, the link of @rref.node found at
 * loco_rhandle_bind(). A post that finds the node's link replaced since
 * (the node came back, or its link was redialled) looks it up again and
 * keeps the answer in the handle, so a handle is good for as long as its
 * reference is. Threads may post through one handle at once. Since loco 0.11.
 */
typedef struct loco_rhandle {
	loco_rref_t rref;
	uint64_t private_[2];
} loco_rhandle_t;

/*
 * loco_rhandle_bind -- @remote bound, for posts from the node of region
 * @r (e.g. the region loco_region_remote() gave @remote for), in *@out.
 * The node need not have a link yet (the first post then looks for it).
 * Returns 0; -EINVAL (NULL). Since loco 0.11.
 */
int loco_rhandle_bind(const loco_region_t *r, const loco_rref_t *remote, loco_rhandle_t *out);

/*
 * loco_rhandle_link -- which data link to @h's node posts take now, in
 * *@out: a number each new link gets, never 0, never given twice by one
 * manager. It changes when the link is made again after a failure (the
 * node stays a member: what was in flight on the old link may be lost
 * without an error to a post that asked for none) and when the node
 * comes back. For an object that repairs its own stream (loco_rpipe(3)
 * READs what it may have missed). A snapshot, and cheap (no lock, no
 * system call). Returns 0; -ENOTCONN (no link to the node now); -EINVAL
 * (NULL, or @h was never bound). @h must have been bound from a region
 * that still exists. Thread-safe. Since loco 0.11.
 */
int loco_rhandle_link(const loco_rhandle_t *h, uint64_t *out);

/* The operations loco_rop_post() posts: as loco_write() and the rest. */
enum loco_rop_opcode {
	LOCO_ROP_WRITE = 1,
	LOCO_ROP_READ = 2,
	LOCO_ROP_CAS = 3, /* @compare, @value: the swap */
	LOCO_ROP_FAA = 4, /* @value: the add */
};

#define LOCO_ROP_INLINE (1u << 0) /* WRITE: as loco_write_inline() */
/*
 * More posts to the same node follow at once (this thread's next post):
 * the fabric may hold this one until that post and send both together
 * (tcp: one socket write, one turn of the target). Follow it with a post
 * without the flag: with none, the operation starts when the fabric next
 * looks (tcp: a waiter's next turn, or at most 100 ms). shm and verbs
 * ignore it. Since loco 0.11.
 */
#define LOCO_ROP_MORE (1u << 1)

/*
 * Nobody waits for this operation's completion soon (a fire-and-forget
 * WRITE, or one whose keys nobody waits on at once): as LOCO_ACK_LAZY for
 * a key, the tcp fabric's target may hold its ACK back until it next
 * sends on the link (the answer to this node's next request), or about
 * 200 us at most, instead of sending a frame of its own that the
 * initiator must then read. shm and verbs ignore it. Since loco 0.11.
 */
#define LOCO_ROP_LAZY (1u << 2)

/*
 * One remote operation: [@loff, @loff + @len) of @local and @roff of the
 * handle's reference; atomics take 8 bytes whatever @len says. Each
 * non-NULL key of @acks gets its completion (as loco_write_acks()); none:
 * fire-and-forget. @reserved must be 0. Since loco 0.11.
 */
typedef struct loco_rop {
	uint32_t opcode; /* enum loco_rop_opcode */
	uint32_t flags;  /* LOCO_ROP_INLINE, LOCO_ROP_MORE, LOCO_ROP_LAZY */
	loco_region_t *local;
	uint64_t loff;
	uint64_t roff;
	uint64_t len;
	uint64_t compare;
	uint64_t value;
	loco_ack_key_t *acks[LOCO_OP_ACKS_MAX];
	uint64_t reserved;
} loco_rop_t;

/*
 * loco_rop_post -- post @op to @h's reference: what loco_write(),
 * loco_write_inline(), loco_write_acks(), loco_read(), loco_cas() and
 * loco_faa() do, through the link @h holds instead of a lookup of the
 * node's. Returns as they do; -EINVAL also for an unknown opcode or flag,
 * or @reserved not 0. Since loco 0.11.
 */
int loco_rop_post(loco_rhandle_t *h, const loco_rop_t *op);

#ifdef __cplusplus
}
#endif

#endif /* LOCO_ROP_H */
