//! The workload's settings: the `guest.*` kernel command line keys and their defaults.

/// Longest run accepted, so a typo cannot keep a test machine busy for days.
const MAX_SECONDS: u64 = 24 * 3600;
/// Most worker threads accepted.
const MAX_THREADS: usize = 1024;
/// Most check-only sweeps per write round.
const MAX_READ_ROUNDS: u64 = 1000;
/// Run length when `guest.seconds` is not given.
const DEFAULT_SECONDS: u64 = 20;

/// A setting that cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum SettingsError {
    #[error("bad setting guest.{key}={value}")]
    Bad { key: String, value: String },
    #[error("unknown setting {0}")]
    Unknown(String),
    #[error("no MemTotal in /proc/meminfo")]
    NoMemTotal,
    #[error("guest.mib={mib} does not fit in {total_mib} MiB of memory")]
    TooLarge { mib: u64, total_mib: u64 },
    #[error("guest.hot-mib={hot_mib} is more than guest.mib={mib}")]
    HotTooLarge { hot_mib: u64, mib: u64 },
}

/// Settings given on the command line; `None` means "use the default".
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Overrides {
    pub mib: Option<u64>,
    pub seconds: Option<u64>,
    pub threads: Option<usize>,
    pub read_rounds: Option<u64>,
    pub hot_mib: Option<u64>,
}

/// What the workload runs with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Settings {
    /// Buffer size in MiB.
    pub mib: u64,
    /// Minimum run time of the check-and-rewrite rounds.
    pub seconds: u64,
    /// Worker threads, each owning an equal share of the buffer.
    pub threads: usize,
    /// Online CPUs; thread `i` is pinned to CPU `i % cpus`.
    pub cpus: usize,
    /// Check-only sweeps of the hot part after each write round: a
    /// read-mostly workload whose hot part only reads show (0: none).
    pub read_rounds: u64,
    /// The hot part, MiB of the buffer (split over the threads' shares,
    /// each share's first part); the whole buffer when 0.
    pub hot_mib: u64,
}

/// Parses the `guest.*` keys of a kernel command line; other words are left to the kernel.
/// A repeated key takes its last value, as the kernel does.
pub fn parse_cmdline(cmdline: &str) -> Result<Overrides, SettingsError> {
    let mut overrides = Overrides::default();
    for word in cmdline.split_whitespace() {
        let Some(setting) = word.strip_prefix("guest.") else {
            continue;
        };
        let (key, value) = setting.split_once('=').unwrap_or((setting, ""));
        let bad = || SettingsError::Bad {
            key: key.into(),
            value: value.into(),
        };
        match key {
            "mib" => overrides.mib = Some(value.parse().ok().filter(|&m| m > 0).ok_or_else(bad)?),
            "seconds" => {
                let seconds = value.parse().ok().filter(|&s| s <= MAX_SECONDS);
                overrides.seconds = Some(seconds.ok_or_else(bad)?);
            }
            "read-rounds" => {
                let rounds = value.parse().ok().filter(|&r| r <= MAX_READ_ROUNDS);
                overrides.read_rounds = Some(rounds.ok_or_else(bad)?);
            }
            "hot-mib" => overrides.hot_mib = Some(value.parse().ok().ok_or_else(bad)?),
            "threads" => {
                let threads = value.parse().ok().filter(|t| (1..=MAX_THREADS).contains(t));
                overrides.threads = Some(threads.ok_or_else(bad)?);
            }
            _ => return Err(SettingsError::Unknown(word.into())),
        }
    }
    Ok(overrides)
}

/// `MemTotal` of a `/proc/meminfo` text, in KiB.
pub fn mem_total_kib(meminfo: &str) -> Result<u64, SettingsError> {
    meminfo
        .lines()
        .find_map(|line| line.strip_prefix("MemTotal:"))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|kib| kib.parse().ok())
        .ok_or(SettingsError::NoMemTotal)
}

/// Fills in the defaults: half of memory (whole MiB), 20 seconds, one thread per online CPU.
pub fn resolve(
    overrides: &Overrides,
    total_kib: u64,
    cpus: usize,
) -> Result<Settings, SettingsError> {
    let total_mib = total_kib / 1024;
    let mib = overrides.mib.unwrap_or(total_mib / 2);
    if mib == 0 || mib >= total_mib {
        return Err(SettingsError::TooLarge { mib, total_mib });
    }
    let hot_mib = overrides.hot_mib.unwrap_or(0);
    if hot_mib > mib {
        return Err(SettingsError::HotTooLarge { hot_mib, mib });
    }
    let cpus = cpus.max(1);
    Ok(Settings {
        mib,
        seconds: overrides.seconds.unwrap_or(DEFAULT_SECONDS),
        threads: overrides.threads.unwrap_or(cpus),
        cpus,
        read_rounds: overrides.read_rounds.unwrap_or(0),
        hot_mib,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn guest_keys_are_parsed_and_other_words_ignored() {
        let o = parse_cmdline(
            "console=ttyS0 guest.mib=64 quiet guest.seconds=0 guest.threads=3 \
             guest.read-rounds=4 guest.hot-mib=16\n",
        )
        .unwrap();
        let expected = Overrides {
            mib: Some(64),
            seconds: Some(0),
            threads: Some(3),
            read_rounds: Some(4),
            hot_mib: Some(16),
        };
        assert_eq!(o, expected);
        assert_eq!(
            parse_cmdline("console=ttyS0 panic=-1").unwrap(),
            Overrides::default()
        );
        assert_eq!(
            parse_cmdline("guest.mib=1 guest.mib=2").unwrap().mib,
            Some(2)
        );
    }

    #[test]
    fn bad_values_are_rejected_with_key_and_value() {
        let bad = [
            "guest.mib=0",
            "guest.mib=x",
            "guest.mib",
            "guest.threads=0",
            "guest.threads=99999",
            "guest.seconds=-1",
            "guest.seconds=999999",
            "guest.read-rounds=1001",
            "guest.hot-mib=x",
        ];
        for word in bad {
            let err = parse_cmdline(word).unwrap_err();
            assert!(matches!(err, SettingsError::Bad { .. }), "{word}");
        }
        let message = parse_cmdline("quiet guest.mib=abc")
            .unwrap_err()
            .to_string();
        assert_eq!(message, "bad setting guest.mib=abc");
        assert!(matches!(
            parse_cmdline("guest.mb=5"),
            Err(SettingsError::Unknown(_))
        ));
    }

    #[test]
    fn defaults_come_from_memory_and_cpus() {
        let kib = mem_total_kib("MemFree: 1 kB\nMemTotal:   250000 kB\n").unwrap();
        assert_eq!(kib, 250_000);
        let s = resolve(&Overrides::default(), kib, 2).unwrap();
        let expected = Settings {
            mib: 122,
            seconds: 20,
            threads: 2,
            cpus: 2,
            read_rounds: 0,
            hot_mib: 0,
        };
        assert_eq!(s, expected);
        let hot = Overrides {
            mib: Some(64),
            hot_mib: Some(65),
            ..Overrides::default()
        };
        assert!(matches!(
            resolve(&hot, kib, 2),
            Err(SettingsError::HotTooLarge { .. })
        ));
        let too_large = Overrides {
            mib: Some(300),
            ..Overrides::default()
        };
        assert!(matches!(
            resolve(&too_large, kib, 2),
            Err(SettingsError::TooLarge { .. })
        ));
        assert!(mem_total_kib("MemFree: 1 kB\n").is_err());
    }
}
