//! Tier specifications as the operator writes them (`--tier name=dram,backend=memfd,size=256M`)
//! and their parser. Only syntax is checked here; whether the host can back
//! the tier is checked when the memory is built.

use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;

use serde::{Deserialize, Serialize};
use thiserror::Error;

use crate::size::{SizeError, format_size_arg, parse_size};
use crate::tier_speed::TierProfile;

/// Keys a tier specification may contain.
/// The keys a `--tier` spec takes.
pub const TIER_SPEC_KEYS: [&str; 9] = [
    "name",
    "backend",
    "size",
    "path",
    "numa-node",
    "hugetlb",
    "prealloc",
    "read-latency",
    "read-bandwidth",
];

/// One tier of guest memory as configured: a name, a backend and a capacity.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct TierSpec {
    /// Name used in messages, statistics and the API (letters, digits, `-`, `_`).
    pub name: String,
    /// What backs the tier.
    pub backend: BackendSpec,
    /// Capacity in bytes. `None` only for file backends, where it means the file's size.
    #[serde(default)]
    pub size: Option<u64>,
    /// The tier's speed, declared instead of measured (emulated tiers,
    /// benchmarks, devices the probe cannot reach).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub profile: Option<TierProfile>,
}

/// The backing object of a tier.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "kebab-case", tag = "kind", deny_unknown_fields)]
pub enum BackendSpec {
    /// Shared anonymous memory (`memfd_create`).
    Memfd {
        /// Host NUMA node the memory is bound to (`mbind(MPOL_BIND)`).
        #[serde(default)]
        numa_node: Option<u32>,
        /// Back the memfd with 2 MiB hugetlb pages.
        #[serde(default)]
        hugetlb: bool,
        /// Allocate the whole tier when the VM starts and keep released
        /// slots' memory for reuse (like QEMU's prealloc): migrations then
        /// copy into memory that exists instead of allocating it page by
        /// page, at the cost of committing the tier's full capacity.
        #[serde(default)]
        prealloc: bool,
    },
    /// A device-DAX character device or a regular file, mapped shared.
    File {
        /// Path of the device or file.
        #[cfg_attr(feature = "openapi", schema(value_type = String))]
        path: PathBuf,
    },
}

/// Why a tier specification was rejected.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum TierSpecError {
    /// An item between commas was empty.
    #[error("empty item in tier specification")]
    EmptyItem,
    /// An item had no `=`.
    #[error("'{0}' is not key=value")]
    NotKeyValue(String),
    /// A key is not one of the known keys.
    #[error(
        "unknown key '{0}' (expected one of name, backend, size, path, numa-node, hugetlb, \
         prealloc, read-latency, read-bandwidth)"
    )]
    UnknownKey(String),
    /// A key appeared twice.
    #[error("duplicate key '{0}'")]
    DuplicateKey(String),
    /// A key had an empty value.
    #[error("empty value for '{0}'")]
    EmptyValue(&'static str),
    /// A required key is absent.
    #[error("missing key '{0}'")]
    MissingKey(&'static str),
    /// The name contains characters other than letters, digits, `-` and `_`.
    #[error("bad value for 'name': '{0}' (use letters, digits, '-' and '_')")]
    BadName(String),
    /// The backend is neither `memfd` nor `file`.
    #[error("bad value for 'backend': '{0}' (expected memfd or file)")]
    UnknownBackend(String),
    /// The size did not parse.
    #[error("bad value for 'size'")]
    BadSize(#[source] SizeError),
    /// The size is zero.
    #[error("bad value for 'size': must be greater than zero")]
    ZeroSize,
    /// The NUMA node is not a number.
    #[error("bad value for 'numa-node': '{0}' (expected a node number)")]
    BadNumaNode(String),
    /// `prealloc` is neither `on` nor `off`.
    #[error("bad value for 'prealloc': '{0}' (expected on or off)")]
    BadPrealloc(String),
    /// `hugetlb` is neither `on` nor `off`.
    #[error("bad value for 'hugetlb': '{0}' (expected on or off)")]
    BadHugetlb(String),
    /// A key that the chosen backend does not take.
    #[error("'{key}' is not valid with backend={backend}")]
    KeyNotForBackend {
        /// The offending key.
        key: &'static str,
        /// The backend that was chosen.
        backend: &'static str,
    },
    /// `backend=memfd` without a size.
    #[error("backend=memfd needs 'size'")]
    MemfdWithoutSize,
    /// `backend=file` without a path.
    #[error("backend=file needs 'path'")]
    FileWithoutPath,
    /// `read-latency` is not a positive number of `ns` or `us`.
    #[error("bad value for 'read-latency': '{0}' (expected a time such as 250ns or 1.2us)")]
    BadLatency(String),
    /// `read-bandwidth` did not parse or is zero.
    #[error("bad value for 'read-bandwidth': '{0}' (expected bytes per second such as 8G)")]
    BadBandwidth(String),
    /// Only one half of a declared profile.
    #[error("'read-latency' and 'read-bandwidth' declare a profile together: give both")]
    HalfProfile,
}

/// The raw key/value pairs of one specification, each key at most once.
#[derive(Default)]
struct RawItems<'a> {
    pairs: Vec<(&'static str, &'a str)>,
}

impl<'a> RawItems<'a> {
    fn parse(text: &'a str) -> Result<Self, TierSpecError> {
        let mut items = Self::default();
        for item in text.split(',') {
            let item = item.trim();
            if item.is_empty() {
                return Err(TierSpecError::EmptyItem);
            }
            let (key, value) = item
                .split_once('=')
                .ok_or_else(|| TierSpecError::NotKeyValue(item.to_owned()))?;
            let key = key.trim();
            let known = TIER_SPEC_KEYS
                .iter()
                .find(|k| **k == key)
                .ok_or_else(|| TierSpecError::UnknownKey(key.to_owned()))?;
            if items.get(known).is_some() {
                return Err(TierSpecError::DuplicateKey(key.to_owned()));
            }
            let value = value.trim();
            if value.is_empty() {
                return Err(TierSpecError::EmptyValue(known));
            }
            items.pairs.push((known, value));
        }
        Ok(items)
    }

    fn get(&self, key: &str) -> Option<&'a str> {
        self.pairs.iter().find(|(k, _)| *k == key).map(|(_, v)| *v)
    }
}

