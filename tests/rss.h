/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * rss.h -- whether a test may judge resident memory. Under AddressSanitizer
 * it may not: the quarantine keeps freed blocks back (tens of MiB after a
 * burst), so RSS measures ASan, not the code; LeakSanitizer checks leaks at
 * exit instead, and the plain build checks the bounds.
 */
#ifndef LOCO_TESTS_RSS_H
#define LOCO_TESTS_RSS_H

#if defined(__SANITIZE_ADDRESS__)
#define RSS_CHECKED 0
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define RSS_CHECKED 0
#endif
#endif
#ifndef RSS_CHECKED
#define RSS_CHECKED 1
#endif

#endif /* LOCO_TESTS_RSS_H */
