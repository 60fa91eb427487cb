//! Tests that read the tables back the way a guest does: scan the BIOS
//! area for the RSDP, follow pointers, check every checksum and length,
//! and decode the MADT entries and the DSDT's AML.

use vm_memory::{Bytes, GuestAddress, GuestMemoryMmap};

use super::aml::decode;
use super::sdt::{HEADER_LEN, byte_sum};
use super::*;

/// 1 MiB of real guest memory, like the low RAM of a Linux guest.
fn low_memory() -> GuestMemoryMmap {
    GuestMemoryMmap::from_ranges(&[(GuestAddress(0), 1 << 20)]).unwrap()
}

fn u16_at(b: &[u8], off: usize) -> u16 {
    u16::from_le_bytes(b[off..off + 2].try_into().unwrap())
}

fn u32_at(b: &[u8], off: usize) -> u32 {
    u32::from_le_bytes(b[off..off + 4].try_into().unwrap())
}

fn u64_at(b: &[u8], off: usize) -> u64 {
    u64::from_le_bytes(b[off..off + 8].try_into().unwrap())
}

/// Finds the RSDP as Linux does without boot_params.acpi_rsdp_addr: the
/// first 16-byte-aligned "RSD PTR " in 0xe0000..0x100000 whose ACPI 1.0
/// checksum holds.
fn scan_for_rsdp(mem: &GuestMemoryMmap) -> u64 {
    let mut sig = [0u8; 8];
    (0xe_0000u64..0x10_0000)
        .step_by(16)
        .find(|&a| {
            mem.read_slice(&mut sig, GuestAddress(a)).unwrap();
            if sig != RSDP_SIGNATURE {
                return false;
            }
            let mut v1 = [0u8; 20];
            mem.read_slice(&mut v1, GuestAddress(a)).unwrap();
            byte_sum(&v1) == 0
        })
        .expect("no RSDP in the BIOS area")
}

/// Reads a table whose header is at `addr`, checking its length and
/// checksum the way ACPICA does before using it.
fn read_table(mem: &GuestMemoryMmap, addr: u64) -> Vec<u8> {
    let mut header = [0u8; HEADER_LEN];
    mem.read_slice(&mut header, GuestAddress(addr)).unwrap();
    let len = u32_at(&header, 4) as usize;
    assert!(
        len >= HEADER_LEN,
        "table at {addr:#x} shorter than a header"
    );
    let mut table = vec![0u8; len];
    mem.read_slice(&mut table, GuestAddress(addr)).unwrap();
    assert_eq!(byte_sum(&table), 0, "checksum of the table at {addr:#x}");
    table
}

/// Every table a guest reaches from the RSDP, with its address.
struct Walked {
    rsdp: (u64, Vec<u8>),
    xsdt: (u64, Vec<u8>),
    fadt: (u64, Vec<u8>),
    madt: (u64, Vec<u8>),
    dsdt: (u64, Vec<u8>),
}

