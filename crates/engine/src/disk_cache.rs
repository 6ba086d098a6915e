//! The compilation cache on disk: compiled executables serialized by the
//! PJRT plugin, so that a new process skips XLA compiles an earlier one did.
//!
//! Where: `$TORCH_TPU_CACHE_DIR` if set (`off` disables the cache), else
//! `$XDG_CACHE_HOME/torch_tpu_rs`, else `~/.cache/torch_tpu_rs`.
//!
//! Key: SHA-256 of the program text, the compile options, and an
//! [`Identity`] of everything else that shapes the compiled code: the plugin
//! file (path, size, mtime), PJRT API version, platform name and version,
//! this package's version, the host CPU (model and flags) and the
//! environment that changes XLA's output (`XLA_FLAGS`,
//! `TORCH_TPU_XLA_CPU_PARALLEL`).
//!
//! Entry file `<hex key>.pjrtexe`: magic, format version (u32 LE), key (32
//! bytes), payload length (u64 LE), payload (the serialized executable),
//! SHA-256 of all that. Writes go to a uniquely named temp file in the same
//! directory, renamed over the entry: readers see a whole entry or none, and
//! two processes storing one key at once each rename a complete file. An
//! entry that is short, long, garbled, for another key or rejected by the
//! plugin counts as corrupt, is deleted (best effort) and recompiled.
//!
//! If the plugin cannot serialize executables, nothing is stored (the
//! program text alone saves nothing) and the mode reads `"unsupported"`.
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

pub const MAGIC: &[u8; 8] = b"TPURSXC\n";
pub const FORMAT_VERSION: u32 = 1;
const HEADER_LEN: usize = 8 + 4 + 32 + 8;
const CHECKSUM_LEN: usize = 32;
pub const ENTRY_EXT: &str = "pjrtexe";

pub type Key = [u8; 32];

// ---------------------------------------------------------------------------
// SHA-256 (FIPS 180-4).

const K: [u32; 64] = [
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
];

/// Incremental SHA-256.
#[derive(Clone)]
pub struct Sha256 {
    h: [u32; 8],
    buf: [u8; 64],
    buf_len: usize,
    total: u64,
}

impl Default for Sha256 {
    fn default() -> Self {
        Sha256 {
            h: [0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19],
            buf: [0; 64],
            buf_len: 0,
            total: 0,
        }
    }
}

impl Sha256 {
    pub fn update(&mut self, mut data: &[u8]) -> &mut Self {
        self.total = self.total.wrapping_add(data.len() as u64);
        if self.buf_len > 0 {
            let n = (64 - self.buf_len).min(data.len());
            self.buf[self.buf_len..self.buf_len + n].copy_from_slice(&data[..n]);
            self.buf_len += n;
            data = &data[n..];
            if self.buf_len < 64 {
                return self;
            }
            let block = self.buf;
            self.block(&block);
            self.buf_len = 0;
        }
        let mut chunks = data.chunks_exact(64);
        for c in &mut chunks {
            self.block(c.try_into().unwrap());
        }
        let rest = chunks.remainder();
        self.buf[..rest.len()].copy_from_slice(rest);
        self.buf_len = rest.len();
        self
    }

    /// Adds a length-prefixed field (so that field boundaries are unambiguous).
    pub fn field(&mut self, data: &[u8]) -> &mut Self {
        self.update(&(data.len() as u64).to_le_bytes()).update(data)
    }

    pub fn finish(&self) -> [u8; 32] {
        let mut s = self.clone();
        let bits = s.total.wrapping_mul(8);
        let pad_len = if s.buf_len < 56 { 56 - s.buf_len } else { 120 - s.buf_len };
        let mut pad = [0u8; 72];
        pad[0] = 0x80;
        pad[pad_len..pad_len + 8].copy_from_slice(&bits.to_be_bytes());
        s.update(&pad[..pad_len + 8]);
        debug_assert_eq!(s.buf_len, 0);
        let mut out = [0u8; 32];
        for (i, w) in s.h.iter().enumerate() {
            out[4 * i..4 * i + 4].copy_from_slice(&w.to_be_bytes());
        }
        out
    }

