//! The on-disk compilation cache: a second cache over the same directory
//! loads instead of compiling; truncated, garbled, misplaced or rejected
//! entries are counted, deleted and recompiled; concurrent writers of one
//! key never leave a broken entry; the key follows every identity field.
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use engine::disk_cache::{decode_entry, encode_entry, key, DiskCache, Identity, Lookup};

const ADD: &str = r#"
module {
  func.func @main(%a: tensor<4xf32>, %b: tensor<4xf32>) -> tensor<4xf32> {
    %0 = stablehlo.add %a, %b : tensor<4xf32>
    return %0 : tensor<4xf32>
  }
}"#;

fn client() -> Option<Arc<pjrt::Client>> {
    if !engine::runtime::plugin_path().map(|p| p.exists()).unwrap_or(false) {
        eprintln!("SKIPPED: no PJRT plugin found (set TORCH_TPU_PJRT_PLUGIN)");
        return None;
    }
    Some(engine::runtime::engine().expect("engine").client.clone())
}

fn temp_dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("tpu_disk_cache_{name}_{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

fn identity() -> Identity {
    Identity {
        plugin_path: "/p/plugin.so".into(),
        plugin_size: 1234,
        plugin_mtime_ns: 5678,
        api_version: (0, 81),
        platform_name: "cpu".into(),
        platform_version: "v1".into(),
        package_version: "0.1.0".into(),
        host: "flags: avx2".into(),
    }
}

fn run_add(client: &Arc<pjrt::Client>, exe: &pjrt::Executable) -> Vec<f32> {
    let dev = client.addressable_devices()[0];
    let bytes = |v: &[f32]| v.iter().flat_map(|x| x.to_ne_bytes()).collect::<Vec<u8>>();
    let a = client.buffer_from_host(&bytes(&[1., 2., 3., 4.]), pjrt::ElementType::F32, &[4], dev).unwrap();
    let b = client.buffer_from_host(&bytes(&[10., 20., 30., 40.]), pjrt::ElementType::F32, &[4], dev).unwrap();
    let out = exe.execute(&[&a, &b], None).unwrap();
    out[0].to_host_vec().unwrap().chunks_exact(4).map(|c| f32::from_ne_bytes(c.try_into().unwrap())).collect()
}

/// Compiles ADD through `cache`; returns (executable, from_disk, corrupt, compiled).
fn through(cache: &DiskCache, client: &Arc<pjrt::Client>, k: &[u8; 32]) -> (pjrt::Executable, bool, bool, bool) {
    let mut compiled = false;
    let (exe, outcome) = cache
        .get_or_compile(client, k, || {
            compiled = true;
            client.compile(ADD)
        })
        .unwrap();
    (exe, outcome.from_disk, outcome.corrupt, compiled)
}

#[test]
fn second_cache_loads_instead_of_compiling() {
    let Some(client) = client() else { return };
    let dir = temp_dir("warm");
    let id = Identity::of_client(&client);
    assert!(!id.plugin_path.is_empty() && id.plugin_size > 0 && id.plugin_mtime_ns > 0);
    let k = key(&id, ADD, pjrt::PORTABLE_COMPILE_OPTIONS);

    let cold = DiskCache::new(&dir);
    let (exe, from_disk, corrupt, compiled) = through(&cold, &client, &k);
    assert!(!from_disk && !corrupt && compiled);
    assert_eq!(run_add(&client, &exe), vec![11., 22., 33., 44.]);
    assert!(cold.entry_path(&k).is_file());
    assert_eq!(cold.mode(), "executable");

    let warm = DiskCache::new(&dir);
    let (exe, from_disk, corrupt, compiled) = through(&warm, &client, &k);
    assert!(from_disk && !corrupt && !compiled);
    assert!(exe.is_portable());
    assert_eq!(run_add(&client, &exe), vec![11., 22., 33., 44.]);
    assert_eq!(warm.stats.hits.load(Ordering::Relaxed), 1);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn bad_entries_are_counted_deleted_and_recompiled() {
    let Some(client) = client() else { return };
    let dir = temp_dir("corrupt");
    let cache = DiskCache::new(&dir);
    let k = key(&identity(), ADD, pjrt::PORTABLE_COMPILE_OPTIONS);
    let other = key(&identity(), "other program", pjrt::PORTABLE_COMPILE_OPTIONS);
    through(&cache, &client, &k);
    let good = std::fs::read(cache.entry_path(&k)).unwrap();
    assert!(decode_entry(&k, &good).is_ok());

    let mut flipped = good.clone();
    let mid = flipped.len() / 2;
    flipped[mid] ^= 0x40;
    let mut bad_version = good.clone();
    bad_version[8] = 99;
    let mut longer = good.clone();
    longer.push(0);
    let cases: Vec<(&str, Vec<u8>)> = vec![
        ("empty", vec![]),
        ("truncated header", good[..20].to_vec()),
        ("truncated payload", good[..good.len() - 40].to_vec()),
        ("trailing bytes", longer),
        ("garbage", b"\x7fELF not a cache entry at all, just garbage bytes......................".to_vec()),
        ("flipped bit", flipped),
        ("bad version", bad_version),
        ("other key", encode_entry(&other, &good[52..good.len() - 32])),
        // Well-formed entry whose payload the plugin rejects.
        ("not an executable", encode_entry(&k, b"not a serialized executable")),
    ];
    for (i, (what, bytes)) in cases.into_iter().enumerate() {
        std::fs::write(cache.entry_path(&k), &bytes).unwrap();
        let (exe, from_disk, corrupt, compiled) = through(&cache, &client, &k);
        assert!(!from_disk && corrupt && compiled, "{what}: from_disk={from_disk} corrupt={corrupt}");
        assert_eq!(cache.stats.corrupt.load(Ordering::Relaxed), i as u64 + 1, "{what}");
        assert_eq!(run_add(&client, &exe), vec![11., 22., 33., 44.], "{what}");
        // The recompiled executable was stored again, whole.
        let now = std::fs::read(cache.entry_path(&k)).unwrap();
        assert!(decode_entry(&k, &now).is_ok(), "{what}");
    }
    // `load` on its own reports and deletes a bad entry.
    std::fs::write(cache.entry_path(&k), b"junk").unwrap();
    assert!(matches!(cache.load(&k), Lookup::Corrupt(_)));
    assert!(!cache.entry_path(&k).exists());
    assert!(matches!(cache.load(&k), Lookup::Miss));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn concurrent_writers_of_one_key() {
    let dir = temp_dir("concurrent");
    let cache = Arc::new(DiskCache::new(&dir));
    let k = key(&identity(), "concurrent", b"opts");
    let payloads: Vec<Vec<u8>> = (0..8u8).map(|i| vec![i; 200_000 + i as usize * 1000]).collect();
    std::thread::scope(|s| {
        for p in &payloads {
            let cache = cache.clone();
            s.spawn(move || {
                for _ in 0..20 {
                    cache.store(&k, p).unwrap();
                }
            });
        }
        // Readers meanwhile see a whole entry (one of the payloads) or none.
        let cache = cache.clone();
        let payloads = &payloads;
        s.spawn(move || {
            for _ in 0..200 {
                match cache.load(&k) {
                    Lookup::Hit(p) => assert!(payloads.contains(&p)),
                    Lookup::Miss => {}
                    Lookup::Corrupt(why) => panic!("reader saw a corrupt entry: {why}"),
                }
            }
        });
    });
    assert_eq!(cache.stats.corrupt.load(Ordering::Relaxed), 0);
    assert_eq!(cache.stats.stores.load(Ordering::Relaxed), 160);
    match cache.load(&k) {
        Lookup::Hit(p) => assert!(payloads.contains(&p)),
        _ => panic!("no entry after the writers finished"),
    }
    // No temp files are left behind.
    let names: Vec<String> =
        std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    assert_eq!(names, vec![cache.entry_path(&k).file_name().unwrap().to_string_lossy().into_owned()]);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn key_follows_program_options_and_identity() {
    let base = identity();
    let k0 = key(&base, "prog", b"opts");
    assert_eq!(k0, key(&identity(), "prog", b"opts"));
    assert_ne!(k0, key(&base, "prog2", b"opts"));
    assert_ne!(k0, key(&base, "prog", b"opts2"));
    // Field boundaries are unambiguous.
    assert_ne!(key(&base, "ab", b"c"), key(&base, "a", b"bc"));
    type Change = (&'static str, fn(&mut Identity));
    let changes: [Change; 8] = [
        ("plugin path", |i| i.plugin_path.push('x')),
        ("plugin size", |i| i.plugin_size += 1),
        ("plugin mtime", |i| i.plugin_mtime_ns += 1),
        ("api version", |i| i.api_version.1 += 1),
        ("platform name", |i| i.platform_name = "tpu".into()),
        ("platform version", |i| i.platform_version.push('1')),
        ("package version", |i| i.package_version = "0.2.0".into()),
        ("host", |i| i.host.push_str(" avx512f")),
    ];
    for (what, change) in changes {
        let mut id = identity();
        change(&mut id);
        assert_ne!(key(&id, "prog", b"opts"), k0, "{what} does not change the key");
    }
}

#[test]
fn plugin_file_change_changes_identity() {
    let Some(client) = client() else { return };
    let a = Identity::of_client(&client);
    assert_eq!(a, Identity::of_client(&client));
    assert_eq!(a.api_version, client.api().version());
    assert_eq!(a.platform_name, client.platform_name());
    assert_eq!(a.package_version, env!("CARGO_PKG_VERSION"));
    // A rebuilt plugin at the same path has another size or mtime.
    let mut b = a.clone();
    b.plugin_mtime_ns += 1_000_000_000;
    assert_ne!(a.digest(), b.digest());
}

#[test]
fn unwritable_dir_is_not_an_error() {
    let Some(client) = client() else { return };
    // A regular file where the directory should be: stores fail, compiles don't.
    let file = temp_dir("notadir");
    std::fs::write(&file, b"x").unwrap();
    let cache = DiskCache::new(file.join("sub"));
    let k = key(&identity(), ADD, pjrt::PORTABLE_COMPILE_OPTIONS);
    let (exe, from_disk, _, compiled) = through(&cache, &client, &k);
    assert!(!from_disk && compiled);
    assert_eq!(run_add(&client, &exe), vec![11., 22., 33., 44.]);
    assert_eq!(cache.stats.store_errors.load(Ordering::Relaxed), 1);
    let _ = std::fs::remove_file(&file);
}
