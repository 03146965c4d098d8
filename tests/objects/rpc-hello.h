/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * rpc-hello.h -- handlers the rpc tests share: "hello" counts a one-way
 * call by its first caller, whose id is also its payload (so a call that
 * came down call_all's tree names its first caller, and a forwarder that
 * lied would be caught); "echo" answers with its arguments and returns
 * the caller's id. Include after scenario.h, in one file of a program.
 */
#ifndef LOCO_TESTS_RPC_HELLO_H
#define LOCO_TESTS_RPC_HELLO_H

#include <errno.h>
#include <string.h>

#include <loco/rpc.h>

#include "scenario.h"

static unsigned hellos[SC_MAX_NODES]; /* by the id of the first caller */

__attribute__((unused)) static int hello(void *arg, const loco_rpc_msg_t *msg, void *ret,
                                         size_t cap, size_t *rl)
{
	uint32_t from;

	(void)arg, (void)ret, (void)cap, (void)rl;
	SC_ASSERT_EQ(msg->len, sizeof(from));
	memcpy(&from, msg->data, sizeof(from));
	SC_ASSERT_EQ(from, msg->caller);
	SC_ASSERT(from < SC_MAX_NODES);
	__atomic_add_fetch(&hellos[from], 1, __ATOMIC_RELAXED);
	return 0;
}

__attribute__((unused)) static int echo(void *arg, const loco_rpc_msg_t *msg, void *ret, size_t cap,
                                        size_t *rl)
{
	(void)arg;
	if (msg->len > cap)
		return -EMSGSIZE;
	memcpy(ret, msg->data, msg->len);
	*rl = msg->len;
	return (int)msg->caller;
}

#endif /* LOCO_TESTS_RPC_HELLO_H */
