# The `devnet` step of scripts/lighthouse.sh (sourced by it, not run): a local network on
# 127.0.0.1 in which doubled validators sign twice, watched by butter_db and LMDB slashers
# (docs/lighthouse.md §6). It uses lighthouse.sh's LH, REPO, CARGO_TARGET_DIR, WORK/TEST_TMP
# (btrfs_tmp), log and die.
#
# 1. Lighthouse's simulator runs the scenario `butter-slashing-sim` (integration/lighthouse/
#    slashing_sim.rs): a boot node, a node whose slasher is on butter_db, one on LMDB, the
#    validator clients, doubled validators that propose and attest twice; it writes the
#    network's directory and, at the end, the nodes' answers.
# 2. Two `lighthouse bn` processes of the built binary join that network from its directory,
#    each with its own `lcli mock-el`: `bin-butter` (--slasher-backend butter, on btrfs) and
#    `bin-lmdb`. On bin-butter, in this order: its `slasher_database_size` against `butter
#    stat`, `butter backup` beside it, SIGTERM and a restart, `kill -9` right after a batch
#    starts and a restart, then stop, `butter remove` and a start on a fresh directory. Then
#    both run side by side to the end, and their metrics and RSS are sampled every epoch.
# 3. integration/lighthouse/devnet_check.py judges the scenario's answers and log; any failure,
#    or a step of 2 that does not do what it should, fails the run.
#
# Everything it starts is stopped at exit (the EXIT trap of lighthouse.sh also removes the
# mount and the work directory). The output stays in DEVNET_OUT (default
# CARGO_TARGET_DIR/devnet/<date-time>): summary.md, the logs, the answers.
#
# Environment: DEVNET_VALIDATORS (256), DEVNET_DOUBLED ("3,77,130,201"), DEVNET_SPEED_UP (2:
# it divides the minimal preset's 6 s slot, in whole seconds, so 2 gives 3 s slots and 4 gives
# 1 s), DEVNET_END_EPOCH (30), DEVNET_HISTORY (16).

DEVNET_PIDS=()
devnet_stop_all() {
    local pid
    # Some are gone already (the node killed on purpose): a failed kill is not an error.
    for pid in "${DEVNET_PIDS[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
    for pid in "${DEVNET_PIDS[@]}"; do
        for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
        kill -KILL "$pid" 2>/dev/null || true
    done
    DEVNET_PIDS=()
}

# One binary node: devnet_node NAME BACKEND INDEX (INDEX picks its ports). Starts its mock EL
# (once) and the beacon node in the background, appending the node's pid to DEVNET_PIDS and
# setting NODE_PID.
devnet_node() {
    local name=$1 backend=$2 i=$3 dir=$DEVNET_OUT/$1 el
    mkdir -p "$dir"
    if [[ ! -s $dir/jwt.hex ]]; then
        el=$DEVNET_OUT/testnet/el.json
        "$DEVNET_LCLI" mock-el --jwt-output-path "$dir/jwt.hex" --listen-address 127.0.0.1 \
            --listen-port $((4100 + i)) --all-payloads-valid true \
            --shanghai-time "$(python3 -c "import json;print(json.load(open('$el'))['shanghai_time'])")" \
            --cancun-time "$(python3 -c "import json;print(json.load(open('$el'))['cancun_time'])")" \
            >"$dir/mock-el.log" 2>&1 &
        DEVNET_PIDS+=($!)
        for _ in $(seq 50); do [[ -s $dir/jwt.hex ]] && break; sleep 0.2; done
    fi
    "$DEVNET_LIGHTHOUSE" --testnet-dir "$DEVNET_OUT/testnet" --debug-level debug --log-format JSON \
        bn --datadir "$dir/data" --execution-endpoint "http://127.0.0.1:$((4100 + i))" \
        --execution-jwt "$dir/jwt.hex" --listen-address 127.0.0.1 --port $((42500 + i)) \
        --enr-address 127.0.0.1 --enr-udp-port $((42500 + i)) --enr-tcp-port $((42500 + i)) \
        --disable-enr-auto-update --enable-private-discovery --disable-upnp --disable-quic \
        --libp2p-addresses /ip4/127.0.0.1/tcp/42424 --target-peers 4 \
        --http --http-address 127.0.0.1 --http-port $((15052 + 2 * i)) \
        --metrics --metrics-address 127.0.0.1 --metrics-port $((15053 + 2 * i)) \
        --allow-insecure-genesis-sync --disable-deposit-contract-sync \
        --subscribe-all-subnets --import-all-attestations \
        --slasher --slasher-backend "$backend" --slasher-dir "$DEVNET_SLASHER_DIR/$name" \
        --slasher-history-length "${DEVNET_HISTORY:-16}" --slasher-update-period 6 \
        --slasher-slot-offset 2.25 --slasher-broadcast false \
        >>"$dir/node.log" 2>&1 &
    NODE_PID=$!
    DEVNET_PIDS+=("$NODE_PID")
}

