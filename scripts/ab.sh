#!/usr/bin/env bash
# A/B of two builds of the engine under a memory limit (by hand, as root; not part of CI):
#
#   sudo scripts/ab.sh REV_A REV_B
#
# REV_A and REV_B are git revisions of this repository, or `.` for the working tree as it is
# (uncommitted changes included). Both may be the same revision with different replay
# arguments (AB_ARGS_A, AB_ARGS_B), to compare a setting. The method of
# docs/runs/memory-limit.md §6.4 and §6.6:
#   1. builds slasher-bench (cargo profile AB_PROFILE_A / AB_PROFILE_B) for each side, each
#      from its own copy of the sources (`git archive`) into its own target directory: with
#      one target directory cargo may take the second side's sources for older than the first
#      side's outputs (it compares modification times) and copy the first binary;
#   2. per round: for each side a sparse btrfs image (`-m single`) on a direct-I/O loop device
#      and a memory cgroup (a child of this script's own, v1 or v2) with the limit; caches
#      dropped; then both sides' `slasher-bench replay` at once, each pinned to its own core
#      (`taskset`), over the first AB_BATCHES batches of the fixture; a later round swaps the
#      cores;
#   3. prints, per round, each side's storage median and total, batch median and largest
#      anonymous memory (the cgroup's v1 `total_rss`, v2 `anon`, sampled every 0.5 s), and B ÷ A.
# Two identical binaries differed by up to 4 % per round this way (§6.6): read a ratio against
# that, not against 1.
#
# Settings (environment):
#   AB_MEMORY_LIMIT  per side, `numfmt --from=iec` (default 66M)
#   AB_BATCHES       batches replayed per run (default 32, the sample's cold epoch)
#   AB_ROUNDS        rounds (default 2; the cores swap every round)
#   AB_BACKENDS      the replay's --backends (default butter)
#   AB_HISTORY       the replay's --history-length (default 256, as scripts/bench.sh)
#   AB_ARGS_A, AB_ARGS_B  more replay arguments for one side, split on spaces
#   AB_FIXTURE       the fixture (default: the sample with its slashings, as scripts/bench.sh
#                    leaves it in $CARGO_TARGET_DIR/fixtures; run that once first)
#   AB_IMAGE_SIZE    each side's image (default 8G, sparse)
#   AB_PROFILE       the cargo profile of both builds (default REPLAY_PROFILE of common.sh,
#                    maxperf, as scripts/bench.sh builds);
#                    AB_PROFILE_A, AB_PROFILE_B for one side
# Output: target/ab/<time>/ (each run's report directory and log, summary.txt). Everything
# else it makes (copies, target directories, images, loop devices, cgroups) is removed at exit.

set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
LOG_TAG=ab.sh
PACKAGES=(btrfs-progs util-linux)
# shellcheck source=scripts/common.sh
source "$REPO/scripts/common.sh"

