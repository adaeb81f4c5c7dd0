#!/usr/bin/env bash
# The project's test command (README: `sudo scripts/test.sh`; CI: `.ci/run`).
#
# As root, on a Debian machine with Rust installed, it:
#   1. installs what a fresh machine lacks (btrfs-progs, libclang-dev, a C toolchain, ...);
#   2. checks the kernel capabilities the tests need (loop devices, btrfs, FUSE), and that
#      uid 65534 can enter the repository and the target directory (a clone in root's 0700
#      home cannot: the script stops at once, naming the directory and the fix);
#   3. creates an 8 GiB sparse image in a temporary directory on the real disk (never tmpfs),
#      formats it as btrfs, loop-mounts it and exports its mount point as BUTTER_BTRFS_DIR
#      (mode 1777, so tests running as an unprivileged user can make their own directories);
#   4. checks that no two source files import each other (scripts/import_cycles.py) and that
#      no function of the engine, the bench or the tools is over 100 lines
#      (scripts/long_fns.py --over 100), runs
#      `cargo fmt --check`, `cargo clippy -D warnings` (the workspace, then the adapters
#      crate once per backend), `cargo test --workspace` (every backend), then the adapters'
#      tests once per backend alone, butter's as uid 65534 in a fresh directory of the mount
#      that must be empty afterwards (every test removes what it made, snapshots included);
#   5. on exit, whatever happened, unmounts, detaches and deletes only what it created, and
#      prints the time each phase took.
# Any failure fails the script. With CI=true a missing capability (root, loop devices, btrfs,
# FUSE) fails it too: CI never skips. Outside CI, not being root prints what is needed and
# exits non-zero.
#
# Environment:
#   CARGO_TARGET_DIR     one target directory for every cargo invocation (default: ./target).
#   BUTTER_TEST_TMPDIR   where the image's temporary directory goes (default: /var/tmp, or
#                        ./target if /var/tmp is tmpfs); must not be tmpfs.
#   BUTTER_TEST_ONLY     DEVELOPMENT ONLY, refused under CI=true: limit the cargo steps to these
#                        packages (space-separated; package or directory names, e.g.
#                        "backend" or "butter_db slasher-adapters"), or "none" for no cargo step
#                        at all (checks the install, mount and cleanup parts alone). By default
#                        everything runs.
#   BUTTER_TEST_KEEP_GOING=1  run every cargo step even after one failed (to see all failures
#                        at once); the script still fails at the end. Default: stop at the first.
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$REPO"

IN_CI=false
[[ ${CI:-} == true ]] && IN_CI=true

BACKENDS=(lmdb mdbx redb butter)
# Debian packages: btrfs-progs (mkfs.btrfs, btrfs), libclang-dev (bindgen for the MDBX
# binding), build-essential and pkg-config (C parts of LMDB/MDBX), util-linux and mount
# (losetup, setpriv, mount), python3 (scripts/import_cycles.py, and the Lighthouse glue's
# patch.py, which tests/tests/lighthouse_glue.rs runs on a tree of its own), git (that test) and
# strace (tools/tests/two_users.rs slows `butter remove` down with it, to stop it part-way).
PACKAGES=(btrfs-progs util-linux mount python3 git strace)
LOG_TAG=test.sh
# shellcheck source=scripts/common.sh
source "$REPO/scripts/common.sh"

# ---- phases and timing ---------------------------------------------------------------------

SCRIPT_START=$SECONDS
PHASE_LINES=()

# phase NAME COMMAND...: runs COMMAND and records how long it took. COMMAND runs under
# `set -e` (not in an `||` context, which would disable it), so any failure inside it ends the
# script; the EXIT trap then records the failed phase.
CURRENT_PHASE=""
PHASE_START=0
phase() {
    CURRENT_PHASE=$1
    PHASE_START=$SECONDS
    shift
    log "=== ${CURRENT_PHASE}"
    "$@"
    local took=$((SECONDS - PHASE_START))
    PHASE_LINES+=("$(printf '%-66s %5ss  ok' "$CURRENT_PHASE" "$took")")
    log "=== ${CURRENT_PHASE}: ok (${took}s)"
    CURRENT_PHASE=""
}