# devnet_metric INDEX NAME: the value of metric NAME (a sample line without labels) of node INDEX.
devnet_metric() {
    curl -sf "http://127.0.0.1:$((15053 + 2 * $1))/metrics" | awk -v m="$2" '$1 == m { print $2 }'
}

# Fails unless every socket that the processes of DEVNET_PIDS listen on (TCP) or are bound to
# (UDP) is on the loopback address; writes them to DEVNET_OUT/sockets.txt.
devnet_check_loopback() {
    local pattern
    pattern=$(printf 'pid=%s,|' "${DEVNET_PIDS[@]}")
    ss -H -ltunp | grep -E "${pattern%|}" >"$DEVNET_OUT/sockets.txt" || true
    [[ -s $DEVNET_OUT/sockets.txt ]] || die "no socket of the devnet's processes found by ss"
    if awk '{ print $5 }' "$DEVNET_OUT/sockets.txt" | grep -Ev '^(127\.0\.0\.1|\[::1\]):'; then
        die "a devnet process listens beyond 127.0.0.1 (see $DEVNET_OUT/sockets.txt)"
    fi
    log "$(wc -l <"$DEVNET_OUT/sockets.txt") sockets of the devnet's processes, all on 127.0.0.1"
}

# devnet_scrape INDEX NAME WHEN: saves node INDEX's /metrics page to DEVNET_OUT/NAME/metrics-WHEN.txt
# under a first line `# scraped-at SECONDS` (devnet_metrics.py diffs two of them).
devnet_scrape() {
    { echo "# scraped-at $(date +%s.%N)"; curl -sf "http://127.0.0.1:$((15053 + 2 * $1))/metrics"; } \
        >"$DEVNET_OUT/$2/metrics-$3.txt" || die "no metrics from $2"
}

# Waits until node INDEX's slasher has run a batch (its batch-time histogram counts one).
devnet_wait_batches() {
    local i=$1 want=${2:-1} n
    for _ in $(seq 300); do
        n=$(devnet_metric "$i" slasher_process_batch_time_count)
        [[ -n $n && ${n%.*} -ge $want ]] && return 0
        sleep 1
    done
    return 1
}

# The seconds between the last "Starting slasher" line of a node log and the start of the run
# that wrote it (its first line after the last "Lighthouse started"), from their timestamps.
devnet_slasher_start_seconds() {
    python3 - "$1" <<'PY'
import json, sys, datetime
start = slasher = None
for line in open(sys.argv[1], errors="replace"):
    try:
        rec = json.loads(line)
    except ValueError:
        continue
    ts = datetime.datetime.fromisoformat(rec.get("ts", "").replace("Z", "+00:00")) if rec.get("ts") else None
    if rec.get("msg") == "Lighthouse started":
        start, slasher = ts, None
    elif rec.get("msg") == "Starting slasher" and start:
        slasher = ts
print(f"{(slasher - start).total_seconds():.2f}" if start and slasher else "?")
PY
}