impl FromStr for TierSpec {
    type Err = TierSpecError;

    /// Parses `name=dram,backend=memfd,size=256M[,numa-node=0][,hugetlb=on|off]`
    /// or `name=pmem,backend=file,path=/dev/dax0.0[,size=...]`.
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let items = RawItems::parse(text)?;
        let name = items.get("name").ok_or(TierSpecError::MissingKey("name"))?;
        if !name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
        {
            return Err(TierSpecError::BadName(name.to_owned()));
        }
        let size = items.get("size").map(parse_spec_size).transpose()?;
        let backend = match items.get("backend") {
            None => return Err(TierSpecError::MissingKey("backend")),
            Some("memfd") => parse_memfd(&items, size)?,
            Some("file") => parse_file(&items)?,
            Some(other) => return Err(TierSpecError::UnknownBackend(other.to_owned())),
        };
        let profile = parse_profile(&items)?;
        Ok(TierSpec {
            name: name.to_owned(),
            backend,
            size,
            profile,
        })
    }
}

fn parse_profile(items: &RawItems<'_>) -> Result<Option<TierProfile>, TierSpecError> {
    let (latency, bandwidth) = match (items.get("read-latency"), items.get("read-bandwidth")) {
        (None, None) => return Ok(None),
        (Some(l), Some(b)) => (l, b),
        _ => return Err(TierSpecError::HalfProfile),
    };
    let bad_latency = || TierSpecError::BadLatency(latency.to_owned());
    let (number, scale) = if let Some(n) = latency.strip_suffix("ns") {
        (n, 1.0)
    } else if let Some(n) = latency.strip_suffix("us") {
        (n, 1000.0)
    } else {
        return Err(bad_latency());
    };
    let ns = number.parse::<f64>().map_err(|_| bad_latency())? * scale;
    // Whole nanoseconds, at least one.
    if !ns.is_finite() || !(0.5..1e12).contains(&ns) {
        return Err(bad_latency());
    }
    let read_latency_ns = ns.round() as u64;
    let read_bandwidth = match parse_size(bandwidth) {
        Ok(b) if b > 0 => b,
        _ => return Err(TierSpecError::BadBandwidth(bandwidth.to_owned())),
    };
    Ok(Some(TierProfile {
        read_latency_ns,
        read_bandwidth,
    }))
}

fn parse_spec_size(text: &str) -> Result<u64, TierSpecError> {
    match parse_size(text).map_err(TierSpecError::BadSize)? {
        0 => Err(TierSpecError::ZeroSize),
        size => Ok(size),
    }
}

fn parse_memfd(items: &RawItems<'_>, size: Option<u64>) -> Result<BackendSpec, TierSpecError> {
    if items.get("path").is_some() {
        return Err(TierSpecError::KeyNotForBackend {
            key: "path",
            backend: "memfd",
        });
    }
    if size.is_none() {
        return Err(TierSpecError::MemfdWithoutSize);
    }
    let numa_node = items
        .get("numa-node")
        .map(|v| {
            v.parse::<u32>()
                .map_err(|_| TierSpecError::BadNumaNode(v.to_owned()))
        })
        .transpose()?;
    let hugetlb = match items.get("hugetlb") {
        None | Some("off") => false,
        Some("on") => true,
        Some(other) => return Err(TierSpecError::BadHugetlb(other.to_owned())),
    };
    let prealloc = match items.get("prealloc") {
        None | Some("off") => false,
        Some("on") => true,
        Some(other) => return Err(TierSpecError::BadPrealloc(other.to_owned())),
    };
    Ok(BackendSpec::Memfd {
        numa_node,
        hugetlb,
        prealloc,
    })
}

