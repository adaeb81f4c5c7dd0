//! butter_db glue, copied into Lighthouse's simulator by `scripts/lighthouse.sh patch` (this file
//! is the project's own, not Lighthouse's): a local network in which some validators sign twice,
//! watched by two slashers, butter_db and LMDB (docs/lighthouse.md, "In a beacon node").
//!
//! Nodes, all in this process on 127.0.0.1 with Lighthouse's mock execution layer:
//! - node 0, the boot node, without a slasher;
//! - node 1, slasher on butter_db (`--butter-dir`, on btrfs), broadcasting what it finds;
//! - node 2, slasher on LMDB (`--lmdb-dir`), the control, not broadcasting (so that what its
//!   operation pool and log hold is its own slasher's work).
//!
//! Validator clients: one for the first half of the interop keys on node 1, one for the second
//! half on node 2, and a third with only the doubled keys (`--doubled`), its own slashing
//! protection database and its own graffiti, on node 0. Whenever a doubled validator proposes,
//! both of its clients propose, with different graffiti: a double proposal. Two stock clients
//! attached to nodes that agree on the head sign identical attestation data, which is not a
//! double vote, so the scenario also signs, for each doubled validator and in three epochs, the
//! attestation of its duty with the epoch's boundary block as head, and posts it to nodes 1
//! and 2: a double vote beside the honest one.
//!
//! At `--end-epoch` it records the nodes' answers in `--out` for the project's checker
//! (`integration/lighthouse/devnet_check.py`): `scenario.json`, `validators-butter.json` and
//! `validators-lmdb.json` (`/eth/v1/beacon/states/head/validators` of nodes 1 and 2), and
//! `blocks.jsonl` (each canonical block's slot, proposer, graffiti and slashings, from node 1).
//! The nodes' log goes to standard output as JSON lines.
use crate::local_network::{LocalNetwork, LocalNetworkParams};
use clap::{Arg, ArgAction, ArgMatches, Command};
use node_test_rig::{
    environment::{EnvironmentBuilder, LoggerConfig},
    eth2::types::{BlockId, StateId},
    testing_validator_config, ValidatorFiles,
};
use serde_json::{json, Value};
use std::cmp::max;
use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use tokio::time::sleep;
use types::test_utils::generate_deterministic_keypair;
use types::{Attestation, Epoch, EthSpec, Graffiti, MinimalEthSpec, Slot};

type E = MinimalEthSpec;

const GENESIS_DELAY: u64 = 64;
const DOUBLED_GRAFFITI: &[u8] = b"butter-sim: doubled";
/// The epochs in which the scenario signs a second attestation for each doubled validator.
const DOUBLE_VOTE_EPOCHS: [u64; 3] = [3, 4, 5];

pub fn cli_app() -> Command {
    let arg = |name: &'static str, default: Option<&'static str>, help: &'static str| {
        let a = Arg::new(name).long(name).action(ArgAction::Set).help(help);
        match default {
            Some(d) => a.default_value(d),
            None => a.required(true),
        }
    };
    Command::new("butter-slashing-sim")
        .about(
            "butter_db glue: a network whose doubled validators sign twice, watched by a \
             butter_db slasher and an LMDB slasher; records the nodes' answers for the \
             project's checker.",
        )
        .arg(arg("validators", Some("256"), "Interop validators at genesis"))
        .arg(arg("doubled", Some("3,77,130,201"), "Validators run by two clients"))
        .arg(arg("speed-up-factor", Some("4"), "Divides the 12 s slot"))
        .arg(arg("end-epoch", Some("20"), "Epoch at which the answers are recorded"))
        .arg(arg("history-length", Some("16"), "The slashers' history, in epochs"))
        .arg(arg("butter-dir", None, "Parent of the butter slasher database (btrfs)"))
        .arg(arg("lmdb-dir", None, "Parent of the LMDB slasher database"))
        .arg(arg("out", None, "Directory for the recorded answers (must not exist)"))
        .arg(arg("debug-level", Some("debug"), "Log level of the nodes"))
        .arg(arg(
            "testnet-dir",
            Some(""),
            "Where to write the network's directory (config, genesis, boot ENR, el.json) for \
             `lighthouse --testnet-dir` nodes that join from outside this process",
        ))
        .arg(arg(
            "also-post",
            Some(""),
            "Beacon API URLs (comma-separated) that also get the second attestations",
        ))
}