fn walk(mem: &GuestMemoryMmap) -> Walked {
    let rsdp_addr = scan_for_rsdp(mem);
    let mut rsdp = vec![0u8; RSDP_LEN];
    mem.read_slice(&mut rsdp, GuestAddress(rsdp_addr)).unwrap();
    assert_eq!(rsdp[15], 2, "RSDP revision");
    assert_eq!(u32_at(&rsdp, 20) as usize, RSDP_LEN, "RSDP length");
    assert_eq!(byte_sum(&rsdp), 0, "RSDP extended checksum");

    let xsdt_addr = u64_at(&rsdp, 24);
    let xsdt = read_table(mem, xsdt_addr);
    assert_eq!(&xsdt[..4], b"XSDT");
    assert_eq!((xsdt.len() - HEADER_LEN) % 8, 0, "XSDT entries are u64s");
    let entries: Vec<u64> = (HEADER_LEN..xsdt.len())
        .step_by(8)
        .map(|off| u64_at(&xsdt, off))
        .collect();
    let tables: Vec<(u64, Vec<u8>)> = entries.iter().map(|&a| (a, read_table(mem, a))).collect();
    let sigs: Vec<&[u8]> = tables.iter().map(|(_, t)| &t[..4]).collect();
    assert_eq!(
        sigs,
        [b"FACP", b"APIC"],
        "XSDT lists the FADT and MADT only"
    );
    let fadt = tables[0].clone();
    let madt = tables[1].clone();

    let x_dsdt = u64_at(&fadt.1, fadt::X_DSDT_OFFSET);
    assert_eq!(
        u64::from(u32_at(&fadt.1, fadt::DSDT_OFFSET)),
        x_dsdt,
        "DSDT and X_DSDT agree"
    );
    let dsdt = read_table(mem, x_dsdt);
    assert_eq!(&dsdt[..4], b"DSDT");
    Walked {
        rsdp: (rsdp_addr, rsdp),
        xsdt: (xsdt_addr, xsdt),
        fadt,
        madt,
        dsdt: (x_dsdt, dsdt),
    }
}

/// The MADT's interrupt controller entries, decoded.
#[derive(Debug, Default)]
struct MadtEntries {
    /// (processor UID, APIC ID, flags)
    lapics: Vec<(u8, u8, u32)>,
    /// (I/O APIC ID, address, GSI base)
    ioapics: Vec<(u8, u32, u32)>,
    /// (bus, source IRQ, GSI, flags)
    overrides: Vec<(u8, u8, u32, u16)>,
    /// (processor UID, flags, LINT#)
    nmis: Vec<(u8, u16, u8)>,
}

fn decode_madt(madt: &[u8]) -> MadtEntries {
    assert_eq!(u32_at(madt, 36), LAPIC_ADDR);
    assert_eq!(u32_at(madt, 40), madt::PCAT_COMPAT);
    let mut e = MadtEntries::default();
    let mut off = HEADER_LEN + 8;
    while off < madt.len() {
        let (kind, len) = (madt[off], usize::from(madt[off + 1]));
        let s = &madt[off..off + len];
        match (kind, len) {
            (0, 8) => e.lapics.push((s[2], s[3], u32_at(s, 4))),
            (1, 12) => e.ioapics.push((s[2], u32_at(s, 4), u32_at(s, 8))),
            (2, 10) => e.overrides.push((s[2], s[3], u32_at(s, 4), u16_at(s, 8))),
            (4, 6) => e.nmis.push((s[2], u16_at(s, 3), s[5])),
            _ => panic!("unexpected MADT entry type {kind} length {len} at {off}"),
        }
        off += len;
    }
    assert_eq!(off, madt.len(), "entries end exactly at the table's end");
    e
}

#[test]
fn a_guest_walks_from_the_rsdp_to_every_table() {
    let mem = low_memory();
    let rsdp = write_tables(&mem, &AcpiConfig::new(4)).unwrap();
    assert_eq!(rsdp, RSDP_ADDR);
    let w = walk(&mem);
    assert_eq!(w.rsdp.0, RSDP_ADDR.0, "the scan finds the RSDP we returned");

    // Each table lies in the window, aligned, without overlapping another.
    let mut spans: Vec<(u64, u64)> = [&w.rsdp, &w.xsdt, &w.fadt, &w.madt, &w.dsdt]
        .iter()
        .map(|(a, t)| (*a, *a + t.len() as u64))
        .collect();
    spans.sort();
    for (start, end) in &spans {
        assert!(*start >= RSDP_ADDR.0 && *end <= TABLES_END.0);
        assert_eq!(start % 16, 0);
    }
    for pair in spans.windows(2) {
        assert!(pair[0].1 <= pair[1].0, "{pair:x?} overlap");
    }

    // What write_tables put there is what build_tables built.
    for t in build_tables(&AcpiConfig::new(4)).unwrap() {
        let mut back = vec![0u8; t.bytes.len()];
        mem.read_slice(&mut back, t.addr).unwrap();
        assert_eq!(back, t.bytes, "{:?}", String::from_utf8_lossy(&t.signature));
    }
}

