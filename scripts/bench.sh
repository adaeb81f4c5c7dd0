#!/usr/bin/env bash
# The project's benchmark command (README: `sudo scripts/bench.sh`), no arguments.
#
# Replays the real mainnet sample through the slasher with Lighthouse's slasher settings and
# tile codec on several backends and writes one merged report, with one exception: the history
# is 256 epochs (BENCH_HISTORY), not Lighthouse's 4096, because at 4096 the slasher's cold
# start (32 batches that each rewrite every tile of the min-target array) takes ~65 minutes per
# row on 2 cores, against ~5 at 256. Every commit is durable (LMDB and MDBX synced commits, redb
# Durability::Immediate, butter_db snapshots).
#
# Rows (BENCH_ROWS):
#   headline (default)  butter@btrfs against lmdb@ext4 (LMDB on its better filesystem, see
#                       docs/runs/method.md §3), then mdbx@ext4 and redb@ext4 if the time budget
#                       (BENCH_BUDGET_MIN, default 45 minutes) leaves room for a second pair.
#   all                 lmdb, mdbx and redb on ext4 and on btrfs, and butter on btrfs.
#   a list              e.g. BENCH_ROWS=lmdb@btrfs,butter@btrfs
#   lighthouse:lmdb@ext4, lighthouse:lmdb@btrfs, lighthouse:butter@btrfs  (in a list) the same
#                       batches through Lighthouse's own slasher: needs BENCH_LIGHTHOUSE_RUNNER
#                       (`scripts/lighthouse.sh LIGHTHOUSE_DIR bench` sets it and these rows);
#                       the row is imported with `slasher-bench import-client`; with
#                       `--fill-epochs N` in BENCH_REPLAY_ARGS its database is first filled by
#                       the port (see prefill below), so the client starts from the same window
# Rows run two at a time, each its own `slasher-bench replay` process pinned to its own core
# (`taskset`) and on its own filesystem, so the two rows of a pair share the machine, disk and
# time alike, but no journal or transaction commit (and a soak's filesystem samples count one
# database each). The first row of a pair draws its progress bar (with ETA) on the terminal;
# the second writes to ROW.log in the report directory. Between pairs the script prints the
# elapsed time and what is left.
#
# As root on a fresh Debian machine with Rust installed, it:
#   1. installs what is missing (btrfs-progs, libclang-dev, build-essential, pkg-config,
#      e2fsprogs, util-linux);
#   2. builds slasher-bench with every backend, in cargo profile maxperf (fat LTO, as
#      Lighthouse builds its released binaries);
#   3. imports the committed sample data/mainnet-merge-2022 (1,012 blocks around the Merge)
#      into $CARGO_TARGET_DIR/fixtures/mainnet-merge-2022.fixture unless it is already there,
#      and copies it with 10 slashable events added within the batches replayed (`slasher-bench
#      inject`), which every row must report ($BENCH_FIXTURE replaces both, as it is);
#   4. creates two equal sparse images (BENCH_IMAGE_SIZE, default 16G) side by side on the real
#      disk (never tmpfs), formats one ext4 (inode tables and journal initialised now, so no
#      lazy-init writes run during the benchmark) and one btrfs (`-m single`), and loop-mounts
#      both with noatime; a pair whose two rows are on the same kind gets a second image of
#      that kind for its second row;
#   5. runs the rows, merges them with `slasher-bench report` and prints a summary table;
#   6. on exit, whatever happened, unmounts, detaches and deletes only what it created, and
#      prints where the report is.
#
# Without root it cannot make images: it runs with BENCH_EXT4_DIR (ext4, or any real-disk
# filesystem that is not btrfs) and BENCH_BTRFS_DIR (btrfs) if both are set; the two rows of
# a pair on the same kind then run one after the other.
#
# Environment (all optional):
#   BENCH_ROWS         headline | all | comma-separated backend@fs rows (see above)
#   BENCH_BUDGET_MIN   headline only: skip a further pair that would end after this many
#                      minutes from the start (default 45)
#   BENCH_HISTORY      the slasher's history in epochs for every row (default 256; 4096 is
#                      Lighthouse's default: one pair then takes ~80 minutes)
#   BENCH_BATCHES      replay only the first N batches (default 128: four epochs of the
#                      sample, the first a slasher cold start); `all` for every batch
#   BENCH_REPLAY_ARGS  extra arguments for every `slasher-bench replay` (other settings, e.g.
#                      --tile-codec fast; the history goes in BENCH_HISTORY)
#   BENCH_FIXTURE      fixture file to replay (default: see step 3)
#   BENCH_OUT          report directory (default: $CARGO_TARGET_DIR/bench/<date-time>)
#   BENCH_IMAGE_SIZE   size of each image (default 16G)
#   BENCH_TMPDIR       where the images go (default /var/tmp; must not be tmpfs)
#   BENCH_BTRFS_MOUNT_OPTIONS  further mount options for the btrfs images (e.g.
#                      compress=zstd:1; the report records every row's mount options)
#   BENCH_EXT4_DIR, BENCH_BTRFS_DIR  use these directories instead of making images
#   BENCH_MEMORY_LIMIT each row in its own memory cgroup with this limit on its memory and page
#                      cache together (e.g. 128M, 1G; numfmt --from=iec), as a node run under
#                      systemd's MemoryMax or a container limit: root only, cgroup v1 or v2.
#                      The images' loop devices then use direct I/O (a page-cache miss reaches
#                      the disk, not the image file's own cache). Each row's memory.stat, peak
#                      usage, failcnt and OOM kills go to ROW.memory in the report directory
#                      and the log; the cgroups are removed afterwards (docs/runs/memory-limit.md)
#   BENCH_ALLOCATOR    jemalloc (default: what Lighthouse links) or glibc: the allocator the
#                      slasher-bench binary is built with (feature `jemalloc`)
#   BENCH_LIGHTHOUSE_RUNNER  the replay runner built inside a Lighthouse checkout, for the
#                      lighthouse:* rows (chunk sizes: Lighthouse's defaults, 16×256)
#   BENCH_ROW_WATCH    a command (split on spaces) started beside each port row as
#                      `CMD ROW DIR REPORT_DIR` (DIR: where the row's database is made),
#                      stopped (SIGTERM) when the pair ends; output in ROW.watch.log
#                      (scripts/full-window.sh's backups beside a replay)
#   BENCH_ROW_HOOK     a command (split on spaces) run after each pair for each of its port
#                      rows that wrote a report, as `CMD ROW DIR REPORT_DIR`, while the row's
#                      filesystem is still mounted (with --keep-db its database is still
#                      there); output in ROW.hook.log, a failure logged and not fatal
#   CARGO_TARGET_DIR   cargo's target directory (default ./target)
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$REPO"
TARGET=${CARGO_TARGET_DIR:-$REPO/target}
PACKAGES=(btrfs-progs e2fsprogs util-linux mount)
LOG_TAG=bench.sh
# shellcheck source=scripts/common.sh
source "$REPO/scripts/common.sh"
BIN=$TARGET/$REPLAY_PROFILE/slasher-bench
IMAGE_SIZE=${BENCH_IMAGE_SIZE:-16G}
SAMPLE=$REPO/data/mainnet-merge-2022
ROWS_CHOICE=${BENCH_ROWS:-headline}
HISTORY=${BENCH_HISTORY:-256}
BUDGET_MIN=${BENCH_BUDGET_MIN:-45}
START=$SECONDS