fn parsed<T: std::str::FromStr>(matches: &ArgMatches, name: &str) -> Result<T, String> {
    let text = matches.get_one::<String>(name).expect("clap default");
    text.parse().map_err(|_| format!("--{name} {text}: not a valid value"))
}

struct Plan {
    validators: usize,
    doubled: Vec<usize>,
    end_epoch: u64,
    history_length: usize,
    butter_dir: PathBuf,
    lmdb_dir: PathBuf,
    out: PathBuf,
    testnet_dir: Option<PathBuf>,
    also_post: Vec<String>,
}

fn plan(matches: &ArgMatches) -> Result<Plan, String> {
    let validators: usize = parsed(matches, "validators")?;
    let mut doubled = Vec::new();
    for part in matches.get_one::<String>("doubled").expect("default").split(',') {
        let index: usize = part
            .trim()
            .parse()
            .map_err(|_| format!("--doubled: {part:?} is not a validator index"))?;
        if index >= validators || doubled.contains(&index) {
            return Err(format!("--doubled: {index} is out of range or repeated"));
        }
        doubled.push(index);
    }
    let history_length: usize = parsed(matches, "history-length")?;
    let end_epoch: u64 = parsed(matches, "end-epoch")?;
    if end_epoch <= history_length as u64 + 1 {
        return Err(format!(
            "--end-epoch {end_epoch} must pass --history-length {history_length} + 1, so that \
             the slashers prune within the run"
        ));
    }
    let path = |name: &str| PathBuf::from(matches.get_one::<String>(name).expect("required"));
    let out = path("out");
    if out.exists() {
        return Err(format!("--out {}: already exists", out.display()));
    }
    let optional = |name: &str| {
        let text = matches.get_one::<String>(name).expect("default");
        (!text.is_empty()).then(|| text.clone())
    };
    let testnet_dir = optional("testnet-dir").map(PathBuf::from);
    if let Some(dir) = &testnet_dir {
        if dir.exists() {
            return Err(format!("--testnet-dir {}: already exists", dir.display()));
        }
    }
    let also_post = optional("also-post")
        .map(|list| list.split(',').map(str::to_string).collect())
        .unwrap_or_default();
    Ok(Plan {
        validators,
        testnet_dir,
        also_post,
        doubled,
        end_epoch,
        history_length,
        butter_dir: path("butter-dir"),
        lmdb_dir: path("lmdb-dir"),
        out,
    })
}

fn slasher_config(
    dir: &Path,
    backend: slasher::DatabaseBackend,
    broadcast: bool,
    history_length: usize,
    seconds_per_slot: u64,
) -> slasher::Config {
    let mut config = slasher::Config::new(dir.join("slasher_db"));
    config.backend = backend;
    config.broadcast = broadcast;
    config.history_length = history_length;
    config.chunk_size = history_length.min(config.chunk_size);
    // A batch every two slots, three quarters into the slot (Lighthouse: 12 s and 10.5 s).
    config.update_period = 2 * seconds_per_slot;
    config.slot_offset = seconds_per_slot as f64 * 0.75;
    config
}

