//! The commit protocol of design.md §3, one method per numbered step, and the disk-full retry.

use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

use crate::error::{Error, Result};
use crate::fs::Fs;
use crate::manifest::{Manifest, SegmentMeta, TableMeta};
use crate::memtable::Memtable;
use crate::root::{self, gen_name, Kind};
use crate::segment::{self, CacheUse, FileSink, Segment, SegmentBuilder};
use crate::version::{order_disjoint_tail, partitions, TableVersion, Version};

use super::hooks::{broken_ack_before_snapshot, fail_point};
use super::policy;
use super::segment_writer::merge_into;
use super::{CommitInfo, Env, WriterState, MANIFEST_FILE, RECLAIM_WAIT, SEGMENT_TABLE_FORMAT};

const MANIFEST_TMP_FILE: &str = "MANIFEST.tmp";

/// What steps 1–4 have made of the transaction so far.
struct Draft {
    generation: u64,
    tables: Vec<TableVersion>,
    /// Segments merged away: unlinked from live/ in step 4, evicted from the cache in step 6.
    retired: Vec<Arc<Segment>>,
    info: CommitInfo,
}

impl Env {
    /// Commit a write transaction's memtables. Called by `WriteTxn::commit` with the writer
    /// lock held. Any error poisons the environment.
    pub(crate) fn commit(
        &self,
        writer: &mut WriterState,
        base: &Version,
        new_tables: &[String],
        memtables: &[Memtable],
        runs: &[Vec<Arc<Segment>>],
        dead: &[Arc<Segment>],
    ) -> Result<CommitInfo> {
        let mut r = self
            .discard_runs(dead)
            .and_then(|()| self.commit_once(writer, base, new_tables, memtables, runs));
        let spilled = runs.iter().any(|r| !r.is_empty());
        if let Some(e) = r.as_ref().err().filter(|e| e.is_disk_full() && spilled) {
            // The retry starts live/ again from the base generation, which would delete the
            // transaction's spilled runs with it.
            log::warn!("{e}; not retrying: the transaction spilled runs to live/");
        } else if let Some(e) = r.as_ref().err().filter(|e| e.is_disk_full()) {
            // Space held by deleted generations comes back only when btrfs's cleaner has
            // processed them: put live/ back to the committed state, let btrfs reclaim, and
            // try once more. (Not if the snapshot exists: undo_for_retry refuses.)
            log::warn!(
                "{e}; waiting for deleted generations to be reclaimed, then retrying the \
                 commit once"
            );
            match self.undo_for_retry(base.generation) {
                Ok(()) => r = self.commit_once(writer, base, new_tables, memtables, runs),
                Err(e) => log::warn!("cannot retry the commit: {e}"),
            }
        }
        if r.is_err() {
            self.poisoned.store(true, Ordering::Release);
        }
        r
    }

