#!/usr/bin/env bash
# What scripts/full-window.sh does beside and after each row of a pair (bench.sh's
# BENCH_ROW_WATCH and BENCH_ROW_HOOK); not meant to be run by hand.
#
#   full-window-row.sh watch ROW DIR REPORT_DIR   beside the row, while it replays
#   full-window-row.sh hook ROW DIR REPORT_DIR    after the pair, its filesystem still mounted
#
# watch (only with FW_BACKUP_AT=K): once the row has finished K batches, a full backup of its
# live database beside the replay: butter, `butter backup DB COPY-a --stream FILE` (a copy on
# the same filesystem, then its send stream); LMDB, `mdb_copy DB COPY`. butter also keeps a
# copy after batch K+1 (COPY-b) for the incremental stream. Each step's start and end (time,
# batches done) go to the watch log, so that the report's batches can be split into those
# with a backup beside them and those without.
# hook: butter rows: the live data (`butter stat --json --deep`: every table's segment bytes less its
# dead entries) against the filesystem's usage in the row's samples; `butter check`; with
# FW_BACKUP_AT, a copy at the end (COPY-c, FW_BATCHES - K batches after COPY-a), the
# incremental streams b and c over a, a restore of a + c and `butter check` of it; the reopen
# after SIGKILL on a copy (backend/examples/reopen.rs). LMDB rows: the size of the copy made
# beside the replay. Every figure is one `fw:` line of the hook log, which full-window.sh
# collects into FW_OUT/ops.md. Everything made here is removed at the end.
#
# Environment: FW_BIN_DIR (butter, slasher-bench, the reopen example), FW_STREAM_DIR (where
# send streams go: a directory off the row's filesystem), FW_BACKUP_AT.
set -euo pipefail

mode=$1 row=$2
BIN_DIR=${FW_BIN_DIR:?}
K=${FW_BACKUP_AT:-}
backend=${row%@*}

fw() { echo "fw: $row $*"; }
now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.2f", b - a }'; }

# The batches the row has finished: lines of the child's stream of finished batches.
batches_done() {
    local f
    for f in "$1"/.child-*.json.batches; do
        [[ -f $f ]] && { wc -l <"$f"; return; }
    done
    echo 0
}

# db_of DIR: the row's database, the newest one `replay` made in DIR.
db_of() {
    local db=""
    for db in "$1"/slasher-bench-"$backend"-*; do :; done
    [[ -d $db ]] || { fw "no database under $1"; exit 1; }
    echo "$db"
}

watch() {
    local dir=$1 report=$2 db t done_at
    [[ -n $K ]] || exit 0
    trap 'kill $(jobs -p) 2>/dev/null; exit 0' TERM
    until (($(batches_done "$report") >= K)); do sleep 0.2; done
    db=$(db_of "$dir")
    mkdir -p "$dir/fw-backups"
    t=$(now)
    fw "backup beside the replay: starts after batch $(batches_done "$report")"
    case $backend in
        butter)
            "$BIN_DIR/butter" backup "$db" "$dir/fw-backups/a" --stream "$FW_STREAM_DIR/$row-a.stream" &
            wait $!
            fw "backup a (copy + full stream) took $(since "$t") s; stream $(stat -c %s "$FW_STREAM_DIR/$row-a.stream") bytes; ends after batch $(batches_done "$report")"
            done_at=$(batches_done "$report")
            until (($(batches_done "$report") > done_at)); do sleep 0.2; done
            t=$(now)
            "$BIN_DIR/butter" backup "$db" "$dir/fw-backups/b" &
            wait $!
            fw "backup b (copy) after batch $(batches_done "$report") took $(since "$t") s"
            ;;
        lmdb)
            mkdir "$dir/fw-backups/a"
            mdb_copy "$db" "$dir/fw-backups/a" &
            wait $!
            fw "mdb_copy took $(since "$t") s; $(stat -c %s "$dir/fw-backups/a/data.mdb") bytes; ends after batch $(batches_done "$report")"
            ;;
    esac
}

# used_bytes DIR: bytes in use on DIR's filesystem (statfs), after a sync of it.
used_bytes() {
    sync -f "$1"
    df -B1 --output=used "$1" | tail -1 | tr -d ' '
}

