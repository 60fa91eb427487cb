//! Opening file backings: device-DAX character devices and regular files.

use std::fs::{File, OpenOptions};
use std::path::Path;

use crate::backend_error::BackendError;

/// Opens a device-DAX device read-write (close-on-exec).
pub(crate) fn open_device(path: &Path) -> Result<File, BackendError> {
    open_rw(path)
}

/// Opens a regular file read-write and grows it to `capacity` if shorter
/// (a shorter file would SIGBUS on access past its end).
pub(crate) fn open_regular(path: &Path, capacity: u64) -> Result<File, BackendError> {
    let file = open_rw(path)?;
    let len = file.metadata().map_err(BackendError::Stat)?.len();
    if len < capacity {
        file.set_len(capacity)
            .map_err(|source| BackendError::Resize {
                size: capacity,
                source,
            })?;
    }
    Ok(file)
}

fn open_rw(path: &Path) -> Result<File, BackendError> {
    // std opens with O_CLOEXEC.
    OpenOptions::new()
        .read(true)
        .write(true)
        .open(path)
        .map_err(|source| BackendError::Open {
            path: path.to_owned(),
            source,
        })
}