#[test]
fn layout_is_the_one_the_module_doc_gives() {
    for (vcpus, madt_len) in [(1, 80), (254, 2104)] {
        let tables = build_tables(&AcpiConfig::new(vcpus)).unwrap();
        let layout: Vec<(&[u8; 4], u64, usize)> = tables
            .iter()
            .map(|t| (&t.signature, t.addr.0, t.bytes.len()))
            .collect();
        assert_eq!(
            layout,
            [
                (b"RSD ", 0xe_0000, 36),
                (b"XSDT", 0xe_0030, 52),
                (b"FACP", 0xe_0070, 276),
                (b"DSDT", 0xe_0190, 234),
                (b"APIC", 0xe_0280, madt_len),
            ]
        );
    }
}

#[test]
fn every_table_has_a_header_length_that_matches_and_sums_to_zero() {
    for t in build_tables(&AcpiConfig::new(8)).unwrap() {
        let sig = String::from_utf8_lossy(&t.signature).into_owned();
        if &t.signature == b"RSD " {
            assert_eq!(u32_at(&t.bytes, 20) as usize, t.bytes.len(), "{sig}");
            assert_eq!(byte_sum(&t.bytes[..20]), 0, "{sig} v1 checksum");
        } else {
            assert_eq!(&t.bytes[..4], &t.signature, "{sig}");
            assert_eq!(u32_at(&t.bytes, 4) as usize, t.bytes.len(), "{sig}");
            assert_eq!(&t.bytes[10..16], b"TIERVR", "{sig} OEM ID");
        }
        assert_eq!(byte_sum(&t.bytes), 0, "{sig} checksum");
    }
}

#[test]
fn madt_has_one_enabled_distinct_lapic_per_vcpu_and_a_distinct_ioapic() {
    for vcpus in [1, 2, 8, 64, 254] {
        let mem = low_memory();
        write_tables(&mem, &AcpiConfig::new(vcpus)).unwrap();
        let e = decode_madt(&walk(&mem).madt.1);

        assert_eq!(e.lapics.len(), vcpus as usize, "{vcpus} vcpus");
        for (i, &(uid, apic_id, flags)) in e.lapics.iter().enumerate() {
            assert_eq!(usize::from(apic_id), i, "APIC ID of vCPU {i}");
            assert_eq!(uid, apic_id, "UID of vCPU {i}");
            assert_eq!(flags & 1, 1, "vCPU {i} enabled");
        }
        let ids: std::collections::BTreeSet<u8> = e.lapics.iter().map(|l| l.1).collect();
        assert_eq!(ids.len(), vcpus as usize, "APIC IDs distinct");
        assert!(!ids.contains(&0xff), "no broadcast APIC ID");

        assert_eq!(e.ioapics.len(), 1);
        let (ioapic_id, addr, gsi_base) = e.ioapics[0];
        assert!(
            !ids.contains(&ioapic_id),
            "I/O APIC ID {ioapic_id} collides"
        );
        assert_ne!(ioapic_id, 0xff);
        assert_eq!((addr, gsi_base), (IOAPIC_ADDR, 0));

        // PIT IRQ 0 on KVM's default routing (GSI 0); nothing for IRQ 9
        // since there is no SCI.
        assert_eq!(e.overrides, [(0, 0, 0, 0)]);
        assert_eq!(e.nmis, [(0xff, 0, 1)]);
    }
}

