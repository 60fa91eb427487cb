//! Extraction from a real distribution kernel: the bzImage named by
//! `TIERVISOR_TEST_KERNEL` (scripts/test-all.sh sets it to the Debian
//! cloud kernel that scripts/debian-kernel.sh fetches). Skipped, with a
//! note, when the variable is unset.

use std::env;

use kernel_image::{MAX_VMLINUX_SIZE, extract, pvh_entry};

#[test]
fn extracts_the_test_kernel() {
    let Some(path) = env::var_os("TIERVISOR_TEST_KERNEL") else {
        eprintln!(
            "skipped: TIERVISOR_TEST_KERNEL is not set (scripts/debian-kernel.sh fetches one)"
        );
        return;
    };
    let image = std::fs::read(&path).unwrap();
    let extracted = extract(&image, MAX_VMLINUX_SIZE).unwrap();
    assert!(
        extracted.header.protocol >= 0x020c,
        "a 64-bit kernel has boot protocol 2.12+"
    );
    assert!(extracted.compression.is_supported());
    // Every x86-64 distribution kernel is a few tens of MiB unpacked; its
    // ELF entry is the physical startup_64 (CONFIG_PHYSICAL_START, 16 MiB
    // by default), above the first MiB.
    assert!(extracted.vmlinux.len() > 8 << 20);
    assert!((0x10_0000..0x1_0000_0000).contains(&extracted.elf.entry));
    assert!(extracted.elf.load_segments >= 2);
    let entry = extracted.elf.pvh_entry;
    assert_eq!(entry, pvh_entry(&extracted.vmlinux));
    eprintln!(
        "{}: {} payload, vmlinux {} bytes, PVH entry {}",
        path.to_string_lossy(),
        extracted.compression,
        extracted.vmlinux.len(),
        entry.map_or_else(|| "none".to_owned(), |entry| format!("{entry:#x}")),
    );
    // The Debian cloud kernel (the one the test setup fetches) is built
    // with CONFIG_PVH, which the VMM's vmlinux boot path relies on (and,
    // in bookworm, with CONFIG_KERNEL_LZ4).
    if path.to_string_lossy().contains("cloud-amd64") {
        let entry = u64::from(entry.unwrap());
        // pvh_start_xen lies in .head.text, just after startup_64.
        assert!((extracted.elf.entry..extracted.elf.entry + 0x10_0000).contains(&entry));
    }

    // When the script also extracted it, the file must be the same kernel.
    if let Some(vmlinux) = env::var_os("TIERVISOR_TEST_VMLINUX") {
        assert!(std::fs::read(vmlinux).unwrap() == extracted.vmlinux);
    }
}
