//! The persistent compile cache: generated NKI source (and, on a Trainium host, what `nki.jit`
//! made of it) kept on disk across processes, keyed by the content of the traced program.
//!
//! The key ([`EntryKey`]) is the blake3 hash of the format version, the target and the program's
//! canonical JSON, so any change to a kernel's instructions, shapes, dtypes or source lines is a
//! new entry; it also carries the op, its signature and the target in words. An entry is one
//! file: a header line `torch-nki-cache <version> <blake3 of the body>` and a JSON body that
//! records the key it was written for (digest, op, signature, target) next to its content.
//! [`DiskCache::get`] checks both: a truncated or corrupted entry fails its checksum, and an
//! entry that is intact but belongs to another key (copied or renamed over this one, swapped
//! with another op's) fails the key check; either is [`Lookup::Corrupt`], never served, and the
//! caller rebuilds it. Writes go to a temporary file in the same directory and are renamed into
//! place, so readers never see half an entry and concurrent writers of the same entry both
//! succeed (the last rename wins; both wrote the same bytes).

use nki_core::ir::{HbmKind, Program};
use serde::{Deserialize, Serialize};
use std::fs;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// Bumped whenever the entry format or the meaning of its contents changes.
pub const FORMAT_VERSION: u32 = 2;

/// What an entry is for: the digest that names its file, and the op, signature and target it
/// was written for (recorded in the entry and checked on every read).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct EntryKey {
    /// Hex blake3 of the format version, the target and the canonical program.
    pub digest: String,
    /// The kernel's name.
    pub op: String,
    /// The program's HBM tensors, `x: f32[4, 8], ... -> out0: f32[4, 8]`.
    pub signature: String,
    /// The target's name.
    pub target: String,
}

impl std::fmt::Display for EntryKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let short = self.digest.get(..12).unwrap_or(&self.digest);
        write!(
            f,
            "{}({}) on {} [{short}]",
            self.op, self.signature, self.target
        )
    }
}

/// What the cache keeps for one program.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CacheEntry {
    /// The key it was written for.
    pub key: EntryKey,
    /// The generated NKI Python source.
    pub source: String,
    /// Whether the program passed validation (only validated programs are stored, so `true`;
    /// kept explicit for readers of the files).
    pub validated: bool,
}

/// The result of looking an entry up.
#[derive(Debug, PartialEq, Eq)]
pub enum Lookup {
    /// A valid entry.
    Hit(CacheEntry),
    /// No entry under this key.
    Miss,
    /// An entry exists but is truncated, corrupted or of another format version.
    Corrupt {
        /// The entry's file.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },
}

/// Size of a cache directory.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CacheInfo {
    /// Number of entries.
    pub entries: usize,
    /// Their total size in bytes.
    pub bytes: u64,
}

/// A cache directory.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DiskCache {
    dir: PathBuf,
}

/// Suffix of entry files.
const ENTRY_EXT: &str = "nkicache";

impl DiskCache {
    /// A cache in `dir` (created on the first write).
    pub fn at(dir: impl Into<PathBuf>) -> DiskCache {
        DiskCache { dir: dir.into() }
    }

    /// The cache in `$TORCH_NKI_CACHE_DIR`, else `$XDG_CACHE_HOME/torch-nki`, else
    /// `~/.cache/torch-nki`, else `torch-nki-cache` under the system temporary directory.
    pub fn from_env() -> DiskCache {
        let var = |name: &str| std::env::var_os(name).filter(|v| !v.is_empty());
        let dir = if let Some(d) = var("TORCH_NKI_CACHE_DIR") {
            PathBuf::from(d)
        } else if let Some(d) = var("XDG_CACHE_HOME") {
            PathBuf::from(d).join("torch-nki")
        } else if let Some(h) = var("HOME") {
            PathBuf::from(h).join(".cache").join("torch-nki")
        } else {
            std::env::temp_dir().join("torch-nki-cache")
        };
        DiskCache { dir }
    }

