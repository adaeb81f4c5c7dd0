//! `butter backup --plain` and `butter restore --plain`: a copy of one generation as plain
//! files, on any filesystem and without root, and back.
//!
//! A plain copy is a directory holding the generation's files byte for byte (`butter.id`,
//! `MANIFEST`, each `<16 hex digits>.seg` its manifest lists) and, written last, the copy's own
//! list of them, `butter-copy.manifest` (format 1, text, one item a line):
//!
//! ```text
//! butter-copy format=1 generation=N identity=HEX files=K bytes=B
//! file NAME LENGTH SHA256
//! ...
//! end
//! ```
//!
//! `identity` is the source database's; `bytes` the files' total. A directory without that
//! list (a copy cut short) is not a copy. With `-` for the destination the same files go to
//! standard output as a POSIX tar (ustar) stream, each under `butter-copy/`, the list last:
//! `tar -x` of it gives a `butter-copy/` directory that `restore --plain` reads as it would the
//! directory copy.
//!
//! Every file the backup writes is created with `O_CREAT|O_EXCL|O_NOFOLLOW` relative to the
//! destination directory's descriptor, so nothing that was there is ever overwritten; a
//! failed backup unlinks exactly the files it created (and the directory, if it made it).
//! Before it reports success, a directory copy is read back and each file's length and SHA-256
//! compared with the list. `restore --plain` writes the files into a new subvolume of the
//! destination database, checks each against the list, and reads the result whole (as `butter
//! check`) before the database can be opened; no step needs root.

use std::fs::File;
use std::io::{BufReader, Read, Write};
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use butter_db::admin::{NewCopy, Snapshot, Verified};
use rustix::fs::{AtFlags, Mode, OFlags, CWD};
use sha2::{Digest, Sha256};

use crate::{Restored, Result, ToolError};

/// The copy's list of its files, written last.
pub const COPY_MANIFEST: &str = "butter-copy.manifest";
/// The directory a tar stream's entries are under.
pub const TAR_DIR: &str = "butter-copy";
/// The list's format version.
pub const COPY_FORMAT: u32 = 1;

const CHUNK: usize = 1 << 20;
const BLOCK: usize = 512;
/// The longest list `restore` reads (a generation has a few hundred files at most).
const MAX_MANIFEST: u64 = 16 << 20;
/// ustar's size field: 11 octal digits.
const MAX_TAR_FILE: u64 = 0o777_7777_7777;

/// One file of a plain copy, as its list names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CopiedFile {
    /// Its name in the generation.
    pub name: String,
    /// Its length.
    pub len: u64,
    /// SHA-256 of its bytes, lowercase hex.
    pub sha256: String,
}

/// A plain copy's list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CopyManifest {
    /// The generation copied.
    pub generation: u64,
    /// The source database's identity.
    pub identity: String,
    /// Its files.
    pub files: Vec<CopiedFile>,
}

impl CopyManifest {
    /// The total of the files' lengths.
    pub fn bytes(&self) -> u64 {
        self.files.iter().map(|f| f.len).sum()
    }

    /// The list as it is written.
    pub fn encode(&self) -> String {
        let mut s = format!(
            "butter-copy format={COPY_FORMAT} generation={} identity={} files={} bytes={}\n",
            self.generation,
            self.identity,
            self.files.len(),
            self.bytes()
        );
        for f in &self.files {
            s.push_str(&format!("file {} {} {}\n", f.name, f.len, f.sha256));
        }
        s.push_str("end\n");
        s
    }

