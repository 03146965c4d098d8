/* SPDX-License-Identifier: BSD-2-Clause */
/* sock.h -- socket helpers shared by the control plane and the tcp provider. */
#ifndef LOCO_SOCK_H
#define LOCO_SOCK_H

#include <stddef.h>
#include <stdint.h>

#include "clock.h"

/*
 * lc_sock_io_full -- send (@out) or receive exactly @len bytes on @fd,
 * blocking in poll() until CLOCK_MONOTONIC @deadline_ns. Works on
 * blocking and non-blocking sockets alike. Returns 0; -ETIMEDOUT;
 * -ECONNRESET when the peer closed; another -errno of send/recv/poll.
 */
int lc_sock_io_full(int fd, void *buf, size_t len, int out, uint64_t deadline_ns);

/*
 * lc_sock_close -- close @fd (< 0: nothing) after reading and dropping what
 * already came and was not read (at most 64 reads, never blocking): a TCP
 * socket closed with unread bytes sends a RST instead of a FIN, which the
 * peer takes for an error (ECONNRESET) and which can cost it the last
 * bytes we sent (a VIEW that tells a leaver it is out, a NAK).
 */
void lc_sock_close(int fd);

/*
 * lc_sock_drain -- read and drop what @fd has, never blocking (at most 64
 * reads): 1 while more may come, 0 at its EOF or an error.
 */
int lc_sock_drain(int fd);

/*
 * lc_sock_close_all -- close the @n sockets @fd[] (< 0: skipped; each set
 * to -1) with a FIN and no RST: each sends its FIN first (shutdown), then
 * what the peers still send is read and dropped until each peer's FIN, for
 * @ms at most in all; only then are they closed. A close() with bytes
 * unread, or bytes that land after it, is answered with a RST, which can
 * cost the peer what we sent last (the end of a job: loco_fini()).
 */
void lc_sock_close_all(int *fd, unsigned n, unsigned ms);

#endif
