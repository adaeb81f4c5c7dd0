# Shell functions and settings shared by most scripts in scripts/ (sourced, not run).
# The sourcing script sets LOG_TAG (e.g. test.sh) and PACKAGES (Debian packages it needs
# besides BUILD_PACKAGES, which building the workspace needs and every script that calls
# install_packages gets).

# What `cargo build` of the workspace needs on a fresh Debian machine (mdbx-sys and lmdb-sys
# compile C and run bindgen, which needs libclang).
BUILD_PACKAGES=(libclang-dev build-essential pkg-config)

# The cargo profile the replay scripts build slasher-bench (and butter, for the runs that use
# it) with: Lighthouse's `maxperf` (fat LTO, one codegen unit), which its released binaries are
# built with (Cargo.toml). Binaries land in $CARGO_TARGET_DIR/$REPLAY_PROFILE/.
REPLAY_PROFILE=maxperf

log() { printf '[%s] %s\n' "$LOG_TAG" "$*"; }
die() {
    printf '[%s] ERROR: %s\n' "$LOG_TAG" "$*" >&2
    exit 1
}

# The filesystem type of the mount holding $1, as the mount table names it (ext4, btrfs,
# tmpfs...). `stat -f -c %T` is only a fallback: it reads the superblock magic, which ext2,
# ext3 and ext4 share, so it calls every ext4 mount "ext2/ext3".
fs_of() {
    local t
    t=$(findmnt -n -o FSTYPE --target "$1" 2>/dev/null) && [[ -n $t ]] && {
        printf '%s\n' "$t"
        return 0
    }
    stat -f -c %T "$1"
}

is_mounted() { grep -qF " $1 " /proc/mounts; }

# unprivileged_reach PATH...: fails, naming the first directory on the way to one of the PATHs
# (or to its nearest existing parent) that uid 65534 cannot enter, and what to do about it.
# scripts/test.sh runs built binaries (the target directory) and reads the repository's
# fixtures as that user; a clone in root's home (mode 0700) is out of its reach.
unprivileged_reach() {
    local path dir part parts
    for path in "$@"; do
        while [[ ! -e $path ]]; do path=$(dirname -- "$path"); done
        path=$(realpath -- "$path")
        [[ -d $path ]] || path=$(dirname -- "$path")
        dir=""
        IFS=/ read -ra parts <<<"${path#/}"
        for part in "" "${parts[@]}"; do
            dir=${dir%/}/$part
            setpriv --reuid=65534 --regid=65534 --clear-groups -- test -x "$dir" && continue
            printf '[%s] ERROR: uid 65534 cannot enter %s (mode %s, owner %s), on the way to %s.
' \
                "$LOG_TAG" "$dir" "$(stat -c %a -- "$dir")" "$(stat -c %U -- "$dir")" "$path" >&2
            printf '[%s] The tests run built binaries and read fixtures as that user. Either clone
' "$LOG_TAG" >&2
            printf '[%s] the repository where others can enter (e.g. under /srv or /var/tmp), or give
' "$LOG_TAG" >&2
            printf '[%s] others the search bit alone (they still cannot list it): chmod o+x %s
' "$LOG_TAG" "$dir" >&2
            return 1
        done
    done
}