    /// Parses a list, refusing anything [`CopyManifest::encode`] would not write.
    ///
    /// # Errors
    /// [`ToolError::BadCopy`] naming the line.
    pub fn decode(text: &str, origin: &str) -> Result<CopyManifest> {
        let bad = |line: usize, why: String| {
            ToolError::BadCopy(format!("{origin}: {COPY_MANIFEST} line {line}: {why}"))
        };
        let mut lines = text.lines().enumerate().map(|(i, l)| (i + 1, l));
        let (_, header) = lines.next().ok_or_else(|| bad(1, "empty".into()))?;
        let mut words = header.split(' ');
        if words.next() != Some("butter-copy") {
            return Err(bad(1, "not a butter copy list".into()));
        }
        let mut fields = std::collections::BTreeMap::new();
        for w in words {
            let (k, v) = w
                .split_once('=')
                .ok_or_else(|| bad(1, format!("bad field {w:?}")))?;
            fields.insert(k, v);
        }
        let num = |k: &str| -> Result<u64> {
            fields
                .get(k)
                .and_then(|v| v.parse().ok())
                .ok_or_else(|| bad(1, format!("no number {k}=")))
        };
        let format = num("format")?;
        if format != u64::from(COPY_FORMAT) {
            return Err(bad(
                1,
                format!("copy format {format}; this build reads format {COPY_FORMAT}"),
            ));
        }
        let (generation, count, bytes) = (num("generation")?, num("files")?, num("bytes")?);
        let identity = fields
            .get("identity")
            .filter(|v| v.len() == 32 && v.bytes().all(|b| b.is_ascii_hexdigit()))
            .ok_or_else(|| bad(1, "no identity= of 32 hex digits".into()))?
            .to_string();
        let mut files: Vec<CopiedFile> = Vec::new();
        let mut ended = false;
        for (n, line) in lines.by_ref() {
            if line == "end" {
                ended = true;
                break;
            }
            let parts: Vec<&str> = line.split(' ').collect();
            let ["file", name, len, sha] = parts.as_slice() else {
                return Err(bad(n, "expected `file NAME LENGTH SHA256`".into()));
            };
            if !generation_file_name(name) {
                return Err(bad(n, format!("{name:?} is not a generation's file name")));
            }
            if files.iter().any(|f| f.name == *name) {
                return Err(bad(n, format!("{name} is listed twice")));
            }
            let len = len
                .parse()
                .map_err(|_| bad(n, format!("bad length {len:?}")))?;
            if sha.len() != 64 || !sha.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')) {
                return Err(bad(n, format!("bad SHA-256 {sha:?}")));
            }
            files.push(CopiedFile {
                name: (*name).into(),
                len,
                sha256: (*sha).into(),
            });
        }
        if !ended {
            return Err(bad(text.lines().count(), "no `end` line: truncated".into()));
        }
        if let Some((n, _)) = lines.next() {
            return Err(bad(n, "text after `end`".into()));
        }
        let m = CopyManifest {
            generation,
            identity,
            files,
        };
        if m.files.len() as u64 != count || m.bytes() != bytes {
            return Err(bad(
                1,
                format!(
                    "it says {count} files of {bytes} bytes; it lists {} of {}",
                    m.files.len(),
                    m.bytes()
                ),
            ));
        }
        for must in ["MANIFEST", "butter.id"] {
            if !m.files.iter().any(|f| f.name == must) {
                return Err(bad(1, format!("it does not list {must}")));
            }
        }
        Ok(m)
    }
}

/// Whether `name` is one a generation holds: `butter.id`, `MANIFEST` or a segment file. No
/// other name (no path) is read or written by a plain copy.
pub fn generation_file_name(name: &str) -> bool {
    name == "butter.id"
        || name == "MANIFEST"
        || name.strip_suffix(".seg").is_some_and(|h| {
            h.len() == 16 && h.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
        })
}

fn io_err(op: &'static str, path: &Path, source: impl Into<std::io::Error>) -> ToolError {
    ToolError::StreamFile {
        op,
        path: path.into(),
        source: source.into(),
    }
}

/// Creates `name` in the directory `dir` (never replacing anything, never through a symlink).
fn create_in(dir: &OwnedFd, dir_path: &Path, name: &str) -> Result<File> {
    let fd = rustix::fs::openat(
        dir,
        name,
        OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::from_raw_mode(0o600),
    )
    .map_err(|e| io_err("create", &dir_path.join(name), e))?;
    Ok(File::from(fd))
}

