#!/usr/bin/env python3
"""Judges a run of the butter slashing scenario from what it recorded (scripts/lighthouse.sh
devnet; docs/lighthouse.md §6).

Usage: devnet_check.py OUT_DIR LOG

OUT_DIR holds what `simulator butter-slashing-sim` recorded: scenario.json (the doubled
validators, the node names), validators-butter.json and validators-lmdb.json (each node's
/eth/v1/beacon/states/head/validators answer), blocks.jsonl (each canonical block's slot,
proposer and slashings). LOG is the nodes' log, JSON lines (the simulator's standard output).

It prints, per doubled validator, what each slasher logged, the slots of the blocks that
included a slashing of it and whether each node calls it slashed, then every failure, and exits
1 if any of these fails:
  - every doubled validator is found by the butter node's slasher (a "Found double-vote
    slashing" line of that node's slasher naming it);
  - an attester or proposer slashing of every doubled validator is in a block;
  - every doubled validator is `slashed: true` on both nodes, and no other validator is;
  - the LMDB node's slasher found the same validators as the butter node's;
  - no slasher found, and no block slashed, a validator that was not doubled.
Exit 2: the recorded answers are missing or malformed.
"""

import json
import pathlib
import sys

DOUBLE_VOTE = "Found double-vote slashing"


class Malformed(Exception):
    pass


def load_json(path):
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError) as e:
        raise Malformed(f"{path}: {e}")


def log_findings(log_path, node):
    """{validator: [(timestamp, epoch)]} from `node`'s slasher double-vote lines. A line's
    `service` key comes twice (the node's, then the slasher's), so pairs are kept, not a dict."""
    found = {}
    try:
        lines = log_path.read_text(errors="replace").splitlines()
    except OSError as e:
        raise Malformed(f"{log_path}: {e}")
    for line in lines:
        if DOUBLE_VOTE not in line:
            continue
        try:
            pairs = json.loads(line, object_pairs_hook=list)
        except ValueError:
            continue
        fields = {}
        for key, value in pairs:
            fields.setdefault(key, []).append(value)
        if fields.get("msg") != [DOUBLE_VOTE] or node not in fields.get("service", []):
            continue
        validator = int(fields["validator_index"][0])
        found.setdefault(validator, []).append((fields.get("ts", ["?"])[0], fields.get("epoch", ["?"])[0]))
    return found


def included(blocks_path):
    """{validator: [(slot, kind)]} for every slashing in a recorded block."""
    found = {}
    try:
        lines = blocks_path.read_text().splitlines()
    except OSError as e:
        raise Malformed(f"{blocks_path}: {e}")
    for n, line in enumerate(lines, 1):
        try:
            block = json.loads(line)
            slot = int(block["slot"])
            for s in block["attester_slashings"] or []:
                one = {int(i) for i in s["attestation_1"]["attesting_indices"]}
                two = {int(i) for i in s["attestation_2"]["attesting_indices"]}
                for v in one & two:
                    found.setdefault(v, []).append((slot, "attester"))
            for s in block["proposer_slashings"] or []:
                v = int(s["signed_header_1"]["message"]["proposer_index"])
                found.setdefault(v, []).append((slot, "proposer"))
        except (ValueError, KeyError, TypeError) as e:
            raise Malformed(f"{blocks_path}:{n}: {e!r}")
    return found


def slashed(validators_path):
    try:
        return {int(v["index"]) for v in load_json(validators_path) if v["validator"]["slashed"]}
    except (KeyError, TypeError, ValueError) as e:
        raise Malformed(f"{validators_path}: {e!r}")


def check(out, log):
    scenario = load_json(out / "scenario.json")
    try:
        doubled = {int(v) for v in scenario["doubled"]}
        nodes = scenario["nodes"]
        butter_node, lmdb_node = nodes["butter"], nodes["lmdb"]
    except (KeyError, TypeError, ValueError) as e:
        raise Malformed(f"{out / 'scenario.json'}: {e!r}")
    if not doubled:
        raise Malformed(f"{out / 'scenario.json'}: no doubled validator, nothing to judge")
    found = {name: log_findings(log, node) for name, node in (("butter", butter_node), ("lmdb", lmdb_node))}
    blocks = included(out / "blocks.jsonl")
    marked = {name: slashed(out / f"validators-{name}.json") for name in ("butter", "lmdb")}

    report, failures = [], []
    report.append(f"doubled validators: {sorted(doubled)}")
    for v in sorted(doubled):
        for name in ("butter", "lmdb"):
            seen = found[name].get(v, [])
            first = f"first at {seen[0][0]} (target epoch {seen[0][1]})" if seen else "none"
            report.append(f"  {v}: {name} slasher double-vote lines: {len(seen)}, {first}")
        report.append(f"  {v}: slashings in blocks at slots {blocks.get(v, [])}")
        report.append(f"  {v}: slashed on butter node {v in marked['butter']}, on LMDB node {v in marked['lmdb']}")
        if v not in found["butter"]:
            failures.append(f"validator {v} signed twice, but the butter node's slasher did not find it")
        if v not in blocks:
            failures.append(f"validator {v} signed twice, but no block includes a slashing of it")
        for name in ("butter", "lmdb"):
            if v not in marked[name]:
                failures.append(f"validator {v} signed twice, but the {name} node does not call it slashed")
    for name in ("butter", "lmdb"):
        honest = sorted(marked[name] - doubled)
        if honest:
            failures.append(f"honest validators slashed on the {name} node: {honest}")
        wrong = sorted(set(found[name]) - doubled)
        if wrong:
            failures.append(f"the {name} slasher found validators that did not sign twice: {wrong}")
    wrong = sorted(set(blocks) - doubled)
    if wrong:
        failures.append(f"blocks slash validators that did not sign twice: {wrong}")
    if set(found["butter"]) != set(found["lmdb"]):
        failures.append(
            f"the slashers disagree: butter found {sorted(found['butter'])}, LMDB {sorted(found['lmdb'])}"
        )
    return report, failures


def main():
    if len(sys.argv) != 3:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    try:
        report, failures = check(pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2]))
    except Malformed as e:
        print(f"devnet_check.py: the recorded answers are unusable: {e}", file=sys.stderr)
        sys.exit(2)
    print("\n".join(report))
    for f in failures:
        print(f"FAIL: {f}")
    if failures:
        sys.exit(1)
    print("devnet_check.py: every doubled validator was found by both slashers, slashed in a block, "
          "and no honest validator was slashed")


if __name__ == "__main__":
    main()
