#!/usr/bin/env bash
# The project's benchmark command (README: `sudo scripts/bench.sh`), no arguments.
#
# Replays the default fixture through the slasher on every backend and writes one report:
#   - LMDB, MDBX and redb on ext4, and again on btrfs; butter_db (every compiled butter
#     backend) on btrfs. Rows are labelled by filesystem: lmdb@ext4, lmdb@btrfs, butter@btrfs...
#   - every commit durable (LMDB/MDBX synced commits, redb Durability::Immediate, butter_db
#     snapshots); BENCH_NON_DURABLE=1 adds separate, labelled redb Durability::Eventual rows.
#
# As root on a fresh Debian machine with Rust installed, it:
#   1. installs what is missing (btrfs-progs, libclang-dev, build-essential, pkg-config, e2fsprogs);
#   2. builds slasher-bench in release mode with every backend;
#   3. picks the fixture: $BENCH_FIXTURE if set, else the default benchmark fixture of
#      fixtures/README.md: the whole real mainnet sample committed in data/mainnet-merge-2022
#      (1,012 blocks around the Merge, read in place), imported by `slasher-bench import-beacon-api`
#      into $CARGO_TARGET_DIR/fixtures/mainnet-merge-2022.fixture unless already there;
#   4. creates two equal sparse images (16 GiB each, BENCH_IMAGE_SIZE) side by side in one
#      directory on the real disk (never tmpfs), formats one ext4 (inode tables and journal
#      initialised now, so no lazy-init writes run during the benchmark) and one btrfs
#      (`-m single`), and loop-mounts both with noatime;
#   5. runs `slasher-bench replay` on each (each backend in its own process, one after
#      another), then `slasher-bench report` to merge both into one report;
#   6. on exit, whatever happened, unmounts, detaches and deletes only what it created, and
#      prints where the report is.
#
# Without root it cannot make images: it says which directories it needs and on which
# filesystem, and runs with BENCH_EXT4_DIR (ext4, or any real-disk filesystem that is not btrfs)
# and BENCH_BTRFS_DIR (btrfs) if both are set.
#
# Environment (all optional):
#   BENCH_FIXTURE      fixture file to replay (default: see step 3)
#   BENCH_BATCHES      replay only the first N batches (default 256: eight epochs of the sample,
#                      the first two of them a cold start at ~20 s a batch on 2 cores; set
#                      BENCH_BATCHES=all for the whole fixture, several hours for all rows)
#   BENCH_OUT          report directory (default: $CARGO_TARGET_DIR/bench/<date-time>)
#   BENCH_IMAGE_SIZE   size of each image (default 16G)
#   BENCH_TMPDIR       where the images go (default /var/tmp; must not be tmpfs)
#   BENCH_NON_DURABLE  1: also run redb with Durability::Eventual on both filesystems
#   BENCH_EXT4_DIR, BENCH_BTRFS_DIR  use these directories instead of making images
#   CARGO_TARGET_DIR   cargo's target directory (default ./target)
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$REPO"
TARGET=${CARGO_TARGET_DIR:-$REPO/target}
BIN=$TARGET/release/slasher-bench
PACKAGES=(btrfs-progs libclang-dev build-essential pkg-config e2fsprogs util-linux mount)
IMAGE_SIZE=${BENCH_IMAGE_SIZE:-16G}
SAMPLE=$REPO/data/mainnet-merge-2022
START=$SECONDS

log() { printf '[bench.sh] %s\n' "$*"; }
die() {
    printf '[bench.sh] ERROR: %s\n' "$*" >&2
    exit 1
}

# ---- cleanup: only what this script created ------------------------------------------------