#[test]
fn vcpu_counts_xapic_cannot_describe_are_refused_before_writing() {
    for vcpus in [0, MAX_VCPUS + 1, 255, 1024] {
        let mem = low_memory();
        let err = write_tables(&mem, &AcpiConfig::new(vcpus)).unwrap_err();
        match vcpus {
            0 => assert!(matches!(err, AcpiError::NoVcpus)),
            n => assert!(matches!(err, AcpiError::TooManyVcpus(v) if v == n)),
        }
        let mut window = vec![0u8; (TABLES_END.0 - RSDP_ADDR.0) as usize];
        mem.read_slice(&mut window, RSDP_ADDR).unwrap();
        assert!(window.iter().all(|&b| b == 0), "nothing written");
    }
}

#[test]
fn memory_that_does_not_cover_the_window_is_an_error() {
    // No memory at the RSDP.
    let mem: GuestMemoryMmap =
        GuestMemoryMmap::from_ranges(&[(GuestAddress(0), 0xa_0000)]).unwrap();
    let err = write_tables(&mem, &AcpiConfig::new(1)).unwrap_err();
    assert!(matches!(&err, AcpiError::Write { table, addr: 0xe_0000, .. } if table == "RSD "));
    // Memory ending just after the RSDP: the XSDT write fails.
    let mem: GuestMemoryMmap =
        GuestMemoryMmap::from_ranges(&[(GuestAddress(0), 0xe_0030)]).unwrap();
    let err = write_tables(&mem, &AcpiConfig::new(1)).unwrap_err();
    assert!(matches!(&err, AcpiError::Write { table, .. } if table == "XSDT"));
    assert!(std::error::Error::source(&err).is_some());
}

#[test]
fn fadt_declares_a_hardware_reduced_pc_with_an_i8042() {
    let mem = low_memory();
    write_tables(&mem, &AcpiConfig::new(1)).unwrap();
    let fadt = walk(&mem).fadt.1;
    assert_eq!(fadt.len(), FADT_LEN);
    assert_eq!(fadt[8], 6, "FADT revision");
    let flags = u32_at(&fadt, fadt::FLAGS_OFFSET);
    assert_eq!(flags, fadt::FLAGS);
    assert_ne!(flags & fadt::FLAG_HW_REDUCED_ACPI, 0);
    let boot = u16_at(&fadt, fadt::IAPC_BOOT_ARCH_OFFSET);
    assert_ne!(boot & fadt::IAPC_8042, 0, "i8042 present");
    assert_ne!(boot & fadt::IAPC_VGA_NOT_PRESENT, 0);
    assert_eq!(
        u16_at(&fadt, 46),
        0,
        "no SCI on a hardware-reduced platform"
    );
    assert_eq!(u32_at(&fadt, 36), 0, "no FACS");
}

/// A decoded AML object of the kinds the DSDT uses.
#[derive(Debug, PartialEq)]
enum Aml {
    Scope(String, Vec<Aml>),
    Device(String, Vec<Aml>),
    Name(String, AmlValue),
    /// Name, MethodFlags, body (undecoded).
    Method(String, u8, Vec<u8>),
}

#[derive(Debug, PartialEq)]
enum AmlValue {
    Integer(u64),
    String(String),
    Buffer(Vec<u8>),
    Package(Vec<AmlValue>),
}

/// Decodes a TermList that must fill `b` exactly.
fn decode_terms(mut b: &[u8]) -> Vec<Aml> {
    let mut out = vec![];
    while !b.is_empty() {
        let (obj, used) = decode_term(b);
        out.push(obj);
        b = &b[used..];
    }
    out
}