pub fn run(matches: &ArgMatches) -> Result<(), String> {
    let plan = plan(matches)?;
    let speed_up: u64 = parsed(matches, "speed-up-factor")?;
    let log_level = matches.get_one::<String>("debug-level").expect("default").clone();
    fs::create_dir_all(&plan.out).map_err(|e| format!("--out: {e}"))?;

    let half = plan.validators / 2;
    let files = [
        ValidatorFiles::with_keystores(&(0..half).collect::<Vec<_>>())?,
        ValidatorFiles::with_keystores(&(half..plan.validators).collect::<Vec<_>>())?,
        ValidatorFiles::with_keystores(&plan.doubled)?,
    ];

    let mut env = EnvironmentBuilder::minimal()
        .initialize_logger(LoggerConfig {
            path: None,
            debug_level: log_level.clone(),
            logfile_debug_level: log_level,
            log_format: Some("JSON".into()),
            logfile_format: None,
            log_color: false,
            disable_log_timestamp: false,
            max_log_size: 0,
            max_log_number: 0,
            compression: false,
            is_restricted: true,
            sse_logging: false,
        })?
        .multi_threaded_tokio_runtime()?
        .build()?;

    let spec = &mut env.eth2_config.spec;
    spec.seconds_per_slot = max(1, spec.seconds_per_slot / speed_up);
    spec.genesis_delay = GENESIS_DELAY;
    spec.min_genesis_time = 0;
    spec.min_genesis_active_validator_count = plan.validators as u64;
    spec.altair_fork_epoch = Some(Epoch::new(0));
    spec.bellatrix_fork_epoch = Some(Epoch::new(0));
    spec.capella_fork_epoch = Some(Epoch::new(1));
    spec.deneb_fork_epoch = Some(Epoch::new(2));
    let spec = spec.clone();
    let slot_duration = Duration::from_secs(spec.seconds_per_slot);
    let context = env.core_context();

    let main = async {
        let (network, beacon_config, mock_el) = LocalNetwork::<E>::create_local_network(
            None,
            None,
            LocalNetworkParams {
                validator_count: plan.validators,
                node_count: 3,
                proposer_nodes: 0,
                extra_nodes: 0,
                genesis_delay: GENESIS_DELAY,
            },
            context.clone(),
        )
        .await?;
        // The first node added is the boot node (without a slasher).
        network
            .add_beacon_node(beacon_config.clone(), mock_el.clone(), false)
            .await?;
        for (dir, backend, broadcast) in [
            (&plan.butter_dir, slasher::DatabaseBackend::Butter, true),
            (&plan.lmdb_dir, slasher::DatabaseBackend::Lmdb, false),
        ] {
            let mut config = beacon_config.clone();
            // A slasher wants every attestation, not only the aggregates (Lighthouse's advice).
            config.network.subscribe_all_subnets = true;
            config.network.import_all_attestations = true;
            config.slasher = Some(slasher_config(
                dir,
                backend,
                broadcast,
                plan.history_length,
                spec.seconds_per_slot,
            ));
            network.add_beacon_node(config, mock_el.clone(), false).await?;
        }

        let [honest_a, honest_b, doubled] = files;
        for (node, files, graffiti) in [
            (1, honest_a, None),
            (2, honest_b, None),
            (0, doubled, Some(DOUBLED_GRAFFITI)),
        ] {
            let mut config = testing_validator_config();
            config.fee_recipient = Some([1; 20].into());
            if let Some(g) = graffiti {
                let mut bytes = [0u8; 32];
                bytes[..g.len()].copy_from_slice(g);
                config.graffiti = Some(Graffiti::from(bytes));
            }
            network.add_validator_client(config, node, files).await?;
        }
        network
            .execution_nodes
            .write()
            .iter()
            .for_each(|node| node.server.all_payloads_valid());

        let slots_per_epoch = E::slots_per_epoch();
        let nodes = network.remote_nodes()?;
        // The network's set-up (keystores, nodes) can outlast the genesis delay on a busy
        // machine: then genesis has passed and there is nothing to wait for.
        let genesis_time = nodes[0]
            .get_beacon_genesis()
            .await
            .map_err(|e| format!("genesis: {e:?}"))?
            .data
            .genesis_time;
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_err(|e| e.to_string())?;
        let to_genesis = Duration::from_secs(genesis_time).saturating_sub(now);
        println!("butter-slashing-sim: genesis in {} s", to_genesis.as_secs());
        sleep(to_genesis).await;
        if let Some(dir) = &plan.testnet_dir {
            let enr = network.beacon_nodes.read()[0]
                .client
                .enr()
                .ok_or("the boot node has no ENR")?;
            let genesis = nodes[0]
                .get_debug_beacon_states_ssz::<E>(StateId::Genesis, &spec)
                .await
                .map_err(|e| format!("genesis state: {e:?}"))?
                .ok_or("no genesis state")?;
            let config = eth2_network_config::Eth2NetworkConfig {
                deposit_contract_deploy_block: 0,
                boot_enr: Some(vec![enr]),
                genesis_state_source: eth2_network_config::GenesisStateSource::IncludedBytes,
                genesis_state_bytes: Some(eth2_network_config::GenesisStateBytes::Vec(
                    ssz::Encode::as_ssz_bytes(&genesis),
                )),
                config: types::Config::from_chain_spec::<E>(&spec),
                kzg_trusted_setup: None,
            };
            write_testnet_dir(dir, config, genesis_time, &spec)?;
            println!("butter-slashing-sim: network directory written to {}", dir.display());
        }
        let mut targets = nodes[1..].to_vec();
        for url in &plan.also_post {
            let url = sensitive_url::SensitiveUrl::parse(url)
                .map_err(|e| format!("--also-post {url}: {e:?}"))?;
            targets.push(node_test_rig::eth2::BeaconNodeHttpClient::new(
                url,
                node_test_rig::eth2::Timeouts::set_all(slot_duration),
            ));
        }
        let sign_twice = async {
            for epoch in DOUBLE_VOTE_EPOCHS {
                double_votes(&nodes[1], &targets, &plan.doubled, Epoch::new(epoch), &spec, slot_duration)
                    .await?;
            }
            Ok::<(), String>(())
        };
        let end = Epoch::new(plan.end_epoch).start_slot(slots_per_epoch);
        let deadline = tokio::time::Instant::now() + slot_duration * end.as_u64() as u32;
        // A stalled chain must not hang the run: every second vote is signed by the end epoch.
        tokio::time::timeout_at(deadline, sign_twice)
            .await
            .map_err(|_| format!("the second votes were not all signed by epoch {}", plan.end_epoch))??;
        tokio::time::sleep_until(deadline).await;
        record(&nodes, &plan, &spec).await?;
        println!("butter-slashing-sim: answers recorded in {}", plan.out.display());
        drop(network);
        Ok::<(), String>(())
    };
    env.runtime().block_on(main)?;
    env.fire_signal();
    env.shutdown_on_idle();
    Ok(())
}