    /// The directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The key of `program`: its digest (hex blake3 of the format version, target and
    /// canonical program), op, signature and target.
    pub fn key(program: &Program) -> EntryKey {
        let mut h = blake3::Hasher::new();
        h.update(format!("torch-nki-cache {FORMAT_VERSION}\n").as_bytes());
        h.update(program.target.name().as_bytes());
        h.update(b"\n");
        h.update(program.to_json().as_bytes());
        let tensors = |kind: HbmKind| {
            program
                .hbm
                .iter()
                .filter(|d| d.kind == kind)
                .map(|d| format!("{}: {}{:?}", d.name, d.dtype, d.shape))
                .collect::<Vec<_>>()
                .join(", ")
        };
        EntryKey {
            digest: h.finalize().to_hex().to_string(),
            op: program.name.clone(),
            signature: format!(
                "{} -> {}",
                tensors(HbmKind::Input),
                tensors(HbmKind::Output)
            ),
            target: program.target.name().to_string(),
        }
    }

    fn path(&self, digest: &str) -> PathBuf {
        self.dir.join(format!("{digest}.{ENTRY_EXT}"))
    }

    /// The entry for `key`, checked against its checksum and against the key it records.
    pub fn get(&self, key: &EntryKey) -> io::Result<Lookup> {
        let path = self.path(&key.digest);
        let corrupt = |reason: String| Lookup::Corrupt {
            path: path.clone(),
            reason,
        };
        match fs::metadata(&path) {
            Ok(m) if !m.is_file() => return Ok(corrupt("not a regular file".into())),
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Lookup::Miss),
            Err(e) => return Err(e),
        }
        let bytes = match fs::read(&path) {
            Ok(b) => b,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Lookup::Miss),
            Err(e) => return Err(e),
        };
        let Some(newline) = bytes.iter().position(|&b| b == b'\n') else {
            return Ok(corrupt("no header line".into()));
        };
        let (header, body) = (&bytes[..newline], &bytes[newline + 1..]);
        let header = String::from_utf8_lossy(header);
        let fields: Vec<&str> = header.split(' ').collect();
        let [magic, version, checksum] = fields[..] else {
            return Ok(corrupt(format!("malformed header `{header}`")));
        };
        if magic != "torch-nki-cache" {
            return Ok(corrupt(format!("malformed header `{header}`")));
        }
        if version != FORMAT_VERSION.to_string() {
            return Ok(corrupt(format!(
                "format version {version}, this build reads {FORMAT_VERSION}"
            )));
        }
        if blake3::hash(body).to_hex().as_str() != checksum {
            return Ok(corrupt("checksum mismatch (truncated or corrupted)".into()));
        }
        match serde_json::from_slice::<CacheEntry>(body) {
            Ok(entry) if entry.key != *key => Ok(corrupt(format!(
                "it was written for {}, not for {key}",
                entry.key
            ))),
            Ok(entry) => Ok(Lookup::Hit(entry)),
            Err(e) => Ok(corrupt(format!("unreadable body: {e}"))),
        }
    }

    /// Stores `entry` under its key atomically (temporary file, then rename).
    pub fn put(&self, entry: &CacheEntry) -> io::Result<()> {
        let key = &entry.key.digest;
        static NEXT: AtomicU64 = AtomicU64::new(0);
        fs::create_dir_all(&self.dir)?;
        let body = serde_json::to_vec(entry).map_err(io::Error::other)?;
        let header = format!(
            "torch-nki-cache {FORMAT_VERSION} {}\n",
            blake3::hash(&body).to_hex()
        );
        let tmp = self.dir.join(format!(
            ".{key}.{}.{}.tmp",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        ));
        let written = (|| {
            let mut f = fs::File::create(&tmp)?;
            f.write_all(header.as_bytes())?;
            f.write_all(&body)?;
            f.sync_all()?;
            fs::rename(&tmp, self.path(key))
        })();
        if written.is_err() {
            let _ = fs::remove_file(&tmp);
        }
        written
    }

    /// Every entry path (`*.nkicache`, whatever it is on disk) and every temporary file a
    /// writer left behind (`.*.tmp`), with whether it is a temporary.
    fn entries(&self) -> io::Result<Vec<(PathBuf, bool)>> {
        let read = match fs::read_dir(&self.dir) {
            Ok(r) => r,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(e),
        };
        let mut out = Vec::new();
        for e in read {
            let path = e?.path();
            let name = path.file_name().unwrap_or_default().to_string_lossy();
            if path.extension().is_some_and(|x| x == ENTRY_EXT) {
                out.push((path, false));
            } else if name.starts_with('.') && name.ends_with(".tmp") {
                out.push((path, true));
            }
        }
        Ok(out)
    }

    /// How many entries and bytes the cache holds (regular files only: a directory or other
    /// file in an entry's place is no entry).
    pub fn info(&self) -> io::Result<CacheInfo> {
        let mut info = CacheInfo::default();
        for (p, temporary) in self.entries()? {
            match fs::symlink_metadata(&p) {
                Ok(m) if m.is_file() && !temporary => {
                    info.entries += 1;
                    info.bytes += m.len();
                }
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => return Err(e),
            }
        }
        Ok(info)
    }

    /// Removes every entry, whatever is in an entry's place (a directory, a symlink) and the
    /// temporary files of interrupted writers; returns how many entries there were.
    pub fn clear(&self) -> io::Result<usize> {
        let mut removed = 0;
        for (p, temporary) in self.entries()? {
            let gone = match fs::symlink_metadata(&p) {
                Ok(m) if m.is_dir() => fs::remove_dir_all(&p),
                Ok(_) => fs::remove_file(&p),
                Err(e) => Err(e),
            };
            match gone {
                Ok(()) => removed += usize::from(!temporary),
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => return Err(e),
            }
        }
        Ok(removed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(digest: &str, op: &str) -> EntryKey {
        EntryKey {
            digest: digest.into(),
            op: op.into(),
            signature: "x: f32[4, 4] -> out0: f32[4, 4]".into(),
            target: "trn2".into(),
        }
    }

    fn entry(digest: &str, source: &str) -> CacheEntry {
        CacheEntry {
            key: key(digest, "k"),
            source: source.into(),
            validated: true,
        }
    }

    fn scratch(name: &str) -> DiskCache {
        let dir = std::env::temp_dir().join(format!(
            "torch-nki-disk-cache-{name}-{}",
            std::process::id()
        ));
        let _ = fs::remove_dir_all(&dir);
        DiskCache::at(dir)
    }

    fn reason(c: &DiskCache, key: &EntryKey) -> String {
        match c.get(key).unwrap() {
            Lookup::Corrupt { path, reason } => {
                assert_eq!(path, c.path(&key.digest));
                reason
            }
            other => panic!("expected corrupt, got {other:?}"),
        }
    }

    #[test]
    fn an_entry_round_trips_and_info_and_clear_see_it() {
        let c = scratch("roundtrip");
        let e = entry("abc", "def k(): pass\n");
        assert_eq!(c.get(&e.key).unwrap(), Lookup::Miss);
        assert_eq!(c.info().unwrap(), CacheInfo::default());
        c.put(&e).unwrap();
        assert_eq!(c.get(&e.key).unwrap(), Lookup::Hit(e.clone()));
        let info = c.info().unwrap();
        assert_eq!(info.entries, 1);
        assert!(info.bytes > 20);
        assert_eq!(c.clear().unwrap(), 1);
        assert_eq!(c.get(&e.key).unwrap(), Lookup::Miss);
        fs::remove_dir_all(c.dir()).unwrap();
    }

    #[test]
    fn truncated_corrupted_and_foreign_entries_are_reported_not_returned() {
        let c = scratch("corrupt");
        let e = entry("k1", "x = 1\n");
        let path = c.path("k1");
        c.put(&e).unwrap();
        let good = fs::read(&path).unwrap();
        // Truncated.
        fs::write(&path, &good[..good.len() - 5]).unwrap();
        assert!(reason(&c, &e.key).contains("checksum"));
        // One byte flipped in the body.
        let mut flipped = good.clone();
        let last = flipped.len() - 3;
        flipped[last] ^= 0x20;
        fs::write(&path, &flipped).unwrap();
        assert!(reason(&c, &e.key).contains("checksum"));
        // Cut inside the header, a foreign file, another format version.
        fs::write(&path, &good[..10]).unwrap();
        assert!(reason(&c, &e.key).contains("no header"));
        fs::write(&path, b"hello world\n{}").unwrap();
        assert!(reason(&c, &e.key).contains("malformed header"));
        let text = String::from_utf8(good.clone()).unwrap();
        let other = text.replacen(&format!("cache {FORMAT_VERSION} "), "cache 99 ", 1);
        fs::write(&path, other).unwrap();
        assert!(reason(&c, &e.key).contains("format version 99"));
        // Rebuilding replaces it.
        c.put(&e).unwrap();
        assert_eq!(c.get(&e.key).unwrap(), Lookup::Hit(e.clone()));
        fs::remove_dir_all(c.dir()).unwrap();
    }

    #[test]
    fn an_intact_entry_under_another_key_is_reported_not_served() {
        let c = scratch("misplaced");
        let add = CacheEntry {
            key: key("aaa", "add"),
            source: "def add(): pass\n".into(),
            validated: true,
        };
        let softmax = CacheEntry {
            key: key("bbb", "softmax"),
            source: "def softmax(): pass\n".into(),
            validated: true,
        };
        c.put(&add).unwrap();
        c.put(&softmax).unwrap();
        let (a, b) = (c.path("aaa"), c.path("bbb"));
        // Swapped between two ops.
        let (bytes_a, bytes_b) = (fs::read(&a).unwrap(), fs::read(&b).unwrap());
        fs::write(&a, &bytes_b).unwrap();
        fs::write(&b, &bytes_a).unwrap();
        let why = reason(&c, &add.key);
        assert!(why.contains("written for softmax("), "{why}");
        assert!(why.contains("not for add("), "{why}");
        assert!(reason(&c, &softmax.key).contains("written for add("));
        // Copied over the same op's entry for another signature: same op, other key.
        let other_shape = CacheEntry {
            key: EntryKey {
                signature: "x: f32[8, 4] -> out0: f32[8, 4]".into(),
                ..key("ccc", "add")
            },
            ..add.clone()
        };
        fs::write(&a, &bytes_a).unwrap();
        fs::copy(&a, c.path("ccc")).unwrap();
        let why = reason(&c, &other_shape.key);
        assert!(
            why.contains("f32[4, 4]") && why.contains("f32[8, 4]"),
            "{why}"
        );
        // Moved: renamed to another key's file name.
        fs::rename(&a, c.path("ddd")).unwrap();
        assert_eq!(c.get(&add.key).unwrap(), Lookup::Miss);
        assert!(reason(&c, &key("ddd", "add")).contains("[aaa]"));
        fs::remove_dir_all(c.dir()).unwrap();
    }

    #[test]
    fn a_directory_in_an_entrys_place_is_corrupt_and_clear_removes_it() {
        let c = scratch("dir");
        let e = entry("k2", "x = 2\n");
        fs::create_dir_all(c.path("k2").join("inside")).unwrap();
        fs::write(c.dir().join(".k3.1.0.tmp"), b"half").unwrap();
        assert!(reason(&c, &e.key).contains("not a regular file"));
        assert!(c.put(&e).is_err());
        assert_eq!(c.info().unwrap().entries, 0);
        assert_eq!(c.clear().unwrap(), 1);
        assert_eq!(fs::read_dir(c.dir()).unwrap().count(), 0);
        c.put(&e).unwrap();
        assert_eq!(c.get(&e.key).unwrap(), Lookup::Hit(e));
        fs::remove_dir_all(c.dir()).unwrap();
    }

    #[test]
    fn concurrent_writers_of_one_entry_all_succeed_and_leave_a_valid_entry() {
        let c = scratch("race");
        let big = entry("same", &"y = 2\n".repeat(20_000));
        std::thread::scope(|s| {
            for _ in 0..8 {
                s.spawn(|| {
                    for _ in 0..10 {
                        c.put(&big).unwrap();
                        match c.get(&big.key).unwrap() {
                            Lookup::Hit(e) => assert_eq!(e.source.len(), big.source.len()),
                            other => panic!("a reader saw {other:?}"),
                        }
                    }
                });
            }
        });
        assert_eq!(c.info().unwrap().entries, 1);
        // No temporary files left behind.
        assert_eq!(fs::read_dir(c.dir()).unwrap().count(), 1);
        fs::remove_dir_all(c.dir()).unwrap();
    }
}
