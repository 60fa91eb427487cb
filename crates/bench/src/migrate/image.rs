//! Reading and writing guest RAM from the VMM side for the end checks:
//! a word reader fast enough to check a whole memcheck buffer (GiBs), and
//! the fill pattern of the idle guest's frames, which no guest code
//! writes, so the VMM checks them itself.

use thiserror::Error;
use vm_memory::{Bytes, GuestAddress};

use guest_memory::FrameId;
use guest_memory::TieredMemory;

use crate::rng::SplitMix64;

/// Bytes the word reader fetches at once.
const CHUNK: u64 = 64 << 10;

/// A pool frame does not hold its pattern.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum PatternError {
    /// Writing the pattern failed.
    #[error("fill frame {frame} at {gpa:#x}: {why}")]
    Fill {
        /// Frame index.
        frame: usize,
        /// Its first byte.
        gpa: u64,
        /// vm-memory's message.
        why: String,
    },
    /// A word differs from its pattern: a migration lost or tore it.
    #[error("word at {gpa:#x} holds {got:#018x}, expected {expected:#018x}")]
    Mismatch {
        /// Where.
        gpa: u64,
        /// The pattern.
        expected: u64,
        /// What memory holds.
        got: u64,
    },
    /// A word could not be read.
    #[error("word at {0:#x} cannot be read")]
    Unreadable(u64),
}

/// Reads guest words through the VMM's mapping, 64 KiB at a time.
#[derive(Debug)]
pub struct WordReader<'m> {
    memory: &'m TieredMemory,
    base: Option<u64>,
    chunk: Vec<u8>,
}

impl<'m> WordReader<'m> {
    /// A reader of `memory`'s guest RAM.
    pub fn new(memory: &'m TieredMemory) -> Self {
        Self {
            memory,
            base: None,
            chunk: vec![0; CHUNK as usize],
        }
    }

    /// The little-endian word at `gpa`, or `None` outside RAM.
    pub fn read(&mut self, gpa: u64) -> Option<u64> {
        let base = gpa & !(CHUNK - 1);
        let offset = (gpa - base) as usize;
        if offset + 8 > self.chunk.len() {
            return self.read_one(gpa);
        }
        if self.base != Some(base) {
            self.base = None;
            let mem = self.memory.guest_memory();
            if mem.read_slice(&mut self.chunk, GuestAddress(base)).is_err() {
                return self.read_one(gpa);
            }
            self.base = Some(base);
        }
        let bytes: [u8; 8] = self.chunk.get(offset..offset + 8)?.try_into().ok()?;
        Some(u64::from_le_bytes(bytes))
    }

    fn read_one(&self, gpa: u64) -> Option<u64> {
        self.memory
            .guest_memory()
            .read_obj::<u64>(GuestAddress(gpa))
            .ok()
    }
}

/// The word the fill pattern puts at `gpa`.
pub fn pattern_word(seed: u64, gpa: u64) -> u64 {
    SplitMix64::new(seed ^ gpa.rotate_left(17)).next_u64()
}

/// Writes the pattern of `seed` into every word of `frames` (before the
/// guest runs, so no dirty tracking needs to see it).
pub fn fill_pattern(
    memory: &TieredMemory,
    frames: &[usize],
    seed: u64,
) -> Result<(), PatternError> {
    let fs = memory.frame_size();
    let mut bytes = vec![0u8; fs as usize];
    for &frame in frames {
        let gpa = memory
            .frames()
            .gpa(FrameId(frame))
            .ok_or(PatternError::Fill {
                frame,
                gpa: 0,
                why: "no such frame".to_owned(),
            })?;
        for (i, word) in bytes.chunks_exact_mut(8).enumerate() {
            word.copy_from_slice(&pattern_word(seed, gpa + i as u64 * 8).to_le_bytes());
        }
        memory
            .guest_memory()
            .write_slice(&bytes, GuestAddress(gpa))
            .map_err(|e| PatternError::Fill {
                frame,
                gpa,
                why: e.to_string(),
            })?;
    }
    Ok(())
}

/// Checks every word of `frames` against the pattern of `seed`; returns
/// the words checked.
pub fn check_pattern(
    memory: &TieredMemory,
    frames: &[usize],
    seed: u64,
) -> Result<u64, PatternError> {
    let fs = memory.frame_size();
    let mut reader = WordReader::new(memory);
    let mut words = 0;
    for &frame in frames {
        let start = memory
            .frames()
            .gpa(FrameId(frame))
            .ok_or(PatternError::Unreadable(0))?;
        for gpa in (start..start + fs).step_by(8) {
            let got = reader.read(gpa).ok_or(PatternError::Unreadable(gpa))?;
            let expected = pattern_word(seed, gpa);
            if got != expected {
                return Err(PatternError::Mismatch { gpa, expected, got });
            }
            words += 1;
        }
    }
    Ok(words)
}

#[cfg(test)]
mod tests {
    use guest_memory::{BackendSpec, MemoryConfig, TierSpec};

    use super::*;

    fn memory() -> TieredMemory {
        let tier = TierSpec {
            name: "fast".into(),
            backend: BackendSpec::Memfd {
                numa_node: None,
                hugetlb: false,
                prealloc: false,
            },
            size: Some(4 << 20),
            profile: None,
        };
        TieredMemory::new(&MemoryConfig {
            frame_size: 64 << 10,
            ..MemoryConfig::new(4 << 20, vec![tier])
        })
        .unwrap()
    }

    #[test]
    fn pattern_survives_and_a_torn_word_is_found() {
        let mem = memory();
        let frames = [3, 7, 8];
        fill_pattern(&mem, &frames, 5).unwrap();
        assert_eq!(check_pattern(&mem, &frames, 5).unwrap(), 3 * 8192);
        assert!(check_pattern(&mem, &frames, 6).is_err(), "seeded");
        let gpa = mem.frames().gpa(FrameId(7)).unwrap() + 4096 + 16;
        mem.guest_memory()
            .write_obj(0xdead_beef_u64, GuestAddress(gpa))
            .unwrap();
        assert_eq!(
            check_pattern(&mem, &frames, 5),
            Err(PatternError::Mismatch {
                gpa,
                expected: pattern_word(5, gpa),
                got: 0xdead_beef
            })
        );
    }

    #[test]
    fn reader_reads_words_across_chunks_and_refuses_outside_ram() {
        let mem = memory();
        let gm = mem.guest_memory();
        for (gpa, value) in [(0u64, 1u64), (CHUNK - 8, 2), (CHUNK, 3), ((4 << 20) - 8, 4)] {
            gm.write_obj(value, GuestAddress(gpa)).unwrap();
        }
        let mut reader = WordReader::new(&mem);
        assert_eq!(reader.read(CHUNK), Some(3));
        assert_eq!(reader.read(0), Some(1));
        assert_eq!(reader.read(CHUNK - 8), Some(2));
        assert_eq!(reader.read((4 << 20) - 8), Some(4));
        assert_eq!(
            reader.read(CHUNK - 4),
            Some(3 << 32),
            "unaligned, across chunks"
        );
        assert_eq!(reader.read(4 << 20), None);
    }
}