    fn block(&mut self, block: &[u8; 64]) {
        let mut w = [0u32; 64];
        for (i, c) in block.chunks_exact(4).enumerate() {
            w[i] = u32::from_be_bytes(c.try_into().unwrap());
        }
        for i in 16..64 {
            let s0 = w[i - 15].rotate_right(7) ^ w[i - 15].rotate_right(18) ^ (w[i - 15] >> 3);
            let s1 = w[i - 2].rotate_right(17) ^ w[i - 2].rotate_right(19) ^ (w[i - 2] >> 10);
            w[i] = w[i - 16].wrapping_add(s0).wrapping_add(w[i - 7]).wrapping_add(s1);
        }
        let mut v = self.h;
        for i in 0..64 {
            let [a, b, c, d, e, f, g, h] = v;
            let s1 = e.rotate_right(6) ^ e.rotate_right(11) ^ e.rotate_right(25);
            let ch = (e & f) ^ (!e & g);
            let t1 = h.wrapping_add(s1).wrapping_add(ch).wrapping_add(K[i]).wrapping_add(w[i]);
            let s0 = a.rotate_right(2) ^ a.rotate_right(13) ^ a.rotate_right(22);
            let t2 = s0.wrapping_add((a & b) ^ (a & c) ^ (b & c));
            v = [t1.wrapping_add(t2), a, b, c, d.wrapping_add(t1), e, f, g];
        }
        for (s, x) in self.h.iter_mut().zip(v) {
            *s = s.wrapping_add(x);
        }
    }
}

pub fn sha256(data: &[u8]) -> [u8; 32] {
    Sha256::default().update(data).finish()
}

pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

// ---------------------------------------------------------------------------
// Location, identity, key.

/// The cache directory from the three settings that choose it (`None` =
/// disabled, or no home directory to put it in).
pub fn resolve_dir(cache_dir: Option<&str>, xdg_cache_home: Option<&str>, home: Option<&str>) -> Option<PathBuf> {
    match cache_dir.map(str::trim) {
        Some(d) if d.eq_ignore_ascii_case("off") => return None,
        Some(d) if !d.is_empty() => return Some(PathBuf::from(d)),
        _ => {}
    }
    // XDG: a relative XDG_CACHE_HOME is invalid and ignored.
    if let Some(x) = xdg_cache_home.filter(|x| Path::new(x).is_absolute()) {
        return Some(Path::new(x).join("torch_tpu_rs"));
    }
    home.filter(|h| !h.is_empty()).map(|h| Path::new(h).join(".cache").join("torch_tpu_rs"))
}

/// [`resolve_dir`] from `TORCH_TPU_CACHE_DIR`, `XDG_CACHE_HOME`, `HOME`.
pub fn dir_from_env() -> Option<PathBuf> {
    let var = |k: &str| std::env::var(k).ok();
    resolve_dir(var("TORCH_TPU_CACHE_DIR").as_deref(), var("XDG_CACHE_HOME").as_deref(), var("HOME").as_deref())
}

/// Everything besides the program and its options that decides what the
/// compiled executable is.
#[derive(Clone, Debug, PartialEq)]
pub struct Identity {
    pub plugin_path: String,
    pub plugin_size: u64,
    pub plugin_mtime_ns: u128,
    pub api_version: (i32, i32),
    pub platform_name: String,
    pub platform_version: String,
    pub package_version: String,
    /// Host CPU and compile-relevant environment.
    pub host: String,
}

impl Identity {
    pub fn of_client(client: &pjrt::Client) -> Identity {
        let path = client.api().path();
        let meta = std::fs::metadata(path).ok();
        let mtime = meta.as_ref().and_then(|m| m.modified().ok());
        Identity {
            plugin_path: path.display().to_string(),
            plugin_size: meta.as_ref().map_or(0, |m| m.len()),
            plugin_mtime_ns: mtime
                .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
                .map_or(0, |d| d.as_nanos()),
            api_version: client.api().version(),
            platform_name: client.platform_name(),
            platform_version: client.platform_version(),
            package_version: env!("CARGO_PKG_VERSION").to_string(),
            host: host_identity(),
        }
    }

