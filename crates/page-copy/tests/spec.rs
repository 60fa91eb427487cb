//! Engine spec strings and building engines from them.

mod common;

use page_copy::{
    CopyError, CopyRange, EngineSpec, KernelMode, PoolError, SpecError, default_workers,
    engine_from_spec,
};

use common::{MIB, Region};

#[test]
fn valid_specs_parse_and_print_back() {
    let cases = [
        ("cpu", EngineSpec::Cpu),
        ("kernel", EngineSpec::Kernel(KernelMode::Auto)),
        ("kernel:threads", EngineSpec::Kernel(KernelMode::Threads)),
        ("kernel:dma", EngineSpec::Kernel(KernelMode::Dma)),
        (
            "threads:4",
            EngineSpec::Threads {
                workers: 4,
                pin: false,
            },
        ),
        (
            "threads:4:pin",
            EngineSpec::Threads {
                workers: 4,
                pin: true,
            },
        ),
        (
            "threads:1",
            EngineSpec::Threads {
                workers: 1,
                pin: false,
            },
        ),
    ];
    for (text, spec) in cases {
        assert_eq!(text.parse::<EngineSpec>().unwrap(), spec, "{text}");
        assert_eq!(spec.to_string(), text);
    }
    assert_eq!(
        "kernel:auto".parse::<EngineSpec>().unwrap(),
        EngineSpec::Kernel(KernelMode::Auto)
    );
    assert_eq!(
        "threads".parse::<EngineSpec>().unwrap(),
        EngineSpec::Threads {
            workers: default_workers(),
            pin: false
        }
    );
}

#[test]
fn invalid_specs_say_what_is_wrong() {
    let unknown = |s: &str| SpecError::UnknownEngine(s.to_owned());
    assert_eq!("".parse::<EngineSpec>(), Err(unknown("")));
    assert_eq!("gpu".parse::<EngineSpec>(), Err(unknown("gpu")));
    assert_eq!("CPU".parse::<EngineSpec>(), Err(unknown("CPU")));
    assert_eq!(" cpu".parse::<EngineSpec>(), Err(unknown(" cpu")));
    assert_eq!(
        "threads:0".parse::<EngineSpec>(),
        Err(SpecError::ZeroWorkers)
    );
    assert!(matches!(
        "threads:".parse::<EngineSpec>(),
        Err(SpecError::BadWorkers { text, .. }) if text.is_empty()
    ));
    assert!(matches!(
        "threads:x".parse::<EngineSpec>(),
        Err(SpecError::BadWorkers { text, .. }) if text == "x"
    ));
    assert!(matches!(
        "threads:-1".parse::<EngineSpec>(),
        Err(SpecError::BadWorkers { .. })
    ));
    assert_eq!(
        "threads:4:pinned".parse::<EngineSpec>(),
        Err(SpecError::UnknownOption("pinned".to_owned()))
    );
    assert!(matches!(
        "threads:4:pin:x".parse::<EngineSpec>(),
        Err(SpecError::UnexpectedOptions {
            engine: "threads",
            ..
        })
    ));
    assert!(matches!(
        "cpu:4".parse::<EngineSpec>(),
        Err(SpecError::UnexpectedOptions { engine: "cpu", .. })
    ));
    assert_eq!(
        "kernel:".parse::<EngineSpec>(),
        Err(SpecError::UnknownKernelMode(String::new()))
    );
    assert_eq!(
        "kernel:gpu".parse::<EngineSpec>(),
        Err(SpecError::UnknownKernelMode("gpu".to_owned()))
    );
    assert!(matches!(
        "kernel:dma:4".parse::<EngineSpec>(),
        Err(SpecError::UnexpectedOptions {
            engine: "kernel",
            ..
        })
    ));
    let err = "threads:x".parse::<EngineSpec>().unwrap_err();
    assert_eq!(err.to_string(), "bad worker count \"x\"");
    assert!(std::error::Error::source(&err).is_some());
}

/// Where the module is not loaded (the development machines), the kernel
/// engine is refused with what to load.
#[test]
fn kernel_engine_is_cleanly_unavailable() {
    if std::path::Path::new(page_copy::KERNEL_DEVICE).exists() {
        eprintln!("skipped: /dev/tiercopy exists here");
        return;
    }
    let err = engine_from_spec(&EngineSpec::Kernel(KernelMode::Dma)).unwrap_err();
    match err {
        CopyError::Unavailable(why) => {
            assert_eq!(
                why,
                "kernel copy engine: /dev/tiercopy not found (load host-kernel/tiercopy)"
            );
        }
        other => panic!("expected Unavailable, got {other:?}"),
    }
}

#[test]
fn zero_workers_are_rejected() {
    let err = engine_from_spec(&EngineSpec::Threads {
        workers: 0,
        pin: false,
    })
    .unwrap_err();
    assert!(
        matches!(err, CopyError::Pool(PoolError::ZeroWorkers)),
        "{err:?}"
    );
}

#[test]
fn built_engines_copy() {
    let src = Region::random(2 * MIB + 7, 11);
    for text in [
        "cpu",
        "threads",
        "threads:1",
        "threads:2",
        "threads:2:pin",
        "threads:3:pin",
    ] {
        let spec: EngineSpec = text.parse().unwrap();
        let engine = engine_from_spec(&spec).unwrap();
        assert!(
            engine.name().starts_with(&spec.to_string()),
            "{}",
            engine.name()
        );
        let dst = Region::new(src.len());
        let range = CopyRange::new(src.ptr(), dst.ptr(), src.len());
        // SAFETY: two live, distinct regions of the same length.
        let stats = unsafe { engine.copy(&[range]) }.unwrap();
        assert_eq!(stats.bytes, src.len() as u64);
        assert!(dst.as_slice() == src.as_slice(), "{text}");
    }
}
