#!/usr/bin/env bash
# butter_db inside Lighthouse itself (README: the optional third command).
#
#   scripts/lighthouse.sh LIGHTHOUSE_DIR [patch | test | bench | build | devnet]   (default: test)
#   scripts/lighthouse.sh LIGHTHOUSE_DIR deps DIR [SOURCE]
#
# LIGHTHOUSE_DIR is a checkout of sigp/lighthouse at one of the commits named in
# docs/lighthouse.md (KNOWN_COMMITS below: `stable` 2e0eb6d1b8 or `unstable` 40d3423193); the
# script edits that checkout, never this repository, and none of Lighthouse's files are copied
# here. At another commit it says which one it found and goes on; the patch step then stops,
# changing nothing and naming the file and the anchor, if the tree has moved.
#   deps   prepares DIR for LIGHTHOUSE_DEPS (machines that cannot reach GitHub): for each of
#          the git dependencies LIGHTHOUSE_DIR pins (sigp/lmdb-rs, sigp/libmdbx-rs,
#          sigp/quick-protobuf) that DIR lacks, clones SOURCE and checks out the pinned
#          revision; SOURCE is a local clone, bare mirror or url in which `{}` stands for the
#          repository's name and `{owner}` for its owner (default: the url Lighthouse names). It fills lmdb-rs's empty
#          submodule lmdb-sys/lmdb with the LMDB sources of the crate lmdb-rkv-sys 0.11.2 from
#          cargo's registry cache (fetched with a throwaway crate if absent), after checking
#          that the crate was cut from a commit with the same submodule revision. It also puts
#          the two deposit-contract files Lighthouse's build would download into
#          DIR/deposit-contract/ (from ethereum/consensus-specs and sigp/unsafe-eth2-deposit-
#          contract at the tags Lighthouse's build.rs names; in SOURCE `{owner}` stands for the
#          owner). It changes nothing it did not create, then checks DIR and lists everything
#          missing.
#   patch  adds the butter backend to the checkout (integration/lighthouse/patch.py: the glue
#          module integration/lighthouse/butter_impl.rs, a `butter` cargo feature in the slasher
#          crate pointing at this repository's adapters, `slasher-butter` in the lighthouse
#          crate, with LIGHTHOUSE_DEPS the [patch] sections). A re-run brings the checkout to
#          the state the current options ask for. It stops, changing nothing, if the tree has
#          moved.
#   build  patch, check that Lighthouse's Cargo.lock only gained packages (patch.py
#          --lock-check), then build the `lighthouse` binary with `slasher-butter` beside the
#          default backend (LMDB), `--locked`; with LIGHTHOUSE_DEPS the deposit-contract files
#          come from DIR/deposit-contract/ instead of the network. Checks that `lighthouse bn
#          --help` offers `butter` and prints the build's time and the target directory's size.
#          LIGHTHOUSE_BUILD_PACKAGES adds packages to the build (e.g. "lcli simulator"),
#          LIGHTHOUSE_FEATURES features (e.g. lighthouse/spec-minimal).
#   devnet build (with lcli, the simulator and lighthouse/spec-minimal), then a local network on
#          127.0.0.1 whose doubled validators sign twice, watched by butter_db and LMDB slashers
#          in the simulator and in two `lighthouse bn` processes, with an operator's actions on
#          the butter one; fails if a doubled validator goes unslashed or an honest one is
#          slashed (scripts/lighthouse-devnet.sh; docs/lighthouse.md §6). By hand: ~15 min.
#   test   patch, then Lighthouse's own slasher test suite twice: with LMDB (the control,
#          Lighthouse's default backend) and with butter as the only backend compiled in (so
#          Lighthouse's default backend, which every test uses, is butter). Both run with TMPDIR
#          on btrfs; prints passed/failed/ignored per test file and fails if any test failed or
#          if the butter run ran fewer tests than the control.
#   bench  patch, build the replay runner (integration/lighthouse/replay.rs) inside the
#          checkout, then scripts/bench.sh with the rows lighthouse:lmdb@ext4 beside lmdb@ext4
#          and lighthouse:butter@btrfs beside butter@btrfs (each pair on its two cores): one
#          report with the client's rows, the port's rows and port ÷ client per phase
#          (docs/lighthouse.md §4). BENCH_* variables pass through (BENCH_HISTORY,
#          BENCH_BATCHES, BENCH_ROWS, ...); LIGHTHOUSE_BUILD_ONLY=1 stops after the build.
#
# Environment (all optional):
#   LIGHTHOUSE_DEPS   a directory made by `deps`: the checkouts lmdb-rs (with lmdb-sys/lmdb
#                     filled in), libmdbx-rs and quick-protobuf at the revisions Lighthouse
#                     pins, patched in by path, for machines that cannot reach GitHub.
#   BUTTER_BTRFS_DIR  an existing directory on btrfs for the tests' TMPDIR; without it the
#                     script (as root) makes, mounts and finally removes an 8 GiB btrfs image.
#   CARGO_TARGET_DIR  default LIGHTHOUSE_DIR/target.
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
LOG_TAG=lighthouse.sh
PACKAGES=(btrfs-progs cmake python3 util-linux mount curl iproute2)
# shellcheck source=scripts/common.sh
. "$REPO/scripts/common.sh"
# shellcheck source=scripts/lighthouse-devnet.sh
. "$REPO/scripts/lighthouse-devnet.sh"

