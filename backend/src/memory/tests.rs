//! Finding a process's memory cgroup and its limit, from sample `/proc` texts and a fake
//! cgroup directory tree.

use super::*;

const MOUNTS_V1: &str = "\
31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu
35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
40 31 0:37 / /sys/fs/cgroup/systemd rw,relatime - cgroup cgroup rw,name=systemd
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
";

#[test]
fn v1_memory_controller_wins_over_the_unified_line() {
    let cgroups = "0::/user.slice\n9:name=systemd:/\n4:memory:/process_api/abc\n1:cpu:/\n";
    let cg = MemoryCgroup::find(cgroups, MOUNTS_V1).expect("found");
    assert_eq!(cg.version, CgroupVersion::V1);
    assert_eq!(cg.dir, Path::new("/sys/fs/cgroup/memory/process_api/abc"));
    assert_eq!(cg.mount, Path::new("/sys/fs/cgroup/memory"));
}

#[test]
fn v1_memory_among_comma_separated_controllers() {
    let mounts = "35 31 0:32 / /sys/fs/cgroup/memory,blkio rw - cgroup cgroup rw,blkio,memory\n";
    let cg = MemoryCgroup::find("5:blkio,memory:/a/b\n", mounts).expect("found");
    assert_eq!(cg.dir, Path::new("/sys/fs/cgroup/memory,blkio/a/b"));
}

#[test]
fn v2_unified_line_and_mount() {
    let mounts = "25 1 0:22 / /sys/fs/cgroup rw,nosuid - cgroup2 cgroup2 rw,nsdelegate\n";
    let cg = MemoryCgroup::find("0::/system.slice/beacon.service\n", mounts).expect("found");
    assert_eq!(cg.version, CgroupVersion::V2);
    assert_eq!(
        cg.dir,
        Path::new("/sys/fs/cgroup/system.slice/beacon.service")
    );
    // The root cgroup is the mount itself.
    let root = MemoryCgroup::find("0::/\n", mounts).expect("found");
    assert_eq!(root.dir, Path::new("/sys/fs/cgroup"));
}

#[test]
fn a_mount_of_part_of_the_hierarchy_and_escaped_mount_points() {
    // A container that sees only its own part of the hierarchy, mounted at a path with a
    // space (mountinfo writes it as \040).
    let mounts = "25 1 0:22 /docker/x /sys/fs/my\\040cgroup rw - cgroup2 cgroup2 rw\n";
    let cg = MemoryCgroup::find("0::/docker/x/inner\n", mounts).expect("found");
    assert_eq!(cg.dir, Path::new("/sys/fs/my cgroup/inner"));
    // A cgroup outside what the mount shows (or sharing only a name prefix) is not there.
    assert_eq!(MemoryCgroup::find("0::/docker/xy\n", mounts), None);
    assert_eq!(MemoryCgroup::find("0::/other\n", mounts), None);
}

#[test]
fn nothing_found_without_a_memory_cgroup_or_its_mount() {
    assert_eq!(MemoryCgroup::find("4:memory:/a\n", "",), None);
    assert_eq!(MemoryCgroup::find("1:cpu:/a\n", MOUNTS_V1), None);
    assert_eq!(MemoryCgroup::find("", MOUNTS_V1), None);
}

/// A fake cgroup tree in a temporary directory: `mount/a/b`, with `files` written under it.
fn tree(files: &[(&str, &str)]) -> (std::path::PathBuf, MemoryCgroup, MemoryCgroup) {
    let base = std::env::temp_dir().join(format!(
        "butter-memory-test-{}-{}",
        std::process::id(),
        NEXT_TREE.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    ));
    let mount = base.join("mount");
    std::fs::create_dir_all(mount.join("a/b")).unwrap();
    for (path, text) in files {
        std::fs::write(mount.join(path), text).unwrap();
    }
    let at = |version| MemoryCgroup {
        dir: mount.join("a/b"),
        mount: mount.clone(),
        version,
    };
    (base, at(CgroupVersion::V1), at(CgroupVersion::V2))
}

static NEXT_TREE: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

