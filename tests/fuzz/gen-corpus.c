/* SPDX-License-Identifier: BSD-2-Clause */
/* gen-corpus.c -- write the seed corpus of fuzz-tcp-wire (corpus/tcp-wire/) */
/*
 * Run once after a change of the wire format or of the fuzz target's
 * table, then commit the files:
 *   build/tests/fuzz/fuzz-gen-corpus tests/fuzz/corpus/tcp-wire
 * Keys and addresses follow fuzz-tcp-wire.c: regions A (0, 256 B, rw +
 * atomic), B (1024, 2048 B, read-only), C (4096, removed), D (6144, 64 B,
 * atomic-only) at FUZZ_VBASE + offset; keys are generation << 2 | slot (the fuzzer's 3-slot table)
 * in the order the target registers them.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tcp/wire.h"

#define FUZZ_VBASE 0x0000100000000000ull
#define KEY_A      0x00000004u
#define KEY_B      0x00000005u
#define KEY_C      0x00000006u /* stale */
#define KEY_D      0x0000000au
#define FL_FL      (TCP_FL_FIRST | TCP_FL_LAST)

static const char *outdir;
static uint8_t buf[4 * (TCP_HDR_LEN + TCP_MAX_SEG)];
static size_t used;

/* put -- append frame @f (and its payload: a byte pattern, or a hello) to buf. */
static void put(struct tcp_frame f)
{
	if (used + TCP_HDR_LEN + f.len > sizeof(buf))
		abort();
	tcp_wire_encode(&f, buf + used);
	used += TCP_HDR_LEN;
	for (uint32_t i = 0; i < f.len; i++)
		buf[used + i] = (uint8_t)(0x30 + i % 64);
	used += f.len;
}

static void put_hello(uint8_t type, uint16_t priv_len, uint32_t sq, uint32_t rw, uint32_t magic)
{
	struct tcp_hello h = {
	    .magic = magic,
	    .version = TCP_VERSION,
	    .priv_len = priv_len,
	    .sq_depth = sq,
	    .read_window = rw,
	};

	memcpy(h.priv, "loco-fuzz-seed-private-data-of-forty-eight-bytes", TCP_PRIV_MAX);
	put((struct tcp_frame){.type = type, .flags = FL_FL, .len = TCP_HELLO_LEN});
	tcp_hello_encode(&h, buf + used - TCP_HELLO_LEN);
}

/* emit -- write the first @len bytes of buf (all when @len is 0) to @name, then clear. */
static void emit(const char *name, size_t len)
{
	char path[4096];
	FILE *fp;

	snprintf(path, sizeof(path), "%s/%s", outdir, name);
	fp = fopen(path, "wb");
	if (fp == NULL || fwrite(buf, 1, len ? len : used, fp) != (len ? len : used) ||
	    fclose(fp) != 0) {
		perror(path);
		exit(1);
	}
	used = 0;
}

static struct tcp_frame req(uint8_t type, uint32_t key, uint64_t off, uint32_t len, uint64_t a)
{
	return (struct tcp_frame){.type = type,
	                          .flags = FL_FL,
	                          .len = len,
	                          .psn = 1,
	                          .key = key,
	                          .addr = FUZZ_VBASE + off,
	                          .a = a};
}