# The Lighthouse commits the glue is tested at, both with the LMDB, MDBX and redb backends.
declare -A KNOWN_COMMITS=(
    [2e0eb6d1b8705bbda2ba56eb195d9cc7c6575e95]="stable (v5.3.0+1, 2024-08-29)"
    [40d3423193e6f97f44c42eb3673af607627c8f7f]="unstable (2024-10-22, with the redb slasher optimisation #6481)"
)
PATCH_PY=$REPO/integration/lighthouse/patch.py
# The crates.io crate holding the LMDB C sources that lmdb-rs keeps in a submodule.
LMDB_CRATE=lmdb-rkv-sys-0.11.2

usage() {
    sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//' >&2
    exit 2
}

(($# >= 1)) || usage
LH=$(cd "$1" 2>/dev/null && pwd) || die "$1: not a directory"
ACTION=${2:-test}
case $ACTION in
    patch | test | bench | build | devnet) (($# <= 2)) || usage ;;
    deps) (($# == 3 || $# == 4)) || usage ;;
    *) usage ;;
esac
[[ -f $LH/slasher/Cargo.toml ]] || die "$LH does not look like a Lighthouse checkout"
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$LH/target}

WORK="" LOOP_DEV=""
cleanup() {
    local rc=$?
    set +e
    [[ $(type -t devnet_stop_all) != function ]] || devnet_stop_all
    if [[ -n $WORK ]]; then
        unmount_below "$WORK"
        [[ -n $LOOP_DEV ]] && losetup -d "$LOOP_DEV" 2>/dev/null
        rm -rf --one-file-system "$WORK"
    fi
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

check_commit() {
    local head
    head=$(git -C "$LH" rev-parse HEAD 2>/dev/null || echo unknown)
    if [[ -n ${KNOWN_COMMITS[$head]:-} ]]; then
        log "Lighthouse at ${head:0:10}: ${KNOWN_COMMITS[$head]}"
    else
        log "warning: $LH is at $head, not a commit the glue is tested at (${!KNOWN_COMMITS[*]});"
        log "the patch step stops if the files it edits have moved"
    fi
}

# The directory of the LMDB sources in cargo's registry cache, fetched there if absent.
lmdb_sources() {
    local home=${CARGO_HOME:-$HOME/.cargo} found tmp
    found=$(compgen -G "$home/registry/src/*/$LMDB_CRATE/lmdb" | head -n 1) || true
    if [[ -z $found ]]; then
        log "fetching $LMDB_CRATE into $home/registry with a throwaway crate" >&2
        tmp=$(mktemp -d)
        mkdir "$tmp/src" && : >"$tmp/src/lib.rs"
        printf '[package]\nname = "lmdb-sources"\nversion = "0.0.0"\nedition = "2021"\n[dependencies]\nlmdb-rkv-sys = "=%s"\n' \
            "${LMDB_CRATE##*-}" >"$tmp/Cargo.toml"
        (cd "$tmp" && cargo fetch -q) || { rm -rf "$tmp"; die "cargo fetch of $LMDB_CRATE failed"; }
        rm -rf "$tmp"
        found=$(compgen -G "$home/registry/src/*/$LMDB_CRATE/lmdb" | head -n 1) ||
            die "$LMDB_CRATE fetched, but no $home/registry/src/*/$LMDB_CRATE/lmdb"
    fi
    printf '%s\n' "$found"
}

# Fills lmdb-rs's submodule lmdb-sys/lmdb when it is empty (as a clone leaves it). The crate's
# sources are used only if the lmdb-rs commit it was cut from pins the same submodule revision.
fill_lmdb() {
    local lmdb=$1 dest=$1/lmdb-sys/lmdb src vcs want have
    [[ -d $dest && -z $(ls -A "$dest") ]] || return 0
    src=$(lmdb_sources)
    vcs=$(sed -n 's/.*"sha1": *"\([0-9a-f]*\)".*/\1/p' "$src/../.cargo_vcs_info.json" 2>/dev/null)
    [[ -n $vcs ]] || die "$src/../.cargo_vcs_info.json names no lmdb-rs commit: cannot check its LMDB revision"
    want=$(git -C "$lmdb" rev-parse HEAD:lmdb-sys/lmdb)
    have=$(git -C "$lmdb" rev-parse "$vcs:lmdb-sys/lmdb" 2>/dev/null) ||
        die "$LMDB_CRATE was cut from lmdb-rs $vcs, which $lmdb does not have: cannot check its LMDB revision"
    [[ $have == "$want" ]] ||
        die "$LMDB_CRATE has LMDB $have, $lmdb pins $want: fill $dest from a checkout of mozilla/lmdb at $want"
    cp -r "$src/." "$dest/"
    log "$dest: LMDB sources from $src (LMDB ${want:0:10}, as lmdb-rs pins)"
}

do_deps() {
    local dir=$1 source=${2:-} name rev url from
    mkdir -p "$dir"
    dir=$(cd "$dir" && pwd)
    while read -r name rev url; do
        if [[ ! -e $dir/$name ]]; then
            from=$url
            if [[ -n $source ]]; then
                from=${source//\{owner\}/sigp}
                from=${from//\{\}/$name}
                [[ $from != "$source" ]] || from=$source/$name
            fi
            log "$dir/$name: cloning $from at ${rev:0:10}"
            if ! { git clone -q --no-checkout "$from" "$dir/$name" &&
                git -C "$dir/$name" checkout -q "$rev"; }; then
                rm -rf "$dir/$name"
                log "could not clone $from at $rev"
                continue
            fi
        fi
        [[ $name != lmdb-rs ]] || fill_lmdb "$dir/$name"
    done < <(python3 "$PATCH_PY" --pins "$LH")
    deposit_contract "$dir" "$source"
    python3 "$PATCH_PY" --check-deps "$LH" "$dir"
    log "ready: LIGHTHOUSE_DEPS=$dir scripts/lighthouse.sh $LH test"
}

# The deposit contract's ABI and bytecode, which Lighthouse's common/deposit_contract/build.rs
# downloads from GitHub unless LIGHTHOUSE_DEPOSIT_CONTRACT_{SPEC,TESTNET}_URL name a file:
# `deposit_contract DIR SOURCE` puts both files into DIR/deposit-contract/, taken from the
# repositories at the tags the build script names (the build script checks their digests).
DEPOSIT_FILES=(
    "SPEC ethereum consensus-specs TAG deposit_contract/contracts/validator_registration.json"
    "TESTNET sigp unsafe-eth2-deposit-contract UNSAFE_TAG unsafe_validator_registration.json"
)
deposit_contract() {
    local dir=$1/deposit-contract source=$2 entry kind owner name tagvar file tag from tmp
    mkdir -p "$dir"
    for entry in "${DEPOSIT_FILES[@]}"; do
        read -r kind owner name tagvar file <<<"$entry"
        [[ -s $dir/$(basename "$file") ]] && continue
        tag=$(sed -n "s/^const $tagvar: &str = \"\(.*\)\";/\1/p" "$LH/common/deposit_contract/build.rs")
        [[ -n $tag ]] || die "$LH/common/deposit_contract/build.rs names no $tagvar: the tree has moved"
        from=https://github.com/$owner/$name
        if [[ -n $source ]]; then
            from=${source//\{owner\}/$owner}
            from=${from//\{\}/$name}
            [[ $from != "$source" ]] || from=$source/$name
        fi
        if [[ -d $from ]]; then
            git -C "$from" show "$tag:$file" >"$dir/$(basename "$file").tmp" ||
                die "$from has no $file at $tag"
        else
            tmp=$(mktemp -d)
            git clone -q --bare --depth 1 --branch "$tag" "$from" "$tmp/repo" &&
                git -C "$tmp/repo" show "$tag:$file" >"$dir/$(basename "$file").tmp" ||
                { rm -rf "$tmp"; die "could not take $file at $tag from $from"; }
            rm -rf "$tmp"
        fi
        mv "$dir/$(basename "$file").tmp" "$dir/$(basename "$file")"
        log "$dir/$(basename "$file"): $owner/$name at $tag ($kind)"
    done
}

do_patch() {
    local deps=()
    if [[ -n ${LIGHTHOUSE_DEPS:-} ]]; then
        deps=("$(cd "$LIGHTHOUSE_DEPS" && pwd)")
    fi
    python3 "$PATCH_PY" "$LH" "$REPO/adapters" "${deps[@]}"
}

# Sets TEST_TMP to a fresh directory on btrfs.
btrfs_tmp() {
    if [[ -n ${BUTTER_BTRFS_DIR:-} ]]; then
        [[ $(fs_of "$BUTTER_BTRFS_DIR") == btrfs ]] || die "BUTTER_BTRFS_DIR=$BUTTER_BTRFS_DIR is not on btrfs"
        WORK=$(mktemp -d "$BUTTER_BTRFS_DIR/lighthouse.XXXXXX")
        TEST_TMP=$WORK
        return
    fi
    [[ $(id -u) == 0 ]] || die "not root: set BUTTER_BTRFS_DIR to a directory on btrfs"
    local parent
    parent=$(pick_real_dir /var/tmp "$CARGO_TARGET_DIR") || die "no real-disk directory for the image"
    WORK=$(mktemp -d "$parent/lighthouse-btrfs.XXXXXX")
    truncate -s 8G "$WORK/btrfs.img"
    mkfs.btrfs -q -f -m single "$WORK/btrfs.img"
    mkdir "$WORK/mnt"
    LOOP_DEV=$(losetup -f --show "$WORK/btrfs.img")
    mount -o noatime "$LOOP_DEV" "$WORK/mnt"
    chmod 1777 "$WORK/mnt"
    TEST_TMP=$WORK/mnt
}

# run_suite FEATURES LABEL: Lighthouse's slasher tests with only FEATURES; prints a per-file
# table into $SUMMARY and returns cargo's status. Lighthouse leaks each test's environment, so
# butter's read-only snapshots stay in TMPDIR until the image goes away.
run_suite() {
    local features=$1 label=$2 out=$CARGO_TARGET_DIR/lighthouse-tests-$2.log rc
    mkdir -p "$TEST_TMP/$label"
    log "Lighthouse slasher tests, features \"$features\" (log: $out)"
    set +e
    TMPDIR=$TEST_TMP/$label cargo test --release -p slasher --no-default-features \
        --features "$features" 2>&1 | tee "$out" | grep -E '^(test result|     Running|   Doc-tests)'
    rc=${PIPESTATUS[0]}
    set -e
    awk -v label="$label" '
        /^     Running / { file = ($2 == "unittests") ? $3 : $2; sub(/^.*\//, "", file) }
        /^   Doc-tests / { file = "doc-tests" }
        /^test result:/ {
            for (i = 1; i <= NF; i++) {
                if ($(i) ~ /^passed;?$/) p = $(i-1)
                if ($(i) ~ /^failed;?$/) f = $(i-1)
                if ($(i) ~ /^ignored;?$/) g = $(i-1)
            }
            printf "%-8s %-24s %6d %6d %7d\n", label, file, p, f, g
        }' "$out" >>"$SUMMARY"
    return "$rc"
}

do_test() {
    btrfs_tmp
    SUMMARY=$CARGO_TARGET_DIR/lighthouse-tests.txt
    mkdir -p "$CARGO_TARGET_DIR"
    printf '%-8s %-24s %6s %6s %7s\n' backend "test file" passed failed ignored >"$SUMMARY"
    local failed=0
    run_suite lmdb lmdb || failed=1
    run_suite butter butter || failed=1
    log "Lighthouse $(git -C "$LH" rev-parse --short=10 HEAD 2>/dev/null), slasher tests:"
    cat "$SUMMARY"
    local control ours
    control=$(awk '$1 == "lmdb" { n += $3 } END { print n + 0 }' "$SUMMARY")
    ours=$(awk '$1 == "butter" { n += $3 } END { print n + 0 }' "$SUMMARY")
    log "passed: lmdb $control, butter $ours"
    # Evidence that the butter suite ran on butter: TempDir removes the control's LMDB files,
    # but not butter_db's read-only generations, which Lighthouse's leaked environments keep.
    local butter_gens
    butter_gens=$(find "$TEST_TMP/butter" -maxdepth 4 -name 'gen-*' | wc -l)
    log "butter_db generations left in the butter suite's TMPDIR: $butter_gens"
    ((butter_gens > 0)) || die "no butter_db generation in TMPDIR: the suite did not run on butter"
    # Every file that runs for both must pass the same number of tests (backend.rs is
    # Lighthouse's LMDB/MDBX override test and compiles only with lmdb). The glue's own tests,
    # butter_database_size.rs (the size gauge, integration/lighthouse/database_size_test.rs)
    # and butter_memory_pressure.rs (the allocator function, memory_pressure_test.rs), compile
    # only with butter and must pass there.
    awk '$1 == "lmdb" { want[$2] = $3 } $1 == "butter" { got[$2] = $3 }
        END { bad = 0
              for (f in want) if (f != "backend.rs" && f !~ /^butter_/ && got[f] != want[f]) {
                  printf "%s: lmdb passed %d, butter %d\n", f, want[f], got[f]; bad = 1 }
              split("butter_database_size.rs butter_memory_pressure.rs", glue, " ")
              for (i in glue) if (got[glue[i]] < 1) {
                  printf "%s: the glue test did not pass on butter\n", glue[i]; bad = 1 }
              exit bad }' "$SUMMARY" || die "butter did not pass every test the control passed"
}

do_build() {
    local started=$SECONDS bin=$CARGO_TARGET_DIR/release/lighthouse packages=(-p lighthouse) p
    for p in ${LIGHTHOUSE_BUILD_PACKAGES:-}; do packages+=(-p "$p"); done
    if [[ -n ${LIGHTHOUSE_DEPS:-} ]]; then
        local dc
        dc=$(cd "$LIGHTHOUSE_DEPS" && pwd)/deposit-contract
        [[ -s $dc/validator_registration.json && -s $dc/unsafe_validator_registration.json ]] ||
            die "$dc lacks the deposit-contract files: run the deps step again"
        export LIGHTHOUSE_DEPOSIT_CONTRACT_SPEC_URL=file://$dc/validator_registration.json
        export LIGHTHOUSE_DEPOSIT_CONTRACT_TESTNET_URL=file://$dc/unsafe_validator_registration.json
    fi
    # Resolve once (cargo writes the added packages into Cargo.lock), check that no version
    # Lighthouse pins moved, then build against exactly that lockfile.
    cargo metadata --format-version 1 --manifest-path "$LH/Cargo.toml" >/dev/null
    python3 "$PATCH_PY" --lock-check "$LH"
    log "building ${packages[*]} with slasher-butter (log: $CARGO_TARGET_DIR/lighthouse-build.log)"
    cargo build --release --locked "${packages[@]}" \
        --features "lighthouse/slasher-butter${LIGHTHOUSE_FEATURES:+,$LIGHTHOUSE_FEATURES}" \
        --manifest-path "$LH/Cargo.toml" 2>&1 | tee "$CARGO_TARGET_DIR/lighthouse-build.log" |
        grep -E '^(warning: `|error|\s+Finished)' || true
    [[ ${PIPESTATUS[0]} == 0 ]] || die "the build failed (log: $CARGO_TARGET_DIR/lighthouse-build.log)"
    "$bin" bn --help | grep -A3 -- '--slasher-backend' | grep -q butter ||
        die "$bin bn --help does not offer butter as a slasher backend"
    log "$bin: $("$bin" --version | head -n 1); 'bn --help' offers: $("$bin" bn --help |
        grep -A3 -- '--slasher-backend' | tr -s ' \n' ' ' | grep -o 'possible values: [a-z, ]*')"
    log "built in $((SECONDS - started)) s; $CARGO_TARGET_DIR holds $(du -sh "$CARGO_TARGET_DIR" | cut -f1)"
}

do_bench() {
    local runner=$LH/slasher/examples/butter_replay.rs
    mkdir -p "$(dirname "$runner")"
    cp "$REPO/integration/lighthouse/replay.rs" "$runner"
    log "building the replay runner in $LH (features lmdb,butter)"
    BUTTER_LIGHTHOUSE_REV=$(git -C "$LH" rev-parse --short=10 HEAD 2>/dev/null || echo unknown) \
        cargo build --release -p slasher --features lmdb,butter --example butter_replay \
        --manifest-path "$LH/Cargo.toml"
    local runner_bin=$CARGO_TARGET_DIR/release/examples/butter_replay
    log "runner: $runner_bin (usage: docs/lighthouse.md §4)"
    [[ ${LIGHTHOUSE_BUILD_ONLY:-0} == 1 ]] && return 0
    # The benchmark builds slasher-bench into this repository's own target directory.
    env -u CARGO_TARGET_DIR BENCH_LIGHTHOUSE_RUNNER="$runner_bin" \
        BENCH_ROWS=${BENCH_ROWS:-lighthouse:lmdb@ext4,lmdb@ext4,lighthouse:butter@btrfs,butter@btrfs} \
        bash "$REPO/scripts/bench.sh"
}

[[ $(id -u) != 0 ]] || install_packages
find_cargo
check_commit
if [[ $ACTION == deps ]]; then
    do_deps "$3" "${4:-}"
    exit 0
fi
do_patch
cd "$LH"
case $ACTION in
    patch) ;;
    test) do_test ;;
    bench) do_bench ;;
    build) do_build ;;
    devnet) do_devnet ;;
esac
log "done"
