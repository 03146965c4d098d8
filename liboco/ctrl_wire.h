/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * ctrl_wire.h -- messages of the control plane between managers.
 *
 * A TCP connection between two managers carries length-prefixed,
 * versioned messages. All integers are little-endian. Header (24 bytes):
 *
 *   off size field
 *     0    4 len       whole message, header included (24..LC_CTRL_MAX_MSG)
 *     4    2 version   LC_CTRL_VERSION
 *     6    2 type      enum lc_msg_type
 *     8    4 src_node  sender's node id
 *    12    4 reserved  must be 0
 *    16    8 src_inc   sender's incarnation
 *
 * Body encodings (in field order of struct lc_msg's union member):
 *   u8/u16/u32/u64  fixed little-endian
 *   bytes[N]        N raw bytes (nonces, MACs)
 *   str             u16 length, then that many bytes: no NUL inside, at
 *                   most the field's maximum (LC_NAME_MAX, LC_ADDR_MAX, ...)
 *   array           u32 count (at most the array's maximum), then entries
 * The body must be consumed exactly: trailing bytes are an error.
 *
 *   HELLO        nonce[32], u32 flags, str fabric, member self
 *   CHALLENGE    nonce[32], mac[32]
 *   AUTH         mac[32]
 *   WELCOME      array of member (the sender's view, itself included)
 *   REFUSE       u32 err (positive errno or LOCO_E*), str reason
 *   MEMBER_JOIN  member
 *   MEMBER_LEAVE u32 node, u64 inc, u32 reason (enum lc_leave_reason)
 *   HEARTBEAT    u64 seq
 *   CHAN         str name, u32 flags, u32 nodes, u32 first, u32 total,
 *                array of region (entries first .. first + count - 1 of the
 *                sender's total; first + count <= total <= LC_CHAN_ENTRIES_MAX)
 *   CHAN_LEAVE   str name
 *   LEAVE        (empty body)
 *   OBJ          str chan, str object, u32 length (<= LC_OBJ_MSG_MAX), bytes
 *   VC           u32 kind, u64 view, u64 ballot, u64 abal, u32 node, u64 inc,
 *                u32 flag, array of member (view.h: the view-change protocol)
 *   member = u32 node, u64 inc, str ctrl_addr, str fab_addr
 *   region = str name, u64 addr, u64 len, u32 rkey, u32 access
 *   A channel announces any number of entries (up to LC_CHAN_ENTRIES_MAX):
 *   when they do not fit one CHAN (LC_MAX_REGIONS), it sends several in a
 *   row, first = 0, LC_MAX_REGIONS, ..., each with the same total; the
 *   receiver acts only when the last page (first + count == total) has
 *   come after all the others in order, and only that page's flags count.
 *   A region entry whose access has LC_REGION_PARAM set is an object's
 *   agreed parameter (loco_object_agree()): name "object/key", addr the
 *   value, len, rkey and the other access bits 0 (the receiver checks).
 */
#ifndef LOCO_CTRL_WIRE_H
#define LOCO_CTRL_WIRE_H

#include <stddef.h>
#include <stdint.h>

#define LC_CTRL_VERSION     2 /* 2: CHAN in pages (first, total), OBJ; 1 before */
#define LC_CTRL_HDR_LEN     24
#define LC_CTRL_MAX_MSG     (64u * 1024)
#define LC_NAME_MAX         128 /* channel full names, region names (bytes, no NUL) */
#define LC_ADDR_MAX         64  /* "ip:port" */
#define LC_FABRIC_MAX       16
#define LC_MAX_MEMBERS      256
#define LC_MAX_REGIONS      64     /* entries in one CHAN message (one page of an announcement) */
#define LC_CHAN_ENTRIES_MAX 16384u /* entries (regions + parameters) a channel announces */
#define LC_OBJ_MSG_MAX      1024   /* bytes of an object message's payload (LOCO_OBJECT_MSG_MAX) */
#define LC_NONCE_LEN        32
#define LC_MAC_LEN          32

enum lc_msg_type {
	LC_MSG_HELLO = 1, /* connector -> acceptor: who I am, a nonce */
	LC_MSG_CHALLENGE, /* acceptor -> connector: its nonce, its proof of the secret */
	LC_MSG_AUTH,      /* connector -> acceptor: its proof of the secret */
	LC_MSG_WELCOME,   /* acceptor -> connector: the member list */
	LC_MSG_REFUSE,    /* either side: why the connection is refused; then close */
	LC_MSG_MEMBER_JOIN,
	LC_MSG_MEMBER_LEAVE,
	LC_MSG_HEARTBEAT,
	LC_MSG_CHAN,       /* a channel's regions on the sender; flags LC_CHAN_* */
	LC_MSG_CHAN_LEAVE, /* the sender left a channel */
	LC_MSG_LEAVE,      /* the sender leaves the cluster (graceful) */
	LC_MSG_VC,         /* membership views: enum lc_vc_kind (view.h) */
	LC_MSG_OBJ,        /* an object's message to its namesake (loco_object_send()) */
	LC_MSG_MAX_,
};

enum lc_hello_flags {
	LC_HELLO_JOIN = 1 << 0, /* the sender is joining: send it the member list */
};

enum lc_chan_flags {
	LC_CHAN_REPLY = 1 << 0, /* answer with your own CHAN for this name */
};

/* lc_region_info.access: LOCO_ACCESS_* of a region, or this bit: a parameter (see above). */
#define LC_REGION_PARAM (1u << 31)

enum lc_leave_reason {
	LC_LEAVE_GRACEFUL = 1,
	LC_LEAVE_FAILED = 2,
};

struct lc_member_info {
	uint32_t node;
	uint64_t inc;
	char ctrl_addr[LC_ADDR_MAX + 1]; /* NUL-terminated */
	char fab_addr[LC_ADDR_MAX + 1];
};

struct lc_region_info {
	char name[LC_NAME_MAX + 1];
	uint64_t addr;
	uint64_t len;
	uint32_t rkey;
	uint32_t access;
};

/* One decoded message. Large (WELCOME, CHAN): allocate it, don't put it on a small stack. */
struct lc_msg {
	uint16_t type;
	uint32_t src_node;
	uint64_t src_inc;
	union {
		struct {
			uint8_t nonce[LC_NONCE_LEN];
			uint32_t flags;
			char fabric[LC_FABRIC_MAX + 1];
			struct lc_member_info self;
		} hello;
		struct {
			uint8_t nonce[LC_NONCE_LEN];
			uint8_t mac[LC_MAC_LEN];
		} challenge;
		struct {
			uint8_t mac[LC_MAC_LEN];
		} auth;
		struct {
			uint32_t n;
			struct lc_member_info m[LC_MAX_MEMBERS];
		} welcome;
		struct {
			uint32_t err;
			char reason[LC_NAME_MAX + 1];
		} refuse;
		struct lc_member_info member_join;
		struct {
			uint32_t node;
			uint64_t inc;
			uint32_t reason;
		} member_leave;
		struct {
			uint64_t seq;
		} heartbeat;
		struct {
			char name[LC_NAME_MAX + 1];
			uint32_t flags;
			uint32_t nodes;
			uint32_t first; /* index of r[0] in the whole announcement */
			uint32_t total; /* entries in the whole announcement */
			uint32_t n;
			struct lc_region_info r[LC_MAX_REGIONS];
		} chan;
		struct {
			char name[LC_NAME_MAX + 1];
		} chan_leave;
		struct {
			uint32_t kind; /* enum lc_vc_kind; any value decodes */
			uint64_t view;
			uint64_t ballot;
			uint64_t abal;
			uint32_t node;
			uint64_t inc;
			uint32_t flag;
			uint32_t n;
			struct lc_member_info m[LC_MAX_MEMBERS];
		} vc;
		struct {
			char chan[LC_NAME_MAX + 1];
			char obj[LC_NAME_MAX + 1];
			uint32_t len;
			uint8_t data[LC_OBJ_MSG_MAX];
		} obj;
	} u;
};

/*
 * lc_ctrl_encode -- serialize @m into @buf (@cap bytes).
 * Returns the message length; -EINVAL (unknown type, a string too long,
 * a count over its maximum, a CHAN page outside its total), -ENOSPC
 * (@cap too small).
 */
long lc_ctrl_encode(const struct lc_msg *m, uint8_t *buf, size_t cap);

/*
 * lc_ctrl_peek -- from the first @avail bytes of a stream, the length of
 * the next message: > 0 the length (whole message may not be there yet),
 * 0 when fewer than 4 bytes are there, -EPROTO when the length is outside
 * [LC_CTRL_HDR_LEN, LC_CTRL_MAX_MSG].
 */
long lc_ctrl_peek(const uint8_t *buf, size_t avail);

/*
 * lc_ctrl_decode -- parse and check one whole message of @len bytes.
 * Returns 0 and fills *@m; -EPROTONOSUPPORT for another version; -EPROTO
 * for anything malformed (length mismatch, reserved bits, unknown type,
 * a string too long or holding a NUL, a count over its maximum, a CHAN
 * page outside its announcement (first + count > total, or total over
 * LC_CHAN_ENTRIES_MAX), trailing
 * or missing body bytes). Never reads past @len.
 */
int lc_ctrl_decode(const uint8_t *buf, size_t len, struct lc_msg *m);

/* lc_msg_type_str -- "HELLO", "CHAN", ... for logs; "?" when unknown. */
const char *lc_msg_type_str(unsigned type);

#endif /* LOCO_CTRL_WIRE_H */