    /// One attempt at the commit: the steps of design.md §3 in order.
    fn commit_once(
        &self,
        writer: &mut WriterState,
        base: &Version,
        new_tables: &[String],
        memtables: &[Memtable],
        runs: &[Vec<Arc<Segment>>],
    ) -> Result<CommitInfo> {
        if self.is_poisoned() {
            return Err(Error::Poisoned);
        }
        if new_tables.is_empty()
            && memtables.iter().all(|m| m.is_empty())
            && runs.iter().all(Vec::is_empty)
        {
            // Nothing to publish: the committed state is already durable.
            return Ok(CommitInfo {
                generation: base.generation,
                memory: self.budget.usage(),
                ..CommitInfo::default()
            });
        }
        if let Some(g) = writer.deferred_snapshot.take() {
            let dir = self.root.join(gen_name(g));
            self.fs
                .snapshot(&self.live, &dir, true)
                .map_err(|e| Error::io("snapshot", &dir, e))?;
        }
        let started = Instant::now();
        let generation = base.generation + 1;
        let mut tables: Vec<TableVersion> = base.tables.clone();
        tables.extend(new_tables.iter().map(|n| TableVersion {
            name: n.clone(),
            segments: vec![],
            parts: 0,
        }));
        let mut draft = Draft {
            generation,
            tables,
            retired: Vec::new(),
            info: CommitInfo {
                generation,
                ..CommitInfo::default()
            },
        };
        self.step1_install_merge(writer, &mut draft)?;
        self.step2_write_segments(writer, &mut draft, memtables, runs)?;
        fail_point("commit::after_segments");
        self.step3_write_manifest(writer, &mut draft)?;
        self.step4_unlink_retired(&draft)?;
        fail_point("commit::before_snapshot");
        draft.info.write_us = elapsed_us(started);
        if broken_ack_before_snapshot() {
            writer.deferred_snapshot = Some(generation);
            *self.current.write() = Arc::new(Version {
                generation,
                tables: draft.tables,
            });
            return Ok(draft.info);
        }
        self.step5_snapshot(&mut draft)?;
        fail_point("commit::after_snapshot");
        let info = self.step6_publish(writer, base, draft);
        // Step 7. The commit is durable; a failure to delete an old generation is not a commit
        // failure. It is retried after the next commit and at the next open.
        self.collect_garbage();
        Ok(info)
    }

    /// Step 1: swap in a finished background merge (already written back). With
    /// `Merges::BackgroundWaited` a running merge is waited for.
    fn step1_install_merge(&self, writer: &mut WriterState, draft: &mut Draft) -> Result<()> {
        if let Some(job) = writer.merge.take() {
            if self.merges.mode.waits_for_merges() || job.handle.is_finished() {
                self.install_merge(
                    writer,
                    job,
                    &mut draft.tables,
                    &mut draft.retired,
                    &mut draft.info,
                )?;
            } else {
                writer.merge = Some(job);
            }
        }
        Ok(())
    }

    /// Step 2: put each table's spilled runs (already in live/) on top of its segments, and
    /// write each changed table's memtable (merged with some of its newest segments, runs
    /// included) as one new segment file in live/; then wait for the new files' and the runs'
    /// write-back (started as each was written), so a write error fails this commit instead
    /// of vanishing inside the snapshot.
    fn step2_write_segments(
        &self,
        writer: &mut WriterState,
        draft: &mut Draft,
        memtables: &[Memtable],
        runs: &[Vec<Arc<Segment>>],
    ) -> Result<()> {
        let mut written: Vec<PathBuf> = Vec::new();
        let mut spilled: Vec<u64> = Vec::new();
        for (i, (table, mem)) in draft.tables.iter_mut().zip(memtables).enumerate() {
            if let Some(runs) = runs.get(i).filter(|r| !r.is_empty()) {
                spilled.extend(runs.iter().map(|s| s.seq));
                draft.info.spilled_runs += runs.len();
                table.segments.splice(0..0, runs.iter().cloned());
            }
            if mem.is_empty() {
                continue;
            }
            let pinned = writer.first_pinned(i, &table.segments);
            let merge = policy::commit_merge(&table.segments, pinned, mem.bytes(), &self.merges);
            let drop_tombstones = merge == table.segments.len();
            let inputs: Vec<Arc<Segment>> = table.segments.drain(..merge).collect();
            let build_started = Instant::now();
            let seq = writer.next_seq;
            writer.next_seq += 1;
            let path = self.live.join(segment::file_name(seq));
            // The blocks go into the cache as they are written: the next transaction is likely
            // to read what this one wrote.
            let sink = FileSink::new(&*self.fs, &path, self.file_mode, Some((&self.cache, seq)));
            let mut builder = SegmentBuilder::new(sink);
            // This commit retires the inputs: their blocks leave the cache as they are read.
            merge_into(&mut builder, mem, &inputs, drop_tombstones, CacheUse::Take)?;
            draft.retired.extend(inputs);
            let entries = builder.entries();
            if entries == 0 {
                // Nothing was written: no file exists (the sequence number stays unused).
                continue;
            }
            let (len, sink) = builder.finish()?;
            draft.info.file_us += sink.file_us;
            draft.info.build_us += elapsed_us(build_started).saturating_sub(sink.file_us);
            written.push(path.clone());
            draft.info.segments_written += 1;
            draft.info.bytes_written += len;
            let seg = Segment::open(path, seq, len, entries, self.cache.clone())?;
            table.segments.insert(0, Arc::new(seg));
        }
        // A table far behind on merges: its disjoint oldest segments in partition order, where
        // the policy says so (`policy::orders_disjoint_tail`).
        for (i, table) in draft.tables.iter_mut().enumerate() {
            let pinned = writer.first_pinned(i, &table.segments);
            if policy::orders_disjoint_tail(&table.segments, pinned) {
                order_disjoint_tail(&mut table.segments, |s| (&s.min_key, &s.max_key));
            }
        }
        // The runs this commit installs as they are (the ones its merges took are unlinked in
        // step 4) were written while the transaction ran: their write-back is waited for too.
        spilled.retain(|seq| !draft.retired.iter().any(|s| s.seq == *seq));
        written.extend(
            spilled
                .iter()
                .map(|&seq| self.live.join(segment::file_name(seq))),
        );
        let write_back_started = Instant::now();
        for path in &written {
            self.fs
                .write_back(path)
                .map_err(|e| Error::io("write back", path, e))?;
        }
        draft.info.write_back_us = elapsed_us(write_back_started);
        Ok(())
    }