/// Decodes one term: (object, bytes used).
fn decode_term(b: &[u8]) -> (Aml, usize) {
    match b[0] {
        0x10 => {
            let (total, pl) = decode::pkg_length(&b[1..]);
            let body = &b[1 + pl..1 + total];
            let (name, n) = decode_name(body);
            (Aml::Scope(name, decode_terms(&body[n..])), 1 + total)
        }
        0x5b if b[1] == 0x82 => {
            let (total, pl) = decode::pkg_length(&b[2..]);
            let body = &b[2 + pl..2 + total];
            let (name, n) = decode_name(body);
            (Aml::Device(name, decode_terms(&body[n..])), 2 + total)
        }
        0x08 => {
            let (name, n) = decode_name(&b[1..]);
            let (value, v) = decode_value(&b[1 + n..]);
            (Aml::Name(name, value), 1 + n + v)
        }
        0x14 => {
            let (total, pl) = decode::pkg_length(&b[1..]);
            let body = &b[1 + pl..1 + total];
            let (name, n) = decode_name(body);
            (
                Aml::Method(name, body[n], body[n + 1..].to_vec()),
                1 + total,
            )
        }
        op => panic!("unexpected AML opcode {op:#x}"),
    }
}

/// A NameString: optional root prefix and one NameSeg.
fn decode_name(b: &[u8]) -> (String, usize) {
    let root = usize::from(b[0] == b'\\');
    let seg = &b[root..root + 4];
    assert!(
        seg[0].is_ascii_uppercase() || seg[0] == b'_',
        "NameSeg lead {seg:?}"
    );
    assert!(
        seg.iter()
            .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || *c == b'_')
    );
    let mut name = if root == 1 {
        "\\".to_owned()
    } else {
        String::new()
    };
    name.push_str(std::str::from_utf8(seg).unwrap());
    (name, root + 4)
}

fn decode_integer(b: &[u8]) -> (u64, usize) {
    let width = match b[0] {
        0x00 => return (0, 1),
        0x01 => return (1, 1),
        0x0a => 1,
        0x0b => 2,
        0x0c => 4,
        0x0e => 8,
        op => panic!("not an integer: {op:#x}"),
    };
    let mut le = [0u8; 8];
    le[..width].copy_from_slice(&b[1..1 + width]);
    (u64::from_le_bytes(le), 1 + width)
}

fn decode_value(b: &[u8]) -> (AmlValue, usize) {
    if b[0] == 0x0d {
        let len = b[1..].iter().position(|&c| c == 0).expect("NUL-terminated");
        let text = std::str::from_utf8(&b[1..1 + len]).expect("ASCII");
        (AmlValue::String(text.to_owned()), len + 2)
    } else if b[0] == 0x11 {
        let (total, pl) = decode::pkg_length(&b[1..]);
        let body = &b[1 + pl..1 + total];
        let (size, n) = decode_integer(body);
        assert_eq!(
            size as usize,
            body.len() - n,
            "BufferSize matches its bytes"
        );
        (AmlValue::Buffer(body[n..].to_vec()), 1 + total)
    } else if b[0] == 0x12 {
        let (total, pl) = decode::pkg_length(&b[1..]);
        let body = &b[1 + pl..1 + total];
        let mut elements = vec![];
        let mut at = 1;
        while at < body.len() {
            let (e, n) = decode_value(&body[at..]);
            elements.push(e);
            at += n;
        }
        assert_eq!(elements.len(), usize::from(body[0]), "NumElements");
        (AmlValue::Package(elements), 1 + total)
    } else {
        let (v, n) = decode_integer(b);
        (AmlValue::Integer(v), n)
    }
}

/// A decoded resource descriptor.
#[derive(Debug, PartialEq)]
enum Resource {
    /// (min, max, alignment, length), 16-bit decode.
    Io(u16, u16, u8, u8),
    /// IRQ mask.
    Irq(u16),
}

/// Decodes a resource template; the end tag must close it and its
/// checksum must balance the template.
fn decode_resources(b: &[u8]) -> Vec<Resource> {
    assert_eq!(byte_sum(b), 0, "end tag checksum");
    let mut out = vec![];
    let mut off = 0;
    loop {
        let tag = b[off];
        assert_eq!(tag & 0x80, 0, "only small descriptors expected");
        let len = usize::from(tag & 7);
        let d = &b[off + 1..off + 1 + len];
        match tag >> 3 {
            0x8 => {
                assert_eq!((len, d[0]), (7, 1), "IO descriptor, Decode16");
                out.push(Resource::Io(u16_at(d, 1), u16_at(d, 3), d[5], d[6]));
            }
            0x4 => {
                assert_eq!(len, 2, "IRQNoFlags");
                out.push(Resource::Irq(u16_at(d, 0)));
            }
            0xf => {
                assert_eq!(len, 1);
                assert_eq!(off + 2, b.len(), "end tag is last");
                return out;
            }
            other => panic!("unexpected resource type {other:#x}"),
        }
        off += 1 + len;
    }
}

