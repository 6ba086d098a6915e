//! Times one StableHLO program, such as one written by `TORCH_TPU_DUMP_IR`:
//! `cargo run --release -p pjrt --example program_time -- prog.mlir [runs]`.
//!
//! Inputs are zero-filled buffers of the types in `@main`'s signature, so
//! a program that reads indices or divides by an input times its zero path.
//! Set XLA_FLAGS as the engine does (`--xla_cpu_experimental_ynn_fusion_type=
//! individual_dot` on the XLA CPU plugin) to time what the engine runs,
//! and TORCH_TPU_CPU_DEVICE_COUNT to the engine's device count (one per
//! core, at most 4): the plugin starts that many worker threads, or one per
//! core if more. Without it the plugin offers 4 devices.
//!
//! By default each execution is waited for before the next starts.
//! PROGRAM_TIME_PIPELINE=1 queues all runs and waits for the last, as Strict
//! Eager does; PROGRAM_TIME_SYNC=1 creates the client with
//! `asynchronous=false`, so each execution runs to its end on this thread.
use std::time::Instant;

/// (element type, dims) of each `tensor<...>` argument of `@main`.
fn main_arguments(text: &str) -> Result<Vec<(pjrt::ElementType, Vec<i64>)>, String> {
    let start = text.find("@main(").ok_or("no func.func @main in the program")? + "@main(".len();
    let signature = &text[start..text[start..].find(") ->").map(|e| start + e).ok_or("no result types")?];
    let mut args = Vec::new();
    for piece in signature.split("tensor<").skip(1) {
        let body = &piece[..piece.find('>').ok_or("unterminated tensor type")?];
        let mut parts: Vec<&str> = body.split('x').collect();
        let ty = match parts.pop().unwrap_or_default() {
            "f32" => pjrt::ElementType::F32,
            "f64" => pjrt::ElementType::F64,
            "i64" => pjrt::ElementType::S64,
            "i32" => pjrt::ElementType::S32,
            "i1" => pjrt::ElementType::Pred,
            other => return Err(format!("argument type {other} is not supported here")),
        };
        let dims = parts.iter().map(|d| d.parse::<i64>().map_err(|e| format!("{d}: {e}"))).collect::<Result<_, _>>()?;
        args.push((ty, dims));
    }
    Ok(args)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut argv = std::env::args().skip(1);
    let file = argv.next().ok_or("usage: program_time prog.mlir [runs]")?;
    let runs: usize = argv.next().and_then(|r| r.parse().ok()).unwrap_or(200);
    let text = std::fs::read_to_string(&file)?;
    let path = pjrt::default_plugin_path().ok_or("no plugin: set TORCH_TPU_PJRT_PLUGIN")?;
    let mut options = Vec::new();
    if let Some(n) = std::env::var("TORCH_TPU_CPU_DEVICE_COUNT").ok().filter(|n| !n.is_empty()) {
        options.push(("cpu_device_count", pjrt::ClientOption::Int(n.trim().parse()?)));
    }
    if std::env::var("PROGRAM_TIME_SYNC").as_deref() == Ok("1") {
        options.push(("asynchronous", pjrt::ClientOption::Bool(false)));
    }
    let client = pjrt::Client::with_options(pjrt::Api::load(&path)?, &options)?;
    let dev = client.addressable_devices()[0];
    let exe = client.compile(&text)?;
    let mut inputs = Vec::new();
    for (ty, dims) in main_arguments(&text)? {
        let n: i64 = dims.iter().product();
        let bytes = vec![0u8; n as usize * ty.byte_width().unwrap_or(1)];
        inputs.push(client.buffer_from_host(&bytes, ty, &dims, dev)?);
    }
    let refs: Vec<&pjrt::Buffer> = inputs.iter().collect();
    let pipeline = std::env::var("PROGRAM_TIME_PIPELINE").as_deref() == Ok("1");
    let mut samples = Vec::new();
    for _ in 0..7 {
        let t0 = Instant::now();
        let mut last = Vec::new();
        for _ in 0..runs {
            last = exe.execute(&refs, None)?;
            if !pipeline {
                for out in &last {
                    out.ready()?;
                }
            }
        }
        for out in &last {
            out.ready()?;
        }
        samples.push(t0.elapsed().as_secs_f64() / runs as f64 * 1e6);
    }
    samples.sort_by(|x, y| x.total_cmp(y));
    println!("{file}: median {:.1} us per execution (best {:.1})", samples[3], samples[0]);
    Ok(())
}