/// Opens `name` in `dir` for reading, refusing a symlink.
fn open_in(dir: &OwnedFd, dir_path: &Path, name: &str) -> Result<File> {
    let fd = rustix::fs::openat(
        dir,
        name,
        OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .map_err(|e| io_err("open", &dir_path.join(name), e))?;
    Ok(File::from(fd))
}

/// Opens the directory `path` itself, refusing a symlink.
fn open_dir(path: &Path) -> Result<OwnedFd> {
    rustix::fs::openat(
        CWD,
        path,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .map_err(|e| io_err("open directory", path, e))
}

/// A destination directory being filled: the files this backup created, so that a failure
/// removes those and nothing else.
struct DestDir {
    path: PathBuf,
    fd: OwnedFd,
    /// DEST's parent, opened once, and DEST's name in it.
    parent: OwnedFd,
    name: std::ffi::OsString,
    /// DEST was made by this backup (and is removed on a failure, if the name still leads to
    /// the directory made: `id`).
    created_dir: bool,
    id: butter_db::fs::FileId,
    created: Vec<String>,
    done: bool,
}

impl DestDir {
    /// Claims `path`: it must not exist (it is created, mode 0700) or be an empty directory.
    /// Its parent is resolved once and, if DEST is new, refused when users other than the
    /// caller and root can write it (they could swap DEST); an existing DEST is refused when
    /// they can write DEST itself. From then on everything goes through the handles, never the
    /// path again.
    /// Claims `path` for a copy of the database directory `source`: refused if it is that
    /// directory or lies inside it (walking up from its parent's handle,
    /// [`butter_db::fs::is_within`]), before anything is made.
    fn claim(path: &Path, source: butter_db::fs::FileId) -> Result<DestDir> {
        use std::os::fd::{AsFd, AsRawFd};
        let Some((parent_path, name)) = crate::dumpload::parent_and_name(path) else {
            return Err(ToolError::PlainDestination(format!(
                "cannot copy into {}: name a directory; nothing was changed",
                path.display()
            )));
        };
        let parent = crate::dumpload::open_parent(parent_path)?;
        let inside = || {
            ToolError::PlainDestination(format!(
                "cannot copy into {}: it is inside the database directory being copied; \
                 nothing was changed",
                path.display()
            ))
        };
        if butter_db::fs::is_within(parent.as_fd(), source)
            .map_err(|e| io_err("open", parent_path, e))?
        {
            return Err(inside());
        }
        let created_dir = match rustix::fs::mkdirat(&parent, name, Mode::from_raw_mode(0o700)) {
            Ok(()) => true,
            Err(rustix::io::Errno::EXIST) => false,
            Err(e) => return Err(io_err("create directory", path, e)),
        };
        let (fd, id) = match crate::dumpload::open_dir_with_id(parent.as_fd(), name) {
            Ok(opened) => opened,
            // Made here and gone or replaced since: left alone. Not a directory: refused.
            Err(e) if e.raw_os_error() == Some(rustix::io::Errno::NOTDIR.raw_os_error()) => {
                return Err(ToolError::PlainDestination(format!(
                    "cannot copy into {}: it exists and is not a directory; nothing was changed",
                    path.display()
                )))
            }
            Err(e) => return Err(io_err("open directory", path, e)),
        };
        if !created_dir && id == source {
            return Err(inside());
        }
        let dest = DestDir {
            path: path.into(),
            fd,
            parent,
            name: name.to_os_string(),
            created_dir,
            id,
            created: Vec::new(),
            done: false,
        };
        // A new DEST is checked through its parent, an existing one itself.
        let (checked, shown) = if created_dir {
            (dest.parent.as_fd(), parent_path)
        } else {
            (dest.fd.as_fd(), path)
        };
        crate::dumpload::refuse_shared_parent(checked, shown)?;
        if !created_dir {
            let listing = PathBuf::from(format!("/proc/self/fd/{}", dest.fd.as_raw_fd()));
            let mut rd = std::fs::read_dir(&listing).map_err(|e| io_err("list", path, e))?;
            if rd.next().is_some() {
                return Err(ToolError::PlainDestination(format!(
                    "cannot copy into {}: it is not empty; nothing was changed",
                    path.display()
                )));
            }
        }
        Ok(dest)
    }

    fn create(&mut self, name: &str) -> Result<File> {
        let f = create_in(&self.fd, &self.path, name)?;
        self.created.push(name.into());
        Ok(f)
    }
}

impl Drop for DestDir {
    fn drop(&mut self) {
        if self.done {
            return;
        }
        for name in self.created.iter().rev() {
            let _ = rustix::fs::unlinkat(&self.fd, name.as_str(), AtFlags::empty());
        }
        if self.created_dir {
            use std::os::fd::AsFd;
            let _ = butter_db::fs::BtrfsFs.remove_tree_at(
                self.parent.as_fd(),
                &self.name,
                Some(self.id),
            );
        }
    }
}

/// Where `backup --plain` writes.
#[derive(Debug, Clone)]
pub enum PlainTarget {
    /// A directory on any filesystem: new, or empty.
    Dir(PathBuf),
    /// A tar stream on standard output.
    Stdout,
}

/// What `backup --plain` wrote.
#[derive(Debug, Clone)]
pub struct PlainBackup {
    /// The list written last (generation, the source's identity, the files).
    pub manifest: CopyManifest,
    /// Bytes written (for a tar stream: headers and padding included).
    pub written: u64,
    /// How long the copy took.
    pub copy_time: Duration,
    /// How long reading a directory copy back took (`None` for a stream).
    pub verify_time: Option<Duration>,
}

/// Copies `file` (exactly `len` bytes) into `out`, returning its SHA-256.
fn copy_generation_file(
    file: &butter_db::admin::GenerationFile<'_>,
    source_dir: &Path,
    out: &mut dyn Write,
    out_path: &Path,
    buf: &mut [u8],
) -> Result<String> {
    let mut hash = Sha256::new();
    let mut at = 0u64;
    while at < file.len {
        let want = usize::try_from(file.len - at)
            .unwrap_or(usize::MAX)
            .min(buf.len());
        let chunk = buf.get_mut(..want).unwrap_or_default();
        let n = file
            .read_at(chunk, at)
            .map_err(|e| io_err("read", &source_dir.join(&file.name), e))?;
        if n == 0 {
            return Err(ToolError::BadCopy(format!(
                "{} ends at byte {at}; its length is {}",
                source_dir.join(&file.name).display(),
                file.len
            )));
        }
        let got = chunk.get(..n).unwrap_or_default();
        hash.update(got);
        out.write_all(got)
            .map_err(|e| io_err("write", out_path, e))?;
        at += n as u64;
    }
    Ok(hex::encode(hash.finalize()))
}

/// `butter backup --plain DIR DEST|-`: the newest committed generation of DIR (read beside a
/// live writer, every file open before any is read) as plain files in DEST, or as a tar
/// stream on standard output; see the module's comment.
///
/// # Errors
/// [`ToolError::Engine`] (DIR), [`ToolError::PlainDestination`], [`ToolError::StreamFile`]
/// (I/O), [`ToolError::BadCopy`] (what was read back differs); a failed directory copy leaves
/// DEST as it was.
pub fn backup_plain(dir: &Path, target: &PlainTarget) -> Result<PlainBackup> {
    // DIR is looked up once (`crate::handle`): another user who can rename an entry on its
    // path cannot swap in another database (root's, say) between two lookups and have it
    // copied out.
    crate::handle::through_handle(dir, |held| backup_plain_via(dir, held, target))
}

/// [`backup_plain`] of DIR (`dir`, for messages), held.
fn backup_plain_via(
    dir: &Path,
    held: &crate::handle::Held,
    target: &PlainTarget,
) -> Result<PlainBackup> {
    let snap = Snapshot::open(&held.via)?;
    let t = Instant::now();
    match target {
        PlainTarget::Dir(dest) => {
            let mut out = DestDir::claim(dest, held.id()?)?;
            let manifest = write_dir(&snap, dir, &mut out)?;
            let copy_time = t.elapsed();
            let t = Instant::now();
            read_back(&out, &manifest)?;
            out.done = true;
            Ok(PlainBackup {
                written: manifest.bytes(),
                manifest,
                copy_time,
                verify_time: Some(t.elapsed()),
            })
        }
        PlainTarget::Stdout => {
            let stdout = std::io::stdout().lock();
            let mut tar = TarWriter {
                out: std::io::BufWriter::with_capacity(CHUNK, stdout),
                written: 0,
                mtime: std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(0, |d| d.as_secs()),
            };
            let manifest = write_tar(&snap, dir, &mut tar)?;
            Ok(PlainBackup {
                manifest,
                written: tar.written,
                copy_time: t.elapsed(),
                verify_time: None,
            })
        }
    }
}

/// `source`: the database's path as the user gave it (for messages).
fn write_dir(snap: &Snapshot, source: &Path, out: &mut DestDir) -> Result<CopyManifest> {
    let mut buf = vec![0u8; CHUNK];
    let mut files = Vec::new();
    for f in snap.files()? {
        let path = out.path.join(&f.name);
        let mut file = out.create(&f.name)?;
        let sha256 = copy_generation_file(&f, source, &mut file, &path, &mut buf)?;
        file.sync_all().map_err(|e| io_err("fsync", &path, e))?;
        files.push(CopiedFile {
            name: f.name.clone(),
            len: f.len,
            sha256,
        });
    }
    let manifest = CopyManifest {
        generation: snap.generation(),
        identity: snap.identity(),
        files,
    };
    let path = out.path.join(COPY_MANIFEST);
    let mut file = out.create(COPY_MANIFEST)?;
    file.write_all(manifest.encode().as_bytes())
        .and_then(|()| file.sync_all())
        .map_err(|e| io_err("write", &path, e))?;
    rustix::fs::fsync(&out.fd).map_err(|e| io_err("fsync", &out.path, e))?;
    Ok(manifest)
}

/// SHA-256 and length of everything `r` yields, copied to `out` if given.
fn hash_reader(
    r: &mut dyn Read,
    mut out: Option<&mut dyn Write>,
    path: &Path,
) -> Result<(u64, String)> {
    let mut buf = vec![0u8; CHUNK];
    let mut hash = Sha256::new();
    let mut len = 0u64;
    loop {
        let n = match r.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(io_err("read", path, e)),
        };
        let got = buf.get(..n).unwrap_or_default();
        hash.update(got);
        if let Some(o) = out.as_mut() {
            o.write_all(got).map_err(|e| io_err("write", path, e))?;
        }
        len += n as u64;
    }
    Ok((len, hex::encode(hash.finalize())))
}

/// Reads every file of a directory copy back and compares it with the list.
fn read_back(out: &DestDir, manifest: &CopyManifest) -> Result<()> {
    for f in &manifest.files {
        let path = out.path.join(&f.name);
        let mut file = open_in(&out.fd, &out.path, &f.name)?;
        let (len, sha) = hash_reader(&mut file, None, &path)?;
        if len != f.len || sha != f.sha256 {
            return Err(ToolError::BadCopy(format!(
                "{} read back as {len} bytes with SHA-256 {sha}; {} bytes with {} were written",
                path.display(),
                f.len,
                f.sha256
            )));
        }
    }
    Ok(())
}

/// A ustar stream being written.
struct TarWriter<W: Write> {
    out: W,
    written: u64,
    mtime: u64,
}

fn octal(field: &mut [u8], value: u64) {
    // Right-aligned digits, zero-padded, then a NUL.
    let width = field.len().saturating_sub(1);
    let digits = format!("{value:0width$o}");
    if let Some(dst) = field.get_mut(..width) {
        dst.copy_from_slice(digits.as_bytes().get(..width).unwrap_or_default());
    }
    if let Some(last) = field.last_mut() {
        *last = 0;
    }
}

/// A ustar header's checksum: the sum of its bytes, the checksum field (148..156) counted as
/// spaces.
fn header_sum(h: &[u8; BLOCK]) -> u64 {
    h.iter()
        .enumerate()
        .map(|(i, &b)| {
            if (148..156).contains(&i) {
                32
            } else {
                u64::from(b)
            }
        })
        .sum()
}

fn tar_header(name: &str, len: u64, dir: bool, mtime: u64) -> [u8; BLOCK] {
    let mut h = [0u8; BLOCK];
    let put = |h: &mut [u8; BLOCK], at: usize, bytes: &[u8]| {
        if let Some(dst) = h.get_mut(at..at + bytes.len()) {
            dst.copy_from_slice(bytes);
        }
    };
    put(&mut h, 0, name.as_bytes());
    let mut field = [0u8; 8];
    octal(&mut field, if dir { 0o700 } else { 0o600 });
    put(&mut h, 100, &field);
    octal(&mut field, 0);
    put(&mut h, 108, &field);
    put(&mut h, 116, &field);
    let mut field = [0u8; 12];
    octal(&mut field, len);
    put(&mut h, 124, &field);
    octal(&mut field, mtime);
    put(&mut h, 136, &field);
    put(&mut h, 148, b"        ");
    put(&mut h, 156, if dir { b"5" } else { b"0" });
    put(&mut h, 257, b"ustar\0");
    put(&mut h, 263, b"00");
    let sum = header_sum(&h);
    // The checksum field: six digits, NUL, space.
    let mut field = [0u8; 8];
    field[7] = b' ';
    let digits = format!("{sum:06o}");
    field[..6].copy_from_slice(digits.as_bytes().get(..6).unwrap_or(b"000000"));
    put(&mut h, 148, &field);
    h
}

impl<W: Write> TarWriter<W> {
    fn raw(&mut self, bytes: &[u8]) -> Result<()> {
        self.out
            .write_all(bytes)
            .map_err(|e| io_err("write", Path::new("standard output"), e))?;
        self.written += bytes.len() as u64;
        Ok(())
    }

    fn header(&mut self, name: &str, len: u64, dir: bool) -> Result<()> {
        if len > MAX_TAR_FILE {
            return Err(ToolError::PlainDestination(format!(
                "{name} has {len} bytes, more than a ustar entry holds"
            )));
        }
        let h = tar_header(name, len, dir, self.mtime);
        self.raw(&h)
    }

    fn pad(&mut self, len: u64) -> Result<()> {
        let rem = (len % BLOCK as u64) as usize;
        if rem != 0 {
            self.raw(&[0u8; BLOCK][rem..])?;
        }
        Ok(())
    }
}

/// `source`: the database's path as the user gave it (for messages).
fn write_tar<W: Write>(
    snap: &Snapshot,
    source: &Path,
    tar: &mut TarWriter<W>,
) -> Result<CopyManifest> {
    let mut buf = vec![0u8; CHUNK];
    let mut files = Vec::new();
    tar.header(&format!("{TAR_DIR}/"), 0, true)?;
    let out_path = PathBuf::from("standard output");
    for f in snap.files()? {
        tar.header(&format!("{TAR_DIR}/{}", f.name), f.len, false)?;
        let mut counting = Counting {
            inner: &mut tar.out,
            n: 0,
        };
        let sha256 = copy_generation_file(&f, source, &mut counting, &out_path, &mut buf)?;
        tar.written += counting.n;
        tar.pad(f.len)?;
        files.push(CopiedFile {
            name: f.name.clone(),
            len: f.len,
            sha256,
        });
    }
    let manifest = CopyManifest {
        generation: snap.generation(),
        identity: snap.identity(),
        files,
    };
    let text = manifest.encode();
    tar.header(
        &format!("{TAR_DIR}/{COPY_MANIFEST}"),
        text.len() as u64,
        false,
    )?;
    tar.raw(text.as_bytes())?;
    tar.pad(text.len() as u64)?;
    tar.raw(&[0u8; 2 * BLOCK])?;
    tar.out
        .flush()
        .map_err(|e| io_err("write", Path::new("standard output"), e))?;
    Ok(manifest)
}

/// A writer counting what passes.
struct Counting<'a, W: Write> {
    inner: &'a mut W,
    n: u64,
}

