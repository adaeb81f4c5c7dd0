//! The segment writer that commits and background merges share: [`merge_into`] writes a
//! memtable merged with segments into one segment (a commit's step 2), and [`Outputs`] writes
//! a merge of segments, or a key range of them, into files split at the partition size (a
//! background job, `worker.rs`).

use std::path::PathBuf;
use std::sync::Arc;

use crate::error::{Error, Result};
use crate::fs::Fs;
use crate::iter::{MemWalk, MergeIter};
use crate::memtable::Memtable;
use crate::segment::{self, key_cmp, CacheUse, FileSink, Segment, SegmentBuilder, SegmentSink};

/// Merge the memtable (newest) with `inputs` (newest first) into `builder`, reading the
/// inputs' blocks through the cache as `cache_use` says.
pub(super) fn merge_into<S: SegmentSink>(
    builder: &mut SegmentBuilder<S>,
    mem: &Memtable,
    inputs: &[Arc<Segment>],
    drop_tombstones: bool,
    cache_use: CacheUse,
) -> Result<()> {
    let mut it = MergeIter::new_using(inputs, cache_use);
    let mut mem = MemWalk::new(mem);
    while let Some((key, value)) = it.next(&mut mem, drop_tombstones)? {
        builder.add(key, value)?;
    }
    Ok(())
}

/// Where and how [`Outputs`] writes its files.
pub(super) struct Target {
    pub(super) fs: Arc<dyn Fs>,
    /// The directory the files go in (`compact/`).
    pub(super) dir: PathBuf,
    /// Their permission bits.
    pub(super) mode: u32,
    /// First sequence number for the files, and how many may be used.
    pub(super) first_seq: u64,
    pub(super) seqs: u64,
    /// A file is closed once it holds about this many bytes, while sequence numbers are left.
    pub(super) part_bytes: u64,
}

/// One file [`Outputs`] wrote.
#[derive(Debug, Clone, Copy)]
pub(super) struct Output {
    pub(super) seq: u64,
    pub(super) entries: u64,
    pub(super) file_len: u64,
}

/// Where a drain job may stop short of its range's end: at a key above `after` (the largest
/// key of the partitions it replaces), once its files hold `bytes`.
#[derive(Debug, Clone, Copy)]
pub(super) struct Cut<'a> {
    pub(super) after: Option<&'a [u8]>,
    pub(super) bytes: u64,
}

/// The files a job writes, split at the partition size while it has sequence numbers left.
pub(super) struct Outputs<'w> {
    target: &'w Target,
    builder: Option<(u64, SegmentBuilder<FileSink<'w>>)>,
    done: Vec<Output>,
    /// Bytes of the files in `done`.
    done_bytes: u64,
}

impl<'w> Outputs<'w> {
    /// No file yet: the first is created with the first entry.
    pub(super) fn new(target: &'w Target) -> Self {
        Outputs {
            target,
            builder: None,
            done: Vec::new(),
            done_bytes: 0,
        }
    }

    /// Merge `inputs` (newest first) from `lo` (inclusive) up to `hi` (exclusive) into the
    /// outputs, dropping tombstones with `bottom` (nothing older lies below the inputs there).
    /// With `cut`, returns the key it stopped at, if it stopped there (that key not written).
    pub(super) fn merge_range(
        &mut self,
        inputs: &[Arc<Segment>],
        lo: Option<&[u8]>,
        hi: Option<&[u8]>,
        bottom: bool,
        cut: Option<Cut<'_>>,
    ) -> Result<Option<Vec<u8>>> {
        // A merge's result does not go into the block cache (it would push out the blocks the
        // slasher reads now, for a segment that is not live yet): its first readers load it.
        let mut it = MergeIter::new_using(inputs, CacheUse::Bypass);
        if let Some(k) = lo {
            it.seek(k, true)?;
        }
        let empty = Memtable::new();
        let mut mem = MemWalk::new(&empty);
        while let Some((key, value)) = it.next(&mut mem, bottom)? {
            if hi.is_some_and(|h| key_cmp(key, h).is_ge()) {
                break;
            }
            let stop = cut.is_some_and(|c| {
                self.bytes() >= c.bytes && c.after.is_none_or(|a| key_cmp(key, a).is_gt())
            });
            if stop {
                return Ok(Some(key.to_vec()));
            }
            self.add(key, value)?;
        }
        Ok(None)
    }

    /// Bytes written so far (the file being written: about).
    pub(super) fn bytes(&self) -> u64 {
        self.done_bytes + self.builder.as_ref().map_or(0, |(_, b)| b.approx_bytes())
    }

    fn add(&mut self, key: &[u8], value: Option<&[u8]>) -> Result<()> {
        let w = self.target;
        let full = self.builder.as_ref().is_some_and(|(_, b)| {
            b.approx_bytes() >= w.part_bytes && (self.done.len() as u64) + 1 < w.seqs
        });
        if full {
            self.finish_one()?;
        }
        let (_, builder) = match &mut self.builder {
            Some(b) => b,
            None => {
                let seq = w.first_seq + self.done.len() as u64;
                let path = w.dir.join(segment::file_name(seq));
                let sink = FileSink::new(&*w.fs, &path, w.mode, None);
                self.builder.insert((seq, SegmentBuilder::new(sink)))
            }
        };
        builder.add(key, value)
    }

    /// Finish the file being written, waiting for its write-back so that a write error is
    /// reported here and the commit that swaps it in has nothing left to wait for.
    fn finish_one(&mut self) -> Result<()> {
        let Some((seq, builder)) = self.builder.take() else {
            return Ok(());
        };
        let entries = builder.entries();
        let (file_len, _) = builder.finish()?;
        let path = self.target.dir.join(segment::file_name(seq));
        self.target
            .fs
            .write_back(&path)
            .map_err(|e| Error::io("write back", &path, e))?;
        self.done_bytes += file_len;
        self.done.push(Output {
            seq,
            entries,
            file_len,
        });
        Ok(())
    }

    pub(super) fn finish(mut self) -> Result<Vec<Output>> {
        self.finish_one()?;
        Ok(self.done)
    }
}