# find_memory_cgroup: the memory cgroup this script runs in (v1 memory controller first: on a
# hybrid system the unified hierarchy has no memory controller), in CG_PARENT and CG_VERSION;
# under v2 the memory controller is handed down to its children (bench.sh, migrate-full-window.sh).
find_memory_cgroup() {
    local line path mnt
    line=$(grep -E '^[0-9]+:([^:]*,)?memory(,[^:]*)?:' /proc/self/cgroup || true)
    if [[ -n $line ]]; then
        path=${line#*:*:}
        mnt=$(findmnt -n -t cgroup -O memory -o TARGET | head -n1)
        CG_VERSION=1
    else
        line=$(grep -E '^0::' /proc/self/cgroup || true)
        path=${line#0::}
        mnt=$(findmnt -n -t cgroup2 -o TARGET | head -n1)
        CG_VERSION=2
    fi
    [[ -n $line && -n $mnt ]] || die "memory limit: no memory cgroup found (/proc/self/cgroup, findmnt)"
    CG_PARENT=$mnt${path%/}
    [[ -d $CG_PARENT ]] || die "memory limit: this script's memory cgroup $CG_PARENT is not visible"
    if ((CG_VERSION == 2)) && ! grep -qw memory "$CG_PARENT/cgroup.subtree_control" 2>/dev/null; then
        # A child gets the memory controller only if its parent hands it down; a v2 cgroup
        # that holds processes cannot (the "no internal processes" rule).
        echo +memory >"$CG_PARENT/cgroup.subtree_control" ||
            die "memory limit: cannot enable the memory controller for children of $CG_PARENT (run from a cgroup that holds no processes, e.g. systemd-run --scope)"
    fi
}

# limit_memory_cgroup CG BYTES: the memory limit of cgroup CG (CG_VERSION from
# find_memory_cgroup; under v2 no swap either).
limit_memory_cgroup() {
    local cg=$1 bytes=$2
    if ((CG_VERSION == 1)); then
        echo "$bytes" >"$cg/memory.limit_in_bytes"
    else
        echo "$bytes" >"$cg/memory.max"
        echo 0 >"$cg/memory.swap.max" 2>/dev/null || true
    fi
}

# in_cgroup CG COMMAND...: COMMAND in cgroup CG (none if CG is empty), entered before it
# starts, so that everything it allocates and reads is charged there.
in_cgroup() {
    local cg=$1
    shift
    if [[ -z $cg ]]; then
        "$@"
    else
        # shellcheck disable=SC2016 # $$ and "$@" are the inner shell's
        sh -c 'echo $$ >"$1/cgroup.procs" && shift && exec "$@"' sh "$cg" "$@"
    fi
}

# remove_cgroup CG: removes cgroup CG once its processes are gone (waits up to 5 s).
remove_cgroup() {
    local cg=$1 i
    [[ -d $cg ]] || return 0
    for i in 1 2 3 4 5; do
        rmdir "$cg" 2>/dev/null && return 0
        sleep 1
    done
    log "warning: could not remove the memory cgroup $cg (processes left: $(cat "$cg/cgroup.procs" | tr '\n' ' '))"
}

# Makes cargo reachable under `sudo`, which resets PATH to the system's.
find_cargo() {
    command -v cargo >/dev/null && return 0
    local home
    for home in "${HOME:-/root}" "$(getent passwd "${SUDO_USER:-}" 2>/dev/null | cut -d: -f6)"; do
        if [[ -n $home && -x $home/.cargo/bin/cargo ]]; then
            export PATH="$home/.cargo/bin:$PATH"
            export CARGO_HOME=${CARGO_HOME:-$home/.cargo}
            export RUSTUP_HOME=${RUSTUP_HOME:-$home/.rustup}
            log "using cargo from $home/.cargo/bin"
            return 0
        fi
    done
    die "cargo not found: install Rust (rustup) first"
}

# Installs the BUILD_PACKAGES and PACKAGES a fresh Debian machine lacks (root only).
install_packages() {
    local missing=() p
    for p in "${BUILD_PACKAGES[@]}" "${PACKAGES[@]}"; do
        if ! dpkg-query -W -f='${db:Status-Abbrev}' "$p" 2>/dev/null | grep -q '^ii'; then
            missing+=("$p")
        fi
    done
    if ((${#missing[@]} == 0)); then
        log "packages already installed: ${BUILD_PACKAGES[*]} ${PACKAGES[*]}"
        return 0
    fi
    command -v apt-get >/dev/null || die "missing packages ${missing[*]} and no apt-get"
    log "installing: ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get -o DPkg::Lock::Timeout=300 update -q
    apt-get -o DPkg::Lock::Timeout=300 install -y -q --no-install-recommends "${missing[@]}"
}

# pick_real_dir CANDIDATE...: prints the first candidate that can be created and is on a real
# disk (not tmpfs or ramfs); fails if none is.
pick_real_dir() {
    local c
    for c in "$@"; do
        [[ -n $c ]] || continue
        mkdir -p "$c" 2>/dev/null || continue
        case $(fs_of "$c") in
            tmpfs | ramfs) log "not using $c: it is $(fs_of "$c")" >&2 ;;
            *)
                printf '%s\n' "$c"
                return 0
                ;;
        esac
    done
    return 1
}

# Unmounts everything mounted strictly below $1, deepest first.
unmount_below() {
    local top=$1 target
    while read -r target; do
        umount "$target" 2>/dev/null || { sleep 1 && umount "$target"; } ||
            umount -l "$target" || log "warning: could not unmount $target"
    done < <(
        while read -r _ target _; do
            target=$(printf '%b' "$target") # /proc/mounts escapes spaces as \040
            [[ $target == "$top"/* ]] && printf '%s\t%s\n' "${#target}" "$target"
        done </proc/mounts | sort -rn | cut -f2-
    )
}

# Detaches loop devices whose backing file lies below $1.
detach_loops_below() {
    local top=$1 dev file
    while read -r dev file; do
        [[ -n $dev && $file == "$top"/* ]] || continue
        losetup -d "$dev" || log "warning: could not detach $dev ($file)"
    done < <(losetup -n -l -O NAME,BACK-FILE 2>/dev/null || true)
}

# remove_work_dir DIR: unmounts and detaches whatever lies below DIR, then deletes DIR unless
# something is still mounted there.
remove_work_dir() {
    local work=$1
    unmount_below "$work"
    detach_loops_below "$work"
    if grep -qF " $work/" /proc/mounts; then
        log "warning: something is still mounted under $work; not deleting it"
    else
        rm -rf --one-file-system "$work"
    fi
}

# generated_fixture PATH ARGS...: `slasher-bench generate ARGS... --out PATH` unless PATH is
# already there (generation is deterministic in its arguments, which PATH's name must carry).
# Needs $BIN.
generated_fixture() {
    local fixture=$1
    shift
    [[ -f $fixture ]] && return 0
    mkdir -p "$(dirname "$fixture")"
    log "generating $fixture"
    "$BIN" generate "$@" --out "$fixture.part"
    mv "$fixture.part" "$fixture"
}
