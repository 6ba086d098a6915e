//! Compiles the C++ dispatcher glue (csrc/) against the installed torch and
//! links it into the extension module.
//!
//! torch's headers and libraries are found by asking the Python interpreter
//! that maturin builds for (PYO3_PYTHON), so nothing of torch is vendored.
use std::path::PathBuf;
use std::process::Command;

fn main() {
    let python = std::env::var("PYO3_PYTHON")
        .or_else(|_| std::env::var("PYTHON_SYS_EXECUTABLE"))
        .unwrap_or_else(|_| "python3".to_string());
    let probe = Command::new(&python)
        .args([
            "-c",
            "import torch, torch.utils.cpp_extension as c; \
             print(int(torch._C._GLIBCXX_USE_CXX11_ABI)); \
             print('\\n'.join(c.include_paths())); print('LIB'); print('\\n'.join(c.library_paths()))",
        ])
        .output()
        .expect("failed to run the Python interpreter to locate torch");
    if !probe.status.success() {
        panic!(
            "torch_tpu_rs needs torch installed in {python}: {}",
            String::from_utf8_lossy(&probe.stderr)
        );
    }
    let text = String::from_utf8_lossy(&probe.stdout).to_string();
    let mut lines = text.lines();
    let abi = lines.next().unwrap_or("1").trim().to_string();
    let mut includes = Vec::new();
    let mut libs = Vec::new();
    let mut in_libs = false;
    for line in lines {
        if line == "LIB" {
            in_libs = true;
        } else if in_libs {
            libs.push(PathBuf::from(line));
        } else {
            includes.push(PathBuf::from(line));
        }
    }

    let csrc = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../csrc");
    let mut build = cc::Build::new();
    build
        .cpp(true)
        .std("c++20")
        .flag("-fPIC")
        .flag("-Wno-unused-parameter")
        .flag("-Wno-missing-field-initializers")
        .define("_GLIBCXX_USE_CXX11_ABI", abi.as_str())
        .opt_level(2)
        .include(&csrc)
        .link_lib_modifier("+whole-archive");
    for inc in &includes {
        build.include(inc);
    }
    let mut sources: Vec<PathBuf> = std::fs::read_dir(&csrc)
        .expect("csrc/ is missing")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().map(|e| e == "cpp").unwrap_or(false))
        .collect();
    sources.sort();
    for src in &sources {
        build.file(src);
        println!("cargo:rerun-if-changed={}", src.display());
    }
    // The folder too: a new .cpp file must rebuild the glue.
    println!("cargo:rerun-if-changed={}", csrc.display());
    println!("cargo:rerun-if-changed={}", csrc.join("engine_api.h").display());
    println!("cargo:rerun-if-changed={}", csrc.join("tpu_common.h").display());
    build.compile("torch_tpu_glue");

    for lib in &libs {
        println!("cargo:rustc-link-search=native={}", lib.display());
    }
    for name in ["c10", "torch_cpu", "torch"] {
        println!("cargo:rustc-link-lib=dylib={name}");
    }
    // The module lives in site-packages/torch_tpu_rs/, torch's libraries in
    // site-packages/torch/lib/.
    println!("cargo:rustc-link-arg=-Wl,-rpath,$ORIGIN/../torch/lib");
    println!("cargo:rerun-if-env-changed=PYO3_PYTHON");
}
