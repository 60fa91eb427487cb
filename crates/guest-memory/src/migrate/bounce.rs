//! The exchange bounce area: a memfd of two frames with a view mapping.
//! Exchanging frames parks both on it (mapped over their host ranges) while
//! their slots are overwritten, so readers always see the right data.

use std::io;
use std::os::fd::{AsFd, BorrowedFd};

use crate::backend_error::BackendError;
use crate::mapping::HostMapping;

/// Two frames of memfd memory.
#[derive(Debug)]
pub(crate) struct BounceArea {
    file: std::fs::File,
    view: HostMapping,
    frame_size: u64,
}

impl BounceArea {
    /// A bounce area for frames of `frame_size` bytes.
    pub(crate) fn new(frame_size: u64) -> Result<Self, BackendError> {
        let file = crate::memfd::create("bounce", 2 * frame_size, false)?;
        let len = usize::try_from(2 * frame_size)
            .map_err(|_| BackendError::MemfdCreate(io::Error::from_raw_os_error(libc::EINVAL)))?;
        let view =
            HostMapping::map_shared(file.as_fd(), len, 0).map_err(BackendError::MemfdCreate)?;
        Ok(BounceArea {
            file,
            view,
            frame_size,
        })
    }

    /// The memfd.
    pub(crate) fn fd(&self) -> BorrowedFd<'_> {
        self.file.as_fd()
    }

    /// File offset of half `k` (0 or 1).
    pub(crate) fn offset(&self, k: u64) -> u64 {
        k * self.frame_size
    }

    /// View address of half `k`.
    pub(crate) fn view(&self, k: u64) -> u64 {
        self.view.addr() as u64 + self.offset(k)
    }
}
