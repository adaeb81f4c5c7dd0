//! `metadata`: schema version 3 and the 24-byte `DiskConfig` are written on first open and
//! checked on every open (`docs/background.md` §1.1), on every compiled backend.

mod slasher_support;

use slasher_adapters::backend::{Environment, RwTransaction};
use slasher_adapters::slasher::{DiskConfig, Error, Slasher};
use slasher_support::TestCtx;

fn written_on_first_open<E: Environment>(ctx: &TestCtx) {
    let config = ctx.config();
    let slasher = ctx.open::<E>(config.clone());
    let dbs = *slasher.databases();
    let txn = slasher.environment().begin_rw_txn().expect("txn");
    let version = txn
        .get(dbs.metadata_db, &[0x00])
        .expect("get")
        .expect("version written");
    assert_eq!(&*version, &[3, 0, 0, 0, 0, 0, 0, 0]);
    let disk = txn
        .get(dbs.metadata_db, &[0x01])
        .expect("get")
        .expect("config written");
    assert_eq!(
        &*disk,
        &[
            16, 0, 0, 0, 0, 0, 0, 0, // chunk_size
            0, 1, 0, 0, 0, 0, 0, 0, // validator_chunk_size = 256
            0, 0x10, 0, 0, 0, 0, 0, 0, // history_length = 4096
        ]
    );
    drop(txn);
    drop(slasher);
    // Re-opening with the same geometry works.
    let _again = ctx.open::<E>(config);
}

fn config_change_refused<E: Environment>(ctx: &TestCtx) {
    let config = ctx.config();
    drop(ctx.open::<E>(config.clone()));
    for change in 0..3 {
        let mut changed = config.clone();
        match change {
            0 => changed.chunk_size = 32,
            1 => changed.validator_chunk_size = 128,
            _ => changed.history_length = 8192,
        }
        let err = Slasher::<E>::create(changed.clone()).expect_err("geometry change accepted");
        match err {
            Error::ConfigIncompatible {
                on_disk,
                configured,
            } => {
                assert_eq!(on_disk, config.disk_config());
                assert_eq!(configured, changed.disk_config());
                let message = Error::ConfigIncompatible {
                    on_disk,
                    configured,
                }
                .to_string();
                assert!(message.contains("cannot change"), "{message}");
            }
            other => panic!("expected ConfigIncompatible, got {other:?}"),
        }
    }
    // Settings outside the geometry may change.
    let mut cache = config.clone();
    cache.attestation_root_cache_size = std::num::NonZeroUsize::MIN;
    drop(ctx.open::<E>(cache));
}

fn schema_version_checked<E: Environment>(ctx: &TestCtx) {
    let config = ctx.config();
    {
        let slasher = ctx.open::<E>(config.clone());
        let dbs = *slasher.databases();
        let mut txn = slasher.environment().begin_rw_txn().expect("txn");
        txn.put(dbs.metadata_db, &[0x00], &2u64.to_le_bytes())
            .expect("put");
        txn.commit().expect("commit");
    }
    let err = Slasher::<E>::create(config.clone()).expect_err("old schema accepted");
    assert!(matches!(
        err,
        Error::IncompatibleSchemaVersion {
            database_schema_version: 2,
            software_schema_version: 3
        }
    ));
    {
        // A Lighthouse database has no metadata at all: accepted, and stamped.
        let other = ctx.config();
        let slasher = ctx.open::<E>(other.clone());
        let dbs = *slasher.databases();
        let mut txn = slasher.environment().begin_rw_txn().expect("txn");
        txn.del(dbs.metadata_db, &[0x00]).expect("del");
        txn.del(dbs.metadata_db, &[0x01]).expect("del");
        txn.commit().expect("commit");
        drop(slasher);
        let slasher = ctx.open::<E>(other);
        // Table handles belong to the environment that opened them.
        let dbs = *slasher.databases();
        let txn = slasher.environment().begin_rw_txn().expect("txn");
        assert!(txn.get(dbs.metadata_db, &[0x00]).expect("get").is_some());
        assert!(txn.get(dbs.metadata_db, &[0x01]).expect("get").is_some());
    }
}

fn invalid_config_rejected<E: Environment>(ctx: &TestCtx) {
    let mut config = ctx.config();
    config.history_length = 100;
    assert!(matches!(
        Slasher::<E>::create(config),
        Err(Error::ConfigInvalidChunkSize {
            chunk_size: 16,
            history_length: 100
        })
    ));
    let _ = DiskConfig {
        chunk_size: 1,
        validator_chunk_size: 1,
        history_length: 1,
    };
}

per_backend!(
    written_on_first_open,
    config_change_refused,
    schema_version_checked,
    invalid_config_rejected
);
