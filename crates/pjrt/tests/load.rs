//! Loading the plugin: version, platform, devices, attributes, and clear
//! errors for missing files and files that are not PJRT plugins.

mod common;

use std::path::Path;
use std::sync::Arc;

use pjrt::{code, Api};

#[test]
fn load_version_platform_devices() {
    let Some(path) = common::plugin_path() else {
        eprintln!("SKIPPED: no PJRT CPU plugin found");
        return;
    };
    let api = Api::load(&path).unwrap();
    let (major, minor) = api.version();
    println!("plugin {} API version {major}.{minor}", path.display());
    assert_eq!(major, 0);
    assert!(minor >= 81);
    // Same file -> same instance (initialised once).
    let again = Api::load(&path).unwrap();
    assert!(Arc::ptr_eq(&api, &again));

    let attrs = api.plugin_attributes().unwrap();
    for (k, v) in &attrs {
        println!("  attribute {k} = {v:?}");
    }

    let client = require_client!();
    assert_eq!(client.platform_name(), "cpu");
    println!("platform_version = {:?}", client.platform_version());
    let devs = client.addressable_devices();
    assert!(!devs.is_empty());
    for (i, d) in devs.iter().enumerate() {
        println!("  device {d} {d:?}");
        assert_eq!(d.index(), i);
        assert_eq!(d.kind(), d.kind_str());
        assert!(!d.kind().is_empty());
    }
    let ids: std::collections::HashSet<i32> = devs.iter().map(|d| d.id()).collect();
    assert_eq!(ids.len(), devs.len(), "device ids are unique");
    assert!(client.device(devs.len()).is_err());
}

#[test]
fn missing_file_is_a_clear_error() {
    let e = Api::load(Path::new("/nonexistent/dir/pjrt_plugin.so")).unwrap_err();
    println!("{e}");
    assert_eq!(e.code, code::NOT_FOUND);
    assert!(e.message.contains("/nonexistent/dir/pjrt_plugin.so"), "{e}");
    assert!(e.message.contains("not found"), "{e}");
}

#[test]
fn non_plugin_files_are_clear_errors() {
    // A file that is not a shared library at all.
    let tmp = std::env::temp_dir().join(format!("pjrt_not_a_plugin_{}.so", std::process::id()));
    std::fs::write(&tmp, b"this is not an ELF file").unwrap();
    let e = Api::load(&tmp).unwrap_err();
    println!("{e}");
    assert!(e.message.contains("not a loadable shared library"), "{e}");
    std::fs::remove_file(&tmp).ok();

    // An executable, not a plugin.
    let e = Api::load(Path::new("/bin/true")).unwrap_err();
    println!("{e}");
    assert!(
        e.message.contains("not a loadable shared library") || e.message.contains("GetPjrtApi"),
        "{e}"
    );

    // A real shared library without GetPjrtApi.
    for lib in [
        "/lib/x86_64-linux-gnu/libm.so.6",
        "/usr/lib/x86_64-linux-gnu/libm.so.6",
    ] {
        if Path::new(lib).exists() {
            let e = Api::load(Path::new(lib)).unwrap_err();
            println!("{e}");
            assert!(e.message.contains("is not a PJRT plugin"), "{e}");
            assert!(e.message.contains("GetPjrtApi"), "{e}");
            break;
        }
    }
}

#[test]
fn default_plugin_path_honours_env_var() {
    // Only checks the env-var branch's contract without mutating the
    // environment of other tests: if set, it is returned verbatim.
    match std::env::var_os(pjrt::PLUGIN_ENV_VAR) {
        Some(v) if !v.is_empty() => {
            assert_eq!(
                pjrt::default_plugin_path().unwrap(),
                std::path::PathBuf::from(v)
            )
        }
        _ => println!("default_plugin_path() = {:?}", pjrt::default_plugin_path()),
    }
}

#[test]
fn device_memory_stats_or_a_clear_unimplemented_error() {
    let client = require_client!();
    let d = client.addressable_devices()[0];
    match d.memory_stats(client.api()) {
        Ok(s) => {
            println!("memory stats {s:?}");
            assert!(s.bytes_in_use >= 0);
            if let Some(limit) = s.bytes_limit {
                assert!(limit > 0);
            }
        }
        Err(e) => {
            println!("memory stats: {e}");
            assert_eq!(e.code, pjrt::code::UNIMPLEMENTED, "{e}");
        }
    }
}