impl<W: Write> Write for Counting<'_, W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.n += n as u64;
        Ok(n)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

/// Where `restore --plain` reads.
#[derive(Debug, Clone)]
pub enum PlainSource {
    /// A directory copy or a tar stream in a file, told apart by what opening the path gives
    /// (the path is looked up once).
    Path(PathBuf),
    /// A tar stream on standard input.
    Stdin,
}

impl PlainSource {
    /// `-` is standard input, anything else a path.
    pub fn from_arg(arg: &Path) -> PlainSource {
        if arg.as_os_str() == "-" {
            PlainSource::Stdin
        } else {
            PlainSource::Path(arg.into())
        }
    }

    fn describe(&self) -> String {
        match self {
            PlainSource::Path(p) => p.display().to_string(),
            PlainSource::Stdin => "standard input".into(),
        }
    }
}

/// `butter restore --plain SRC|- DEST`: DEST (new, or an empty directory, on btrfs) becomes a
/// new database from a plain copy; no root needed. Each file is checked against the copy's
/// list as it is written, the generation is read whole (as `butter check`) before DEST gets its
/// identity; a failed restore leaves DEST as it was.
///
/// # Errors
/// [`ToolError::NotACopy`] (no list), [`ToolError::BadCopy`] (a file differs from the list, a
/// malformed stream), [`ToolError::Engine`] (DEST refused, the generation damaged), I/O.
pub fn restore_plain(source: &PlainSource, dest: &Path) -> Result<Restored> {
    let t = Instant::now();
    // The source is looked at before anything is made.
    let mut input: Option<Box<dyn Read>> = None;
    let mut src_dir = None;
    let mut listed = None;
    // A path is looked up once: whether it is a directory copy or a tar file is decided by
    // what was opened.
    let opened = match source {
        PlainSource::Path(p) => {
            let (fd, is_dir) = crate::handle::open_to_read(p).map_err(|e| io_err("open", p, e))?;
            Some((p, fd, is_dir))
        }
        PlainSource::Stdin => None,
    };
    match opened {
        Some((dir, fd, true)) => {
            let mut f = open_in(&fd, dir, COPY_MANIFEST).map_err(|e| match e {
                ToolError::StreamFile { source, .. }
                    if source.kind() == std::io::ErrorKind::NotFound =>
                {
                    ToolError::NotACopy(format!(
                        "{} is not a plain copy: it has no {COPY_MANIFEST} (a copy cut short, \
                         or not a copy); nothing was changed",
                        dir.display()
                    ))
                }
                e => e,
            })?;
            let text = read_limited(&mut f, &dir.join(COPY_MANIFEST))?;
            listed = Some(CopyManifest::decode(&text, &source.describe())?);
            src_dir = Some((dir.clone(), fd));
        }
        Some((_, fd, false)) => {
            input = Some(Box::new(BufReader::with_capacity(CHUNK, File::from(fd))));
        }
        None => {
            input = Some(Box::new(BufReader::with_capacity(CHUNK, std::io::stdin())));
        }
    }
    let mut copy = NewCopy::create(dest)?;
    let staging = copy.stage()?;
    let staging_fd = open_dir(&staging)?;
    let manifest = match (src_dir, listed, input) {
        (Some((dir, fd)), Some(m), _) => {
            for f in &m.files {
                let path = dir.join(&f.name);
                let mut from = open_in(&fd, &dir, &f.name)?;
                let mut to = create_in(&staging_fd, &staging, &f.name)?;
                let (len, sha) = hash_reader(&mut from, Some(&mut to), &path)?;
                check_file(f, len, &sha, &source.describe())?;
                to.sync_all()
                    .map_err(|e| io_err("fsync", &staging.join(&f.name), e))?;
            }
            m
        }
        (_, _, Some(mut r)) => read_tar(&mut r, &staging_fd, &staging, &source.describe())?,
        _ => return Err(ToolError::NotACopy("nothing to restore from".into())),
    };
    rustix::fs::fsync(&staging_fd).map_err(|e| io_err("fsync", &staging, e))?;
    drop(staging_fd);
    let gen = copy.install_staged()?;
    if gen.generation != manifest.generation || gen.source_identity != manifest.identity {
        return Err(ToolError::BadCopy(format!(
            "{}: the list names generation {} of {}, its files hold generation {} of {}",
            source.describe(),
            manifest.generation,
            manifest.identity,
            gen.generation,
            gen.source_identity
        )));
    }
    // Read back through DEST's handle.
    let verified: Verified = copy.verify()?;
    let info = copy.finish()?;
    Ok(Restored {
        copy: info,
        verified,
        elapsed: t.elapsed(),
    })
}

