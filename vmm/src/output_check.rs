//! Checks of the files `tiervisor` will write (the report, the console
//! log, the API socket) before any guest starts, so that a run is not
//! lost to a path that was never writable.

use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use thiserror::Error;

/// Why an output path cannot be used.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum OutputPathError {
    /// The directory the file goes into does not exist.
    #[error("{option} {path}: directory {dir} does not exist")]
    NoDirectory {
        /// The option naming the path.
        option: &'static str,
        /// The path as given.
        path: PathBuf,
        /// Its directory.
        dir: PathBuf,
    },
    /// What should be the directory is something else.
    #[error("{option} {path}: {dir} is not a directory")]
    NotADirectory {
        /// The option naming the path.
        option: &'static str,
        /// The path as given.
        path: PathBuf,
        /// Its would-be directory.
        dir: PathBuf,
    },
    /// The directory cannot be written.
    #[error("{option} {path}: directory {dir} is not writable")]
    NotWritable {
        /// The option naming the path.
        option: &'static str,
        /// The path as given.
        path: PathBuf,
        /// Its directory.
        dir: PathBuf,
    },
    /// The path is a directory.
    #[error("{option} {path}: is a directory")]
    IsADirectory {
        /// The option naming the path.
        option: &'static str,
        /// The path as given.
        path: PathBuf,
    },
}

/// Checks that `path` (given with `option`) can be created or replaced:
/// its directory exists and is writable, and it is not a directory
/// itself.
pub fn check_output_path(option: &'static str, path: &Path) -> Result<(), OutputPathError> {
    if path.is_dir() {
        return Err(OutputPathError::IsADirectory {
            option,
            path: path.into(),
        });
    }
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let fail = |make: fn(&'static str, PathBuf, PathBuf) -> OutputPathError| {
        Err(make(option, path.into(), dir.into()))
    };
    if !dir.exists() {
        return fail(|option, path, dir| OutputPathError::NoDirectory { option, path, dir });
    }
    if !dir.is_dir() {
        return fail(|option, path, dir| OutputPathError::NotADirectory { option, path, dir });
    }
    if !writable(dir) {
        return fail(|option, path, dir| OutputPathError::NotWritable { option, path, dir });
    }
    Ok(())
}

/// Whether this process may create files in `dir` (`access(2)` with
/// `W_OK | X_OK`: a read-only filesystem or missing permission says no).
fn writable(dir: &Path) -> bool {
    let Ok(c) = CString::new(dir.as_os_str().as_bytes()) else {
        return false;
    };
    // SAFETY: `c` is a valid NUL-terminated path; access only reads it.
    unsafe { libc::access(c.as_ptr(), libc::W_OK | libc::X_OK) == 0 }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_directory_is_named() {
        let err = check_output_path("--report-json", Path::new("/nonexistent-tv/r.json"));
        assert_eq!(
            err.unwrap_err().to_string(),
            "--report-json /nonexistent-tv/r.json: directory /nonexistent-tv does not exist"
        );
    }

    #[test]
    fn a_file_in_a_writable_directory_passes_and_a_directory_does_not() {
        let dir = std::env::temp_dir();
        assert_eq!(
            check_output_path("--report-json", &dir.join("r.json")),
            Ok(())
        );
        assert_eq!(
            check_output_path("--report-json", Path::new("r.json")),
            Ok(())
        );
        assert!(matches!(
            check_output_path("--report-json", &dir),
            Err(OutputPathError::IsADirectory { .. })
        ));
    }

    #[test]
    fn a_file_as_directory_is_refused() {
        let file = std::env::temp_dir().join(format!("tv-output-check-{}", std::process::id()));
        std::fs::write(&file, b"x").unwrap();
        let err = check_output_path("--console-log", &file.join("log")).unwrap_err();
        std::fs::remove_file(&file).unwrap();
        assert!(
            matches!(err, OutputPathError::NotADirectory { .. }),
            "{err}"
        );
    }
}