#[test]
fn dsdt_aml_decodes_to_com1_the_i8042_and_the_power_button_under_sb() {
    let mem = low_memory();
    write_tables(&mem, &AcpiConfig::new(2)).unwrap();
    let dsdt = walk(&mem).dsdt.1;
    assert_eq!(dsdt[8], 2, "DSDT revision 2: 64-bit integers");
    let terms = decode_terms(&dsdt[HEADER_LEN..]);
    let [Aml::Name(s5, s5_value), Aml::Scope(scope, devices)] = &terms[..] else {
        panic!("\\_S5_ and one root scope expected, got {terms:?}");
    };
    assert_eq!(s5, "_S5_");
    assert_eq!(
        *s5_value,
        AmlValue::Package(vec![
            AmlValue::Integer(5),
            AmlValue::Integer(0),
            AmlValue::Integer(0),
            AmlValue::Integer(0)
        ])
    );
    assert_eq!(scope, "\\_SB_");
    let [
        Aml::Device(com, com_body),
        Aml::Device(kbd, kbd_body),
        Aml::Device(button, button_body),
        Aml::Device(ged, ged_body),
    ] = &devices[..]
    else {
        panic!("four devices expected, got {devices:?}");
    };
    assert_eq!(
        [com, kbd, button, ged].map(String::as_str),
        ["COM1", "PS2K", "PWRB", "GED0"]
    );

    let crs = |body: &[Aml]| -> Vec<Resource> {
        body.iter()
            .find_map(|o| match o {
                Aml::Name(n, AmlValue::Buffer(b)) if n == "_CRS" => Some(decode_resources(b)),
                _ => None,
            })
            .expect("_CRS")
    };
    assert_eq!(
        com_body[0],
        Aml::Name("_HID".into(), AmlValue::Integer(0x0105_d041))
    );
    assert_eq!(com_body[1], Aml::Name("_UID".into(), AmlValue::Integer(0)));
    assert_eq!(
        crs(com_body),
        [Resource::Io(0x3f8, 0x3f8, 1, 8), Resource::Irq(1 << 4)]
    );
    assert_eq!(
        kbd_body[0],
        Aml::Name("_HID".into(), AmlValue::Integer(0x0303_d041))
    );
    assert_eq!(
        crs(kbd_body),
        [
            Resource::Io(0x60, 0x60, 1, 1),
            Resource::Io(0x64, 0x64, 1, 1),
            Resource::Irq(1 << 1)
        ]
    );
    assert_eq!(
        button_body[..],
        [
            Aml::Name("_HID".into(), AmlValue::Integer(0x0c0c_d041)),
            Aml::Name("_UID".into(), AmlValue::Integer(0)),
        ]
    );
    assert_eq!(
        ged_body[0],
        Aml::Name("_HID".into(), AmlValue::String("ACPI0013".into()))
    );
    assert_eq!(crs(ged_body), [Resource::Irq(1 << 5)]);
    // Notify (\_SB.PWRB, 0x80): NotifyOp, the absolute dual name, 0x80.
    let mut notify = vec![0x86, b'\\', 0x2e];
    notify.extend_from_slice(b"_SB_PWRB");
    notify.extend_from_slice(&[0x0a, 0x80]);
    assert_eq!(
        ged_body.last(),
        Some(&Aml::Method("_EVT".into(), 1, notify)),
        "_EVT takes one argument, is not serialized and notifies the button"
    );
}