(($# == 2)) || die "usage: scripts/ab.sh REV_A REV_B (git revisions, or . for the working tree)"
[[ $(id -u) == 0 ]] || die "needs root (memory cgroups, loop devices, mounts)"
(($(nproc) >= 2)) || die "needs 2 cores: each side runs on its own"

LIMIT=$(numfmt --from=iec "${AB_MEMORY_LIMIT:-66M}" 2>/dev/null) ||
    die "AB_MEMORY_LIMIT=${AB_MEMORY_LIMIT:-} is not a size (e.g. 66M)"
((LIMIT >= 16 << 20)) || die "AB_MEMORY_LIMIT is below 16 MiB"
BATCHES=${AB_BATCHES:-32}
ROUNDS=${AB_ROUNDS:-2}
[[ $BATCHES =~ ^[1-9][0-9]*$ && $ROUNDS =~ ^[1-9][0-9]*$ ]] ||
    die "AB_BATCHES and AB_ROUNDS must be positive whole numbers"
TARGET=${CARGO_TARGET_DIR:-$REPO/target}
FIXTURE=${AB_FIXTURE:-$TARGET/fixtures/mainnet-merge-2022+slashings-128.fixture}
[[ -f $FIXTURE ]] || die "no fixture $FIXTURE: run scripts/bench.sh once (it imports the sample), or set AB_FIXTURE"

declare -A REV=([A]=$1 [B]=$2) ARGS=([A]=${AB_ARGS_A:-} [B]=${AB_ARGS_B:-})
PROFILE_BOTH=${AB_PROFILE:-$REPLAY_PROFILE}
declare -A PROFILE=([A]=${AB_PROFILE_A:-$PROFILE_BOTH} [B]=${AB_PROFILE_B:-$PROFILE_BOTH})
for side in A B; do
    [[ ${REV[$side]} == . ]] || git -C "$REPO" rev-parse --verify -q "${REV[$side]}^{commit}" >/dev/null ||
        die "${REV[$side]} is not a revision of $REPO"
done

WORK=""
CGROUPS=()
cleanup() {
    local rc=$?
    set +e
    local cg
    for cg in "${CGROUPS[@]}"; do
        [[ -d $cg ]] || continue
        # A run still going (the script was stopped) ends with it.
        xargs -r kill -KILL <"$cg/cgroup.procs" 2>/dev/null
        remove_cgroup "$cg"
    done
    [[ -n $WORK ]] && remove_work_dir "$WORK"
    if ((rc == 0)); then log "done"; else log "FAILED (exit $rc)"; fi
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

install_packages
find_cargo
find_memory_cgroup
base=$(pick_real_dir /var/tmp "$TARGET") || die "no directory on a real disk for the images"
WORK=$(mktemp -d "$base/ab.XXXXXX")
OUT=$TARGET/ab/$(date -u +%Y%m%d-%H%M%S)
mkdir -p "$OUT"
log "A: ${REV[A]} (${PROFILE[A]}) ${ARGS[A]}; B: ${REV[B]} (${PROFILE[B]}) ${ARGS[B]}; limit $LIMIT bytes, $BATCHES batches, $ROUNDS rounds; output $OUT"

# ---- builds ----------------------------------------------------------------------------------

declare -A BIN
for side in A B; do
    src=$WORK/src-$side
    if [[ ${REV[$side]} == . ]]; then
        src=$REPO
    else
        mkdir "$src"
        # The sources only: the mainnet sample (data/) is not needed to build.
        git -C "$REPO" archive "${REV[$side]}" -- . ':!data' | tar -x -C "$src"
    fi
    log "building side $side (${REV[$side]}) in $WORK/target-$side"
    (cd "$src" && CARGO_TARGET_DIR=$WORK/target-$side cargo build --profile "${PROFILE[$side]}" -q -p slasher-bench)
    BIN[$side]=$WORK/target-$side/${PROFILE[$side]}/slasher-bench
done
if cmp -s "${BIN[A]}" "${BIN[B]}"; then
    log "the two binaries are identical: the rounds measure the set-up's noise and the arguments"
fi

# ---- rounds ----------------------------------------------------------------------------------

# side_setup SIDE ROUND: an image, loop device and mount in $WORK/r<ROUND>-<SIDE>, and a
# memory cgroup with the limit in CG[SIDE].
declare -A CG
side_setup() {
    local side=$1 round=$2 dir=$WORK/r$2-$1 dev cg
    mkdir "$dir"
    truncate -s "${AB_IMAGE_SIZE:-8G}" "$dir/img"
    dev=$(losetup -f --show --direct-io=on "$dir/img")
    mkfs.btrfs -q -f -m single "$dev" >/dev/null
    mkdir "$dir/mnt"
    mount -o noatime "$dev" "$dir/mnt"
    cg=$CG_PARENT/ab-$$-r$round-$side
    mkdir "$cg"
    CGROUPS+=("$cg")
    limit_memory_cgroup "$cg" "$LIMIT"
    CG[$side]=$cg
}

# side_run SIDE ROUND CORE: the replay in the side's cgroup on CORE; the cgroup's largest
# anonymous memory, sampled while it runs, into OUT/r<ROUND>-<SIDE>.anon.
side_run() {
    local side=$1 round=$2 core=$3 cg=${CG[$1]} name=r$2-$1 key=total_rss
    ((CG_VERSION == 2)) && key=anon
    (
        local max=0 v
        while [[ ! -e $OUT/$name.done ]]; do
            v=$(awk -v k="$key" '$1 == k { print $2 }' "$cg/memory.stat" 2>/dev/null)
            [[ -n $v ]] && ((v > max)) && max=$v
            sleep 0.5
        done
        echo "$max" >"$OUT/$name.anon"
    ) &
    local sampler=$! rc=0
    # The extra arguments are split on spaces on purpose.
    # shellcheck disable=SC2086
    in_cgroup "$cg" taskset -c "$core" "${BIN[$side]}" replay --fixture "$FIXTURE" --backends "${AB_BACKENDS:-butter}" \
        --db-dir "$WORK/r$round-$side/mnt/db" --out "$OUT/$name" --batches "$BATCHES" \
        --history-length "${AB_HISTORY:-256}" --no-progress ${ARGS[$side]} \
        >"$OUT/$name.log" 2>&1 || rc=$?
    touch "$OUT/$name.done"
    wait "$sampler"
    echo "exit $rc" >>"$OUT/$name.log"
}

side_teardown() {
    local dir=$WORK/r$2-$1
    unmount_below "$dir"
    detach_loops_below "$dir"
    rm -rf --one-file-system "$dir"
    remove_cgroup "${CG[$1]}"
}

for ((round = 1; round <= ROUNDS; round++)); do
    side_setup A "$round"
    side_setup B "$round"
    sync
    echo 3 >/proc/sys/vm/drop_caches
    core_a=$(((round + 1) % 2))
    log "round $round: A on core $core_a, B on core $((1 - core_a))"
    # Both in the background: a signal to the script runs its cleanup at once, not after a
    # foreground run ends.
    side_run A "$round" "$core_a" &
    pid_a=$!
    side_run B "$round" $((1 - core_a)) &
    wait "$pid_a" "$!"
    side_teardown A "$round"
    side_teardown B "$round"
done

# ---- summary ---------------------------------------------------------------------------------

python3 - "$OUT" "$ROUNDS" <<'PY' | tee "$OUT/summary.txt"
import json, statistics, sys

out, rounds = sys.argv[1], int(sys.argv[2])
for r in range(1, rounds + 1):
    got = {}
    for side in "AB":
        name = f"r{r}-{side}"
        try:
            row = json.load(open(f"{out}/{name}/report.json"))["runs"][0]["backends"][0]
        except (OSError, ValueError, LookupError) as e:
            print(f"round {r} {side}: no report ({e}); see {out}/{name}.log")
            continue
        storage = [b["storage_ms"] for b in row["batches"]]
        wall = [b["wall_ms"] for b in row["batches"]]
        try:
            anon = int(open(f"{out}/{name}.anon").read()) / 2**20
        except (OSError, ValueError):
            anon = float("nan")
        if not storage:
            print(f"round {r} {side}: no batch ran; see {out}/{name}.log")
            continue
        got[side] = (statistics.median(storage), sum(storage), statistics.median(wall), len(storage))
        cut = ", cut short" if row.get("interrupted") else ""
        print(f"round {r} {side}: {len(storage)} batches{cut}; storage median {got[side][0]:.1f} ms,"
              f" total {got[side][1]:.0f} ms; batch median {got[side][2]:.0f} ms;"
              f" largest anonymous memory {anon:.1f} MiB")
    if len(got) == 2 and got["A"][3] != got["B"][3]:
        print(f"round {r}: not compared, A ran {got['A'][3]} batches and B {got['B'][3]}")
    elif len(got) == 2:
        a, b = got["A"], got["B"]
        print(f"round {r} B / A: storage median {b[0] / a[0]:.3f}, storage total {b[1] / a[1]:.3f},"
              f" batch median {b[2] / a[2]:.3f}")
PY