    pub fn digest(&self) -> [u8; 32] {
        let mut h = Sha256::default();
        h.field(b"torch_tpu_rs identity v1")
            .field(self.plugin_path.as_bytes())
            .field(&self.plugin_size.to_le_bytes())
            .field(&self.plugin_mtime_ns.to_le_bytes())
            .field(&self.api_version.0.to_le_bytes())
            .field(&self.api_version.1.to_le_bytes())
            .field(self.platform_name.as_bytes())
            .field(self.platform_version.as_bytes())
            .field(self.package_version.as_bytes())
            .field(self.host.as_bytes());
        h.finish()
    }
}

/// The first CPU's model name and flags (XLA CPU compiles for the host's
/// instruction set) plus the environment that changes XLA's output.
fn host_identity() -> String {
    let mut s = String::new();
    if let Ok(info) = std::fs::read_to_string("/proc/cpuinfo") {
        let first = info.split("\n\n").next().unwrap_or("");
        for line in first.lines() {
            let name = line.split(':').next().unwrap_or("").trim();
            if matches!(name, "model name" | "flags" | "Features" | "CPU part") {
                s.push_str(line.trim());
                s.push('\n');
            }
        }
    }
    // The device count sets the plugin's worker threads, which its loops
    // are split for (`xla_cpu_devices.rs`).
    for var in ["XLA_FLAGS", "TORCH_TPU_XLA_CPU_PARALLEL", crate::xla_cpu_devices::COUNT_VAR] {
        s.push_str(&format!("{var}={}\n", std::env::var(var).unwrap_or_default()));
    }
    // The flags the engine gives the XLA CPU plugin (entries compiled
    // without them may hold its YNNPACK miscompiles).
    s.push_str(crate::xla_cpu_flags::YNN_FUSIONS);
    s.push('\n');
    s.push_str(&crate::compile_affinity::policy_tag());
    s
}

/// The cache key of compiling `program` with `options` under `identity`.
pub fn key(identity: &Identity, program: &str, options: &[u8]) -> Key {
    Sha256::default()
        .field(b"torch_tpu_rs compile cache key v1")
        .field(&identity.digest())
        .field(program.as_bytes())
        .field(options)
        .finish()
}

// ---------------------------------------------------------------------------
// Entries.

pub fn encode_entry(key: &Key, payload: &[u8]) -> Vec<u8> {
    let mut v = Vec::with_capacity(HEADER_LEN + payload.len() + CHECKSUM_LEN);
    v.extend_from_slice(MAGIC);
    v.extend_from_slice(&FORMAT_VERSION.to_le_bytes());
    v.extend_from_slice(key);
    v.extend_from_slice(&(payload.len() as u64).to_le_bytes());
    v.extend_from_slice(payload);
    let sum = sha256(&v);
    v.extend_from_slice(&sum);
    v
}

/// The payload of a well-formed entry for `key`, or why it is not one.
pub fn decode_entry<'a>(key: &Key, bytes: &'a [u8]) -> Result<&'a [u8], String> {
    if bytes.len() < HEADER_LEN + CHECKSUM_LEN {
        return Err(format!("truncated ({} bytes)", bytes.len()));
    }
    if &bytes[..8] != MAGIC {
        return Err("bad magic".into());
    }
    let version = u32::from_le_bytes(bytes[8..12].try_into().unwrap());
    if version != FORMAT_VERSION {
        return Err(format!("format version {version}, expected {FORMAT_VERSION}"));
    }
    if &bytes[12..44] != key {
        return Err("entry is for another key".into());
    }
    let len = u64::from_le_bytes(bytes[44..52].try_into().unwrap());
    let expected = (HEADER_LEN + CHECKSUM_LEN) as u64 + len.min(u64::MAX / 2);
    if bytes.len() as u64 != expected {
        return Err(format!("length {} but the header says {expected}", bytes.len()));
    }
    let body_end = bytes.len() - CHECKSUM_LEN;
    if sha256(&bytes[..body_end]) != bytes[body_end..] {
        return Err("checksum mismatch".into());
    }
    Ok(&bytes[HEADER_LEN..body_end])
}

pub enum Lookup {
    Hit(Vec<u8>),
    Miss,
    /// Present but unusable (deleted); the reason.
    Corrupt(String),
}