    /// Step 3: the new manifest, written beside the old one and renamed over it.
    fn step3_write_manifest(&self, writer: &WriterState, draft: &mut Draft) -> Result<()> {
        let manifest = Manifest {
            keys_recorded: true,
            table_format: SEGMENT_TABLE_FORMAT,
            generation: draft.generation,
            next_seq: writer.next_seq,
            tables: draft
                .tables
                .iter()
                .map(|t| TableMeta {
                    name: t.name.clone(),
                    segments: t
                        .segments
                        .iter()
                        .map(|s| SegmentMeta {
                            seq: s.seq,
                            file_len: s.file_len,
                            entries: s.entries,
                            min_key: s.min_key.clone(),
                            max_key: s.max_key.clone(),
                        })
                        .collect(),
                })
                .collect(),
        };
        draft.info.bytes_written +=
            write_manifest(&*self.fs, &self.live, &manifest, self.file_mode)?;
        Ok(())
    }

    /// Step 4: unlink merged-away segments from live/ (older generations keep them).
    fn step4_unlink_retired(&self, draft: &Draft) -> Result<()> {
        for s in &draft.retired {
            let path = self.live.join(segment::file_name(s.seq));
            // A reader pinned to an older version may still read it, through its open file: a
            // segment opened from the manifest opens its file on first use, which after the
            // unlink would find nothing. The merge that retired it read it, so its file is
            // open already (tests check it); should a later path retire one unread, it is
            // opened now. Failing that, the reader's read fails naming the file, and the
            // commit goes on: it does not need the file.
            debug_assert!(s.cacheable_blocks() > 0, "segment {} retired unread", s.seq);
            if let Err(e) = s.file() {
                log::warn!("retiring a segment whose file could not be opened: {e}");
            }
            self.fs
                .remove_file(&path)
                .map_err(|e| Error::io("unlink", &path, e))?;
        }
        Ok(())
    }

    /// Step 5, the commit point: the read-only snapshot of live/ flushes it and commits the
    /// btrfs transaction before it returns. Its error is `CommitOutcomeUnknown`: the kernel
    /// can report one after the snapshot exists.
    fn step5_snapshot(&self, draft: &mut Draft) -> Result<()> {
        let snap_started = Instant::now();
        let generation = draft.generation;
        let gen_dir = self.root.join(gen_name(generation));
        self.fs
            .snapshot(&self.live, &gen_dir, true)
            .map_err(|e| Error::CommitOutcomeUnknown {
                generation,
                source: Box::new(Error::io("snapshot", &gen_dir, e)),
            })?;
        draft.info.snapshot_us = elapsed_us(snap_started);
        Ok(())
    }

