/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * rpc_frame.h -- objects/-private: the rpc's frames in a ring message
 * and their decoder (rpc_frame.c, which depends on nothing else: the
 * fuzz target tests/fuzz/fuzz-rpc-frame.c builds it alone).
 *
 * A ring message (one rpipe record) holds one frame, or several when
 * the caller aggregates. A frame, 8-byte aligned:
 *   u32 plen     payload bytes after the header
 *   u8  kind     RF_CALL (one-way), RF_RET (result wanted), RF_PULL,
 *                RF_TREE (a one-way call to pass down a tree), RF_DEST
 *                (result wanted; the payload was WRITten to the callee)
 *   u8  rsv[3]   0
 *   u32 hid      handler id
 *   u32 slot     the caller's reply slot (RF_RET, RF_PULL)
 *   u32 ret_cap  bytes of result the caller takes; RF_TREE: how long, in
 *                ms, each node may wait to pass the call on (the first
 *                caller's timeout; UINT32_MAX: as long as the next lives)
 *   u32 rsv2     0
 *   u64 tag      the reply slot's tag (unique per call on that node)
 *   payload      plen bytes (RF_PULL: struct rf_pull), padded to 8
 * An RF_TREE payload: u32 origin (the node that called), u32 n, then n
 * u32 node ids (the subtree this node passes the call on to), then the
 * call's arguments (plen - 8 - 4 n bytes). An RF_TREEV payload (a buffer
 * broadcast, loco 0.12) is the same tree header and ids, then an RF_VEC
 * body: the bytes to READ from the sender (its slot and tag: where the
 * callee marks them consumed; no reply follows). ret_cap: as RF_TREE's.
 * The ring message is untrusted: every length is checked against what is
 * left of the message, and the kinds and the pull's extent too.
 */
#ifndef LOCO_OBJECTS_RPC_FRAME_H
#define LOCO_OBJECTS_RPC_FRAME_H

#include <stddef.h>
#include <stdint.h>

enum {
	RF_CALL = 1,
	RF_RET = 2,
	RF_PULL = 3,
	RF_TREE = 4,
	RF_DEST = 5,
	RF_VEC = 6,   /* loco_rpc_callv(): arguments copied, and arguments to READ (loco 0.11) */
	RF_TREEV = 7, /* loco_rpc_call_buffer_all(): a tree call whose bytes are READ (loco 0.12) */
};

#define RF_VEC_MAX 8u /* arguments of one RF_VEC frame (LOCO_RPC_ARGS_MAX) */

#define RF_TREE_MAX 4096u /* node ids one RF_TREE frame may name */

#define RF_HDR 32u

struct rf_hdr {
	uint32_t plen;
	uint8_t kind;
	uint8_t rsv[3];
	uint32_t hid;
	uint32_t slot;
	uint32_t ret_cap;
	uint32_t rsv2;
	uint64_t tag;
};

/* the payload of an RF_PULL frame: where the bytes are in the caller's send region */
struct rf_pull {
	uint64_t off;
	uint64_t len;
};

/* the payload of an RF_DEST frame: where the caller WROTE the bytes, on the callee */
struct rf_dest {
	uint64_t addr;
	uint64_t len;
	uint32_t rkey;
	uint32_t rsv;
};

/*
 * the payload of an RF_VEC frame: struct rf_vec, @n struct rf_varg, then
 * the copied arguments' bytes one after the other (no padding). The
 * callee lays the arguments out one after the other, in order, and runs
 * the handler on them: copied ones from the frame, the others READ from
 * the caller's memory (@addr, @rkey: a region the caller registered).
 */
struct rf_vec {
	uint32_t n;
	uint32_t rsv;
};

struct rf_varg {
	uint64_t len;
	uint64_t addr; /* RF_VARG_READ: where on the caller; copied: 0 */
	uint32_t rkey;
	uint32_t how; /* RF_VARG_COPY or RF_VARG_READ */
};

enum {
	RF_VARG_COPY = 0,
	RF_VARG_READ = 1
};

/* a decoded frame: payload points into the message */
struct rf_frame {
	struct rf_hdr h;
	const void *payload;
	struct rf_pull pull; /* RF_PULL only */
	struct rf_dest dest; /* RF_DEST only */
	/* RF_VEC, RF_TREEV: the arguments (unaligned: copy them out), the copied bytes, the total */
	uint32_t vn;
	const uint8_t *varg, *vcopy;
	uint64_t vlen;
	/* RF_TREE, RF_TREEV: who called, and the nodes to pass it on to (unaligned u32s) */
	uint32_t origin, nsub;
	const uint8_t *sub;
	/* the arguments: payload, or past the tree header for RF_TREE (RF_TREEV: its vec body) */
	const void *args;
	uint32_t alen;
};

/* limits the decoder checks frames against (the endpoint's agreed sizes) */
struct rf_limits {
	uint32_t slots; /* reply slots: slot < slots for RF_RET/RF_PULL/RF_DEST/RF_VEC/RF_TREEV */
	uint64_t pull_max; /* RF_PULL len in 1 .. pull_max */
	uint64_t send_len; /* RF_PULL off + len <= send_len */
};

static inline size_t rf_r8(size_t n)
{
	return (n + 7) & ~(size_t)7;
}

/*
 * rf_next -- decode the frame at *@pos of message @msg (@len bytes) into
 * *@f and advance *@pos. Returns 1 (a frame), 0 (end of the message), or
 * -EBADMSG (a malformed frame: the rest of the message is to be dropped).
 */
int rf_next(const void *msg, size_t len, size_t *pos, const struct rf_limits *lim,
            struct rf_frame *f);

#endif /* LOCO_OBJECTS_RPC_FRAME_H */