/// What [`DiskCache::get_or_compile`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Outcome {
    /// The executable came from disk (no compile).
    pub from_disk: bool,
    /// A corrupt entry was found (and deleted) on the way.
    pub corrupt: bool,
}

/// Counters of one [`DiskCache`].
#[derive(Default, Debug)]
pub struct Stats {
    pub hits: AtomicU64,
    pub corrupt: AtomicU64,
    pub stores: AtomicU64,
    pub store_errors: AtomicU64,
}

pub struct DiskCache {
    dir: PathBuf,
    unsupported: AtomicBool,
    pub stats: Stats,
}

static TMP_COUNTER: AtomicU64 = AtomicU64::new(0);

impl DiskCache {
    /// A cache in `dir` (created on the first store).
    pub fn new(dir: impl Into<PathBuf>) -> DiskCache {
        DiskCache { dir: dir.into(), unsupported: AtomicBool::new(false), stats: Stats::default() }
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn entry_path(&self, key: &Key) -> PathBuf {
        self.dir.join(format!("{}.{ENTRY_EXT}", hex(key)))
    }

    /// `"executable"`, or `"unsupported"` once the plugin failed to serialize.
    pub fn mode(&self) -> &'static str {
        if self.unsupported.load(Ordering::Relaxed) {
            "unsupported"
        } else {
            "executable"
        }
    }

    /// Reads the entry for `key`. A corrupt entry is counted and deleted.
    pub fn load(&self, key: &Key) -> Lookup {
        let path = self.entry_path(key);
        let bytes = match std::fs::read(&path) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Lookup::Miss,
            Err(e) => return self.corrupt(key, format!("unreadable: {e}")),
        };
        match decode_entry(key, &bytes) {
            Ok(p) => Lookup::Hit(p.to_vec()),
            Err(why) => self.corrupt(key, why),
        }
    }

    /// Counts the entry for `key` as corrupt and deletes it (best effort).
    pub fn discard(&self, key: &Key, why: &str) {
        self.stats.corrupt.fetch_add(1, Ordering::Relaxed);
        let _ = std::fs::remove_file(self.entry_path(key));
        if std::env::var_os("TORCH_TPU_DEBUG_CACHE").is_some() {
            eprintln!("torch_tpu_rs: discarding compile cache entry {}: {why}", self.entry_path(key).display());
        }
    }

    fn corrupt(&self, key: &Key, why: String) -> Lookup {
        self.discard(key, &why);
        Lookup::Corrupt(why)
    }

    /// Writes the entry for `key` atomically (temp file + rename).
    pub fn store(&self, key: &Key, payload: &[u8]) -> std::io::Result<()> {
        let r = self.store_inner(key, payload);
        let c = if r.is_ok() { &self.stats.stores } else { &self.stats.store_errors };
        c.fetch_add(1, Ordering::Relaxed);
        r
    }

    fn store_inner(&self, key: &Key, payload: &[u8]) -> std::io::Result<()> {
        std::fs::create_dir_all(&self.dir)?;
        let n = TMP_COUNTER.fetch_add(1, Ordering::Relaxed);
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        let tmp = self.dir.join(format!(".{}.{}.{n}.{nanos}.tmp", hex(&key[..8]), std::process::id()));
        let write = || -> std::io::Result<()> {
            let mut f = std::fs::OpenOptions::new().write(true).create_new(true).open(&tmp)?;
            f.write_all(&encode_entry(key, payload))?;
            drop(f);
            std::fs::rename(&tmp, self.entry_path(key))
        };
        let r = write();
        if r.is_err() {
            let _ = std::fs::remove_file(&tmp);
        }
        r
    }

    /// The executable for `key`: loaded from disk when a valid entry exists
    /// and the plugin accepts it, otherwise `compile()`d and stored.
    /// Storing is best effort; only `compile`'s errors are returned.
    pub fn get_or_compile(
        &self,
        client: &Arc<pjrt::Client>,
        key: &Key,
        compile: impl FnOnce() -> pjrt::Result<pjrt::Executable>,
    ) -> pjrt::Result<(pjrt::Executable, Outcome)> {
        let mut corrupt = false;
        if !self.unsupported.load(Ordering::Relaxed) {
            match self.load(key) {
                Lookup::Hit(bytes) => match client.deserialize_executable(&bytes) {
                    Ok(exe) => {
                        self.stats.hits.fetch_add(1, Ordering::Relaxed);
                        return Ok((exe, Outcome { from_disk: true, corrupt: false }));
                    }
                    Err(e) => {
                        self.discard(key, &format!("the plugin rejected it: {e}"));
                        corrupt = true;
                    }
                },
                Lookup::Corrupt(_) => corrupt = true,
                Lookup::Miss => {}
            }
        }
        let exe = compile()?;
        if !self.unsupported.load(Ordering::Relaxed) {
            match exe.serialize() {
                Ok(bytes) => {
                    let _ = self.store(key, &bytes);
                }
                Err(e) if e.code == pjrt::code::UNIMPLEMENTED => {
                    self.unsupported.store(true, Ordering::Relaxed);
                }
                Err(_) => {}
            }
        }
        Ok((exe, Outcome { from_disk: false, corrupt }))
    }
}

