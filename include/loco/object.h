/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * loco/object.h -- objects: the object-author API (object callbacks,
 * handles, agreed parameters, object messages). See loco_object(3).
 *
 * An object lives in a channel (loco/channel.h) and owns registered
 * memory regions (loco/rop.h); everything a stock object needs is public:
 * objects/ includes only public headers, and a user can write an object
 * the same way. <loco/channel.h> includes this header.
 *
 * Thread safety: MT-safe. Object callbacks run on the manager's progress
 * thread (never on an application thread), without the manager's lock;
 * they may call any function of the object-author API, but must not wait:
 * no loco_channel_join(), loco_channel_destroy(), nor loco_ack_wait() with
 * a timeout.
 */
#ifndef LOCO_OBJECT_H
#define LOCO_OBJECT_H

#include <stddef.h>
#include <stdint.h>

#include <loco/manager.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct loco_channel loco_channel_t;
typedef struct loco_object loco_object_t;

#define LOCO_NAME_MAX 128 /* bytes of a full channel name or object/region name */

/*
 * Callbacks of an object: a peer paired in the channel, or left it.
 * @view: the number of the membership view that made the change (views
 * grow by one with every join, leave or failure the cluster agreed on;
 * a pairing made within one view carries that view's number).
 */
struct loco_object_ops {
	void (*peer_join)(loco_object_t *obj, uint32_t node, uint64_t view, void *arg);
	void (*peer_leave)(loco_object_t *obj, uint32_t node, uint64_t view, void *arg);
};

/*
 * Handles: how a handle that is gone says so (loco(7), MISUSE). Every
 * handle LOCO gives out -- manager, channel, object, ack key, poller and
 * each stock object -- is made with loco_handle_alloc() or its liboco
 * twin. Destroying it marks it dead and keeps its memory in a bounded,
 * process-wide graveyard instead of freeing it, so a call on it later
 * returns -EBADF rather than reading freed memory; loco_fini() kills
 * every handle of its manager still alive, so every call after it gets
 * -EBADF too. The graveyard holds the last 1024 dead handles (4 MiB at
 * most): a handle destroyed longer ago is really freed; a check on it
 * aborts with "loco: misuse: ... is not a live LOCO handle" while the
 * memory is unused, and cannot tell it from a new handle once malloc
 * reused it. An object author makes its handle with loco_handle_alloc(),
 * frees it with loco_handle_free(), and begins every entry point with
 * loco_handle_check(). Appeared in loco 0.10.
 */

/*
 * loco_handle_alloc -- @size zeroed bytes for an object's handle in @ch,
 * killed by loco_fini() of @ch's manager if still alive then. Returns 0
 * and sets *@out; -EINVAL (NULL, @size 0), -EBADF (@ch is gone), -ENOMEM.
 */
int loco_handle_alloc(loco_channel_t *ch, size_t size, void **out);

/* loco_handle_free -- mark @h dead and park it in the graveyard (never freed at once). NULL-safe. */
void loco_handle_free(void *h);

/*
 * loco_handle_check -- whether handle @h may be used: 0; -EINVAL (NULL);
 * -EBADF (destroyed, or its manager finished). Lock-free: one load. Aborts
 * with a message naming the misuse when @h is no handle at all (memory
 * freed past the graveyard; a pointer LOCO never gave, usually: the check
 * reads memory just before @h).
 */
int loco_handle_check(const void *h);

/*
 * loco_object_create -- register object @name (unique in the channel) in
 * @ch with callbacks @ops (may be NULL) and their @arg.
 * Returns 0 and sets *@out; -EINVAL, -EEXIST, -ENOMEM.
 */
int loco_object_create(loco_channel_t *ch, const char *name, const struct loco_object_ops *ops,
                       void *arg, loco_object_t **out);

/*
 * loco_object_destroy -- remove the object and tell the channel's peers;
 * its regions are deregistered and freed two failure bounds later (a
 * peer's WRITE that crossed the news lands in them, harmlessly; at most
 * 64 regions and 16 MiB are kept, the oldest go first). NULL-safe; a
 * second destroy logs the misuse and does nothing.
 */
void loco_object_destroy(loco_object_t *obj);

/* loco_object_channel -- the channel of @obj. */
loco_channel_t *loco_object_channel(const loco_object_t *obj);

