//! Measures PJRT execute latency for an elementwise multiply of n floats:
//! `cargo run --release -p pjrt --example exec_latency -- 65536`.
//! (To time another program, such as a dumped one, see `program_time.rs`.)
use std::time::Instant;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let n: i64 = std::env::args().nth(1).and_then(|a| a.parse().ok()).unwrap_or(65536);
    let path = pjrt::default_plugin_path().ok_or("no plugin: set TORCH_TPU_PJRT_PLUGIN")?;
    let mut opts: Vec<(&str, pjrt::ClientOption)> = Vec::new();
    if let Ok(t) = std::env::var("INTRA") {
        opts.push(("intra_op_parallelism_threads", pjrt::ClientOption::Int(t.parse()?)));
    }
    if let Ok(a) = std::env::var("ASYNC") {
        opts.push(("asynchronous", pjrt::ClientOption::Bool(a == "1")));
    }
    extern "C" {
        fn sched_setaffinity(pid: i32, size: usize, mask: *const u64) -> i32;
    }
    let pin_load = std::env::var("LOAD1").is_ok();
    if pin_load {
        let mask: u64 = 1;
        unsafe { sched_setaffinity(0, 8, &mask) };
    }
    let api = pjrt::Api::load(&path)?;
    // PIN=k: create the client on a thread allowed only on cpu k, so the
    // plugin's worker threads (which inherit the mask) stay there.
    let client = match std::env::var("PIN").ok().and_then(|p| p.parse::<u32>().ok()) {
        Some(cpu) => std::thread::spawn(move || {
            let mask: u64 = 1 << cpu;
            unsafe { sched_setaffinity(0, 8, &mask) };
            pjrt::Client::with_options(api, &opts)
        })
        .join()
        .map_err(|_| "client thread panicked")??,
        None => {
            // MAIN1=1: pin this thread to cpu 0 while the client starts and
            // runs once, then allow all cpus again.
            let pin_main = std::env::var("MAIN1").is_ok();
            if pin_main {
                let mask: u64 = 1;
                unsafe { sched_setaffinity(0, 8, &mask) };
            }
            let c = pjrt::Client::with_options(api, &opts)?;

            if pin_main {
                let dev = c.addressable_devices()[0];
                let t = "module { func.func @main(%a: tensor<65536xf32>) -> tensor<65536xf32> { %0 = stablehlo.add %a, %a : tensor<65536xf32> \n return %0 : tensor<65536xf32> } }";
                let e = c.compile(t)?;
                let buf = c.buffer_from_host(&vec![0u8; 65536 * 4], pjrt::ElementType::F32, &[65536], dev)?;
                e.execute(&[&buf], None)?[0].ready()?;
                let all: u64 = !0;
                unsafe { sched_setaffinity(0, 8, &all) };
            }
            c
        }
    };
    let dev = client.addressable_devices()[0];
    let text = format!(
        "module {{ func.func @main(%a: tensor<{n}xf32>, %b: tensor<{n}xf32>) -> tensor<{n}xf32> {{ \
         %0 = stablehlo.multiply %a, %b : tensor<{n}xf32> \n return %0 : tensor<{n}xf32> }} }}"
    );
    let pin_compile = std::env::var("COMPILE1").is_ok();
    if pin_compile {
        let cpu: u32 = std::env::var("COMPILE1").ok().and_then(|c| c.parse().ok()).unwrap_or(0);
        let mask: u64 = 1 << cpu;
        unsafe { sched_setaffinity(0, 8, &mask) };
    }
    let exe = client.compile(&text)?;
    if pin_load || pin_compile {
        // Compiled while this thread saw one cpu; now run with all of them.
        let all: u64 = !0;
        unsafe { sched_setaffinity(0, 8, &all) };
    }
    let bytes = vec![0u8; n as usize * 4];
    let a = client.buffer_from_host(&bytes, pjrt::ElementType::F32, &[n], dev)?;
    let b = client.buffer_from_host(&bytes, pjrt::ElementType::F32, &[n], dev)?;
    for (label, wait) in [("execute only", false), ("execute + ready", true)] {
        let mut samples = Vec::new();
        for _ in 0..7 {
            let t0 = Instant::now();
            let mut last = None;
            for _ in 0..200 {
                let out = exe.execute(&[&a, &b], None)?;
                if wait {
                    out[0].ready()?;
                }
                last = Some(out);
            }
            if let Some(o) = last {
                o[0].ready()?;
            }
            samples.push(t0.elapsed().as_secs_f64() / 200.0 * 1e6);
        }
        samples.sort_by(|x, y| x.partial_cmp(y).unwrap());
        println!("n={n} {label}: median {:.1} us per execution", samples[3]);
    }
    Ok(())
}