    /// Step 6: publish the new version in memory, evict merged-away segments from the cache,
    /// and start the next background merge if one is due. Cannot fail.
    fn step6_publish(
        &self,
        writer: &mut WriterState,
        base: &Version,
        mut draft: Draft,
    ) -> CommitInfo {
        let mut tables = draft.tables;
        for t in &mut tables {
            t.parts = partitions(&t.segments);
        }
        let version = Arc::new(Version {
            generation: draft.generation,
            tables,
        });
        *self.current.write() = version.clone();
        self.old_generations.lock().push(base.generation);
        for s in &draft.retired {
            self.cache.evict_segment(s.seq, s.cacheable_blocks());
        }
        self.budget.observe();
        draft.info.memory = self.budget.usage();
        if writer.merge.is_none() {
            self.start_merge(writer, &version);
        }
        draft.info
    }

    /// After a commit failed before its snapshot: discard what it wrote (`live/` becomes a
    /// writable snapshot of gen-`base` again, as at open) and wait for btrfs to reclaim the
    /// generations deleted so far. Refuses if gen-(`base`+1) exists (the commit may have
    /// taken effect).
    fn undo_for_retry(&self, base: u64) -> Result<()> {
        let next = self.root.join(gen_name(base + 1));
        if root::check_kind(&next, Kind::Subvolume)? {
            return Err(Error::foreign(
                &next,
                "the failed commit's snapshot exists; not retrying",
            ));
        }
        self.fs
            .delete_subvolume(&self.live)
            .map_err(|e| Error::io("delete subvolume", &self.live, e))?;
        let base_dir = self.root.join(gen_name(base));
        self.fs
            .snapshot(&base_dir, &self.live, false)
            .map_err(|e| Error::io("snapshot", &self.live, e))?;
        self.wait_for_reclaim();
        Ok(())
    }

    /// Asks btrfs to commit its transaction, which also wakes the cleaner that frees deleted
    /// subvolumes, and repeats until the free space stops growing (five polls 100 ms apart
    /// without growth), for at most RECLAIM_WAIT.
    fn wait_for_reclaim(&self) {
        let deadline = Instant::now() + RECLAIM_WAIT;
        let free = || {
            rustix::fs::statvfs(&self.root)
                .map(|s| s.f_bavail * s.f_frsize)
                .unwrap_or(0)
        };
        let mut best = free();
        let mut still = 0;
        while still < 5 && Instant::now() < deadline {
            if let Err(e) = self.fs.sync(&self.root) {
                log::warn!("sync while waiting for free space: {e}");
            }
            std::thread::sleep(std::time::Duration::from_millis(100));
            let now = free();
            if now > best {
                best = now;
                still = 0;
            } else {
                still += 1;
            }
        }
        self.unreclaimed.store(0, Ordering::Relaxed);
    }
}

/// Write `live/MANIFEST` by writing a temporary file and renaming it into place.
pub(super) fn write_manifest(
    fs: &dyn Fs,
    live: &Path,
    manifest: &Manifest,
    mode: u32,
) -> Result<u64> {
    let tmp = live.join(MANIFEST_TMP_FILE);
    let dst = live.join(MANIFEST_FILE);
    if tmp.exists() {
        fs.remove_file(&tmp)
            .map_err(|e| Error::io("unlink", &tmp, e))?;
    }
    let bytes = manifest.encode();
    fs.write_new_file(&tmp, &bytes, mode)
        .map_err(|e| Error::io("write", &tmp, e))?;
    fs.rename(&tmp, &dst)
        .map_err(|e| Error::io("rename", &dst, e))?;
    Ok(bytes.len() as u64)
}

fn elapsed_us(since: Instant) -> u64 {
    u64::try_from(since.elapsed().as_micros()).unwrap_or(u64::MAX)
}