/*
 * loco_object_status -- whether @obj may be used: 0; -LOCO_ENOTJOINED
 * (its channel was never joined: loco_channel_join()); -LOCO_EMISMATCH (a
 * peer holds the object with another value of a parameter agreed with
 * loco_object_agree(), or a region of another length: the pairing of the
 * object failed, for good, and the log names the object, both values and
 * the peer); -EINVAL (NULL). Lock-free: objects call it on their data
 * path. loco_region_remote() returns the same errors. Appeared in loco 0.4.
 */
int loco_object_status(const loco_object_t *obj);

#define LOCO_AGREE_MAX 8 /* parameters one object can agree on */

/*
 * loco_object_agree -- declare that every node holding @obj must give
 * parameter @key (a name as a region's: no '/', and "object/key" within
 * LOCO_NAME_MAX) the same @value: a row size, a host's node id. The
 * parameter travels with the channel's announcements and is checked when
 * peers pair, on both sides; regions of the object are checked the same
 * way by length, without a call. A mismatch is logged on both nodes and
 * makes the object's calls there return -LOCO_EMISMATCH
 * (loco_object_status()). Call it right after loco_object_create(),
 * before the object's regions. Returns 0 (also when @key already has
 * @value); -EEXIST (@key has another value), -ENOSPC (LOCO_AGREE_MAX
 * parameters, or the channel announces 16384 entries already, listed
 * regions and parameters together), -EINVAL. Appeared in loco 0.4.
 */
int loco_object_agree(loco_object_t *obj, const char *key, uint64_t value);

/*
 * loco_object_sync -- wait until every peer paired in @obj's channel holds
 * the object too: it announced every parameter of @obj and one of its
 * regions at least (the first an object makes: the one pushed to; some
 * regions are one node's only), so a push right after this returns
 * reaches each of them. An object made
 * after loco_channel_join() needs this before its first push (a peer that
 * has not made it yet has nowhere to take it). Returns the number of
 * those peers (>= 0); -ETIMEDOUT after @timeout_ns (< 0: forever; the log
 * names the peers that miss it); -LOCO_ENOTJOINED, -LOCO_EMISMATCH,
 * -LOCO_EPARTITION; -EINVAL. Appeared in loco 0.4.
 */
int loco_object_sync(loco_object_t *obj, int64_t timeout_ns);

/*
 * Object messages: a short message from an object to the object of the
 * same name, in the channel of the same full name, on another member,
 * over the control plane (not the fabric: for set-up, not for data).
 * They let an object make per-peer state on first use and hand over
 * unlisted regions, instead of announcing per-pair regions to every
 * member.
 *
 * Delivery: on the receiver's progress thread, under the rules of the
 * object callbacks, to the function set by loco_object_on_msg(); in the
 * order sent between one pair of objects; at most once. A message is
 * dropped (the log says so, at debug level) when the receiver has
 * no such object or no function set, when the sender is not a member of
 * the receiver's view any more, or when either node leaves or fails.
 * An object's peer_join callback for a node comes before any message
 * from that node's object; a peer_leave callback for a node comes after
 * the last message delivered from the incarnation that left.
 */
#define LOCO_OBJECT_MSG_MAX 1024u /* bytes of one object message */

typedef void (*loco_object_msg_fn)(loco_object_t *obj, uint32_t node, const void *msg, size_t len,
                                   void *arg);

/*
 * loco_object_on_msg -- deliver @obj's messages to @fn(@obj, sender,
 * bytes, length, @arg) from now on (NULL: drop them). Set it before
 * loco_channel_join() or loco_object_sync() so that no message is lost.
 * Returns 0; -EINVAL. Appeared in loco 0.10.
 */
int loco_object_on_msg(loco_object_t *obj, loco_object_msg_fn fn, void *arg);

/*
 * loco_object_send -- send the @len bytes at @msg (copied) to @obj's
 * namesake on member @node. Never waits: it may be called from
 * callbacks and pollers. Returns 0 when queued; -ENOTCONN (@node is not
 * a paired peer of the channel: not a member, left, or has not paired
 * yet), -EMSGSIZE (@len > LOCO_OBJECT_MSG_MAX), -LOCO_ENOTJOINED,
 * -ENOBUFS (the control connection to @node is that far behind),
 * -EINVAL. Appeared in loco 0.10.
 */
int loco_object_send(loco_object_t *obj, uint32_t node, const void *msg, size_t len);

#ifdef __cplusplus
}
#endif

#endif /* LOCO_OBJECT_H */
