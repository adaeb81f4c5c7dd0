#!/usr/bin/env bash
# The full history window (docs/runs/full-window.md §12): for each history, one
# `scripts/bench.sh` pair (butter@btrfs against lmdb@ext4 by default) whose rows each start
# from a database filled with that many epochs of regular chain (`replay --fill-epochs`),
# then replay the first 64 batches of a generated Electra chain at 1.1M validators, each row in
# its own memory cgroup on a direct-I/O loop device. The reports are merged into one.
#
#   sudo scripts/full-window.sh
#
# Environment (all optional):
#   FW_HISTORIES      histories in epochs (default "256": 15 min a pair on 2 cores; "64 128 256"
#                     is the growth table of §12.4, 38 min)
#   FW_VALIDATORS     validators (default 1100000)
#   FW_MEMORY_LIMIT   each row's memory cgroup limit (default 900M, a tenth of LMDB's database
#                     at history 256 and 1.1M validators)
#   FW_BATCHES        batches replayed after the fill (default 64: two epochs)
#   FW_ROWS           rows of each pair (default lmdb@ext4,butter@btrfs)
#   FW_OUT            report directory (default: $CARGO_TARGET_DIR/full-window/<date-time>)
#   FW_BACKUP_AT      K: once a row has replayed K batches, a full backup of its live database
#                     beside the replay (butter: a copy and its send stream, and a copy one
#                     batch later; LMDB: mdb_copy), and after the run the incremental streams
#                     over the first copy (1 and FW_BATCHES - K batches later), a restore and
#                     a check (scripts/full-window-row.sh). Unset: no backups. Root only.
#   FW_STREAM_DIR     where the send streams go (default FW_OUT/streams; not the rows' images)
#   BENCH_REPLAY_ARGS further replay settings for every row, and bench.sh's other variables
#                     (BENCH_TMPDIR, BENCH_EXT4_DIR, BENCH_BTRFS_DIR)
# Disk: two images of H/8 + 8 GiB each (sparse; LMDB's database is ~34 MiB an epoch of history
# at 1.1M validators, butter's about the same); with FW_BACKUP_AT, about twice the database
# more on each, and a full send stream in FW_STREAM_DIR.
#
# Each row keeps its database (`--keep-db`) and samples its filesystem every 2 batches
# (`--sample-every 2`, outside the timed part); after each pair scripts/full-window-row.sh
# measures butter's live data against that usage, runs `butter check`, and times reopening a
# copy after a SIGKILL of its writer (backend/examples/reopen.rs). Its `fw:` lines go to
# FW_OUT/ops.md; the databases go with the images.
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$REPO"
TARGET=${CARGO_TARGET_DIR:-$REPO/target}
LOG_TAG=full-window.sh
PACKAGES=(python3 lmdb-utils btrfs-progs e2fsprogs util-linux mount)
# shellcheck source=scripts/common.sh
source "$REPO/scripts/common.sh"
BIN=$TARGET/$REPLAY_PROFILE/slasher-bench
HISTORIES=${FW_HISTORIES:-256}
VALIDATORS=${FW_VALIDATORS:-1100000}
OUT=${FW_OUT:-$TARGET/full-window/$(date +%Y%m%d-%H%M%S)}

find_cargo
[[ $(id -u) != 0 ]] || install_packages
cargo build --profile "$REPLAY_PROFILE" -q -p slasher-bench -p butter-tools
cargo build --profile "$REPLAY_PROFILE" -q -p butter_db --example reopen
mkdir -p "$OUT"
export FW_BIN_DIR=$TARGET/$REPLAY_PROFILE FW_BACKUP_AT=${FW_BACKUP_AT:-}
export FW_STREAM_DIR=${FW_STREAM_DIR:-$OUT/streams}
mkdir -p "$FW_STREAM_DIR"
START=$SECONDS
fixture=$TARGET/fixtures/synthetic-electra-v$VALIDATORS-e3-s1-from491000.fixture
generated_fixture "$fixture" --validators "$VALIDATORS" --epochs 3 --seed 1 --start-epoch 491000
RUNS=()
RC=0
for h in $HISTORIES; do
    log "history $h: elapsed $((SECONDS - START)) s"
    BENCH_FIXTURE=$fixture BENCH_HISTORY=$h BENCH_BATCHES=${FW_BATCHES:-64} \
        BENCH_ROWS=${FW_ROWS:-lmdb@ext4,butter@btrfs} BENCH_IMAGE_SIZE=$((h / 8 + 8))G \
        BENCH_MEMORY_LIMIT=${FW_MEMORY_LIMIT:-900M} BENCH_OUT=$OUT/h$h \
        BENCH_ROW_WATCH="$REPO/scripts/full-window-row.sh watch" \
        BENCH_ROW_HOOK="$REPO/scripts/full-window-row.sh hook" \
        BENCH_REPLAY_ARGS="--fill-epochs $h --keep-db --sample-every 2 ${BENCH_REPLAY_ARGS:-}" \
        "$REPO/scripts/bench.sh" || {
        RC=$?
        log "history $h: bench.sh failed (exit $RC); going on"
    }
    for row in "$OUT/h$h"/*/; do
        [[ -f $row/report.json ]] && RUNS+=("${row%/}")
    done
    {
        echo "## history $h"
        grep -h -E '^(fw|reopen|check): ' "$OUT/h$h"/*.watch.log "$OUT/h$h"/*.hook.log 2>/dev/null |
            sed 's/^/    /' || true
    } >>"$OUT/ops.md"
done
rmdir "$FW_STREAM_DIR" 2>/dev/null || true
((${#RUNS[@]})) || die "no run produced a report"
"$BIN" report "${RUNS[@]}" --out "$OUT" >/dev/null || RC=$?
log "done in $((SECONDS - START)) s for histories $HISTORIES; report: $OUT/report.md; operations: $OUT/ops.md"
exit "$RC"
