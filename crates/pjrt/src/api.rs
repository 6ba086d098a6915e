//! Loading a PJRT plugin (`dlopen` + `GetPjrtApi`), the API version check,
//! one-time plugin initialisation, conversion of `PJRT_Error*` into
//! [`Error`], the [`pjrt_call!`] helper macro, and [`default_plugin_path`].

use std::ffi::c_char;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use crate::error::{code, Error, Result};
use crate::ffi::{self, PjrtArgs};

/// Calls the PJRT function `$func` of `$api` (an `&Api`) with `$args` (a
/// `&mut` to its argument struct) and converts the returned `PJRT_Error*`
/// into `Result<()>`. A missing function pointer becomes an `UNIMPLEMENTED`
/// error. Must be used inside `unsafe`: the caller guarantees that every
/// pointer inside `$args` is valid for the call.
macro_rules! pjrt_call {
    ($api:expr, $func:ident, $args:expr) => {{
        let api: &$crate::api::Api = $api;
        match api.raw().$func {
            Some(f) => api.take_error(f($args)),
            None => Err($crate::error::Error::new(
                $crate::error::code::UNIMPLEMENTED,
                concat!("the PJRT plugin does not implement ", stringify!($func)),
            )),
        }
    }};
}
pub(crate) use pjrt_call;

/// A loaded PJRT plugin: the dynamic library and its `PJRT_Api` table.
///
/// Plugins are loaded once per process per (canonical) path and are never
/// unloaded: [`Api::load`] on the same path returns the same `Arc<Api>`, and
/// `PJRT_Plugin_Initialize` runs exactly once. (Unloading XLA plugins is not
/// safe in practice: they start threads and register static state.)
pub struct Api {
    raw: *const ffi::PJRT_Api,
    version: (i32, i32),
    path: PathBuf,
    _lib: libloading::Library,
}

// SAFETY: the PJRT C API is thread-safe; the table is immutable after load.
unsafe impl Send for Api {}
unsafe impl Sync for Api {}

impl std::fmt::Debug for Api {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Api")
            .field("path", &self.path)
            .field("version", &self.version)
            .finish()
    }
}

/// A value of a plugin attribute (`PJRT_NamedValue`).
#[derive(Debug, Clone, PartialEq)]
pub enum NamedValue {
    String(String),
    Int64(i64),
    Int64List(Vec<i64>),
    Float(f32),
    Bool(bool),
}

static LOADED: Mutex<Vec<(PathBuf, Arc<Api>)>> = Mutex::new(Vec::new());

impl Api {
    /// Loads the PJRT plugin at `path`, checks that its API version is 0.x
    /// with x >= 81 (the version this crate's declarations follow), and calls
    /// `PJRT_Plugin_Initialize`. Loading the same file again returns the
    /// already-loaded instance.
    pub fn load(path: &Path) -> Result<Arc<Api>> {
        if !path.exists() {
            return Err(Error::new(
                code::NOT_FOUND,
                format!("PJRT plugin not found at {}", path.display()),
            ));
        }
        let canonical = path.canonicalize().unwrap_or_else(|_| path.to_path_buf());
        // A poisoned lock only means another thread panicked while holding it;
        // the list itself is always consistent.
        let mut loaded = LOADED.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((_, api)) = loaded.iter().find(|(p, _)| *p == canonical) {
            return Ok(api.clone());
        }
        let api = Arc::new(Self::load_uncached(&canonical, path)?);
        loaded.push((canonical, api.clone()));
        Ok(api)
    }

