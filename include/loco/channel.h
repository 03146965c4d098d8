/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * loco/channel.h -- channels, and the object-author API.
 *
 * A channel has a full name ("kv/shard/sst": parent names joined by '/'),
 * an expected node count, and child objects. Each object owns registered
 * memory regions. loco_channel_join() pairs this node with every node
 * holding a channel of the same full name and exchanges region
 * descriptors; later joins and leaves reach the objects' callbacks.
 *
 * The object-author API is split by concept, and this header includes
 * every part, so an object author includes it alone: loco/object.h
 * (objects, handles, object messages), loco/rop.h (regions and remote
 * operations), loco/poller.h (pollers), loco/waiter.h (waiters),
 * loco/log.h (loco_log()).
 * objects/ includes only public headers; a user can write an object the
 * same way.
 *
 * Thread safety: MT-safe. Object callbacks run on the manager's progress
 * thread (never on an application thread), without the manager's lock;
 * they may call any function of these headers, but must not wait: no
 * loco_channel_join(), loco_channel_destroy(), nor loco_ack_wait() with a
 * timeout. Remote operations and loco_region_remote() take no lock.
 */
#ifndef LOCO_CHANNEL_H
#define LOCO_CHANNEL_H

#include <stddef.h>
#include <stdint.h>

#include <loco/ack.h>
#include <loco/log.h>
#include <loco/manager.h>
#include <loco/object.h>
#include <loco/poller.h>
#include <loco/rop.h>
#include <loco/waiter.h>

#ifdef __cplusplus
extern "C" {
#endif

/*
 * loco_channel_create -- a channel @name under @parent (NULL: top level),
 * expecting @nodes nodes (this one included; >= 1). Not yet announced.
 * Returns 0 and sets *@out; -EINVAL (bad name: empty, '/' inside, too
 * long), -EEXIST (this node has that full name already), -ENOMEM.
 */
int loco_channel_create(loco_manager_t *m, loco_channel_t *parent, const char *name, uint32_t nodes,
                        loco_channel_t **out);

/*
 * loco_channel_join -- announce the channel and its regions to the
 * cluster, pair with every node that holds the same full name, and wait
 * until @nodes - 1 peers are paired or @timeout_ns passes (< 0: forever).
 * Objects of a channel never joined fail with -LOCO_ENOTJOINED. Objects
 * made after the join are announced as they are made (see
 * loco_object_sync()). Returns 0; -ETIMEDOUT (the channel stays joined:
 * late peers still pair and reach the callbacks; the log says how many
 * paired, which members did not, and how many expected nodes are not
 * members at all); -LOCO_EPARTITION; -EINVAL.
 */
int loco_channel_join(loco_channel_t *ch, int64_t timeout_ns);

/*
 * loco_channel_destroy -- leave and free the channel. Returns 0, or -EBUSY
 * while objects or child channels remain in it (nothing is changed);
 * -EBADF when it was destroyed already or its manager finished.
 */
int loco_channel_destroy(loco_channel_t *ch);

/*
 * loco_channel_fence -- order the channel's later operations after its
 * earlier ones: at each peer, the next operation of @ch starts only after
 * every earlier operation of this node to that peer completed (READs and
 * atomics included, whose results a later WRITE may send on). Without a
 * fence, requests to one node execute in order, but a WRITE posted after a
 * READ may read its local source before the READ's data has landed.
 * Returns 0; -EINVAL.
 */
int loco_channel_fence(loco_channel_t *ch);

/* loco_channel_name -- the full name. */
const char *loco_channel_name(const loco_channel_t *ch);

/* loco_channel_manager -- the manager that owns @ch. */
loco_manager_t *loco_channel_manager(const loco_channel_t *ch);

/*
 * loco_channel_partitioned -- loco_manager_partitioned() of @ch's manager:
 * 1 when the node cannot reach a majority of its view (an object's waits
 * then return -LOCO_EPARTITION), else 0. Lock-free. See loco_channel(3).
 */
int loco_channel_partitioned(loco_channel_t *ch);

/*
 * loco_channel_peers -- the ids of the nodes paired in @ch (this node
 * excluded), ascending; up to @max written; returns the peer count.
 */
int loco_channel_peers(loco_channel_t *ch, uint32_t *ids, size_t max);

#ifdef __cplusplus
}
#endif

#endif /* LOCO_CHANNEL_H */
