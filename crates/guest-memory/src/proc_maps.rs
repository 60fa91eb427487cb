//! Reading `/proc/self/maps`: which file (device, inode) and offset backs
//! each host-virtual range of this process.

use std::fs;
use std::io;

use thiserror::Error;

/// One line of `/proc/self/maps`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct MapsEntry {
    pub start: u64,
    pub end: u64,
    pub offset: u64,
    pub dev_major: u32,
    pub dev_minor: u32,
    pub inode: u64,
}

/// Why `/proc/self/maps` could not be read.
#[derive(Debug, Error)]
pub enum MapsError {
    /// Reading failed.
    #[error("cannot read /proc/self/maps")]
    Read(#[source] io::Error),
    /// A line did not have the expected shape.
    #[error("cannot parse /proc/self/maps line '{0}'")]
    Parse(String),
}

/// The current mappings of this process, sorted by address.
pub(crate) fn read_self_maps() -> Result<Vec<MapsEntry>, MapsError> {
    let text = fs::read_to_string("/proc/self/maps").map_err(MapsError::Read)?;
    parse_maps(&text)
}

/// Parses the text of a maps file.
pub(crate) fn parse_maps(text: &str) -> Result<Vec<MapsEntry>, MapsError> {
    text.lines()
        .filter(|l| !l.is_empty())
        .map(|line| parse_line(line).ok_or_else(|| MapsError::Parse(line.to_owned())))
        .collect()
}

/// `start-end perms offset major:minor inode [path]`, numbers in hex except the inode.
fn parse_line(line: &str) -> Option<MapsEntry> {
    let mut fields = line.split_ascii_whitespace();
    let (start, end) = fields.next()?.split_once('-')?;
    let _perms = fields.next()?;
    let offset = fields.next()?;
    let (major, minor) = fields.next()?.split_once(':')?;
    let inode = fields.next()?;
    Some(MapsEntry {
        start: u64::from_str_radix(start, 16).ok()?,
        end: u64::from_str_radix(end, 16).ok()?,
        offset: u64::from_str_radix(offset, 16).ok()?,
        dev_major: u32::from_str_radix(major, 16).ok()?,
        dev_minor: u32::from_str_radix(minor, 16).ok()?,
        inode: inode.parse().ok()?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_file_and_anonymous_lines() {
        let text = "7f0000000000-7f0000200000 rw-s 00400000 00:01 4242   /memfd:tiervisor-a (deleted)\n\
                    7f0000200000-7f0000400000 ---p 00000000 00:00 0 \n\
                    7ffd00000000-7ffd00021000 rw-p 00000000 fd:1f 99 [stack]\n";
        let entries = parse_maps(text).unwrap();
        assert_eq!(
            entries[0],
            MapsEntry {
                start: 0x7f00_0000_0000,
                end: 0x7f00_0020_0000,
                offset: 0x40_0000,
                dev_major: 0,
                dev_minor: 1,
                inode: 4242,
            }
        );
        assert_eq!(entries[1].inode, 0);
        assert_eq!((entries[2].dev_major, entries[2].dev_minor), (0xfd, 0x1f));
    }

    #[test]
    fn rejects_garbage() {
        assert!(matches!(
            parse_maps("hello world\n"),
            Err(MapsError::Parse(_))
        ));
    }

    #[test]
    fn own_maps_are_sorted_and_readable() {
        let entries = read_self_maps().unwrap();
        assert!(!entries.is_empty());
        assert!(entries.windows(2).all(|w| w[0].end <= w[1].start));
    }
}