    /// Loads `path` (canonical); messages name `shown_path` (as given).
    fn load_uncached(path: &Path, shown_path: &Path) -> Result<Api> {
        let shown = shown_path.display();
        // SAFETY: loading a shared library runs its initialisers; the caller
        // asked for exactly this file to be loaded as a PJRT plugin.
        let lib = unsafe { libloading::Library::new(path) }.map_err(|e| {
            Error::invalid_argument(format!(
                "failed to load PJRT plugin {shown}: it is not a loadable shared library ({e})"
            ))
        })?;
        // From here on, failures leak the library instead of unloading it:
        // running a half-initialised plugin's destructors is riskier.
        let fail = |lib: libloading::Library, e: Error| -> Result<Api> {
            std::mem::forget(lib);
            Err(e)
        };
        // SAFETY: `GetPjrtApi` has this signature in every PJRT plugin.
        let get: std::result::Result<ffi::GetPjrtApiFn, _> =
            unsafe { lib.get::<ffi::GetPjrtApiFn>(b"GetPjrtApi\0").map(|s| *s) };
        let get = match get {
            Ok(g) => g,
            Err(e) => {
                return fail(
                    lib,
                    Error::invalid_argument(format!(
                        "{shown} is not a PJRT plugin: it does not export GetPjrtApi ({e})"
                    )),
                )
            }
        };
        // SAFETY: calling the plugin's entry point.
        let raw = unsafe { get() };
        if raw.is_null() {
            return fail(
                lib,
                Error::internal(format!(
                    "PJRT plugin {shown}: GetPjrtApi returned a null PJRT_Api"
                )),
            );
        }
        // SAFETY: `raw` points to the plugin's static PJRT_Api; struct_size is
        // its first field and is always present.
        let struct_size = unsafe { (*raw).struct_size };
        let version_end = std::mem::offset_of!(ffi::PJRT_Api, pjrt_api_version)
            + std::mem::size_of::<ffi::PJRT_Api_Version>();
        if struct_size < version_end {
            return fail(
                lib,
                Error::new(
                    code::FAILED_PRECONDITION,
                    format!(
                        "PJRT plugin at {shown} returned a PJRT_Api of only {struct_size} bytes"
                    ),
                ),
            );
        }
        // SAFETY: within struct_size, checked above.
        let v = unsafe { (*raw).pjrt_api_version };
        let version = (v.major_version, v.minor_version);
        if let Err(e) = check_version(shown_path, version) {
            return fail(lib, e);
        }
        if struct_size < ffi::PJRT_API_USED_SIZE {
            return fail(
                lib,
                Error::new(
                    code::FAILED_PRECONDITION,
                    format!(
                        "PJRT plugin at {shown} (API {}.{}) has a PJRT_Api of {struct_size} bytes; \
                         torch_tpu_rs needs at least {}",
                        version.0,
                        version.1,
                        ffi::PJRT_API_USED_SIZE
                    ),
                ),
            );
        }
        // SAFETY: struct_size covers every field we declared.
        let table = unsafe { &*raw };
        if table.PJRT_Error_Destroy.is_none() || table.PJRT_Error_Message.is_none() {
            return fail(
                lib,
                Error::internal(format!(
                    "PJRT plugin at {shown} lacks PJRT_Error_Destroy/PJRT_Error_Message"
                )),
            );
        }
        let api = Api {
            raw,
            version,
            path: path.to_path_buf(),
            _lib: lib,
        };
        if api.raw().PJRT_Plugin_Initialize.is_some() {
            let mut args = ffi::PJRT_Plugin_Initialize_Args::new();
            // SAFETY: args is a valid, fully initialised argument struct.
            let r = unsafe { pjrt_call!(&api, PJRT_Plugin_Initialize, &mut args) };
            if let Err(e) = r {
                let Api { _lib, .. } = api;
                return fail(
                    _lib,
                    Error::new(
                        e.code,
                        format!(
                            "PJRT plugin at {shown}: PJRT_Plugin_Initialize failed: {}",
                            e.message
                        ),
                    ),
                );
            }
        }
        Ok(api)
    }

    /// `(major, minor)` API version reported by the plugin.
    pub fn version(&self) -> (i32, i32) {
        self.version
    }

