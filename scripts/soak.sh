#!/usr/bin/env bash
# The full soak (issue 16): weeks of generated chain of today's shape (Electra attestations)
# at a realistic validator count, wrapping the slasher's history SOAK_WRAPS times, replayed on
# butter@btrfs, lmdb@ext4 and lmdb@btrfs with a sample of the database and its filesystem every
# SOAK_SAMPLE_EVERY batches. It is `slasher-bench soak` run through `scripts/bench.sh`, so the
# rows run two at a time on their own cores and loop images, and the report (report.md: a soak
# table per row and one chart per sampled quantity) is merged the same way.
#
#   sudo scripts/soak.sh
#
# Environment (all optional):
#   SOAK_VALIDATORS    active validators (default 1100000, mainnet's in 2026)
#   SOAK_HISTORY       the slasher's history, epochs (default 16, the shortest Lighthouse's
#                      16-epoch chunks allow, so that the wrap-arounds happen in hours)
#   SOAK_WRAPS         wrap-arounds of the history (default 2; the chain is
#                      SOAK_WRAPS × SOAK_HISTORY + 2 epochs of 32 batches)
#   SOAK_SEED          generator seed (default 1)
#   SOAK_SAMPLE_EVERY  batches between samples (default 32, once per epoch)
#   SOAK_ROWS          rows (default butter@btrfs,lmdb@ext4,lmdb@btrfs)
#   SOAK_OUT           report directory (default: $CARGO_TARGET_DIR/soak/<date-time>)
#   and bench.sh's variables (BENCH_IMAGE_SIZE, BENCH_TMPDIR, BENCH_EXT4_DIR, BENCH_BTRFS_DIR,
#   BENCH_REPLAY_ARGS for further settings such as --tile-codec).
# Time on 2 cores at the defaults: about 9 s a batch per row at 1.1M validators (docs/runs/soak.md
# §6), so about 2.7 h per pair of rows and 5.5 h in all; with BENCH_REPLAY_ARGS="--tile-codec fast"
# a pair took 2 h (§6.3).
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$REPO"
TARGET=${CARGO_TARGET_DIR:-$REPO/target}
LOG_TAG=soak.sh
PACKAGES=()
# shellcheck source=scripts/common.sh
source "$REPO/scripts/common.sh"
BIN=$TARGET/$REPLAY_PROFILE/slasher-bench
VALIDATORS=${SOAK_VALIDATORS:-1100000}
HISTORY=${SOAK_HISTORY:-16}
WRAPS=${SOAK_WRAPS:-2}
SEED=${SOAK_SEED:-1}
EPOCHS=$((WRAPS * HISTORY + 2))
OUT=${SOAK_OUT:-$TARGET/soak/$(date +%Y%m%d-%H%M%S)}

find_cargo
[[ $(id -u) != 0 ]] || install_packages
cargo build --profile "$REPLAY_PROFILE" -q -p slasher-bench
fixture=$TARGET/fixtures/soak-electra-v$VALIDATORS-h$HISTORY-x$WRAPS-s$SEED.fixture
generated_fixture "$fixture" --validators "$VALIDATORS" --epochs "$EPOCHS" --seed "$SEED" \
    --history-length "$HISTORY" --name "soak-${VALIDATORS}v-h$HISTORY-x$WRAPS"
log "$EPOCHS epochs ($((EPOCHS * 32)) batches) of $VALIDATORS validators, history $HISTORY"
RC=0
BENCH_FIXTURE=$fixture BENCH_BATCHES=all BENCH_OUT=$OUT BENCH_HISTORY=$HISTORY \
    BENCH_ROWS=${SOAK_ROWS:-butter@btrfs,lmdb@ext4,lmdb@btrfs} \
    BENCH_REPLAY_ARGS="--sample-every ${SOAK_SAMPLE_EVERY:-32} ${BENCH_REPLAY_ARGS:-}" \
    "$REPO/scripts/bench.sh" || RC=$?
if [[ -f $OUT/report.md ]]; then
    log "soak table (trend, stalls, space; the charts are in $OUT/<row>/):"
    sed -n '/^| run | backend | warm batches/,/^$/p' "$OUT/report.md"
fi
exit "$RC"
