//! `extract-vmlinux BZIMAGE OUT`: writes the `vmlinux` ELF inside a
//! bzImage to OUT (atomically, through a temporary file beside it) and
//! prints what it found. scripts/test-all.sh uses it to give the Linux
//! boot tests an uncompressed kernel to boot through its PVH entry.

use std::error::Error;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::{env, fs, io};

use kernel_image::{ExtractError, MAX_VMLINUX_SIZE, extract};

const USAGE: &str = "usage: extract-vmlinux BZIMAGE OUT";

/// Why the command failed.
#[derive(Debug, thiserror::Error)]
enum CliError {
    #[error("{USAGE}")]
    Usage,
    #[error("cannot read {}", .path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("cannot extract a vmlinux from {}", .path.display())]
    Extract {
        path: PathBuf,
        #[source]
        source: ExtractError,
    },
    #[error("cannot write {}", .path.display())]
    Write {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
}

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            let mut message = format!("extract-vmlinux: {err}");
            let mut cause = err.source();
            while let Some(source) = cause {
                message.push_str(&format!(": {source}"));
                cause = source.source();
            }
            eprintln!("{message}");
            ExitCode::FAILURE
        }
    }
}

fn run() -> Result<(), CliError> {
    let args: Vec<PathBuf> = env::args_os().skip(1).map(PathBuf::from).collect();
    let [input, output] = args.as_slice() else {
        return Err(CliError::Usage);
    };
    let bzimage = fs::read(input).map_err(|source| CliError::Read {
        path: input.clone(),
        source,
    })?;
    let extracted = extract(&bzimage, MAX_VMLINUX_SIZE).map_err(|source| CliError::Extract {
        path: input.clone(),
        source,
    })?;
    write_atomically(output, &extracted.vmlinux).map_err(|source| CliError::Write {
        path: output.clone(),
        source,
    })?;
    let pvh = extracted
        .elf
        .pvh_entry
        .map_or_else(|| "none".to_owned(), |entry| format!("{entry:#x}"));
    println!(
        "{}: {}-byte vmlinux from a {} payload (boot protocol {}.{:02}, PVH entry {pvh})",
        output.display(),
        extracted.vmlinux.len(),
        extracted.compression,
        extracted.header.protocol >> 8,
        extracted.header.protocol & 0xff,
    );
    Ok(())
}

/// Writes `data` to a temporary file beside `path`, then renames it over
/// `path`, so that an interrupted run never leaves a partial kernel.
fn write_atomically(path: &Path, data: &[u8]) -> io::Result<()> {
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".tmp");
    let tmp = PathBuf::from(tmp);
    fs::write(&tmp, data)?;
    fs::rename(&tmp, path).inspect_err(|_| {
        let _ = fs::remove_file(&tmp);
    })
}