    /// The file this plugin was loaded from (canonicalised).
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Plugin attributes (`PJRT_Plugin_Attributes`), e.g. `xla_version`,
    /// `stablehlo_current_version`, `stablehlo_minimum_version`.
    pub fn plugin_attributes(&self) -> Result<Vec<(String, NamedValue)>> {
        let mut args = ffi::PJRT_Plugin_Attributes_Args::new();
        // SAFETY: valid argument struct.
        unsafe { pjrt_call!(self, PJRT_Plugin_Attributes, &mut args) }?;
        let mut out = Vec::with_capacity(args.num_attributes);
        for i in 0..args.num_attributes {
            // SAFETY: the plugin returned an array of num_attributes entries
            // with process lifetime.
            let nv = unsafe { &*args.attributes.add(i) };
            let name = unsafe { string_from(nv.name, nv.name_size) };
            // SAFETY: the union member read is selected by `type_`.
            let value = unsafe {
                match nv.type_ {
                    0 => NamedValue::String(string_from(nv.value.string_value, nv.value_size)),
                    1 => NamedValue::Int64(nv.value.int64_value),
                    2 => NamedValue::Int64List(
                        slice_from(nv.value.int64_array_value, nv.value_size).to_vec(),
                    ),
                    3 => NamedValue::Float(nv.value.float_value),
                    4 => NamedValue::Bool(nv.value.bool_value),
                    t => NamedValue::String(format!("<unknown PJRT_NamedValue type {t}>")),
                }
            };
            out.push((name, value));
        }
        Ok(out)
    }

    /// The raw function table.
    pub(crate) fn raw(&self) -> &ffi::PJRT_Api {
        // SAFETY: the table is static in the (never unloaded) plugin and its
        // size was checked at load.
        unsafe { &*self.raw }
    }

    /// Converts an owned `PJRT_Error*` (null = success) into a `Result`,
    /// reading its code and message and destroying it.
    ///
    /// # Safety
    /// `err` must be null or a live error returned by this plugin that is not
    /// used afterwards.
    pub(crate) unsafe fn take_error(&self, err: *mut ffi::PJRT_Error) -> Result<()> {
        if err.is_null() {
            return Ok(());
        }
        let t = self.raw();
        let mut message = String::from("<no message>");
        if let Some(f) = t.PJRT_Error_Message {
            let mut a = ffi::PJRT_Error_Message_Args::new();
            a.error = err;
            f(&mut a);
            message = string_from(a.message, a.message_size);
        }
        let mut errcode = code::UNKNOWN;
        if let Some(f) = t.PJRT_Error_GetCode {
            let mut a = ffi::PJRT_Error_GetCode_Args::new();
            a.error = err;
            let e2 = f(&mut a);
            if e2.is_null() {
                errcode = a.code;
            } else {
                self.destroy_error(e2);
            }
        }
        self.destroy_error(err);
        Err(Error::new(errcode, message))
    }

    unsafe fn destroy_error(&self, err: *mut ffi::PJRT_Error) {
        if let Some(f) = self.raw().PJRT_Error_Destroy {
            let mut a = ffi::PJRT_Error_Destroy_Args::new();
            a.error = err;
            f(&mut a);
        }
    }
}

/// Accepts API versions `0.x` with `x >= 81` (the version of our declarations).
pub(crate) fn check_version(path: &Path, version: (i32, i32)) -> Result<()> {
    if version.0 == ffi::PJRT_API_MAJOR && version.1 >= ffi::PJRT_API_MINOR {
        return Ok(());
    }
    Err(Error::new(
        code::FAILED_PRECONDITION,
        format!(
            "PJRT plugin at {} has API version {}.{}; torch_tpu_rs needs {}.{} or newer with major {}",
            path.display(),
            version.0,
            version.1,
            ffi::PJRT_API_MAJOR,
            ffi::PJRT_API_MINOR,
            ffi::PJRT_API_MAJOR
        ),
    ))
}

/// Copies a (pointer, length) string owned by the plugin; lossy UTF-8.
///
/// # Safety
/// `ptr` must be null or valid for `len` bytes.
pub(crate) unsafe fn string_from(ptr: *const c_char, len: usize) -> String {
    if ptr.is_null() || len == 0 {
        return String::new();
    }
    let bytes = std::slice::from_raw_parts(ptr as *const u8, len);
    String::from_utf8_lossy(bytes).into_owned()
}