minutes() { printf '%dm%02ds' $(($1 / 60)) $(($1 % 60)); }

# ---- cleanup: only what this script created ------------------------------------------------

WORK=""
OUT=""
BG_PID=""
cleanup() {
    local rc=$?
    set +e
    if [[ -n $BG_PID ]]; then
        # The second row of an interrupted pair stops too (and writes its partial report).
        kill -TERM "$BG_PID" 2>/dev/null && wait "$BG_PID" 2>/dev/null
    fi
    stop_watchers
    remove_row_cgroups
    if [[ -n $WORK ]]; then
        remove_work_dir "$WORK"
    fi
    log "took $(minutes $((SECONDS - START)))"
    if [[ -n $OUT && -f $OUT/report.md ]]; then
        log "report: $OUT/report.md (also report.json, batches.csv and the SVG charts there)"
    fi
    ((rc == 0)) && log "done" || log "FAILED (exit $rc)"
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# ---- preparation ---------------------------------------------------------------------------

pick_image_dir() {
    pick_real_dir "${BENCH_TMPDIR:-}" /var/tmp "$TARGET" ||
        die "no directory on a real disk for the images; set BENCH_TMPDIR"
}

# make_fs KIND [NAME]: a sparse image of IMAGE_SIZE in $WORK, formatted as KIND and
# loop-mounted on $WORK/NAME (default KIND), which it stores in MOUNTED. The cleanup finds both
# below $WORK.
MOUNTED=""
make_fs() {
    local kind=$1 name=${2:-$1}
    local img=$WORK/$name.img mnt=$WORK/$name dev
    truncate -s "$IMAGE_SIZE" "$img"
    case $kind in
        ext4) mkfs.ext4 -q -F -E lazy_itable_init=0,lazy_journal_init=0 "$img" >&2 ;;
        btrfs) mkfs.btrfs -q -f -m single "$img" >&2 ;;
    esac
    mkdir "$mnt"
    dev=$(losetup -f --show "${LOOP_OPTS[@]}" "$img")
    local opts=noatime
    [[ $kind == btrfs && -n ${BENCH_BTRFS_MOUNT_OPTIONS:-} ]] && opts+=,$BENCH_BTRFS_MOUNT_OPTIONS
    mount -o "$opts" "$dev" "$mnt"
    chmod 1777 "$mnt"
    log "$name: $IMAGE_SIZE sparse image $img on $dev, mounted on $mnt ($(fs_of "$mnt"))"
    MOUNTED=$mnt
}

