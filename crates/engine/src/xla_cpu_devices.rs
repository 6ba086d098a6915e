//! How many devices the XLA CPU plugin exposes, and so how many worker
//! threads it runs.
//!
//! The plugin starts one worker thread per device or per core, whichever
//! is more, and exposes 4 devices unless told otherwise. On a 2-core
//! machine that is 4 busy threads on 2 cores: they preempt each other
//! inside every program. Exposing 2 devices there gives 2 workers, and the
//! Llama bench step's forward and backward programs ran 15% faster (5.7-6.3
//! ms against 6.5-7.9, and 7.6-8.0 against 9.0-9.2, alternating runs of
//! `crates/pjrt/examples/program_time.rs`).
//!
//! So, on the XLA CPU plugin, the count is the number of cores this
//! process may use, at most the plugin's own 4: nothing changes on
//! machines with 4 cores or more. `TORCH_TPU_CPU_DEVICE_COUNT=n` chooses
//! n instead (as jax's `--xla_force_host_platform_device_count`), for
//! tests of several devices on a small machine. Other plugins get no
//! option: their devices are real hardware.
use std::path::Path;

/// The environment variable that overrides the count.
pub const COUNT_VAR: &str = "TORCH_TPU_CPU_DEVICE_COUNT";

/// The plugin's own default, kept as the most the engine asks for.
const PLUGIN_DEFAULT: usize = 4;

/// The device count for `cores` usable cores and the variable's value.
pub fn device_count(var: Option<&str>, cores: usize) -> Result<usize, String> {
    match var.map(str::trim).filter(|v| !v.is_empty()) {
        None => Ok(cores.clamp(1, PLUGIN_DEFAULT)),
        Some(v) => match v.parse::<usize>() {
            Ok(n) if (1..=1024).contains(&n) => Ok(n),
            _ => Err(format!(
                "torch_tpu_rs: {COUNT_VAR}={v:?} is not a device count: give a whole number from 1 \
                 to 1024, or unset it to get one device per core (at most {PLUGIN_DEFAULT})"
            )),
        },
    }
}

/// The client options for `plugin`: the device count on the XLA CPU
/// plugin, none on others.
pub fn client_options(plugin: &Path) -> Result<Vec<(&'static str, pjrt::ClientOption)>, String> {
    if !crate::xla_cpu_flags::is_xla_cpu_plugin(plugin) {
        return Ok(Vec::new());
    }
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let n = device_count(std::env::var(COUNT_VAR).ok().as_deref(), cores)?;
    Ok(vec![("cpu_device_count", pjrt::ClientOption::Int(n as i64))])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_device_per_core_up_to_the_plugins_four() {
        assert_eq!(device_count(None, 1), Ok(1));
        assert_eq!(device_count(None, 2), Ok(2));
        assert_eq!(device_count(None, 4), Ok(4));
        assert_eq!(device_count(None, 64), Ok(4));
        assert_eq!(device_count(None, 0), Ok(1));
        assert_eq!(device_count(Some(""), 2), Ok(2));
    }

    #[test]
    fn the_variable_wins_and_bad_values_say_what_to_give() {
        assert_eq!(device_count(Some("8"), 2), Ok(8));
        assert_eq!(device_count(Some(" 1 "), 64), Ok(1));
        for bad in ["0", "-2", "two", "1.5", "5000"] {
            let e = device_count(Some(bad), 2).unwrap_err();
            assert!(e.contains(COUNT_VAR) && e.contains(bad) && e.contains("whole number"), "{e}");
        }
    }

    #[test]
    fn only_the_xla_cpu_plugin_gets_a_count() {
        assert!(client_options(Path::new("/opt/libtpu.so")).unwrap().is_empty());
        let opts = client_options(Path::new("/x/pjrt_c_api_cpu_plugin.so")).unwrap();
        assert_eq!(opts.len(), 1);
        assert_eq!(opts[0].0, "cpu_device_count");
    }
}