/// Borrows a (pointer, length) array owned by the plugin; empty if null.
///
/// # Safety
/// `ptr` must be null or valid for `len` elements for the returned lifetime.
pub(crate) unsafe fn slice_from<'a, T>(ptr: *const T, len: usize) -> &'a [T] {
    if ptr.is_null() || len == 0 {
        &[]
    } else {
        std::slice::from_raw_parts(ptr, len)
    }
}

/// Environment variable naming the PJRT plugin to use.
pub const PLUGIN_ENV_VAR: &str = "TORCH_TPU_PJRT_PLUGIN";

/// Relative location of the CPU plugin inside a Python `site-packages`.
pub const CPU_PLUGIN_SUBPATH: &str = "lammps_jax_pjrt_cpu/pjrt_c_api_cpu_plugin.so";

/// Where to find the PJRT plugin by default:
/// 1. `$TORCH_TPU_PJRT_PLUGIN` if set and non-empty (returned even if the
///    file is missing, so that loading reports a clear error);
/// 2. `lammps_jax_pjrt_cpu/pjrt_c_api_cpu_plugin.so` under
///    `$VIRTUAL_ENV/lib/python3*/site-packages`;
/// 3. the same under `.venv/lib/python3*/site-packages` of the directory of
///    the current executable or the current directory, or any of their
///    ancestors.
pub fn default_plugin_path() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os(PLUGIN_ENV_VAR) {
        if !p.is_empty() {
            return Some(PathBuf::from(p));
        }
    }
    if let Some(venv) = std::env::var_os("VIRTUAL_ENV") {
        if let Some(p) = plugin_in_venv(Path::new(&venv)) {
            return Some(p);
        }
    }
    let mut starts = Vec::new();
    if let Ok(exe) = std::env::current_exe() {
        if let Some(dir) = exe.parent() {
            starts.push(dir.to_path_buf());
        }
    }
    if let Ok(cwd) = std::env::current_dir() {
        starts.push(cwd);
    }
    for start in starts {
        for dir in start.ancestors() {
            if let Some(p) = plugin_in_venv(&dir.join(".venv")) {
                return Some(p);
            }
        }
    }
    None
}

fn plugin_in_venv(venv: &Path) -> Option<PathBuf> {
    let lib = venv.join("lib");
    let mut entries: Vec<PathBuf> = std::fs::read_dir(&lib)
        .ok()?
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().starts_with("python3"))
        .map(|e| e.path())
        .collect();
    entries.sort();
    entries
        .into_iter()
        .map(|d| d.join("site-packages").join(CPU_PLUGIN_SUBPATH))
        .find(|p| p.is_file())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn version_check() {
        let p = Path::new("/x/plugin.so");
        assert!(check_version(p, (0, 81)).is_ok());
        assert!(check_version(p, (0, 115)).is_ok());
        let e = check_version(p, (0, 54)).unwrap_err();
        assert_eq!(
            e.message,
            "PJRT plugin at /x/plugin.so has API version 0.54; torch_tpu_rs needs 0.81 or newer with major 0"
        );
        assert_eq!(e.code, code::FAILED_PRECONDITION);
        assert!(check_version(p, (1, 0)).is_err());
    }

    #[test]
    fn plugin_in_venv_finds_site_packages() {
        let root = std::env::temp_dir().join(format!("pjrt_venv_test_{}", std::process::id()));
        let dir = root.join("lib/python3.11/site-packages/lammps_jax_pjrt_cpu");
        std::fs::create_dir_all(&dir).unwrap();
        assert_eq!(plugin_in_venv(&root), None);
        std::fs::write(dir.join("pjrt_c_api_cpu_plugin.so"), b"").unwrap();
        assert_eq!(
            plugin_in_venv(&root),
            Some(dir.join("pjrt_c_api_cpu_plugin.so"))
        );
        std::fs::remove_dir_all(&root).ok();
    }
}