WORK=""
LOOPS=()
MOUNTS=()
OUT=""
cleanup() {
    local rc=$?
    set +e
    local m d
    for m in "${MOUNTS[@]}"; do
        umount "$m" 2>/dev/null || { sleep 2 && umount "$m"; } || umount -l "$m" ||
            log "warning: could not unmount $m"
    done
    for d in "${LOOPS[@]}"; do
        losetup -d "$d" 2>/dev/null || log "warning: could not detach $d"
    done
    if [[ -n $WORK ]]; then
        if grep -qF " $WORK/" /proc/mounts; then
            log "warning: something is still mounted under $WORK; not deleting it"
        else
            rm -rf --one-file-system "$WORK"
        fi
    fi
    log "took $((SECONDS - START)) s"
    if [[ -n $OUT && -f $OUT/report.md ]]; then
        log "report: $OUT/report.md (also report.json, batches.csv and the SVG charts there)"
    fi
    ((rc == 0)) && log "done" || log "FAILED (exit $rc)"
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

fs_of() { stat -f -c %T "$1"; }

# ---- preparation ---------------------------------------------------------------------------

find_cargo() {
    command -v cargo >/dev/null && return 0
    local home
    for home in "${HOME:-/root}" "$(getent passwd "${SUDO_USER:-}" 2>/dev/null | cut -d: -f6)"; do
        if [[ -n $home && -x $home/.cargo/bin/cargo ]]; then
            export PATH="$home/.cargo/bin:$PATH"
            return 0
        fi
    done
    die "cargo not found: install Rust (rustup) first"
}

install_packages() {
    local missing=() p
    for p in "${PACKAGES[@]}"; do
        dpkg-query -W -f='${db:Status-Abbrev}' "$p" 2>/dev/null | grep -q '^ii' || missing+=("$p")
    done
    ((${#missing[@]} == 0)) && return 0
    command -v apt-get >/dev/null || die "missing packages ${missing[*]} and no apt-get"
    log "installing: ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get -o DPkg::Lock::Timeout=300 update -q
    apt-get -o DPkg::Lock::Timeout=300 install -y -q --no-install-recommends "${missing[@]}"
}

pick_image_dir() {
    local c
    for c in ${BENCH_TMPDIR:-} /var/tmp "$TARGET"; do
        mkdir -p "$c" 2>/dev/null || continue
        case $(fs_of "$c") in
            tmpfs | ramfs) log "not using $c for the images: it is $(fs_of "$c")" >&2 ;;
            *)
                printf '%s\n' "$c"
                return 0
                ;;
        esac
    done
    die "no directory on a real disk for the images; set BENCH_TMPDIR"
}

# make_fs KIND: a sparse image of IMAGE_SIZE in $WORK, formatted and loop-mounted on
# $WORK/KIND, which it stores in MOUNTED. (Not called in a subshell: the cleanup lists must
# see the loop device and mount it adds.)
MOUNTED=""
make_fs() {
    local kind=$1 img=$WORK/$1.img mnt=$WORK/$1 dev
    truncate -s "$IMAGE_SIZE" "$img"
    case $kind in
        ext4) mkfs.ext4 -q -F -E lazy_itable_init=0,lazy_journal_init=0 "$img" >&2 ;;
        btrfs) mkfs.btrfs -q -f -m single "$img" >&2 ;;
    esac
    mkdir "$mnt"
    dev=$(losetup -f --show "$img")
    LOOPS+=("$dev")
    mount -o noatime "$dev" "$mnt"
    MOUNTS+=("$mnt")
    chmod 1777 "$mnt"
    log "$kind: $IMAGE_SIZE sparse image $img on $dev, mounted on $mnt ($(fs_of "$mnt"))"
    MOUNTED=$mnt
}

choose_fixture() {
    if [[ -n ${BENCH_FIXTURE:-} ]]; then
        [[ -f $BENCH_FIXTURE ]] || die "BENCH_FIXTURE=$BENCH_FIXTURE does not exist"
        FIXTURE=$BENCH_FIXTURE
    elif [[ -d $SAMPLE/attestations ]]; then
        # The default benchmark fixture (fixtures/README.md): the whole mainnet sample, imported
        # at run time (it is not committed), reused while it checks out.
        FIXTURE=$TARGET/fixtures/mainnet-merge-2022.fixture
        if [[ -f $FIXTURE ]] && "$BIN" inspect "$FIXTURE" >/dev/null 2>&1; then
            log "reusing $FIXTURE (checked)"
        else
            mkdir -p "$(dirname "$FIXTURE")"
            log "importing the mainnet sample $SAMPLE (read in place) into $FIXTURE"
            "$BIN" import-beacon-api --attestations "$SAMPLE/attestations" \
                --headers "$SAMPLE/headers" --name mainnet-merge-2022 --out "$FIXTURE"
        fi
    else
        die "no fixture: set BENCH_FIXTURE, or restore the committed mainnet sample at $SAMPLE"
    fi
    log "fixture: $FIXTURE"
}