# ---- memory-limited rows (BENCH_MEMORY_LIMIT) ----------------------------------------------

MEMORY_LIMIT=""   # bytes; empty: no limit
LOOP_OPTS=()      # --direct-io=on with a limit
CG_PARENT=""      # this script's memory cgroup directory
CG_VERSION=""     # 1 or 2
CGROUPS=()        # the row cgroups this script made
ROW_CGROUP=""     # the current row's, set by row_cgroup

setup_memory_limit() {
    [[ -n ${BENCH_MEMORY_LIMIT:-} ]] || return 0
    [[ $(id -u) == 0 ]] || die "BENCH_MEMORY_LIMIT needs root (it makes cgroups and direct-I/O loop devices)"
    [[ -z ${BENCH_EXT4_DIR:-}${BENCH_BTRFS_DIR:-} ]] ||
        die "BENCH_MEMORY_LIMIT makes its own images (direct-I/O loop devices): unset BENCH_EXT4_DIR and BENCH_BTRFS_DIR"
    MEMORY_LIMIT=$(numfmt --from=iec "$BENCH_MEMORY_LIMIT" 2>/dev/null) ||
        die "BENCH_MEMORY_LIMIT=$BENCH_MEMORY_LIMIT is not a size (e.g. 128M, 1G)"
    ((MEMORY_LIMIT >= 16 << 20)) || die "BENCH_MEMORY_LIMIT=$BENCH_MEMORY_LIMIT is below 16 MiB"
    find_memory_cgroup
    LOOP_OPTS=(--direct-io=on)
    log "memory limit $BENCH_MEMORY_LIMIT ($MEMORY_LIMIT bytes) per row: a child of the cgroup-v$CG_VERSION memory cgroup $CG_PARENT each; loop devices with direct I/O"
}