fn check_file(f: &CopiedFile, len: u64, sha: &str, origin: &str) -> Result<()> {
    if len != f.len || sha != f.sha256 {
        return Err(ToolError::BadCopy(format!(
            "{origin}: {} has {len} bytes with SHA-256 {sha}; the list says {} bytes with {}; \
             nothing was left in the destination",
            f.name, f.len, f.sha256
        )));
    }
    Ok(())
}

fn read_limited(r: &mut dyn Read, path: &Path) -> Result<String> {
    let mut bytes = Vec::new();
    r.take(MAX_MANIFEST + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| io_err("read", path, e))?;
    if bytes.len() as u64 > MAX_MANIFEST {
        return Err(ToolError::BadCopy(format!(
            "{}: larger than {MAX_MANIFEST} bytes",
            path.display()
        )));
    }
    String::from_utf8(bytes)
        .map_err(|_| ToolError::BadCopy(format!("{}: not UTF-8 text", path.display())))
}

fn parse_octal(field: &[u8]) -> Option<u64> {
    let text = std::str::from_utf8(field).ok()?;
    let text = text.trim_matches(|c: char| c == '\0' || c == ' ');
    if text.is_empty() {
        return Some(0);
    }
    u64::from_str_radix(text, 8).ok()
}

/// Reads a tar stream written by `backup --plain -`, writing its files into `staging` and
/// checking them against the list it ends with.
fn read_tar(
    r: &mut dyn Read,
    staging_fd: &OwnedFd,
    staging: &Path,
    origin: &str,
) -> Result<CopyManifest> {
    let bad = |why: String| bad_tar(origin, why);
    let mut written: Vec<CopiedFile> = Vec::new();
    let mut manifest = None;
    let mut header = [0u8; BLOCK];
    let mut first = true;
    loop {
        fill_tar(r, &mut header, "a header", origin)?;
        if header.iter().all(|&b| b == 0) {
            break;
        }
        let (name, len, kind) = parse_tar_header(&header, origin)?;
        if first {
            first = false;
            if kind == b'5' && name == format!("{TAR_DIR}/") {
                continue;
            }
        }
        if manifest.is_some() {
            return Err(bad(format!(
                "entry {name:?} after the list, which comes last"
            )));
        }
        if kind != b'0' && kind != 0 {
            return Err(bad(format!("entry {name:?} is not a regular file")));
        }
        let file = name
            .strip_prefix(&format!("{TAR_DIR}/"))
            .ok_or_else(|| bad(format!("entry {name:?} is not under {TAR_DIR}/")))?;
        let mut body = (&mut *r).take(len);
        if file == COPY_MANIFEST {
            if len > MAX_MANIFEST {
                return Err(bad(format!("the list has {len} bytes")));
            }
            let mut text = vec![0u8; len as usize];
            fill_tar(&mut body, &mut text, "the list", origin)?;
            let text = String::from_utf8(text).map_err(|_| bad("the list is not text".into()))?;
            manifest = Some(CopyManifest::decode(&text, origin)?);
        } else {
            if !generation_file_name(file) {
                return Err(bad(format!("entry {name:?} is not a generation's file")));
            }
            if written.iter().any(|f| f.name == file) {
                return Err(bad(format!("entry {name:?} comes twice")));
            }
            let path = staging.join(file);
            let mut to = create_in(staging_fd, staging, file)?;
            let (got, sha) = hash_reader(&mut body, Some(&mut to), Path::new(origin))?;
            if got != len {
                return Err(bad(format!("the stream ends inside {name:?}: truncated")));
            }
            to.sync_all().map_err(|e| io_err("fsync", &path, e))?;
            written.push(CopiedFile {
                name: file.into(),
                len,
                sha256: sha,
            });
        }
        let rem = (len % BLOCK as u64) as usize;
        if rem != 0 {
            let mut pad = [0u8; BLOCK];
            fill_tar(r, &mut pad[rem..], "padding", origin)?;
        }
    }
    let Some(m) = manifest else {
        return Err(bad(format!(
            "the stream has no {COPY_MANIFEST}: truncated, or not a copy"
        )));
    };
    check_tar_files(&m, &written, origin)?;
    Ok(m)
}