# ---- the runs ------------------------------------------------------------------------------

# Forget cached pages between runs (root only), so no run starts with another's database or
# fixture pages warm; `replay` then reads the fixture once before its first backend.
drop_caches() {
    sync
    if [[ -w /proc/sys/vm/drop_caches ]]; then
        echo 3 >/proc/sys/vm/drop_caches 2>/dev/null || true
    fi
}

RC=0
replay() {
    local label=$1
    shift
    local args=(replay --fixture "$FIXTURE" --out "$OUT/$label" "$@")
    local batches=${BENCH_BATCHES:-256}
    [[ $batches != all ]] && args+=(--batches "$batches")
    drop_caches
    log "run $label: slasher-bench ${args[*]}"
    "$BIN" "${args[@]}" || {
        RC=$?
        log "run $label FAILED (exit $RC); going on to merge what there is"
    }
    [[ -f $OUT/$label/report.json ]] && RUNS+=("$OUT/$label")
    return 0
}

main() {
    local ext4_dir btrfs_dir
    if [[ $(id -u) != 0 ]]; then
        if [[ -z ${BENCH_EXT4_DIR:-} || -z ${BENCH_BTRFS_DIR:-} ]]; then
            cat >&2 <<'EOF'
[bench.sh] Not root, so no loop images can be made. Run `sudo scripts/bench.sh`, or give two
[bench.sh] directories on real disks (never tmpfs), ideally of equal size on the same device:
[bench.sh]   BENCH_EXT4_DIR=DIR   on ext4 (LMDB, MDBX, redb run here)
[bench.sh]   BENCH_BTRFS_DIR=DIR  on btrfs (LMDB, MDBX, redb and butter_db run here)
[bench.sh] and have installed btrfs-progs, libclang-dev, build-essential and pkg-config.
EOF
            exit 1
        fi
    fi
    find_cargo
    if [[ $(id -u) == 0 ]]; then install_packages; fi

    OUT=${BENCH_OUT:-$TARGET/bench/$(date +%Y%m%d-%H%M%S)}
    mkdir -p "$OUT"
    case $(fs_of "$OUT") in tmpfs | ramfs) log "note: the report directory $OUT is on tmpfs" ;; esac

    log "building slasher-bench (release, every backend)"
    cargo build --release -p slasher-bench
    choose_fixture

    if [[ -n ${BENCH_EXT4_DIR:-} && -n ${BENCH_BTRFS_DIR:-} ]]; then
        ext4_dir=$BENCH_EXT4_DIR
        btrfs_dir=$BENCH_BTRFS_DIR
        log "using BENCH_EXT4_DIR=$ext4_dir ($(fs_of "$ext4_dir")) and BENCH_BTRFS_DIR=$btrfs_dir ($(fs_of "$btrfs_dir"))"
        [[ $(fs_of "$btrfs_dir") == btrfs ]] || die "BENCH_BTRFS_DIR=$btrfs_dir is not on btrfs"
    else
        local parent
        parent=$(pick_image_dir)
        WORK=$(mktemp -d "$parent/slasher-bench.XXXXXX")
        make_fs ext4
        ext4_dir=$MOUNTED
        make_fs btrfs
        btrfs_dir=$MOUNTED
    fi

    RUNS=()
    # butter_db needs btrfs, so it runs there only; the other engines run on both. On btrfs the
    # default is every compiled backend.
    replay ext4 --backends lmdb,mdbx,redb --db-dir "$ext4_dir"
    replay btrfs --db-dir "$btrfs_dir"
    if [[ ${BENCH_NON_DURABLE:-} == 1 ]]; then
        replay ext4-nondurable --backends redb --non-durable --db-dir "$ext4_dir"
        replay btrfs-nondurable --backends redb --non-durable --db-dir "$btrfs_dir"
    fi
    ((${#RUNS[@]})) || die "no run produced a report"
    log "merging ${#RUNS[@]} runs into $OUT"
    "$BIN" report "${RUNS[@]}" --out "$OUT" || RC=$?
    return "$RC"
}

main