/// Writes the network's directory for nodes outside this process (config.yaml, genesis.ssz and
/// boot_enr.yaml as `lighthouse --testnet-dir` reads them) and el.json, what `lcli mock-el`
/// needs to agree with this network's execution layer (its fork times).
fn write_testnet_dir(
    dir: &Path,
    config: eth2_network_config::Eth2NetworkConfig,
    genesis_time: u64,
    spec: &types::ChainSpec,
) -> Result<(), String> {
    config.force_write_to_file(dir.to_path_buf())?;
    let fork_time = |epoch: Option<Epoch>| {
        epoch.map(|e| genesis_time + spec.seconds_per_slot * E::slots_per_epoch() * e.as_u64())
    };
    let el = json!({
        "genesis_time": genesis_time,
        "shanghai_time": fork_time(spec.capella_fork_epoch),
        "cancun_time": fork_time(spec.deneb_fork_epoch),
    });
    fs::write(dir.join("el.json"), el.to_string()).map_err(|e| format!("el.json: {e}"))
}

/// For each doubled validator with a duty in `epoch` that is not the epoch's first slot, signs
/// its attestation with the epoch's boundary block as head (different from the head its honest
/// client sees, the block of the duty's slot) and posts it to every slasher's node.
async fn double_votes(
    node: &node_test_rig::eth2::BeaconNodeHttpClient,
    nodes: &[node_test_rig::eth2::BeaconNodeHttpClient],
    doubled: &[usize],
    epoch: Epoch,
    spec: &types::ChainSpec,
    slot_duration: Duration,
) -> Result<(), String> {
    let slots_per_epoch = E::slots_per_epoch();
    // Wait for the epoch to start, so that its committees are known.
    wait_for_slot(node, epoch.start_slot(slots_per_epoch), slot_duration).await?;
    let committees = node
        .get_beacon_states_committees(StateId::Head, None, None, Some(epoch))
        .await
        .map_err(|e| format!("committees of epoch {epoch}: {e:?}"))?
        .ok_or("no committees")?
        .data;
    let fork = node
        .get_beacon_states_fork(StateId::Head)
        .await
        .map_err(|e| format!("fork: {e:?}"))?
        .ok_or("no fork")?
        .data;
    let genesis_root = node
        .get_beacon_genesis()
        .await
        .map_err(|e| format!("genesis: {e:?}"))?
        .data
        .genesis_validators_root;
    let mut duties: Vec<(Slot, u64, usize, usize, usize)> = Vec::new();
    for committee in &committees {
        for &v in doubled {
            if let Some(pos) = committee.validators.iter().position(|&x| x as usize == v) {
                duties.push((committee.slot, committee.index, committee.validators.len(), pos, v));
            }
        }
    }
    duties.sort();
    for (slot, index, len, position, validator) in duties {
        if slot == epoch.start_slot(slots_per_epoch) {
            println!("butter-slashing-sim: validator {validator} attests at {slot}, the boundary: not doubled in {epoch}");
            continue;
        }
        // Half a slot in: the honest client has signed (a third in) with the slot's block as head.
        wait_for_slot(node, slot, slot_duration).await?;
        sleep(slot_duration / 2).await;
        let data = node
            .get_validator_attestation_data(slot, index)
            .await
            .map_err(|e| format!("attestation data {slot}/{index}: {e:?}"))?
            .data;
        if data.beacon_block_root == data.target.root {
            println!("butter-slashing-sim: validator {validator} at {slot}: head is the boundary block, skipped");
            continue;
        }
        let mut attestation = Attestation::<E>::empty_for_signing(
            index,
            len,
            slot,
            data.target.root,
            data.source,
            data.target,
            spec,
        )
        .map_err(|e| format!("attestation: {e:?}"))?;
        attestation
            .sign(
                &generate_deterministic_keypair(validator).sk,
                position,
                &fork,
                genesis_root,
                spec,
            )
            .map_err(|e| format!("sign: {e:?}"))?;
        for (i, n) in nodes.iter().enumerate() {
            // The node may refuse it for gossip (the validator's vote for this target is known
            // already); its slasher sees it either way.
            let answer = n.post_beacon_pool_attestations_v1(&[attestation.clone()]).await;
            println!(
                "butter-slashing-sim: second attestation of validator {validator} at slot {slot} \
                 (target {}) posted to node {i}: {}",
                data.target.epoch,
                match answer {
                    Ok(()) => "accepted".to_string(),
                    Err(e) => format!("refused for gossip ({e:?})"),
                }
            );
        }
    }
    Ok(())
}

