// The glue registers the allocator's memory-pressure function, and the function moves
// jemalloc's decay times to 0 and back.
//
// This file belongs to the butter_db project (integration/lighthouse/memory_pressure_test.rs);
// it is not part of Lighthouse. `scripts/lighthouse.sh` copies it into a Lighthouse checkout as
// `slasher/tests/butter_memory_pressure.rs`, where it runs in builds with the butter feature
// (`scripts/lighthouse.sh LIGHTHOUSE_DIR test`, the butter run).
//
// A test binary of its own, so that nothing in the process has registered a function before
// the slasher opens its database. This binary's global allocator is the system's (it does not
// link malloc_utils): the jemalloc that the glue's `jemalloc_ctl` links is idle here, but its
// settings read back as they do in a beacon node, where it is the global allocator.
#![cfg(feature = "butter")]

use jemalloc_ctl::{Access, AsName};
use logging::test_logger;
use slasher::{
    test_utils::{chain_spec, E},
    Config, DatabaseBackend, Slasher,
};
use tempfile::tempdir;

fn decay_ms(name: &[u8]) -> isize {
    Access::read(name.name()).unwrap()
}

/// Each arena's and new arenas' decay times, dirty and muzzy.
const DECAY_TIMES: [&[u8]; 4] = [
    b"arena.0.dirty_decay_ms\0",
    b"arena.0.muzzy_decay_ms\0",
    b"arenas.dirty_decay_ms\0",
    b"arenas.muzzy_decay_ms\0",
];

fn decay_name(name: &[u8]) -> std::borrow::Cow<'_, str> {
    String::from_utf8_lossy(&name[..name.len() - 1])
}

fn nothing(_: bool) {}

#[test]
fn opening_a_butter_database_registers_the_allocator_function() {
    let tempdir = tempdir().unwrap();
    let mut config = Config::new(tempdir.path().into());
    config.backend = DatabaseBackend::Butter;
    let path = config.database_path.clone();
    // The glue registers before the store opens, so this holds whether or not the directory
    // is on btrfs (elsewhere the open fails: `scripts/lighthouse.sh test` gives it btrfs).
    let opened = Slasher::<E>::open(config, chain_spec(), test_logger());
    assert!(
        !slasher_adapters::butter::set_on_memory_pressure(nothing),
        "no pressure function was registered when the slasher opened a butter database"
    );
    if let Ok(slasher) = opened {
        drop(slasher);
        // The read-only snapshots, which the temporary directory's own removal cannot delete.
        slasher_adapters::cleanup::destroy_database_dir(&path).unwrap();
    }

    // A time that is neither 0 nor the process's setting (`_RJEM_MALLOC_CONF` may make that 0),
    // so that each call has to change every one of them.
    const OTHER_MS: isize = 12_345;
    for name in DECAY_TIMES {
        Access::<isize>::write(name.name(), OTHER_MS).unwrap();
    }
    slasher::butter_on_memory_pressure(true);
    for name in DECAY_TIMES {
        assert_eq!(decay_ms(name), 0, "{} under pressure", decay_name(name));
    }
    for name in DECAY_TIMES {
        Access::<isize>::write(name.name(), OTHER_MS).unwrap();
    }
    slasher::butter_on_memory_pressure(false);
    let dirty = decay_ms(b"opt.dirty_decay_ms\0");
    let muzzy = decay_ms(b"opt.muzzy_decay_ms\0");
    for (name, setting) in DECAY_TIMES.into_iter().zip([dirty, muzzy, dirty, muzzy]) {
        assert_eq!(
            decay_ms(name),
            setting,
            "{} after the pressure",
            decay_name(name)
        );
    }
}
