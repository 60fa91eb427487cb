//! Builds the workload payload ELF (crates/workloads, `payload` feature) as a
//! static, non-PIE, CPL3 binary and places it in OUT_DIR so that
//! `tiervisor` embeds it: no payload files are needed at run time.
//!
//! The payload needs link flags that must not apply to the host crates, so
//! it is built by a nested cargo with its own target directory (a separate
//! build lock; no deadlock with the outer cargo) and a clean environment.

use std::env;
use std::path::PathBuf;
use std::process::Command;

const PAYLOAD_RUSTFLAGS: &[&str] = &[
    "-Crelocation-model=static",
    "-Ctarget-cpu=x86-64-v2",
    "-Clink-arg=-nostartfiles",
    "-Clink-arg=-nostdlib",
    "-Clink-arg=-static",
    "-Clink-arg=-no-pie",
    "-Clink-arg=-Wl,--image-base=0x400000",
    "-Clink-arg=-Wl,--build-id=none",
    "-Clink-arg=-Wl,--gc-sections",
];

fn main() {
    let manifest_dir =
        PathBuf::from(env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"));
    let workspace = manifest_dir
        .parent()
        .expect("vmm/ lives in the workspace root")
        .to_path_buf();
    let out_dir = PathBuf::from(env::var("OUT_DIR").expect("cargo sets OUT_DIR"));
    let target_dir = out_dir.join("payload-target");

    for path in [
        "crates/workloads",
        "crates/guest-abi",
        "Cargo.toml",
        "Cargo.lock",
    ] {
        println!("cargo:rerun-if-changed={}", workspace.join(path).display());
    }

    let cargo = env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let mut cmd = Command::new(cargo);
    cmd.current_dir(&workspace)
        .args([
            "build",
            "--offline",
            "--locked",
            "-p",
            "workloads",
            "--features",
            "payload",
            "--profile",
            "payload",
            "--bin",
            "workloads-payload",
            "--target-dir",
        ])
        .arg(&target_dir);
    // The outer build's flags, jobserver and target selection must not leak
    // into the payload build.
    for (key, _) in env::vars_os() {
        let key = key.to_string_lossy().into_owned();
        if key.starts_with("CARGO_") && key != "CARGO_HOME"
            || key == "RUSTFLAGS"
            || key == "RUSTC_WRAPPER"
            || key == "RUSTC_WORKSPACE_WRAPPER"
        {
            cmd.env_remove(&key);
        }
    }
    cmd.env("CARGO_ENCODED_RUSTFLAGS", PAYLOAD_RUSTFLAGS.join("\x1f"));

    let status = cmd
        .status()
        .expect("failed to run cargo for the workload payload");
    assert!(
        status.success(),
        "building the workload payload failed: {status}"
    );

    let built = target_dir.join("payload").join("workloads-payload");
    let dest = out_dir.join("workloads-payload.elf");
    std::fs::copy(&built, &dest).unwrap_or_else(|e| panic!("copy {}: {e}", built.display()));
}