async fn wait_for_slot(
    node: &node_test_rig::eth2::BeaconNodeHttpClient,
    slot: Slot,
    slot_duration: Duration,
) -> Result<(), String> {
    loop {
        let head = node
            .get_beacon_headers_block_id(BlockId::Head)
            .await
            .map_err(|e| format!("head: {e:?}"))?
            .ok_or("no head")?
            .data
            .header
            .message
            .slot;
        if head >= slot {
            return Ok(());
        }
        sleep(slot_duration / 4).await;
    }
}

async fn record(
    nodes: &[node_test_rig::eth2::BeaconNodeHttpClient],
    plan: &Plan,
    spec: &types::ChainSpec,
) -> Result<(), String> {
    let write = |name: &str, text: String| {
        fs::write(plan.out.join(name), text).map_err(|e| format!("{name}: {e}"))
    };
    for (i, name) in [(1, "butter"), (2, "lmdb")] {
        let validators = nodes[i]
            .get_beacon_states_validators(StateId::Head, None, None)
            .await
            .map_err(|e| format!("validators of node {i}: {e:?}"))?
            .ok_or("no validators")?
            .data;
        write(
            &format!("validators-{name}.json"),
            serde_json::to_string(&validators).map_err(|e| e.to_string())?,
        )?;
    }
    let head = nodes[1]
        .get_beacon_headers_block_id(BlockId::Head)
        .await
        .map_err(|e| format!("head: {e:?}"))?
        .ok_or("no head")?
        .data
        .header
        .message
        .slot;
    let mut blocks = fs::File::create(plan.out.join("blocks.jsonl")).map_err(|e| e.to_string())?;
    for slot in 1..=head.as_u64() {
        let Some(block) = nodes[1]
            .get_beacon_blocks::<E>(BlockId::Slot(Slot::new(slot)))
            .await
            .map_err(|e| format!("block {slot}: {e:?}"))?
        else {
            continue;
        };
        let value = serde_json::to_value(&block.data).map_err(|e| e.to_string())?;
        let message = &value["message"];
        let line = json!({
            "slot": slot,
            "proposer_index": message["proposer_index"],
            "graffiti": message["body"]["graffiti"],
            "attester_slashings": message["body"]["attester_slashings"],
            "proposer_slashings": message["body"]["proposer_slashings"],
        });
        writeln!(blocks, "{line}").map_err(|e| e.to_string())?;
    }
    let scenario: Value = json!({
        "validators": plan.validators,
        "doubled": plan.doubled,
        "end_epoch": plan.end_epoch,
        "history_length": plan.history_length,
        "slots_per_epoch": E::slots_per_epoch(),
        "seconds_per_slot": spec.seconds_per_slot,
        "head_slot": head.as_u64(),
        "nodes": {"butter": "node_1", "lmdb": "node_2"},
    });
    write("scenario.json", scenario.to_string())
}