hook() {
    local dir=$1 report=$2 db t
    db=$(db_of "$dir")
    case $backend in
        butter)
            "$BIN_DIR/butter" stat "$db" --json --deep >"$report/../$row.stat.json"
            python3 - "$report/../$row.stat.json" "$report/report.json" "$row" "${K:-0}" <<'PY'
import json, sys
stat = json.load(open(sys.argv[1]))
tables = stat["tables"]
# live/dead bytes count entries in memory's form (format 1's); the files may store them smaller
# (format 2), so the live share of each table's files is its share of those entry bytes.
live = round(sum(t["file_bytes"] * t["live_bytes"] / max(1, t["live_bytes"] + t["dead_bytes"])
                 for t in tables))
files = sum(t["file_bytes"] for t in tables)
row = json.load(open(sys.argv[2]))["runs"][0]["backends"][0]
samples = [(s["index"], s.get("fs_used_bytes")) for s in row.get("samples", []) if s.get("fs_used_bytes")]
name, k = sys.argv[3], int(sys.argv[4])
print(f"fw: {name} live data {live} bytes (segment files {files} bytes, dead {files - live})")
def peak(label, chosen):
    if chosen:
        i, used = max(chosen, key=lambda s: s[1])
        print(f"fw: {name} filesystem used {label}: peak {used} bytes after batch {i} = "
              f"{used / live:.3f}x live ({len(chosen)} samples)")
# Batch indices count from 0: the batches before the K-th, before any backup copy existed.
peak("before the backups" if k else "over the run", [s for s in samples if not k or s[0] < k - 1])
if k:
    peak("over the run, the backup copies included", samples)
PY
            t=$(now)
            "$BIN_DIR/butter" check "$db" | sed 's/^/check: /'
            fw "butter check took $(since "$t") s"
            if [[ -n $K && -d $dir/fw-backups/a ]]; then
                local used0
                used0=$(used_bytes "$dir")
                t=$(now)
                "$BIN_DIR/butter" backup "$db" "$dir/fw-backups/c"
                fw "backup c (copy, end of the run) took $(since "$t") s; filesystem used +$(($(used_bytes "$dir") - used0)) bytes"
                for x in b c; do
                    t=$(now)
                    "$BIN_DIR/butter" backup "$dir/fw-backups/$x" "$dir/fw-backups/s$x" \
                        --stream "$FW_STREAM_DIR/$row-$x.stream" --parent "$dir/fw-backups/a"
                    fw "incremental stream $x over a took $(since "$t") s; $(stat -c %s "$FW_STREAM_DIR/$row-$x.stream") bytes"
                done
                t=$(now)
                "$BIN_DIR/butter" restore "$FW_STREAM_DIR/$row-a.stream" "$FW_STREAM_DIR/$row-c.stream" "$dir/fw-backups/restored"
                fw "restore a + c took $(since "$t") s"
                t=$(now)
                "$BIN_DIR/butter" check "$dir/fw-backups/restored" | sed 's/^/check: /'
                fw "butter check of the restored copy took $(since "$t") s"
            fi
            mkdir -p "$dir/fw-backups"
            "$BIN_DIR/butter" backup "$db" "$dir/fw-backups/reopen" >/dev/null
            "$BIN_DIR/examples/reopen" "$dir/fw-backups/reopen" 3 | sed 's/^/reopen: /'
            ;;
        lmdb)
            [[ -f $dir/fw-backups/a/data.mdb ]] &&
                fw "mdb_copy's copy: $(stat -c %s "$dir/fw-backups/a/data.mdb") bytes"
            fw "database file: $(stat -c %s "$db/data.mdb") bytes"
            ;;
    esac
    remove_made "$dir"
    rm -f "$FW_STREAM_DIR/$row"-*.stream
}

# remove_made DIR: the copies this script made under DIR/fw-backups.
remove_made() {
    local d
    [[ -d $1/fw-backups ]] || return 0
    for d in "$1"/fw-backups/*; do
        [[ -e $d ]] || continue
        if [[ $backend == butter ]]; then
            "$BIN_DIR/butter" remove "$d" >/dev/null
        else
            rm -rf "$d"
        fi
    done
    rmdir "$1/fw-backups"
}

case $mode in
    watch) watch "$3" "$4" ;;
    hook) hook "$3" "$4" ;;
    *) echo "usage: $0 watch|hook ROW DIR REPORT_DIR" >&2; exit 2 ;;
esac