#[test]
fn v2_limit_is_the_smallest_of_the_cgroup_and_its_ancestors() {
    let (base, _, v2) = tree(&[
        ("memory.max", "100\n"), // the root's is never read (a real root has none)
        ("a/memory.max", "134217728\n"),
        ("a/b/memory.max", "max\n"),
        (
            "a/b/memory.events",
            "low 0\nhigh 0\nmax 12\noom 1\noom_kill 1\noom_group_kill 0\n",
        ),
    ]);
    assert_eq!(v2.limit_bytes(), Some(128 << 20));
    assert_eq!(v2.oom_kills(), Some(1));
    assert_eq!(v2.anon_and_limit(), None, "no memory.stat");
    std::fs::write(v2.dir.join("memory.stat"), "anon 4096\nfile 8192\n").unwrap();
    assert_eq!(v2.anon_and_limit(), Some((4096, 128 << 20)));
    std::fs::write(v2.dir.join("memory.max"), "67108864\n").unwrap();
    assert_eq!(v2.limit_bytes(), Some(64 << 20));
    std::fs::write(v2.mount.join("a/memory.max"), "max\n").unwrap();
    std::fs::write(v2.dir.join("memory.max"), "max\n").unwrap();
    assert_eq!(v2.limit_bytes(), None, "max everywhere: no limit");
    std::fs::remove_dir_all(base).unwrap();
}

#[test]
fn v1_limit_prefers_the_hierarchical_limit_and_ignores_unlimited() {
    let (base, v1, _) = tree(&[
        ("a/b/memory.limit_in_bytes", "9223372036854771712\n"),
        (
            "a/b/memory.stat",
            "cache 4096\nrss 8192\nhierarchical_memory_limit 201326592\ntotal_cache 4096\n",
        ),
        (
            "a/b/memory.oom_control",
            "oom_kill_disable 0\nunder_oom 0\noom_kill 3\n",
        ),
    ]);
    assert_eq!(v1.limit_bytes(), Some(192 << 20), "an ancestor's limit");
    assert_eq!(v1.oom_kills(), Some(3));
    assert_eq!(v1.anon_and_limit(), None, "no total_rss line");
    std::fs::write(
        v1.dir.join("memory.stat"),
        "rss 8192\nhierarchical_memory_limit 201326592\ntotal_rss 12288\n",
    )
    .unwrap();
    assert_eq!(v1.anon_and_limit(), Some((12288, 192 << 20)));
    std::fs::write(v1.dir.join("memory.stat"), "cache 0\n").unwrap();
    assert_eq!(
        v1.limit_bytes(),
        None,
        "own limit unlimited, no hierarchical line"
    );
    std::fs::write(v1.dir.join("memory.limit_in_bytes"), "134217728\n").unwrap();
    assert_eq!(v1.limit_bytes(), Some(128 << 20));
    std::fs::remove_file(v1.dir.join("memory.oom_control")).unwrap();
    assert_eq!(v1.oom_kills(), None, "no counter: unknown");
    std::fs::remove_dir_all(base).unwrap();
}

#[test]
fn default_cache_is_an_eighth_of_what_is_available_within_bounds() {
    assert_eq!(default_block_cache_bytes(Some(128 << 20)), 16 << 20);
    assert_eq!(default_block_cache_bytes(Some(2 << 30)), 256 << 20);
    assert_eq!(
        default_block_cache_bytes(Some(32 << 20)),
        MIN_BLOCK_CACHE_BYTES
    );
    assert_eq!(
        default_block_cache_bytes(Some(64 << 30)),
        MAX_BLOCK_CACHE_BYTES
    );
    assert_eq!(default_block_cache_bytes(None), MAX_BLOCK_CACHE_BYTES);
}

#[test]
fn default_memtable_budget_is_an_eighth_of_what_is_available_at_least_16_mib() {
    assert_eq!(default_memtable_bytes(Some(256 << 20)), 32 << 20);
    assert_eq!(default_memtable_bytes(Some(96 << 20)), MIN_MEMTABLE_BYTES);
    assert_eq!(default_memtable_bytes(Some(16 << 20)), MIN_MEMTABLE_BYTES);
    assert_eq!(default_memtable_bytes(Some(64 << 30)), MAX_MEMTABLE_BYTES);
    assert_eq!(default_memtable_bytes(None), MAX_MEMTABLE_BYTES);
}

#[test]
fn this_process_has_some_memory_available() {
    let ram = total_ram_bytes().expect("/proc/meminfo has MemTotal");
    let available = available_bytes().expect("known");
    assert!(available > 0 && available <= ram, "{available} of {ram}");
}