fn parse_file(items: &RawItems<'_>) -> Result<BackendSpec, TierSpecError> {
    for key in ["numa-node", "hugetlb", "prealloc"] {
        if items.get(key).is_some() {
            return Err(TierSpecError::KeyNotForBackend {
                key,
                backend: "file",
            });
        }
    }
    let path = items.get("path").ok_or(TierSpecError::FileWithoutPath)?;
    Ok(BackendSpec::File {
        path: PathBuf::from(path),
    })
}

impl fmt::Display for TierSpec {
    /// Writes the specification in the form [`FromStr`] accepts.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "name={}", self.name)?;
        match &self.backend {
            BackendSpec::Memfd { .. } => write!(f, ",backend=memfd")?,
            BackendSpec::File { path } => write!(f, ",backend=file,path={}", path.display())?,
        }
        if let Some(size) = self.size {
            write!(f, ",size={}", format_size_arg(size))?;
        }
        if let BackendSpec::Memfd {
            numa_node,
            hugetlb,
            prealloc,
        } = &self.backend
        {
            if let Some(node) = numa_node {
                write!(f, ",numa-node={node}")?;
            }
            if *hugetlb {
                write!(f, ",hugetlb=on")?;
            }
            if *prealloc {
                write!(f, ",prealloc=on")?;
            }
        }
        if let Some(p) = &self.profile {
            write!(
                f,
                ",read-latency={}ns,read-bandwidth={}",
                p.read_latency_ns,
                format_size_arg(p.read_bandwidth)
            )?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::size::MIB;

    fn parse(text: &str) -> Result<TierSpec, TierSpecError> {
        text.parse()
    }

    #[test]
    fn prealloc_is_a_memfd_option() {
        let on = parse("name=a,backend=memfd,size=2M,prealloc=on").unwrap();
        assert!(matches!(
            on.backend,
            BackendSpec::Memfd { prealloc: true, .. }
        ));
        assert_eq!(
            on.to_string().parse::<TierSpec>().unwrap(),
            on,
            "round-trips"
        );
        assert!(matches!(
            parse("name=a,backend=memfd,size=2M,prealloc=maybe"),
            Err(TierSpecError::BadPrealloc(_))
        ));
        assert!(parse("name=a,backend=file,path=/tmp/x,prealloc=on").is_err());
    }

    #[test]
    fn a_tier_may_declare_its_speed() {
        let spec =
            parse("name=cxl,backend=memfd,size=1G,read-latency=0.25us,read-bandwidth=8G").unwrap();
        let p = spec.profile.unwrap();
        assert_eq!(p.read_latency_ns, 250);
        assert_eq!(p.read_bandwidth, 8 << 30);
        assert_eq!(
            spec.to_string().parse::<TierSpec>().unwrap(),
            spec,
            "round-trips"
        );
        let file =
            parse("name=pmem,backend=file,path=/dev/dax0.0,read-latency=300ns,read-bandwidth=6G");
        assert_eq!(file.unwrap().profile.unwrap().read_latency_ns, 300);
        for (text, expect) in [
            ("read-latency=250ns", TierSpecError::HalfProfile),
            ("read-bandwidth=8G", TierSpecError::HalfProfile),
            (
                "read-latency=250,read-bandwidth=8G",
                TierSpecError::BadLatency("250".into()),
            ),
            (
                "read-latency=-3ns,read-bandwidth=8G",
                TierSpecError::BadLatency("-3ns".into()),
            ),
            (
                "read-latency=250ns,read-bandwidth=0",
                TierSpecError::BadBandwidth("0".into()),
            ),
            (
                "read-latency=250ns,read-bandwidth=fast",
                TierSpecError::BadBandwidth("fast".into()),
            ),
        ] {
            assert_eq!(
                parse(&format!("name=a,backend=memfd,size=2M,{text}")),
                Err(expect),
                "{text}"
            );
        }
    }

    #[test]
    fn parses_memfd_tier() {
        let spec = parse("name=dram,backend=memfd,size=256M").unwrap();
        assert_eq!(
            spec,
            TierSpec {
                name: "dram".into(),
                backend: BackendSpec::Memfd {
                    numa_node: None,
                    hugetlb: false,
                    prealloc: false
                },
                size: Some(256 * MIB),
                profile: None,
            }
        );
    }

    #[test]
    fn parses_memfd_options_in_any_order() {
        let spec = parse("hugetlb=on, size=1G ,numa-node=1,backend=memfd,name=fast_0").unwrap();
        assert_eq!(spec.name, "fast_0");
        assert_eq!(spec.size, Some(1024 * MIB));
        assert_eq!(
            spec.backend,
            BackendSpec::Memfd {
                numa_node: Some(1),
                hugetlb: true,
                prealloc: false
            }
        );
        let off = parse("name=a,backend=memfd,size=2M,hugetlb=off").unwrap();
        assert_eq!(
            off.backend,
            BackendSpec::Memfd {
                numa_node: None,
                hugetlb: false,
                prealloc: false
            }
        );
    }

    #[test]
    fn parses_file_tier_with_and_without_size() {
        let spec = parse("name=pmem,backend=file,path=/dev/dax0.0").unwrap();
        assert_eq!(
            spec.backend,
            BackendSpec::File {
                path: "/dev/dax0.0".into()
            }
        );
        assert_eq!(spec.size, None);
        let sized = parse("name=pmem,backend=file,path=/tmp/x,size=64M").unwrap();
        assert_eq!(sized.size, Some(64 * MIB));
    }

    #[test]
    fn display_round_trips() {
        for text in [
            "name=dram,backend=memfd,size=256M",
            "name=dram,backend=memfd,size=3G,numa-node=0,hugetlb=on",
            "name=pmem,backend=file,path=/dev/dax0.0",
            "name=pmem,backend=file,path=/tmp/p,size=64M",
        ] {
            let spec = parse(text).unwrap();
            assert_eq!(spec.to_string(), text);
            assert_eq!(parse(&spec.to_string()).unwrap(), spec);
        }
    }

    #[test]
    fn rejects_each_malformed_spec_with_the_key_named() {
        use TierSpecError as E;
        let cases: Vec<(&str, TierSpecError)> = vec![
            ("backend=memfd,size=1M", E::MissingKey("name")),
            ("name=a,size=1M", E::MissingKey("backend")),
            (
                "name=a,backend=memfd,size=1M,colour=red",
                E::UnknownKey("colour".into()),
            ),
            (
                "name=a,name=b,backend=memfd,size=1M",
                E::DuplicateKey("name".into()),
            ),
            (
                "name=a,backend=memfd,size=1M,size=2M",
                E::DuplicateKey("size".into()),
            ),
            ("name=a,backend=memfd,size=1M,", E::EmptyItem),
            ("name=a,backend=memfd,size", E::NotKeyValue("size".into())),
            ("name=,backend=memfd,size=1M", E::EmptyValue("name")),
            ("name=a b,backend=memfd,size=1M", E::BadName("a b".into())),
            (
                "name=a,backend=ram,size=1M",
                E::UnknownBackend("ram".into()),
            ),
            ("name=a,backend=memfd,size=0", E::ZeroSize),
            (
                "name=a,backend=memfd,size=1Q",
                E::BadSize(SizeError::UnknownSuffix("1Q".into())),
            ),
            (
                "name=a,backend=memfd,size=1M,numa-node=x",
                E::BadNumaNode("x".into()),
            ),
            (
                "name=a,backend=memfd,size=1M,numa-node=-1",
                E::BadNumaNode("-1".into()),
            ),
            (
                "name=a,backend=memfd,size=1M,hugetlb=yes",
                E::BadHugetlb("yes".into()),
            ),
            ("name=a,backend=memfd", E::MemfdWithoutSize),
            (
                "name=a,backend=memfd,size=1M,path=/x",
                E::KeyNotForBackend {
                    key: "path",
                    backend: "memfd",
                },
            ),
            ("name=a,backend=file", E::FileWithoutPath),
            (
                "name=a,backend=file,path=/x,numa-node=0",
                E::KeyNotForBackend {
                    key: "numa-node",
                    backend: "file",
                },
            ),
            (
                "name=a,backend=file,path=/x,hugetlb=on",
                E::KeyNotForBackend {
                    key: "hugetlb",
                    backend: "file",
                },
            ),
        ];
        for (text, expected) in cases {
            assert_eq!(parse(text), Err(expected), "{text}");
        }
    }

    #[test]
    fn error_messages_name_the_key() {
        let msg = parse("name=a,backend=memfd,size=1M,size=2M")
            .unwrap_err()
            .to_string();
        assert_eq!(msg, "duplicate key 'size'");
        let msg = parse("name=a,backend=file,path=/x,numa-node=0")
            .unwrap_err()
            .to_string();
        assert_eq!(msg, "'numa-node' is not valid with backend=file");
        let msg = parse("name=a,backend=memfd,size=lots")
            .unwrap_err()
            .to_string();
        assert!(msg.contains("'size'"), "{msg}");
    }
}