# row_cgroup ROW: a new memory cgroup for ROW with the limit, in ROW_CGROUP (empty without a
# limit).
row_cgroup() {
    ROW_CGROUP=""
    [[ -n $MEMORY_LIMIT ]] || return 0
    local cg=$CG_PARENT/slasher-bench-$$-${1//[^a-z0-9@-]/_}
    mkdir "$cg" || die "cannot create the memory cgroup $cg"
    CGROUPS+=("$cg")
    limit_memory_cgroup "$cg" "$MEMORY_LIMIT"
    ROW_CGROUP=$cg
}

# watch_cgroup ROW CG: in the background, every 2 s while the row runs, one line of what its
# cgroup holds (v1: rss cache mapped_file usage; v2: anon file file_mapped usage, bytes) into
# ROW.memory-samples in the report directory: after the row the processes are gone and
# memory.stat shows nothing. Its pid goes to WATCHERS.
WATCHERS=()
watch_cgroup() {
    local row=$1 cg=$2
    [[ -n $cg ]] || return 0
    (
        local keys=' rss cache mapped_file ' usage=memory.usage_in_bytes
        ((CG_VERSION == 2)) && keys=' anon file file_mapped ' usage=memory.current
        echo "seconds${keys}usage"
        local t=0
        while [[ -d $cg ]]; do
            printf '%d %s %s\n' "$t" \
                "$(awk -v keys="$keys" 'index(keys, " " $1 " ") { v[$1] = $2 }
                    END { n = split(keys, k, " "); for (i = 1; i <= n; i++) printf "%s%s", v[k[i]], (i < n ? " " : "") }' \
                    "$cg/memory.stat" 2>/dev/null)" "$(cat "$cg/$usage" 2>/dev/null)"
            sleep 2
            t=$((t + 2))
        done
    ) >"$OUT/$row.memory-samples" 2>/dev/null &
    WATCHERS+=($!)
}

stop_watchers() {
    local pid
    for pid in "${WATCHERS[@]}"; do
        # A killed watcher's status is 143: not a failure of the row.
        kill "$pid" 2>/dev/null && { wait "$pid" 2>/dev/null || true; }
    done
    WATCHERS=()
}

# record_cgroup ROW CG: what the row's cgroup held (the largest of each ROW.memory-samples
# column while it ran) and its counters after it (peak usage, failcnt, OOM kills, memory.stat)
# into ROW.memory in the report directory, and the main lines to the log.
record_cgroup() {
    local row=$1 cg=$2 file=$OUT/$1.memory
    [[ -n $cg && -d $cg ]] || return 0
    {
        echo "# $cg, limit $MEMORY_LIMIT bytes, cgroup v$CG_VERSION"
        awk 'NR == 1 { n = split($0, name, " "); next }
            { for (i = 2; i <= NF; i++) if ($i > max[i]) max[i] = $i }
            END { for (i = 2; i <= n; i++) printf "largest %s %.0f\n", name[i], max[i] }' \
            "$OUT/$row.memory-samples" 2>/dev/null
        if ((CG_VERSION == 1)); then
            for f in memory.max_usage_in_bytes memory.failcnt; do echo "$f $(cat "$cg/$f")"; done
            sed 's/^/memory.oom_control /' "$cg/memory.oom_control"
        else
            for f in memory.peak; do [[ -f $cg/$f ]] && echo "$f $(cat "$cg/$f")"; done
            sed 's/^/memory.events /' "$cg/memory.events"
        fi
        sed 's/^/memory.stat /' "$cg/memory.stat"
    } >"$file" 2>&1
    local keys='largest [a-z_]+|memory.max_usage_in_bytes|memory.failcnt|memory.peak|memory.oom_control oom_kill|memory.events (max|oom_kill)'
    log "row $row memory (all of it in $file; samples every 2 s in $OUT/$row.memory-samples):"
    grep -E "^($keys) " "$file" | awk '{
        name = substr($0, 1, length($0) - length($NF) - 1)
        if (name ~ /failcnt|oom_kill|events max/) printf "    %s %d\n", name, $NF
        else printf "    %s %.1f MiB\n", name, $NF / 1048576
    }'
}

remove_row_cgroups() {
    local cg
    for cg in "${CGROUPS[@]}"; do remove_cgroup "$cg"; done
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
            log "importing the mainnet sample $SAMPLE into $FIXTURE"
            "$BIN" import-beacon-api --attestations "$SAMPLE/attestations" \
                --headers "$SAMPLE/headers" --name mainnet-merge-2022 --out "$FIXTURE"
        fi
        # The sample holds no slashing: add some (4 double votes, 4 surround votes, 2 double
        # proposals by its own validators, all within the batches replayed), so that the
        # correctness gate has something to find and a backend that misses one fails the run.
        local batches=${BENCH_BATCHES:-128} last=() injected
        if [[ $batches == all ]]; then
            injected=${FIXTURE%.fixture}+slashings.fixture
        else
            last=(--last-batch "$((batches - 1))")
            injected=${FIXTURE%.fixture}+slashings-$batches.fixture
        fi
        if [[ -f $injected && $injected -nt $FIXTURE ]] && "$BIN" inspect "$injected" >/dev/null 2>&1; then
            log "reusing $injected (checked)"
        else
            log "adding slashings to the sample: $injected"
            "$BIN" inject --fixture "$FIXTURE" "${last[@]}" --out "$injected"
        fi
        FIXTURE=$injected
    else
        die "no fixture: set BENCH_FIXTURE, or restore the committed mainnet sample at $SAMPLE"
    fi
    log "fixture: $FIXTURE"
}

# ---- the rows ------------------------------------------------------------------------------