/// A tar stream refused for `why`.
fn bad_tar(origin: &str, why: String) -> ToolError {
    ToolError::BadCopy(format!(
        "{origin}: {why}; nothing was left in the destination"
    ))
}

/// Fills `buf` from the tar stream; the stream ending first is a truncated copy, inside
/// `what`.
fn fill_tar(r: &mut dyn Read, buf: &mut [u8], what: &str, origin: &str) -> Result<()> {
    r.read_exact(buf).map_err(|e| {
        if e.kind() == std::io::ErrorKind::UnexpectedEof {
            ToolError::BadCopy(format!(
                "{origin}: the stream ends inside {what}: truncated; nothing was left in the \
                 destination"
            ))
        } else {
            io_err("read", Path::new(origin), e)
        }
    })
}

/// A tar header's entry name, size and type flag, once its checksum, its `ustar` magic, its
/// name (UTF-8, no prefix) and its size are checked.
fn parse_tar_header(header: &[u8; BLOCK], origin: &str) -> Result<(String, u64, u8)> {
    let bad = |why: String| bad_tar(origin, why);
    let stored = parse_octal(&header[148..156])
        .ok_or_else(|| bad("a header's checksum is not octal".into()))?;
    let sum = header_sum(header);
    if sum != stored {
        return Err(bad(format!(
            "a header's checksum is {stored:o}, its bytes add up to {sum:o}"
        )));
    }
    if &header[257..262] != b"ustar" {
        return Err(bad("not a ustar stream".into()));
    }
    let name_end = header[..100].iter().position(|&b| b == 0).unwrap_or(100);
    let name = std::str::from_utf8(&header[..name_end])
        .map_err(|_| bad("an entry's name is not UTF-8".into()))?
        .to_string();
    if header[345] != 0 {
        return Err(bad(format!(
            "entry {name:?} has a name prefix, which a copy never has"
        )));
    }
    let len =
        parse_octal(&header[124..136]).ok_or_else(|| bad(format!("entry {name:?}: bad size")))?;
    Ok((name, len, header[156]))
}