do_devnet() {
    DEVNET_LIGHTHOUSE=$CARGO_TARGET_DIR/release/lighthouse
    DEVNET_LCLI=$CARGO_TARGET_DIR/release/lcli
    local sim=$CARGO_TARGET_DIR/release/simulator butter=$REPO/target/release/butter
    local epoch_s speed=${DEVNET_SPEED_UP:-2} end=${DEVNET_END_EPOCH:-30} summary
    LIGHTHOUSE_BUILD_PACKAGES="lcli simulator ${LIGHTHOUSE_BUILD_PACKAGES:-}" \
        LIGHTHOUSE_FEATURES=lighthouse/spec-minimal do_build
    log "building the butter tool in $REPO"
    (cd "$REPO" && env -u CARGO_TARGET_DIR cargo build --release -q -p butter-tools)
    command -v curl >/dev/null || die "curl is needed"
    for port in 42424 42500 42501 4000 4100 4101 15052 15053 15054 15055; do
        ! ss -ltn "sport = :$port" | grep -q LISTEN || die "port $port on 127.0.0.1 is in use"
    done
    btrfs_tmp
    DEVNET_OUT=${DEVNET_OUT:-$CARGO_TARGET_DIR/devnet/$(date -u +%Y%m%dT%H%M%SZ)}
    [[ ! -e $DEVNET_OUT ]] || die "$DEVNET_OUT exists"
    mkdir -p "$DEVNET_OUT"
    DEVNET_SLASHER_DIR=$TEST_TMP/slashers
    mkdir -p "$DEVNET_SLASHER_DIR" "$WORK/lmdb"
    summary=$DEVNET_OUT/summary.md

    log "simulator butter-slashing-sim (log: $DEVNET_OUT/sim.log)"
    "$sim" butter-slashing-sim --validators "${DEVNET_VALIDATORS:-256}" \
        --doubled "${DEVNET_DOUBLED:-3,77,130,201}" --speed-up-factor "$speed" \
        --end-epoch "$end" --history-length "${DEVNET_HISTORY:-16}" \
        --butter-dir "$DEVNET_SLASHER_DIR/sim-butter" --lmdb-dir "$WORK/lmdb" \
        --out "$DEVNET_OUT/answers" --testnet-dir "$DEVNET_OUT/testnet" \
        --also-post http://127.0.0.1:15052,http://127.0.0.1:15054 \
        >"$DEVNET_OUT/sim.log" 2>&1 &
    local sim_pid=$!
    DEVNET_PIDS+=("$sim_pid")
    for _ in $(seq 600); do
        [[ -s $DEVNET_OUT/testnet/el.json ]] && break
        kill -0 "$sim_pid" 2>/dev/null || die "the simulator stopped before genesis (log: $DEVNET_OUT/sim.log)"
        sleep 1
    done
    [[ -s $DEVNET_OUT/testnet/el.json ]] || die "no network directory after 600 s"
    # The epoch's length as the network has it (the minimal preset: 8 slots).
    epoch_s=$(($(sed -n "s/^SECONDS_PER_SLOT: *['\"]*\([0-9]*\).*/\1/p" "$DEVNET_OUT/testnet/config.yaml") * 8))
    ((epoch_s > 0)) || die "no SECONDS_PER_SLOT in $DEVNET_OUT/testnet/config.yaml"
    {
        echo "# Lighthouse devnet, $(date -u +%FT%TZ), Lighthouse $(git -C "$LH" rev-parse --short=10 HEAD)"
        echo
        echo "validators ${DEVNET_VALIDATORS:-256}, doubled ${DEVNET_DOUBLED:-3,77,130,201}, ${epoch_s} s epochs, history ${DEVNET_HISTORY:-16}, end epoch $end"
        echo
    } >"$summary"

    devnet_node bin-butter butter 0
    local butter_pid=$NODE_PID
    devnet_node bin-lmdb lmdb 1
    local lmdb_pid=$NODE_PID
    devnet_wait_batches 0 3 || die "bin-butter's slasher ran no batch (log: $DEVNET_OUT/bin-butter/node.log)"
    devnet_wait_batches 1 3 || die "bin-lmdb's slasher ran no batch"
    devnet_check_loopback
    local db=$DEVNET_SLASHER_DIR/bin-butter gauge stat
    # A node that has not synced yet stores nothing: wait until bin-butter's slasher has
    # committed attestations (more than the 220-byte manifest of an empty database).
    for _ in $(seq 300); do
        gauge=$(devnet_metric 0 slasher_database_size)
        [[ -n $gauge && ${gauge%.*} -gt 4096 ]] && break
        sleep 1
    done
    [[ ${gauge%.*} -gt 4096 ]] || die "bin-butter's slasher stored no attestation within 300 s"
    # The operator's actions on bin-butter, each quoted into the summary.
    sleep $((3 * epoch_s))
    local gauge2 json
    gauge=$(devnet_metric 0 slasher_database_size)
    stat=$("$butter" stat "$db" 2>&1) || die "butter stat $db failed: $stat"
    json=$("$butter" stat --json "$db" 2>&1) || die "butter stat --json $db failed: $json"
    gauge2=$(devnet_metric 0 slasher_database_size)
    {
        echo "## bin-butter: the gauge and butter stat"
        echo '```'
        echo "slasher_database_size $gauge (before butter stat), $gauge2 (after)"
        echo "\$ butter stat $db"
        echo "$stat"
        echo '```'
    } >>"$summary"
    python3 - "$gauge" "$gauge2" "$json" >>"$summary" <<'PY' || die "slasher_database_size is not butter stat's size within a generation (summary: $summary)"
import json, sys
before, after = float(sys.argv[1]), float(sys.argv[2])
stat = json.loads(sys.argv[3])
# What the gauge counts (adapters' butter::database_size): the newest generation's segments,
# its manifest and the merge outputs waiting to be installed.
size = sum(t["file_bytes"] for t in stat["tables"]) + stat["manifest_bytes"] + stat["merge_output_bytes"]
# Within one generation: a batch may commit, or a merge output appear, between the readings;
# one batch of this network writes well under 64 KiB.
slack = max(0.1 * size, 64 * 1024)
ok = min(abs(before - size), abs(after - size)) <= slack
print(f"gauge {before:.0f} / {after:.0f} bytes, butter stat generation {stat['generation']}: "
      f"{size} bytes: {'within' if ok else 'NOT within'} one generation")
sys.exit(0 if ok else 1)
PY
    local backup=$TEST_TMP/backup
    {
        echo "## bin-butter: butter backup beside the running node"
        echo '```'
        echo "\$ butter backup $db $backup"
        "$butter" backup "$db" "$backup" 2>&1 || echo "FAILED: $?"
        echo "\$ butter check $backup"
        "$butter" check "$backup" 2>&1 || echo "FAILED: $?"
        echo '```'
    } >>"$summary"
    grep -q FAILED "$summary" && die "butter backup or check failed beside the node (summary: $summary)"

    local before
    before=$(devnet_metric 0 slasher_process_batch_time_count)
    kill -TERM "$butter_pid"
    for _ in $(seq 100); do kill -0 "$butter_pid" 2>/dev/null || break; sleep 0.2; done
    ! kill -0 "$butter_pid" 2>/dev/null || die "bin-butter did not stop within 20 s of SIGTERM"
    devnet_node bin-butter butter 0
    butter_pid=$NODE_PID
    devnet_wait_batches 0 2 || die "bin-butter's slasher ran no batch after SIGTERM and a restart"
    echo "## bin-butter: SIGTERM, restart: batches before $before, slasher started $(devnet_slasher_start_seconds "$DEVNET_OUT/bin-butter/node.log") s after the node" >>"$summary"

    # kill -9 as the slasher starts a batch: the first "Pre-processing attestations" line the
    # log gains from now on.
    local lines
    lines=$(wc -l <"$DEVNET_OUT/bin-butter/node.log")
    for _ in $(seq 600); do
        tail -n +$((lines + 1)) "$DEVNET_OUT/bin-butter/node.log" | grep -q 'Pre-processing attestations for slasher' && break
        sleep 0.05
    done
    kill -KILL "$butter_pid"
    sleep 1
    {
        echo "## bin-butter: kill -9 as a batch started, then butter check and a restart"
        echo '```'
        echo "\$ butter check $db"
        "$butter" check "$db" 2>&1 || echo "FAILED: $?"
        echo '```'
    } >>"$summary"
    grep -q FAILED "$summary" && die "butter check failed after kill -9 (summary: $summary)"
    devnet_node bin-butter butter 0
    butter_pid=$NODE_PID
    devnet_wait_batches 0 2 || die "bin-butter's slasher ran no batch after kill -9 and a restart"
    echo "slasher started $(devnet_slasher_start_seconds "$DEVNET_OUT/bin-butter/node.log") s after the node; batches run again" >>"$summary"

    kill -TERM "$butter_pid"
    for _ in $(seq 100); do kill -0 "$butter_pid" 2>/dev/null || break; sleep 0.2; done
    {
        echo "## bin-butter: stop, butter remove, start on a fresh directory"
        echo '```'
        echo "\$ butter remove $db"
        "$butter" remove "$db" 2>&1 || echo "FAILED: $?"
        echo '```'
    } >>"$summary"
    grep -q FAILED "$summary" && die "butter remove failed (summary: $summary)"
    [[ ! -e $db ]] || die "butter remove left $db"
    devnet_node bin-butter butter 0
    butter_pid=$NODE_PID
    devnet_wait_batches 0 2 || die "bin-butter's slasher ran no batch on a fresh directory"
    echo "a fresh database at $db: batches run" >>"$summary"

    # Side by side to the end: both nodes' metrics and RSS every epoch.
    local csv=$DEVNET_OUT/metrics.csv i name pid
    echo "time,node,batches,batch_time_sum_s,attestations_valid,blocks,database_bytes,rss_kib" >"$csv"
    devnet_scrape 0 bin-butter start
    devnet_scrape 1 bin-lmdb start
    while kill -0 "$sim_pid" 2>/dev/null; do
        for i in 0 1; do
            name=$([[ $i == 0 ]] && echo butter || echo lmdb)
            pid=$([[ $i == 0 ]] && echo "$butter_pid" || echo "$lmdb_pid")
            echo "$(date +%s),$name,$(devnet_metric $i slasher_process_batch_time_count),$(devnet_metric $i slasher_process_batch_time_sum),$(devnet_metric $i slasher_num_attestations_valid),$(devnet_metric $i slasher_num_blocks_processed),$(devnet_metric $i slasher_database_size),$(awk '/VmRSS/ { print $2 }' "/proc/$pid/status" 2>/dev/null)" >>"$csv"
        done
        sleep "$epoch_s"
    done
    devnet_scrape 0 bin-butter end
    devnet_scrape 1 bin-lmdb end
    wait "$sim_pid" || die "the simulator failed (log: $DEVNET_OUT/sim.log)"
    devnet_stop_all
    {
        echo "## The scenario's checks (devnet_check.py)"
        echo '```'
    } >>"$summary"
    local rc=0
    python3 "$REPO/integration/lighthouse/devnet_check.py" "$DEVNET_OUT/answers" "$DEVNET_OUT/sim.log" \
        >>"$summary" 2>&1 || rc=$?
    echo '```' >>"$summary"
    echo "## Side by side from the nodes' own metrics (devnet_metrics.py)" >>"$summary"
    python3 "$REPO/integration/lighthouse/devnet_metrics.py" "$DEVNET_OUT" >>"$summary" 2>&1 || rc=$?
    for name in bin-butter bin-lmdb; do
        echo "$name: $(grep -c '"Found double-vote slashing"' "$DEVNET_OUT/$name/node.log") double-vote lines, validators $(grep '"Found double-vote slashing"' "$DEVNET_OUT/$name/node.log" | grep -o '"validator_index":[0-9]*' | cut -d: -f2 | sort -nu | tr '\n' ' ')" >>"$summary"
    done
    cat "$summary"
    log "summary: $summary"
    ((rc == 0)) || die "the scenario's checks failed"
}
