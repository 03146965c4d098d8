#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-2-Clause
#
# stop-norejoin.sh -- as stop-rejoin.sh, with LOCO_REJOIN=0: node 4, SIGSTOPped for 5 s and
# removed meanwhile, learns after SIGCONT that it was excluded and stays out: it keeps its
# incarnation, stays partitioned (its barrier returns -LOCO_EPARTITION, never a round alone),
# and nodes 1-3 keep their view of 3 and their rounds.
#
#   bash stop-norejoin.sh VIEW-NODE
# shellcheck source=tests/scenarios/driver.sh
source "$(dirname "${BASH_SOURCE[0]}")/driver.sh"
# shellcheck source=tests/scenarios/views-lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/views-lib.sh"

export LOCO_REJOIN=0
vl_start 4
inc4=$(vl_get 4 inc)
kill -STOP "${VL_PID[4]}"
ok "SIGSTOPped node 4"
vl_wait 5 vl_one_view 1 2 3 || fail "nodes 1-3 did not remove node 4 within 5 s"
sleep 5
kill -CONT "${VL_PID[4]}"
ok "SIGCONTed node 4"
vl_wait 10 vl_gt 4 excluded 0 || fail "node 4 did not learn that it was excluded"
e=$(vl_get 4 epart)
sleep 3
vl_one_view 1 2 3 || fail "nodes 1-3 are not in one view of 3"
[[ $(vl_get 4 rejoined) -eq 0 ]] || fail "node 4 rejoined with LOCO_REJOIN=0"
[[ $(vl_get 4 inc) == "$inc4" ]] || fail "node 4 changed its incarnation"
[[ $(vl_get 4 partitioned) -eq 1 ]] || fail "node 4 is not partitioned"
(($(vl_get 4 epart) > e)) || fail "node 4's waits do not return -LOCO_EPARTITION"
[[ $(vl_get 4 solo) -eq 0 ]] || fail "node 4 passed $(vl_get 4 solo) round(s) alone"
vl_show
vl_stop
finish