int main(int argc, char **argv)
{
	struct tcp_frame f;

	if (argc != 2) {
		fprintf(stderr, "usage: %s OUTDIR\n", argv[0]);
		return 1;
	}
	outdir = argv[1];

	put_hello(TCP_F_HELLO, 14, 256, 1u << 20, TCP_MAGIC);
	emit("hello", 0);
	put_hello(TCP_F_HELLO_ACK, 0, 1, TCP_MAX_SEG, TCP_MAGIC);
	emit("hello-ack", 0);
	put_hello(TCP_F_HELLO, TCP_PRIV_MAX, 65536, 64u << 20, TCP_MAGIC);
	emit("hello-limits", 0);
	put_hello(TCP_F_HELLO, 4, 256, 1u << 20, TCP_MAGIC ^ 1);
	emit("hello-bad-magic", 0);
	put_hello(TCP_F_HELLO, 4, 0, 1u << 20, TCP_MAGIC);
	emit("hello-bad-sq-depth", 0);

	put(req(TCP_F_WRITE, KEY_A, 16, 32, 32));
	emit("write-a", 0);
	f = req(TCP_F_WRITE_IMM, KEY_A, 0, 256, 256);
	f.flags |= TCP_FL_ACKREQ;
	f.b = 0xabcd;
	put(f);
	emit("write-imm-a-whole", 0);
	f = req(TCP_F_WRITE, KEY_A, 0, 100, 200);
	f.flags = TCP_FL_FIRST;
	put(f);
	f = req(TCP_F_WRITE, KEY_A, 100, 100, 200);
	f.flags = TCP_FL_LAST;
	put(f);
	emit("write-a-two-segments", 0);
	put(req(TCP_F_READ, KEY_A, 8, 0, 64));
	emit("read-a", 0);
	put(req(TCP_F_READ, KEY_B, 1024, 0, 2048));
	emit("read-b-whole", 0);
	f = req(TCP_F_CAS, KEY_A, 64, 0, 0);
	f.b = 42;
	put(f);
	emit("cas-a", 0);
	put(req(TCP_F_FAA, KEY_A, 72, 0, 1));
	emit("faa-a", 0);
	put(req(TCP_F_FAA, KEY_D, 6144 + 56, 0, 5));
	emit("faa-d", 0);
	put(req(TCP_F_CAS, KEY_A, 68, 0, 0));
	emit("cas-a-misaligned", 0);
	f = req(TCP_F_SEND, 0x1234, 0, 16, 0);
	f.flags |= TCP_FL_HAS_IMM;
	put(f);
	emit("send", 0);

	/* refused accesses */
	put(req(TCP_F_WRITE, KEY_B, 1024, 8, 8));
	emit("refused-write-read-only", 0);
	put(req(TCP_F_READ, KEY_C, 4096, 0, 8));
	emit("refused-stale-key", 0);
	put(req(TCP_F_READ, KEY_D, 6144, 0, 8));
	emit("refused-read-atomic-only", 0);
	put(req(TCP_F_READ, KEY_A, 250, 0, 8));
	emit("refused-read-past-end", 0);
	put(req(TCP_F_WRITE, KEY_A, 0ull - FUZZ_VBASE - 8, 16, 16));
	emit("refused-write-wraps", 0);
	put(req(TCP_F_FAA, KEY_A, (uint64_t)-16, 0, 1));
	emit("refused-faa-below-base", 0);

	/* responses, one stream */
	put((struct tcp_frame){.type = TCP_F_ACK, .psn = 7});
	put((struct tcp_frame){.type = TCP_F_READ_RESP, .flags = FL_FL, .len = 32, .psn = 8});
	put((struct tcp_frame){.type = TCP_F_ATOMIC_RESP, .psn = 9, .a = 99});
	put((struct tcp_frame){.type = TCP_F_CREDIT, .a = 3});
	put((struct tcp_frame){.type = TCP_F_NAK, .psn = 10, .key = 13});
	emit("responses", 0);

	/* a session: hello, requests, then truncated copies */
	put_hello(TCP_F_HELLO, 8, 128, 1u << 20, TCP_MAGIC);
	put(req(TCP_F_WRITE, KEY_A, 0, 128, 128));
	put(req(TCP_F_READ, KEY_B, 2048, 0, 512));
	put(req(TCP_F_CAS, KEY_A, 128, 0, 0));
	put(req(TCP_F_FAA, KEY_D, 6144, 0, 2));
	put((struct tcp_frame){.type = TCP_F_ACK, .psn = 3});
	emit("stream", 0);
	put_hello(TCP_F_HELLO, 8, 128, 1u << 20, TCP_MAGIC);
	put(req(TCP_F_WRITE, KEY_A, 0, 128, 128));
	put((struct tcp_frame){.type = TCP_F_ACK, .psn = 3});
	emit("stream-cut-in-header", used - 20);
	put_hello(TCP_F_HELLO, 8, 128, 1u << 20, TCP_MAGIC);
	put(req(TCP_F_WRITE, KEY_A, 0, 128, 128));
	emit("stream-cut-in-payload", used - 50);
	put(req(TCP_F_WRITE, KEY_A, 0, TCP_MAX_SEG, TCP_MAX_SEG));
	emit("write-max-seg-incomplete", TCP_HDR_LEN + 100);

	/* malformed headers, each after a good frame */
	put((struct tcp_frame){.type = TCP_F_ACK});
	put((struct tcp_frame){.type = TCP_F_MAX_});
	emit("bad-type", 0);
	put((struct tcp_frame){.type = TCP_F_ACK});
	put((struct tcp_frame){.type = TCP_F_ACK, .flags = 0x10});
	emit("bad-flags", 0);
	put((struct tcp_frame){.type = TCP_F_ACK});
	buf[2] = 1;
	emit("bad-reserved", 0);
	put(req(TCP_F_READ, KEY_A, 0, 0, 0));
	emit("bad-read-zero", 0);
	put(req(TCP_F_READ, KEY_A, 0, 0, TCP_MAX_SEG + 1));
	emit("bad-read-too-big", 0);
	put(req(TCP_F_CAS, KEY_A, 0, 8, 0));
	emit("bad-cas-with-payload", 0);

	/*
	 * A FIRST WRITE segment whose payload is longer than the whole WR it
	 * announces (a = 0, len = 16) at the end of region A: the provider
	 * checks only @a bytes, then lands @len. Traps until that is fixed.
	 */
	put(req(TCP_F_WRITE, KEY_A, 256, 16, 0));
	emit("write-first-len-above-a", 0);
	return 0;
}