ROWS=()
plan_rows() {
    case $ROWS_CHOICE in
        headline) ROWS=(lmdb@ext4 butter@btrfs mdbx@ext4 redb@ext4) ;;
        all) ROWS=(lmdb@ext4 butter@btrfs mdbx@ext4 redb@ext4 lmdb@btrfs mdbx@btrfs redb@btrfs) ;;
        *) IFS=, read -r -a ROWS <<<"$ROWS_CHOICE" ;;
    esac
    ((${#ROWS[@]})) || die "BENCH_ROWS is empty"
    local r
    for r in "${ROWS[@]}"; do
        case $r in
            lmdb@ext4 | mdbx@ext4 | redb@ext4 | lmdb@btrfs | mdbx@btrfs | redb@btrfs | butter@btrfs) ;;
            lighthouse:lmdb@ext4 | lighthouse:lmdb@btrfs | lighthouse:butter@btrfs)
                [[ -x ${BENCH_LIGHTHOUSE_RUNNER:-} ]] ||
                    die "row $r needs BENCH_LIGHTHOUSE_RUNNER, the runner built by scripts/lighthouse.sh LIGHTHOUSE_DIR bench"
                ;;
            *) die "BENCH_ROWS: unknown row '$r' (lmdb, mdbx or redb @ext4 or @btrfs; butter@btrfs; lighthouse:lmdb@ext4, lighthouse:lmdb@btrfs, lighthouse:butter@btrfs)" ;;
        esac
    done
}

# Forget cached pages before each pair (root only), so no row starts with another's database
# or fixture pages warm.
drop_caches() {
    sync
    if [[ -w /proc/sys/vm/drop_caches ]]; then
        echo 3 >/proc/sys/vm/drop_caches 2>/dev/null || true
    fi
}

# second_fs FS: in SECOND_DIR, the directory for the second row of a pair whose first row is
# on the same kind of filesystem: a second image of that kind, made when first needed; empty
# when there are no images (BENCH_EXT4_DIR and BENCH_BTRFS_DIR give one directory of each).
declare -A SECOND_DIRS=()
SECOND_DIR=""
second_fs() {
    local fs=$1
    SECOND_DIR=""
    [[ -n $WORK ]] || return 0
    if [[ -z ${SECOND_DIRS[$fs]:-} ]]; then
        make_fs "$fs" "$fs-2"
        SECOND_DIRS[$fs]=$MOUNTED
    fi
    SECOND_DIR=${SECOND_DIRS[$fs]}
}

