//! Checks the tables with ACPICA's iasl, the same ACPICA code Linux
//! parses tables with: every table must disassemble without a warning,
//! error or bad checksum, and compiling the disassembly back must give
//! our bytes. The RSDP, which iasl cannot load, is compiled from its
//! fields instead. Skipped (with a note) when iasl is not installed
//! (Debian: `apt-get install acpica-tools`).

use std::path::{Path, PathBuf};
use std::process::Command;

use super::sdt::{CHECKSUM_OFFSET, HEADER_LEN, byte_sum, checksum};
use super::*;

/// A scratch directory for one test, removed when dropped.
struct Scratch(PathBuf);

impl Scratch {
    fn new(name: &str) -> Self {
        let dir =
            std::env::temp_dir().join(format!("tiervisor-acpi-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        Self(dir)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Whether iasl can be run; says so on stderr when it cannot.
fn have_iasl() -> bool {
    match Command::new("iasl").arg("-v").output() {
        Ok(_) => true,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            eprintln!("iasl not installed (acpica-tools): skipping the ACPICA checks");
            false
        }
        Err(e) => panic!("running iasl: {e}"),
    }
}

/// Runs iasl with `args` in `dir`: (success, stdout and stderr).
fn iasl(dir: &Path, args: &[&str]) -> (bool, String) {
    let out = Command::new("iasl")
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

/// Disassembles `bytes` as `name.dat`: the ASL, or iasl's complaint.
fn disassemble(dir: &Path, name: &str, bytes: &[u8]) -> Result<String, String> {
    std::fs::write(dir.join(format!("{name}.dat")), bytes).unwrap();
    let (ok, log) = iasl(dir, &["-d", &format!("{name}.dat")]);
    let dsl = std::fs::read_to_string(dir.join(format!("{name}.dsl"))).unwrap_or_default();
    let complaint = ["Error", "Warning", "Incorrect checksum", "Invalid"]
        .iter()
        .any(|w| log.contains(w) || dsl.contains(w));
    if !ok || complaint || dsl.is_empty() {
        return Err(format!("{log}\n{dsl}"));
    }
    Ok(dsl)
}

/// Compiles `source` (ASL or a data table source) without optimizations:
/// the binary, or iasl's complaint.
fn compile(dir: &Path, source: &str, out: &str) -> Result<Vec<u8>, String> {
    let (ok, log) = iasl(dir, &["-oa", "-p", out, source]);
    if !ok || !log.contains("0 Errors, 0 Warnings") {
        return Err(log);
    }
    Ok(std::fs::read(dir.join(format!("{out}.aml"))).unwrap())
}

/// `ours` with iasl's creator ID and revision (which iasl stamps into
/// everything it compiles) and the checksum fixed to match.
fn with_creator_of(ours: &[u8], iasl_out: &[u8]) -> Vec<u8> {
    let mut v = ours.to_vec();
    v[28..36].copy_from_slice(&iasl_out[28..36]);
    v[CHECKSUM_OFFSET] = 0;
    v[CHECKSUM_OFFSET] = checksum(&v);
    v
}

#[test]
fn acpica_disassembles_every_table_and_compiles_it_back_to_our_bytes() {
    if !have_iasl() {
        return;
    }
    for vcpus in [2, MAX_VCPUS] {
        let scratch = Scratch::new(&format!("roundtrip-{vcpus}"));
        let dir = &scratch.0;
        for t in build_tables(&AcpiConfig::new(vcpus)).unwrap() {
            let name = String::from_utf8_lossy(&t.signature).trim().to_lowercase();
            match &t.signature {
                b"RSD " => check_rsdp(dir, &t.bytes),
                b"DSDT" => check_dsdt(dir, &t.bytes),
                _ => {
                    let dsl = disassemble(dir, &name, &t.bytes)
                        .unwrap_or_else(|e| panic!("{name}: iasl -d complained:\n{e}"));
                    let back = compile(dir, &format!("{name}.dsl"), &format!("{name}-back"))
                        .unwrap_or_else(|e| panic!("{name}: recompiling failed:\n{e}"));
                    assert_eq!(with_creator_of(&t.bytes, &back), back, "{name}");
                    check_decoded_fields(&name, &dsl, vcpus);
                }
            }
        }
    }
}

/// What ACPICA decoded, in its own words.
fn check_decoded_fields(name: &str, dsl: &str, vcpus: u32) {
    let field = |label: &str| -> String {
        dsl.lines()
            .find(|l| {
                l.split(':')
                    .next()
                    .is_some_and(|k| k.trim().ends_with(label))
            })
            .and_then(|l| l.split(':').nth(1))
            .map(|v| v.trim().to_owned())
            .unwrap_or_else(|| panic!("{name}: no {label:?} in\n{dsl}"))
    };
    match name {
        "facp" => {
            assert_eq!(field("Hardware Reduced (V5)"), "1");
            assert_eq!(field("8042 Present on ports 60/64 (V2)"), "1");
            assert_eq!(field("Reset Register Supported (V2)"), "1");
            assert_eq!(field("Value to cause reset"), "FE");
            assert_eq!(field("FADT Minor Revision"), "05");
        }
        "apic" => {
            let lapics = dsl.matches("[Processor Local APIC]").count();
            assert_eq!(lapics, vcpus as usize, "local APICs ACPICA sees");
            assert_eq!(dsl.matches("[I/O APIC]").count(), 1);
            assert_eq!(field("I/O Apic ID"), format!("{vcpus:02X}"));
            assert_eq!(field("Interrupt Input LINT"), "01");
        }
        "xsdt" => assert!(dsl.contains("ACPI Table Address   1")),
        other => panic!("unexpected table {other}"),
    }
}

/// iasl cannot load an RSDP, so compile one from our field values and
/// require ACPICA's bytes, checksums included, to equal ours.
fn check_rsdp(dir: &Path, ours: &[u8]) {
    let xsdt = u64::from_le_bytes(ours[24..32].try_into().unwrap());
    let source = format!(
        "Signature : \"RSD PTR \"\nChecksum : 00\nOem ID : \"TIERVR\"\nRevision : 02\n\
         RSDT Address : 00000000\nLength : 00000024\nXSDT Address : {xsdt:016X}\n\
         Extended Checksum : 00\nReserved : 000000\n"
    );
    std::fs::write(dir.join("rsdp.asl"), source).unwrap();
    let back = compile(dir, "rsdp.asl", "rsdp-back")
        .unwrap_or_else(|e| panic!("rsdp: compiling failed:\n{e}"));
    assert_eq!(back, ours, "RSDP");
}

/// The DSDT disassembles to the ASL we mean, and compiles back to our AML
/// except for the resource end-tag checksums, which iasl leaves 0 ("no
/// checksum") where we compute one.
fn check_dsdt(dir: &Path, ours: &[u8]) {
    let dsl =
        disassemble(dir, "dsdt", ours).unwrap_or_else(|e| panic!("dsdt: iasl -d complained:\n{e}"));
    for expected in [
        "Name (_S5, Package (0x04)",
        "Scope (\\_SB)",
        "Device (COM1)",
        "EisaId (\"PNP0501\")",
        "Device (PS2K)",
        "EisaId (\"PNP0303\")",
        "0x03F8,             // Range Minimum",
        "0x0064,             // Range Minimum",
        "{4}",
        "{1}",
        "Device (PWRB)",
        "EisaId (\"PNP0C0C\")",
        "Device (GED0)",
        "Name (_HID, \"ACPI0013\" /* Generic Event Device */)",
        "{5}",
        "Method (_EVT, 1, NotSerialized)",
        "Notify (\\_SB.PWRB, 0x80)",
    ] {
        assert!(dsl.contains(expected), "{expected:?} missing from\n{dsl}");
    }
    let back = compile(dir, "dsdt.dsl", "dsdt-back")
        .unwrap_or_else(|e| panic!("dsdt: recompiling failed:\n{e}"));
    assert_eq!(back.len(), ours.len());
    assert_eq!(byte_sum(&back), 0);
    assert_eq!(back[..CHECKSUM_OFFSET], ours[..CHECKSUM_OFFSET]);
    assert_eq!(back[CHECKSUM_OFFSET + 1..28], ours[CHECKSUM_OFFSET + 1..28]);
    let end_tag_checksums: Vec<usize> = (HEADER_LEN..ours.len())
        .filter(|&i| back[i] != ours[i])
        .inspect(|&i| {
            assert!(
                back[i] == 0 && back[i - 1] == 0x79 && ours[i - 1] == 0x79,
                "DSDT byte {i}: ours {:#x}, iasl {:#x}",
                ours[i],
                back[i]
            )
        })
        .collect();
    assert!(end_tag_checksums.len() <= 3, "{end_tag_checksums:?}");
}

#[test]
fn the_acpica_check_rejects_a_bad_checksum_and_bad_aml() {
    if !have_iasl() {
        return;
    }
    let scratch = Scratch::new("negative");
    let tables = build_tables(&AcpiConfig::new(1)).unwrap();
    let table = |sig: &[u8; 4]| tables.iter().find(|t| &t.signature == sig).unwrap();

    let mut fadt = table(b"FACP").bytes.clone();
    assert!(disassemble(&scratch.0, "good", &fadt).is_ok());
    fadt[CHECKSUM_OFFSET] ^= 1;
    let err = disassemble(&scratch.0, "badsum", &fadt).unwrap_err();
    assert!(err.contains("Incorrect checksum"), "{err}");

    let mut dsdt = table(b"DSDT").bytes.clone();
    // The \\_SB scope's PkgLength, made to end mid-name.
    let scope = HEADER_LEN + dsdt[HEADER_LEN..].iter().position(|&b| b == 0x10).unwrap();
    dsdt[scope + 1] = 0x30;
    dsdt[CHECKSUM_OFFSET] = 0;
    dsdt[CHECKSUM_OFFSET] = checksum(&dsdt);
    assert!(disassemble(&scratch.0, "badaml", &dsdt).is_err());
}