/// Checks the files the tar stream brought against its list: each listed file there with the
/// listed length and SHA-256, and none unlisted.
fn check_tar_files(m: &CopyManifest, written: &[CopiedFile], origin: &str) -> Result<()> {
    for f in &m.files {
        let Some(w) = written.iter().find(|w| w.name == f.name) else {
            return Err(bad_tar(
                origin,
                format!("{} is listed but not in the stream", f.name),
            ));
        };
        check_file(f, w.len, &w.sha256, origin)?;
    }
    if let Some(extra) = written
        .iter()
        .find(|w| !m.files.iter().any(|f| f.name == w.name))
    {
        return Err(bad_tar(
            origin,
            format!("{} is in the stream but not listed", extra.name),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> CopyManifest {
        CopyManifest {
            generation: 102,
            identity: "17e08784281d4e0f3c024aba03314c84".into(),
            files: ["0000000000002488.seg", "MANIFEST", "butter.id"]
                .iter()
                .enumerate()
                .map(|(i, n)| CopiedFile {
                    name: (*n).into(),
                    len: 10 + i as u64,
                    sha256: format!("{i:064x}"),
                })
                .collect(),
        }
    }

    #[test]
    fn the_list_reads_back_as_written() {
        let m = sample();
        assert_eq!(CopyManifest::decode(&m.encode(), "t").unwrap(), m);
    }

    #[test]
    fn the_list_refuses_what_encode_never_writes() {
        let text = sample().encode();
        let cases = [
            // A path, not a generation's file name.
            text.replace("0000000000002488.seg", "../../etc/passwd"),
            // Cut short.
            text.replace("end\n", ""),
            // Totals that do not add up.
            text.replace("bytes=33", "bytes=34"),
            // Another format.
            text.replace("format=1", "format=2"),
            // A name twice.
            text.replace("file MANIFEST", "file butter.id"),
            // Text after the end.
            format!("{text}file MANIFEST 1 {}\n", "0".repeat(64)),
        ];
        for bad in cases {
            assert_ne!(bad, text);
            assert!(
                matches!(CopyManifest::decode(&bad, "t"), Err(ToolError::BadCopy(_))),
                "accepted: {bad}"
            );
        }
    }

    #[test]
    fn tar_headers_carry_their_checksum_and_fields() {
        let h = tar_header("butter-copy/MANIFEST", 820, false, 1_700_000_000);
        assert_eq!(parse_octal(&h[148..156]), Some(header_sum(&h)));
        assert_eq!(parse_octal(&h[124..136]), Some(820));
        assert_eq!(&h[257..263], b"ustar\0");
        assert_eq!(h[156], b'0');
        assert!(generation_file_name("00000000000000ff.seg"));
        assert!(!generation_file_name("00000000000000FF.seg"));
        assert!(!generation_file_name("butter-copy.manifest"));
    }
}