// ---------------------------------------------------------------------------
// The engine's cache.

struct Global {
    cache: Option<DiskCache>,
    identity: Identity,
}

static GLOBAL: OnceLock<Global> = OnceLock::new();

fn global(engine: &crate::Engine) -> &'static Global {
    GLOBAL.get_or_init(|| Global {
        cache: dir_from_env().map(DiskCache::new),
        identity: Identity::of_client(&engine.client),
    })
}

/// `"off"`, `"executable"` or `"unsupported"` (the plugin cannot serialize
/// executables, so nothing is stored) for the engine's disk cache.
pub fn mode() -> &'static str {
    match GLOBAL.get() {
        Some(g) => g.cache.as_ref().map_or("off", |c| c.mode()),
        None if dir_from_env().is_none() => "off",
        None => "executable",
    }
}

/// Compiles `text` with `options` through the engine's disk cache; bumps the
/// engine's `cache_hits_disk` / `cache_disk_corrupt` metrics. Returns the
/// executable and whether it came from disk (then nothing was compiled).
pub fn compile_cached(
    engine: &crate::Engine,
    text: &str,
    options: &[u8],
    compile: impl FnOnce() -> pjrt::Result<pjrt::Executable>,
) -> pjrt::Result<(pjrt::Executable, bool)> {
    let g = global(engine);
    let Some(cache) = &g.cache else {
        return Ok((compile()?, false));
    };
    let k = key(&g.identity, text, options);
    let (exe, outcome) = cache.get_or_compile(&engine.client, &k, compile)?;
    let m = &engine.metrics;
    if outcome.from_disk {
        crate::metrics::Metrics::inc(&m.cache_hits_disk);
    }
    if outcome.corrupt {
        crate::metrics::Metrics::inc(&m.cache_disk_corrupt);
    }
    Ok((exe, outcome.from_disk))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_compiled_under_another_core_policy_are_other_entries() {
        // Which programs compile for one core changes the executable.
        assert!(host_identity().contains(&crate::compile_affinity::policy_tag()));
    }

    #[test]
    fn sha256_known_answers() {
        assert_eq!(hex(&sha256(b"")), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
        assert_eq!(hex(&sha256(b"abc")), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
        assert_eq!(
            hex(&sha256(b"abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq")),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"
        );
        let a = vec![b'a'; 1_000_000];
        assert_eq!(hex(&sha256(&a)), "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
        // Incremental updates in odd pieces give the same digest.
        let mut h = Sha256::default();
        for c in a.chunks(77) {
            h.update(c);
        }
        assert_eq!(h.finish(), sha256(&a));
    }

    #[test]
    fn dir_resolution() {
        let r = |c, x, h| resolve_dir(c, x, h);
        assert_eq!(r(Some("off"), Some("/x"), Some("/h")), None);
        assert_eq!(r(Some("OFF"), None, Some("/h")), None);
        assert_eq!(r(Some("/c"), Some("/x"), Some("/h")), Some(PathBuf::from("/c")));
        assert_eq!(r(Some(""), Some("/x"), Some("/h")), Some(PathBuf::from("/x/torch_tpu_rs")));
        assert_eq!(r(None, Some("rel"), Some("/h")), Some(PathBuf::from("/h/.cache/torch_tpu_rs")));
        assert_eq!(r(None, None, None), None);
    }
}
