//! What the end-to-end tests of `tierbench` share: running the binary as a
//! user does, a scratch directory per test, and a suite run with every
//! output file.

#![allow(dead_code)]

use std::fs;
use std::path::PathBuf;
use std::process::{Command, Output};

/// Runs `tierbench` with `args`.
pub fn tierbench(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_tierbench"))
        .args(args)
        .output()
        .expect("run tierbench")
}

/// A fresh directory for one test's files.
pub fn scratch(name: &str) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("bench-{name}"));
    let _ = fs::remove_dir_all(&dir);
    fs::create_dir_all(&dir).unwrap();
    dir
}

/// Asserts that `out` succeeded and that stderr (not a terminal) held no
/// progress bar, only the names of the files written.
pub fn assert_success(out: &Output) {
    assert!(
        out.status.success(),
        "stdout:\n{}\nstderr:\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    for line in String::from_utf8_lossy(&out.stderr).lines() {
        assert!(
            line.starts_with("wrote "),
            "unexpected stderr line {line:?}"
        );
    }
}

/// The output files of a suite run.
pub struct Outputs {
    /// `--json`.
    pub json: PathBuf,
    /// `--svg`.
    pub svg: PathBuf,
    /// `--markdown`.
    pub md: PathBuf,
}

/// Runs `tierbench SUITE --quick ARGS --json --svg --markdown` into a
/// scratch directory named `name`; asserts success. Returns the files and
/// stdout.
pub fn quick_suite(suite: &str, name: &str, args: &[&str]) -> (Outputs, String) {
    let dir = scratch(name);
    let files = Outputs {
        json: dir.join("r.json"),
        svg: dir.join("svg"),
        md: dir.join("r.md"),
    };
    let mut all = vec![suite, "--quick"];
    all.extend_from_slice(args);
    all.extend_from_slice(&[
        "--json",
        files.json.to_str().unwrap(),
        "--svg",
        files.svg.to_str().unwrap(),
        "--markdown",
        files.md.to_str().unwrap(),
    ]);
    let out = tierbench(&all);
    assert_success(&out);
    (files, String::from_utf8_lossy(&out.stdout).into_owned())
}