# row_dir ROW [DIR]: DIR, or the directory of the row's filesystem kind.
row_dir() {
    if [[ -n ${2:-} ]]; then
        echo "$2"
    elif [[ ${1#*@} == ext4 ]]; then
        echo "$EXT4_DIR"
    else
        echo "$BTRFS_DIR"
    fi
}

# row_command ROW [DIR]: the command of one row, in CMD, with its database in DIR (default: the
# directory of the row's filesystem kind). A port row is a `slasher-bench replay`; a
# lighthouse:* row is the runner on a fresh directory, whose path goes to CLIENT_DB (empty for
# a port row) for the import afterwards.
CMD=()
CLIENT_DB=""
declare -A ROW_DIRS=()
row_command() {
    local row=$1 backend=${1%@*} dir batches=${BENCH_BATCHES:-128}
    dir=$(row_dir "$row" "${2:-}")
    CLIENT_DB=""
    ROW_DIRS[$row]=$dir
    if [[ $backend == lighthouse:* ]]; then
        backend=${backend#lighthouse:}
        if [[ -n ${FILLED[$row]:-} ]]; then
            CLIENT_DB=${FILLED[$row]}
        else
            CLIENT_DB=$(mktemp -d "$dir/lighthouse-$backend.XXXXXX")
        fi
        [[ $batches == all ]] && batches=1000000000
        CMD=("$BENCH_LIGHTHOUSE_RUNNER" "$FIXTURE" "$CLIENT_DB" "$OUT/$row.jsonl" "$backend"
            "$batches" "$HISTORY" 16 256)
        return
    fi
    CMD=("$BIN" replay --fixture "$FIXTURE" --backends "$backend" --db-dir "$dir" --out "$OUT/$row"
        --history-length "$HISTORY")
    [[ $batches != all ]] && CMD+=(--batches "$batches")
    # shellcheck disable=SC2206 # the extra arguments are split on spaces on purpose
    CMD+=(${BENCH_REPLAY_ARGS:-})
}

# finish_row ROW STATUS DB: a client row's JSON lines become a report row (its database is measured,
# then removed); a failed row sets RC. Adds the row's report directory to RUNS.
RC=0
RUNS=()
finish_row() {
    local row=$1 rc=$2 db=$3
    if ((rc == 0)) && [[ -n $db ]]; then
        "$BIN" import-client --fixture "$FIXTURE" --rows "$OUT/$row.jsonl" --db-dir "$db" \
            --remove-db --out "$OUT/$row" || rc=$?
    fi
    if ((rc != 0)); then
        RC=$rc
        log "row $row FAILED (exit $rc); going on to merge what there is"
    fi
    [[ -f $OUT/$row/report.json ]] && RUNS+=("$OUT/$row")
    return 0
}

# prefill ROW DIR CORE: with `--fill-epochs N` in BENCH_REPLAY_ARGS, the database of a
# lighthouse:* row is filled before the pair by the port (`replay --fill-epochs N --batches 0
# --keep-db`: the same tables in Lighthouse's bytes, the state Lighthouse's slasher leaves after
# N epochs of regular chain), so that the client starts from the same window as the port's
# rows; the runner then opens it. Not part of the row's figures; its log is ROW.fill.log. The
# filled directory goes to FILLED[ROW].
declare -A FILLED=()
prefill() {
    local row=$1 dir=$2 core=$3 backend epochs before after d
    [[ $row == lighthouse:* ]] || return 0
    epochs=$(grep -oE -- '--fill-epochs[ =][0-9]+' <<<"${BENCH_REPLAY_ARGS:-}" | grep -oE '[0-9]+$') ||
        return 0
    backend=${row#lighthouse:}
    backend=${backend%@*}
    dir=$(row_dir "$row" "$dir")
    before=$(ls -d "$dir"/slasher-bench-"$backend"-* 2>/dev/null || true)
    log "row $row: filling its database with $epochs epochs first (the port's fill; $OUT/$row.fill.log)"
    taskset -c "$core" "$BIN" replay --fixture "$FIXTURE" --backends "$backend" --db-dir "$dir" \
        --out "$OUT/$row.fill" --history-length "$HISTORY" --fill-epochs "$epochs" --batches 0 \
        --keep-db --no-progress >"$OUT/$row.fill.log" 2>&1 || die "row $row: the fill failed ($OUT/$row.fill.log)"
    after=$(ls -d "$dir"/slasher-bench-"$backend"-* 2>/dev/null || true)
    for d in $after; do
        grep -qxF -- "$d" <<<"$before" || FILLED[$row]=$d
    done
    [[ -n ${FILLED[$row]:-} ]] || die "row $row: the fill left no database in $dir"
}

# row_watch ROW: BENCH_ROW_WATCH beside port row ROW (whose command row_command just made);
# its pid goes to WATCHERS.
row_watch() {
    [[ -n ${BENCH_ROW_WATCH:-} && -z $CLIENT_DB ]] || return 0
    local cmd
    read -r -a cmd <<<"$BENCH_ROW_WATCH"
    "${cmd[@]}" "$1" "${ROW_DIRS[$1]}" "$OUT/$1" >"$OUT/$1.watch.log" 2>&1 &
    WATCHERS+=($!)
}

# row_hook ROW: BENCH_ROW_HOOK after the pair of port row ROW.
row_hook() {
    local row=$1 rc=0 cmd
    [[ -n ${BENCH_ROW_HOOK:-} && $row != lighthouse:* && -f $OUT/$row/report.json ]] || return 0
    log "row $row: $BENCH_ROW_HOOK (output in $OUT/$row.hook.log)"
    read -r -a cmd <<<"$BENCH_ROW_HOOK"
    "${cmd[@]}" "$row" "${ROW_DIRS[$row]}" "$OUT/$row" >"$OUT/$row.hook.log" 2>&1 || rc=$?
    ((rc == 0)) || log "row $row: the hook failed (exit $rc; $OUT/$row.hook.log)"
}

# run_pair ROW [ROW2]: ROW in the foreground on core 0 (progress bar on the terminal) and
# ROW2 at the same time on core 1 (output in ROW2.log), each on a filesystem of its own.
run_pair() {
    local a=$1 b=${2:-} rc_a=0 rc_b=0 db_b="" dir_b="" cg_a="" cg_b=""
    if [[ -n $b && ${a#*@} == "${b#*@}" ]]; then
        second_fs "${b#*@}"
        if [[ -z $SECOND_DIR ]]; then
            log "rows $a and $b are both on ${b#*@}, which has one directory: one after the other"
            run_pair "$a"
            run_pair "$b"
            return 0
        fi
        dir_b=$SECOND_DIR
    fi
    prefill "$a" "" 0
    [[ -z $b ]] || prefill "$b" "$dir_b" 1
    drop_caches
    if [[ -n $b ]]; then
        row_command "$b" "$dir_b"
        db_b=$CLIENT_DB
        [[ -z $db_b ]] && CMD+=(--no-progress)
        row_cgroup "$b"
        cg_b=$ROW_CGROUP
        watch_cgroup "$b" "$cg_b"
        log "row $b on core 1 (output in $OUT/$b.log): ${CMD[*]}"
        in_cgroup "$cg_b" taskset -c 1 "${CMD[@]}" >"$OUT/$b.log" 2>&1 &
        BG_PID=$!
        row_watch "$b"
    fi
    row_command "$a"
    row_cgroup "$a"
    cg_a=$ROW_CGROUP
    watch_cgroup "$a" "$cg_a"
    row_watch "$a"
    log "row $a on core 0: ${CMD[*]}"
    in_cgroup "$cg_a" taskset -c 0 "${CMD[@]}" || rc_a=$?
    record_cgroup "$a" "$cg_a"
    finish_row "$a" "$rc_a" "$CLIENT_DB"
    if [[ -n $b ]]; then
        wait "$BG_PID" || rc_b=$?
        BG_PID=""
        grep -E '^ +[a-z].*: (first|FAILED)|replayed through Lighthouse' "$OUT/$b.log" || true
        record_cgroup "$b" "$cg_b"
        finish_row "$b" "$rc_b" "$db_b"
    fi
    stop_watchers
    row_hook "$a"
    [[ -z $b ]] || row_hook "$b"
    remove_row_cgroups
    return 0
}

# One line per row of the merged report's main table (columns found by their headers).
print_summary() {
    local md=$OUT/report.md
    [[ -f $md ]] || return 0
    log "summary (times in ms; the other columns and the charts are in report.md):"
    awk -F'|' '
        function trim(s) { gsub(/^ +| +$/, "", s); return s }
        function col(name) { return (name in at) ? trim($(at[name])) : "?" }
        /^## Fixture/ { sub(/^## /, ""); print "    " $0 }
        /^\| run \| backend \| phase \| clock ns / {
            delete at
            for (i = 2; i < NF; i++) at[trim($i)] = i
            table = 4
            print "    storage net of the clock (calls × clock ns taken out):"
            next
        }
        /^\| run \| backend \| (filesystem|phase \| batches \| median) / {
            delete at
            for (i = 2; i < NF; i++) at[trim($i)] = i
            table = ("phase" in at) ? 2 : 1
            if (table == 2) print "    by phase (storage: time inside the backend calls):"
            next
        }
        /^\| run \|/ { table = 0; next }
        table && /^\|---/ { next }
        table == 1 && /^\|/ {
            printf "    %-24s first %9s  median %8s  p99 %9s  total %7s s | vs LMDB: median %-6s total %-6s | DB %s MiB | peak RSS %s MiB\n",
                col("backend"), col("first batch"), col("median"), col("p99"), col("total s"),
                col("median ×LMDB"), col("total ×LMDB"), col("DB MiB (apparent / allocated)"),
                col("peak RSS MiB")
            next
        }
        /^\| port row \| client row / {
            delete at
            for (i = 2; i < NF; i++) at[trim($i)] = i
            table = 3
            print "    the port against the client (port ÷ client):"
            next
        }
        table == 3 && /^\|/ {
            printf "      %-24s %-10s median %8s vs %8s (%s) total %7s vs %7s s (%s)\n",
                col("port row"), col("phase"), col("port median"), col("client median"),
                col("median ÷ client"), col("port total s"), col("client total s"),
                col("total ÷ client")
            next
        }
        table == 2 && /^\|/ {
            printf "      %-24s %-10s median %8s (%-6s) total %7s s (%-6s) | storage median %8s (%-6s) total %7s s (%-6s) share %s\n",
                col("backend"), col("phase"), col("median"), col("median ×LMDB"), col("total s"),
                col("total ×LMDB"), col("storage median"), col("storage median ×LMDB"),
                col("storage total s"), col("storage total ×LMDB"), col("storage share")
            next
        }
        table == 4 && /^\|/ {
            printf "      %-24s %-10s net storage median %8s (%-6s) total %7s s (%-6s) | clock %s ns a call, %s of storage\n",
                col("backend"), col("phase"), col("net median"), col("net median ×LMDB"),
                col("net total s"), col("net total ×LMDB"), col("clock ns"),
                col("clock share of storage")
            next
        }
        { table = 0 }
    ' "$md"
    grep -E '^(Correctness gate|\*\*CORRECTNESS|\*\*EXPECTED|- .* expected found)' "$md" | sed 's/^/    /' || true
}

main() {
    if [[ $(id -u) != 0 && (-z ${BENCH_EXT4_DIR:-} || -z ${BENCH_BTRFS_DIR:-}) ]]; then
        cat >&2 <<'USAGE'
[bench.sh] Not root, so no loop images can be made. Run `sudo scripts/bench.sh`, or give two
[bench.sh] directories on real disks (never tmpfs), ideally of equal size on the same device:
[bench.sh]   BENCH_EXT4_DIR=DIR   on ext4 (LMDB, MDBX, redb)
[bench.sh]   BENCH_BTRFS_DIR=DIR  on btrfs (butter_db; LMDB, MDBX, redb with BENCH_ROWS=all)
[bench.sh] and have installed btrfs-progs, libclang-dev, build-essential and pkg-config.
USAGE
        exit 1
    fi
    plan_rows
    [[ $HISTORY =~ ^[1-9][0-9]*$ ]] || die "BENCH_HISTORY=$HISTORY is not a number of epochs"
    [[ " ${BENCH_REPLAY_ARGS:-} " != *" --history-length"* ]] ||
        die "BENCH_REPLAY_ARGS names --history-length: set BENCH_HISTORY instead"
    if ((HISTORY != 4096)); then
        log "history $HISTORY epochs, not Lighthouse's default of 4096 (BENCH_HISTORY)"
    fi
    find_cargo
    if [[ $(id -u) == 0 ]]; then install_packages; fi
    setup_memory_limit
    command -v taskset >/dev/null || die "taskset not found (package util-linux)"

    OUT=${BENCH_OUT:-$TARGET/bench/$(date +%Y%m%d-%H%M%S)}
    mkdir -p "$OUT"
    case $(fs_of "$OUT") in tmpfs | ramfs) log "note: the report directory $OUT is on tmpfs" ;; esac

    case ${BENCH_ALLOCATOR:-jemalloc} in
        jemalloc)
            log "building slasher-bench ($REPLAY_PROFILE, every backend, jemalloc)"
            cargo build --profile "$REPLAY_PROFILE" -p slasher-bench
            ;;
        glibc)
            log "building slasher-bench ($REPLAY_PROFILE, every backend, glibc's malloc)"
            cargo build --profile "$REPLAY_PROFILE" -p slasher-bench --no-default-features \
                --features lmdb,mdbx,redb,butter
            ;;
        *) die "BENCH_ALLOCATOR=$BENCH_ALLOCATOR: jemalloc or glibc" ;;
    esac
    choose_fixture

    if [[ -n ${BENCH_EXT4_DIR:-} && -n ${BENCH_BTRFS_DIR:-} ]]; then
        EXT4_DIR=$BENCH_EXT4_DIR
        BTRFS_DIR=$BENCH_BTRFS_DIR
        log "using BENCH_EXT4_DIR=$EXT4_DIR ($(fs_of "$EXT4_DIR")) and BENCH_BTRFS_DIR=$BTRFS_DIR ($(fs_of "$BTRFS_DIR"))"
        [[ $(fs_of "$BTRFS_DIR") == btrfs ]] || die "BENCH_BTRFS_DIR=$BTRFS_DIR is not on btrfs"
    else
        WORK=$(mktemp -d "$(pick_image_dir)/slasher-bench.XXXXXX")
        make_fs ext4
        EXT4_DIR=$MOUNTED
        make_fs btrfs
        BTRFS_DIR=$MOUNTED
    fi

    local pairs=$(((${#ROWS[@]} + 1) / 2)) i k first_pair_s=0 pair_start elapsed
    log "rows: ${ROWS[*]} ($pairs pair(s), two rows at a time)"
    for ((i = 0; i < ${#ROWS[@]}; i += 2)); do
        k=$((i / 2 + 1))
        elapsed=$((SECONDS - START))
        if ((k > 1)); then
            if [[ $ROWS_CHOICE == headline ]] && ((elapsed + first_pair_s > BUDGET_MIN * 60)); then
                log "not running ${ROWS[*]:i}: another pair (~$(minutes "$first_pair_s")) would end after the $BUDGET_MIN-minute budget (BENCH_ROWS=all runs every row)"
                break
            fi
            log "pair $k of $pairs; elapsed $(minutes "$elapsed"), about $(minutes $((first_pair_s * (pairs - k + 1)))) left"
        fi
        pair_start=$SECONDS
        run_pair "${ROWS[i]}" "${ROWS[i + 1]:-}"
        ((k == 1)) && first_pair_s=$((SECONDS - pair_start))
    done
    ((${#RUNS[@]})) || die "no run produced a report"
    log "merging ${#RUNS[@]} rows into $OUT"
    "$BIN" report "${RUNS[@]}" --out "$OUT" >/dev/null || RC=$?
    print_summary
    return "$RC"
}

main
