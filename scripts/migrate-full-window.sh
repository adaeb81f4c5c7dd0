#!/usr/bin/env bash
# The full-window move (docs/benchmarks.md, "Moving a database between backends"): an LMDB
# slasher database filled with MW_HISTORY epochs of regular chain at MW_VALIDATORS validators
# (`replay --fill-epochs`), moved to butter with `slasher-bench migrate`, then back to a new
# LMDB database; each move in its own memory cgroup (MW_MEMORY_LIMIT) with the page cache
# dropped first, the databases on direct-I/O loop devices (LMDB on ext4, butter on btrfs).
#
#   sudo scripts/migrate-full-window.sh
#
# Environment (all optional): MW_HISTORY (256), MW_VALIDATORS (1100000), MW_MEMORY_LIMIT
# (900M), MW_OUT (report directory; default $CARGO_TARGET_DIR/migrate/<date-time>), MW_IMAGES
# (where the two sparse 40 GiB images go; default /var/tmp; about 9 GB for LMDB's database at
# the defaults, and as much again for the move back, plus 4 GB for butter's).
# Output: MW_OUT/log (one line per step), each move's `migrate` report and /usr/bin/time -v,
# the cgroup's peak anonymous memory, and `butter stat --deep` of the moved database.
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$REPO"
TARGET=${CARGO_TARGET_DIR:-$REPO/target}
LOG_TAG=migrate-full-window.sh
PACKAGES=(btrfs-progs e2fsprogs util-linux mount time)
# shellcheck source=scripts/common.sh
source "$REPO/scripts/common.sh"
BIN=$TARGET/$REPLAY_PROFILE/slasher-bench
[[ $(id -u) == 0 ]] || die "needs root (loop devices, mounts, memory cgroups)"
HISTORY=${MW_HISTORY:-256}
VALIDATORS=${MW_VALIDATORS:-1100000}
LIMIT=${MW_MEMORY_LIMIT:-900M}
OUT=${MW_OUT:-$TARGET/migrate/$(date +%Y%m%d-%H%M%S)}
WORK=$(mktemp -d "${MW_IMAGES:-/var/tmp}/migrate.XXXXXX")
EXT4=$WORK/ext4 BTRFS=$WORK/btrfs
DEVS=()
CG=""
cleanup() {
    [[ -n $CG && -d $CG ]] && rmdir "$CG" 2>/dev/null
    for m in "$EXT4" "$BTRFS"; do mountpoint -q "$m" && umount "$m"; done
    for d in "${DEVS[@]}"; do losetup -d "$d"; done
    rm -rf "$WORK"
}
trap cleanup EXIT
step() { log "$*" | tee -a "$OUT/log"; }

find_cargo
install_packages
cargo build --profile "$REPLAY_PROFILE" -q -p slasher-bench -p butter-tools
mkdir -p "$OUT" "$EXT4" "$BTRFS"
fixture=$TARGET/fixtures/synthetic-electra-v$VALIDATORS-e3-s1-from491000.fixture
generated_fixture "$fixture" --validators "$VALIDATORS" --epochs 3 --seed 1 --start-epoch 491000

# image FILE MKFS... MOUNTPOINT: a sparse image on a direct-I/O loop device, mounted.
image() {
    local file=$1 dir=${*: -1} dev
    truncate -s 40G "$file"
    "${@:2:$#-2}" "$file" >/dev/null
    dev=$(losetup -f --show --direct-io=on "$file")
    DEVS+=("$dev")
    mount -o noatime "$dev" "$dir"
}
image "$WORK/ext4.img" mkfs.ext4 -q -F "$EXT4"
image "$WORK/btrfs.img" mkfs.btrfs -q -f -m single "$BTRFS"

# The memory cgroup of this shell (v1 or v2) gets a child per move.
find_memory_cgroup
CG=$CG_PARENT/migrate-$$
if ((CG_VERSION == 1)); then
    LIMIT_FILE=memory.limit_in_bytes PEAK_FILE=memory.max_usage_in_bytes ANON_KEY=rss
else
    LIMIT_FILE=memory.max PEAK_FILE=memory.peak ANON_KEY=anon
fi

# move NAME FROM TO: one `migrate` in a fresh cgroup, caches dropped, anonymous memory sampled.
move() {
    local name=$1 from=$2 to=$3 peak_anon=0 a rc=0 start=$SECONDS
    mkdir "$CG"
    numfmt --from=iec "$LIMIT" >"$CG/$LIMIT_FILE"
    sync
    echo 3 >/proc/sys/vm/drop_caches
    in_cgroup "$CG" \
        /usr/bin/time -v "$BIN" migrate --from "$from" --to "$to" --no-progress >"$OUT/$name.log" 2>&1 &
    local pid=$!
    while kill -0 "$pid" 2>/dev/null; do
        a=$(awk -v k="$ANON_KEY" '$1 == k {print $2}' "$CG/memory.stat")
        ((a > peak_anon)) && peak_anon=$a
        sleep 0.5
    done
    wait "$pid" || rc=$?
    step "$name: exit $rc, $((SECONDS - start)) s, cgroup peak $(($(cat "$CG/$PEAK_FILE") >> 20)) MiB (limit $LIMIT), anonymous peak $((peak_anon >> 20)) MiB, $(grep -E 'copied in' "$OUT/$name.log" | sed 's/^ *//')"
    rmdir "$CG"
    return "$rc"
}

step "filling LMDB: history $HISTORY, $VALIDATORS validators"
"$BIN" replay --fixture "$fixture" --backends lmdb --db-dir "$EXT4/fill" --keep-db \
    --fill-epochs "$HISTORY" --history-length "$HISTORY" --batches 0 --out "$OUT/fill" \
    --no-progress >"$OUT/fill.log" 2>&1
src=$(dirname "$(find "$EXT4/fill" -name data.mdb | head -n1)")
step "source: $(du -m "$src/data.mdb" | cut -f1) MiB data.mdb"
move to-butter "lmdb:$src" "butter:$BTRFS/butter"
"$TARGET/$REPLAY_PROFILE/butter" stat --deep "$BTRFS/butter" >"$OUT/butter-stat-deep.txt"
step "butter: $(btrfs filesystem du -s --raw "$BTRFS/butter" | awk 'NR == 2 {print int($3 / 1048576)}') MiB on disk (btrfs filesystem du, set shared)"
move to-lmdb "butter:$BTRFS/butter" "lmdb:$EXT4/back"
step "back to LMDB: $(du -m "$EXT4/back/data.mdb" | cut -f1) MiB data.mdb"
