#!/usr/bin/env bash
# The scale table: butter@btrfs against lmdb@ext4 on generated fixtures of today's shape
# (Electra attestations, `slasher-bench generate`) at several validator counts, each count one
# `scripts/bench.sh` pair, merged into one report whose report.md has a "Scale" section.
#
#   sudo scripts/scale.sh
#
# Environment (all optional):
#   SCALE_VALIDATORS   validator counts (default "500000 1100000 2000000")
#   SCALE_EPOCHS       epochs per fixture (default 3: the cold epoch, the next, one steady)
#   SCALE_SEED         generator seed (default 1)
#   SCALE_START_EPOCH  the fixtures' first epoch (default 491000, the generator's: about
#                      mainnet's in late 2026, with the slasher's whole history window before
#                      it, so the first epoch rewrites every tile as on a node started today;
#                      given explicitly because it is part of the cached fixture's name)
#   SCALE_ROWS         rows of each pair (default lmdb@ext4,butter@btrfs)
#   SCALE_OUT          report directory (default: $CARGO_TARGET_DIR/scale/<date-time>)
#   BENCH_HISTORY      the slasher's history (default 4096, Lighthouse's): on 2 cores the
#                      1.1M pair alone takes ~97 min (its cold epoch ~75 min), the three
#                      counts several hours; BENCH_HISTORY=256 is much shorter
#   BENCH_REPLAY_ARGS  further replay settings for every row
#   and bench.sh's variables (BENCH_IMAGE_SIZE, BENCH_TMPDIR, BENCH_EXT4_DIR, BENCH_BTRFS_DIR).
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$REPO"
TARGET=${CARGO_TARGET_DIR:-$REPO/target}
LOG_TAG=scale.sh
PACKAGES=()
# shellcheck source=scripts/common.sh
source "$REPO/scripts/common.sh"
BIN=$TARGET/$REPLAY_PROFILE/slasher-bench
VALIDATORS=${SCALE_VALIDATORS:-500000 1100000 2000000}
EPOCHS=${SCALE_EPOCHS:-3}
SEED=${SCALE_SEED:-1}
START_EPOCH=${SCALE_START_EPOCH:-491000}
OUT=${SCALE_OUT:-$TARGET/scale/$(date +%Y%m%d-%H%M%S)}

find_cargo
[[ $(id -u) != 0 ]] || install_packages
cargo build --profile "$REPLAY_PROFILE" -q -p slasher-bench
mkdir -p "$OUT"
START=$SECONDS
RUNS=()
RC=0
for n in $VALIDATORS; do
    fixture=$TARGET/fixtures/synthetic-electra-v$n-e$EPOCHS-s$SEED-from$START_EPOCH.fixture
    generated_fixture "$fixture" --validators "$n" --epochs "$EPOCHS" --seed "$SEED" \
        --start-epoch "$START_EPOCH"
    log "validators $n: elapsed $((SECONDS - START)) s"
    BENCH_FIXTURE=$fixture BENCH_BATCHES=all BENCH_ROWS=${SCALE_ROWS:-lmdb@ext4,butter@btrfs} \
        BENCH_OUT=$OUT/v$n BENCH_HISTORY=${BENCH_HISTORY:-4096} "$REPO/scripts/bench.sh" || {
        RC=$?
        log "validators $n: bench.sh failed (exit $RC); going on"
    }
    for row in "$OUT/v$n"/*/; do
        [[ -f $row/report.json ]] && RUNS+=("${row%/}")
    done
done
((${#RUNS[@]})) || die "no run produced a report"
"$BIN" report "${RUNS[@]}" --out "$OUT" >/dev/null || RC=$?
log "done in $((SECONDS - START)) s; the scale table is in $OUT/report.md (section Scale)"
sed -n '/^## Scale/,/^## Run/p' "$OUT/report.md" | sed '$d'
exit "$RC"