# cargo_phase NAME COMMAND...: a phase running one external command; with
# BUTTER_TEST_KEEP_GOING=1 a failure is recorded and the script goes on (failing at the end).
FAILED_PHASES=()
cargo_phase() {
    if [[ ${BUTTER_TEST_KEEP_GOING:-} != 1 ]]; then
        phase "$@"
        return
    fi
    local name=$1 start=$SECONDS rc=0
    shift
    log "=== ${name}"
    "$@" || rc=$?
    local took=$((SECONDS - start))
    if ((rc == 0)); then
        PHASE_LINES+=("$(printf '%-66s %5ss  ok' "$name" "$took")")
        log "=== ${name}: ok (${took}s)"
    else
        PHASE_LINES+=("$(printf '%-66s %5ss  FAILED (exit %s)' "$name" "$took" "$rc")")
        FAILED_PHASES+=("$name")
        log "=== ${name}: FAILED (exit ${rc}, ${took}s); going on (BUTTER_TEST_KEEP_GOING=1)"
    fi
}

print_timings() {
    ((${#PHASE_LINES[@]})) || return 0
    log "phase timings:"
    printf '    %s\n' "${PHASE_LINES[@]}"
    printf '    %-66s %5ss\n' "total" "$((SECONDS - SCRIPT_START))"
}

# ---- cleanup: only what this script created -------------------------------------------------

WORK=""     # the temporary directory (mktemp): btrfs.img and the mount point mnt/
LOOP_DEV="" # the loop device this script attached

cleanup() {
    local rc=$?
    set +e
    if [[ -n $CURRENT_PHASE ]]; then
        PHASE_LINES+=("$(printf '%-66s %5ss  FAILED (exit %s)' "$CURRENT_PHASE" \
            "$((SECONDS - PHASE_START))" "$rc")")
    fi
    if [[ -n $WORK ]]; then
        log "cleanup: unmounting, detaching and removing $WORK"
        local mnt=$WORK/mnt
        unmount_below "$mnt"
        detach_loops_below "$mnt"
        if is_mounted "$mnt"; then
            umount "$mnt" || { sleep 2 && umount "$mnt"; } || umount -l "$mnt"
        fi
        if [[ -n $LOOP_DEV ]]; then
            losetup -d "$LOOP_DEV" || log "warning: could not detach $LOOP_DEV"
        fi
        if grep -qF " $WORK/" /proc/mounts; then
            log "warning: something is still mounted under $WORK; not deleting it"
        else
            rm -rf --one-file-system "$WORK"
        fi
    fi
    print_timings
    if ((rc == 0)); then
        log "PASSED"
    else
        log "FAILED (exit $rc)${CURRENT_PHASE:+ in phase: $CURRENT_PHASE}"
    fi
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# ---- preflight ------------------------------------------------------------------------------

need_root() {
    [[ $(id -u) == 0 ]] && return 0
    cat >&2 <<'EOF'
[test.sh] This script must run as root: it installs packages (btrfs-progs, libclang-dev),
[test.sh] attaches a loop device and mounts a btrfs image for the tests, and runs some tests
[test.sh] as an unprivileged user. Needed: root, /dev/loop-control, btrfs in the kernel,
[test.sh] /dev/fuse, and a non-tmpfs directory with ~2 GiB free (BUTTER_TEST_TMPDIR).
[test.sh] Run:  sudo scripts/test.sh
EOF
    if $IN_CI; then
        die "CI=true and not root: failing (CI never skips)"
    fi
    exit 1
}

check_capabilities() {
    local problems=() c
    for c in mkfs.btrfs btrfs losetup mount umount setpriv; do
        command -v "$c" >/dev/null || problems+=("command $c not found")
    done
    [[ -e /dev/loop-control ]] || problems+=("/dev/loop-control missing (no loop devices)")
    grep -qw btrfs /proc/filesystems || problems+=("btrfs not in /proc/filesystems")
    cargo fmt --version >/dev/null 2>&1 || problems+=("cargo fmt (rustfmt component) missing")
    cargo clippy --version >/dev/null 2>&1 || problems+=("cargo clippy (component) missing")
    if ((${#problems[@]})); then
        printf '[test.sh] missing: %s\n' "${problems[@]}" >&2
        die "the tests need the above"
    fi
    if [[ ! -e /dev/fuse ]]; then
        if $IN_CI; then
            die "/dev/fuse missing and CI=true: the FUSE crash tiers cannot run (CI never skips)"
        fi
        log "warning: /dev/fuse missing: tests that need FUSE will skip (they fail under CI)"
    fi
}

# ---- the btrfs image ------------------------------------------------------------------------

pick_tmp_parent() {
    pick_real_dir "${BUTTER_TEST_TMPDIR:-}" /var/tmp "${CARGO_TARGET_DIR:-$REPO/target}" ||
        die "no non-tmpfs directory for the image; set BUTTER_TEST_TMPDIR"
}

mount_btrfs() {
    local parent
    parent=$(pick_tmp_parent)
    WORK=$(mktemp -d "$parent/butter-test.XXXXXX")
    # mktemp makes it 0700; the tests' unprivileged user must be able to reach mnt/ inside.
    chmod 0755 "$WORK"
    local img=$WORK/btrfs.img
    (umask 077 && truncate -s 8G "$img")
    mkfs.btrfs -q -f -m single "$img"
    mkdir "$WORK/mnt"
    # Equivalent to `mount -o loop,noatime img DIR`, with the loop device attached explicitly
    # so that exactly this one is detached at the end (other jobs may have their own).
    LOOP_DEV=$(losetup -f --show "$img")
    mount -o noatime "$LOOP_DEV" "$WORK/mnt"
    local mnt=$WORK/mnt
    chmod 1777 "$mnt"
    export BUTTER_BTRFS_DIR=$mnt
    log "btrfs: $img on $LOOP_DEV mounted at $mnt ($(fs_of "$mnt"))"
    if [[ ! -e /sys/fs/btrfs/features/rmdir_subvol ]]; then
        log "warning: kernel lacks rmdir_subvol (Linux < 4.18): unprivileged deletion fails"
    fi
}

# ---- cargo ----------------------------------------------------------------------------------

PKG_ARGS=(--workspace)
ADAPTERS_SELECTED=true
RUN_CARGO=true

select_packages() {
    local only=${BUTTER_TEST_ONLY:-}
    [[ -z $only ]] && return 0
    if $IN_CI; then
        die "BUTTER_TEST_ONLY is for development and is refused under CI=true"
    fi
    log "BUTTER_TEST_ONLY=$only: DEVELOPMENT RUN, not everything is tested"
    if [[ $only == none ]]; then
        RUN_CARGO=false
        return 0
    fi
    PKG_ARGS=()
    ADAPTERS_SELECTED=false
    local p
    for p in $only; do
        case $p in
            backend) p=butter_db ;;
            adapters) p=slasher-adapters ;;
            tests) p=butter-tests ;;
            tools) p=butter-tools ;;
        esac
        [[ $p == slasher-adapters ]] && ADAPTERS_SELECTED=true
        PKG_ARGS+=(-p "$p")
    done
}

# keep_tier_lines COMMAND...: run it, its output shown as usual and also copied to $WORK, so
# print_tier_summary can list the tier lines; the command's exit status is returned.
keep_tier_lines() {
    "$@" 2>&1 | tee -a "$WORK/test-output.log"
    return "${PIPESTATUS[0]}"
}

print_tier_summary() {
    [[ -n $WORK && -f $WORK/test-output.log ]] || return 0
    log "reliability tiers (one line each, from the test output):"
    grep -oE 'tier [a-z].*' "$WORK/test-output.log" | sed 's/^/    /' || true
}

# expect_empty DIR: fails, listing what is there, if the tests left anything in DIR (then
# removes the empty DIR).
expect_empty() {
    local dir=$1 count
    count=$(find "$dir" -mindepth 1 -maxdepth 1 -printf . | wc -c)
    if ((count > 0)); then
        log "the tests left $count entries in $dir (each test must remove the databases it made,"
        log "read-only snapshots included: slasher_adapters::DatabaseDirGuard); the first ones:"
        find "$dir" -mindepth 1 -maxdepth 2 -printf '    %M %u %p\n' | sed -n 1,40p >&2
        return 1
    fi
    log "nothing left in $dir"
    rmdir "$dir"
}

# adapters_butter_as_nobody: the adapters' butter tests as uid 65534 (cargo builds as root and
# starts each test binary through setpriv, its runner), in a fresh directory of the mount that
# must be empty afterwards: as their unprivileged owner, the tests remove every database they
# made, read-only snapshots included.
adapters_butter_as_nobody() {
    local dir=$BUTTER_BTRFS_DIR/adapters-butter runner_var
    mkdir "$dir" && chmod 1777 "$dir" || return
    runner_var=CARGO_TARGET_$(rustc -vV | sed -n 's/^host: //p' | tr 'a-z-' 'A-Z_')_RUNNER
    env BUTTER_BTRFS_DIR="$dir" "$runner_var=setpriv --reuid=65534 --regid=65534 --clear-groups --" \
        cargo test -p slasher-adapters --no-default-features --features butter,slasher,test-utils || return
    expect_empty "$dir"
}

# nothing_left: fails, listing them, if the workspace's tests left anything on the mount (the
# fresh image starts empty; every test removes the databases it made, read-only snapshots
# included, also when it fails: DatabaseDirGuard, the tiers' btrfs_dir guard).
nothing_left() {
    [[ -z $(find "$BUTTER_BTRFS_DIR" -mindepth 1 -maxdepth 1 -printf .) ]] && return 0
    log "the workspace's tests left these in $BUTTER_BTRFS_DIR:"
    find "$BUTTER_BTRFS_DIR" -mindepth 1 -maxdepth 2 -printf '    %M %u %p\n' | sed -n 1,40p >&2
    return 1
}

cargo_steps() {
    local b
    cargo_phase "cargo fmt --check" cargo fmt "${PKG_ARGS[@]/--workspace/--all}" -- --check
    cargo_phase "cargo clippy ${PKG_ARGS[*]} --all-targets -D warnings" \
        cargo clippy "${PKG_ARGS[@]}" --all-targets -- -D warnings
    if $ADAPTERS_SELECTED; then
        # Without the slasher port: the shape the Lighthouse glue builds (docs/lighthouse.md §2).
        for b in "${BACKENDS[@]}"; do
            cargo_phase "cargo clippy -p slasher-adapters --features $b,test-utils" \
                cargo clippy -p slasher-adapters --no-default-features \
                --features "$b,test-utils" --all-targets -- -D warnings
        done
    fi
    cargo_phase "cargo test ${PKG_ARGS[*]} --no-run (build)" cargo test "${PKG_ARGS[@]}" --no-run
    # --show-output: the reliability tiers print one summary line each ("tier …: N fault
    # points, V violations, T s"); they are collected and repeated at the end of the run.
    cargo_phase "cargo test ${PKG_ARGS[*]} (all backends)" \
        keep_tier_lines cargo test "${PKG_ARGS[@]}" -- --show-output
    cargo_phase "the workspace's tests left nothing on the mount" nothing_left
    if $ADAPTERS_SELECTED; then
        for b in "${BACKENDS[@]}"; do
            if [[ $b == butter ]]; then
                cargo_phase "adapters' butter,slasher,test-utils tests as uid 65534, nothing left" \
                    adapters_butter_as_nobody
                continue
            fi
            cargo_phase "cargo test -p slasher-adapters --features $b,slasher,test-utils" \
                cargo test -p slasher-adapters --no-default-features --features "$b,slasher,test-utils"
        done
    fi
}

# ---- main -----------------------------------------------------------------------------------

log "repo $REPO, CI=$IN_CI, kernel $(uname -r)"
need_root
find_cargo
select_packages
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$REPO/target}
export RUST_BACKTRACE=${RUST_BACKTRACE:-1}
log "CARGO_TARGET_DIR=$CARGO_TARGET_DIR; $(cargo --version)"

phase "install packages" install_packages
phase "check capabilities" check_capabilities
phase "uid 65534 can reach the repository and the target directory" \
    unprivileged_reach "$REPO" "$CARGO_TARGET_DIR"
phase "no two source files import each other" python3 scripts/import_cycles.py
# The adapters are not gated: slasher/mod.rs's process_batch is a port of Lighthouse's, kept
# comparable with upstream, and conformance/model.rs's run_model and cursor_session are over
# 100 lines as well.
phase "no function over 100 lines in the engine, the bench or the tools" \
    python3 scripts/long_fns.py --over 100 backend/src slasher-bench/src tools/src
phase "create and mount the btrfs image" mount_btrfs
if $RUN_CARGO; then
    cargo_steps
else
    log "BUTTER_TEST_ONLY=none: no cargo step"
fi
print_tier_summary
if ((${#FAILED_PHASES[@]})); then
    printf '[test.sh] failed: %s\n' "${FAILED_PHASES[@]}" >&2
    exit 1
fi
