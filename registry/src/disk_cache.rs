//! The persistent compile cache: generated NKI source (and, on a Trainium host, what `nki.jit`
//! made of it) kept on disk across processes, keyed by the content of the traced program.
//!
//! The key is the blake3 hash of the format version, the target and the program's canonical
//! JSON, so any change to a kernel's instructions, shapes, dtypes or source lines is a new
//! entry. An entry is one file: a header line `torch-nki-cache <version> <blake3 of the body>`
//! and a JSON body. Writes go to a temporary file in the same directory and are renamed into
//! place, so readers never see half an entry and concurrent writers of the same entry both
//! succeed (the last rename wins; both wrote the same bytes). A truncated or corrupted entry
//! fails its checksum: [`DiskCache::get`] reports it as [`Lookup::Corrupt`] and the caller
//! rebuilds it.

use nki_core::ir::Program;
use serde::{Deserialize, Serialize};
use std::fs;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// Bumped whenever the entry format or the meaning of its contents changes.
pub const FORMAT_VERSION: u32 = 1;

/// What the cache keeps for one program.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CacheEntry {
    /// The kernel's name.
    pub kernel: String,
    /// The target it was compiled for.
    pub target: String,
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

    /// The key of `program`: hex blake3 of the format version, target and canonical program.
    pub fn key(program: &Program) -> String {
        let mut h = blake3::Hasher::new();
        h.update(format!("torch-nki-cache {FORMAT_VERSION}\n").as_bytes());
        h.update(program.target.name().as_bytes());
        h.update(b"\n");
        h.update(program.to_json().as_bytes());
        h.finalize().to_hex().to_string()
    }

    fn path(&self, key: &str) -> PathBuf {
        self.dir.join(format!("{key}.{ENTRY_EXT}"))
    }

    /// The entry under `key`, checked against its checksum.
    pub fn get(&self, key: &str) -> io::Result<Lookup> {
        let path = self.path(key);
        let bytes = match fs::read(&path) {
            Ok(b) => b,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Lookup::Miss),
            Err(e) => return Err(e),
        };
        let corrupt = |reason: String| Lookup::Corrupt {
            path: path.clone(),
            reason,
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
        match serde_json::from_slice(body) {
            Ok(entry) => Ok(Lookup::Hit(entry)),
            Err(e) => Ok(corrupt(format!("unreadable body: {e}"))),
        }
    }

    /// Stores `entry` under `key` atomically (temporary file, then rename).
    pub fn put(&self, key: &str, entry: &CacheEntry) -> io::Result<()> {
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

    fn entries(&self) -> io::Result<Vec<PathBuf>> {
        let read = match fs::read_dir(&self.dir) {
            Ok(r) => r,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(e),
        };
        let mut out = Vec::new();
        for e in read {
            let path = e?.path();
            if path.extension().is_some_and(|x| x == ENTRY_EXT) {
                out.push(path);
            }
        }
        Ok(out)
    }

    /// How many entries and bytes the cache holds.
    pub fn info(&self) -> io::Result<CacheInfo> {
        let mut info = CacheInfo::default();
        for p in self.entries()? {
            info.entries += 1;
            info.bytes += fs::metadata(&p)?.len();
        }
        Ok(info)
    }

    /// Removes every entry; returns how many there were.
    pub fn clear(&self) -> io::Result<usize> {
        let entries = self.entries()?;
        for p in &entries {
            match fs::remove_file(p) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => return Err(e),
            }
        }
        Ok(entries.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(source: &str) -> CacheEntry {
        CacheEntry {
            kernel: "k".into(),
            target: "trn2".into(),
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

    #[test]
    fn an_entry_round_trips_and_info_and_clear_see_it() {
        let c = scratch("roundtrip");
        assert_eq!(c.get("abc").unwrap(), Lookup::Miss);
        assert_eq!(c.info().unwrap(), CacheInfo::default());
        c.put("abc", &entry("def k(): pass\n")).unwrap();
        assert_eq!(c.get("abc").unwrap(), Lookup::Hit(entry("def k(): pass\n")));
        let info = c.info().unwrap();
        assert_eq!(info.entries, 1);
        assert!(info.bytes > 20);
        assert_eq!(c.clear().unwrap(), 1);
        assert_eq!(c.get("abc").unwrap(), Lookup::Miss);
        fs::remove_dir_all(c.dir()).unwrap();
    }

    #[test]
    fn truncated_corrupted_and_foreign_entries_are_reported_not_returned() {
        let c = scratch("corrupt");
        let path = c.path("k1");
        let reason = |c: &DiskCache| match c.get("k1").unwrap() {
            Lookup::Corrupt { path: p, reason } => {
                assert_eq!(p, path);
                reason
            }
            other => panic!("expected corrupt, got {other:?}"),
        };
        c.put("k1", &entry("x = 1\n")).unwrap();
        let good = fs::read(&path).unwrap();
        // Truncated.
        fs::write(&path, &good[..good.len() - 5]).unwrap();
        assert!(reason(&c).contains("checksum"));
        // One byte flipped in the body.
        let mut flipped = good.clone();
        let last = flipped.len() - 3;
        flipped[last] ^= 0x20;
        fs::write(&path, &flipped).unwrap();
        assert!(reason(&c).contains("checksum"));
        // Cut inside the header, a foreign file, another format version.
        fs::write(&path, &good[..10]).unwrap();
        assert!(reason(&c).contains("no header"));
        fs::write(&path, b"hello world\n{}").unwrap();
        assert!(reason(&c).contains("malformed header"));
        let text = String::from_utf8(good.clone()).unwrap();
        fs::write(&path, text.replacen("cache 1 ", "cache 99 ", 1)).unwrap();
        assert!(reason(&c).contains("format version 99"));
        // Rebuilding replaces it.
        c.put("k1", &entry("x = 1\n")).unwrap();
        assert_eq!(c.get("k1").unwrap(), Lookup::Hit(entry("x = 1\n")));
        fs::remove_dir_all(c.dir()).unwrap();
    }

    #[test]
    fn concurrent_writers_of_one_entry_all_succeed_and_leave_a_valid_entry() {
        let c = scratch("race");
        let big = "y = 2\n".repeat(20_000);
        std::thread::scope(|s| {
            for _ in 0..8 {
                s.spawn(|| {
                    for _ in 0..10 {
                        c.put("same", &entry(&big)).unwrap();
                        match c.get("same").unwrap() {
                            Lookup::Hit(e) => assert_eq!(e.source.len(), big.len()),
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
