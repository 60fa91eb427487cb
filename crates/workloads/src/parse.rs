//! Parsing of workload strings `NAME[:k=v,k=v,...]` into a [`Spec`]. Only
//! the syntax and per-key ranges are checked here; limits that depend on
//! the buffer size are checked by [`Spec::layout`].

use core::str::FromStr;

use crate::number::{self, NumberError};
use crate::parse_error::{ParseError, Snippet};
use crate::spec::{Spec, StreamOp, Workload};

/// Longest phase, in milliseconds (one day).
const MAX_PHASE_MS: u64 = 86_400_000;
/// Most phases a run may have.
const MAX_PHASES: u64 = 100_000;
/// Most memcheck rounds per phase.
const MAX_ROUNDS: u64 = 1_000_000_000;
/// Largest zipf record.
const MAX_ITEM: u64 = 64 << 10;

impl Spec {
    /// Parses a workload string such as
    /// `hotset:size=256M,hot=32M,hot-frac=0.9,phases=3,seconds=2`.
    pub fn parse(s: &str) -> Result<Spec, ParseError> {
        let s = s.trim();
        if s.is_empty() {
            return Err(ParseError::Empty);
        }
        let (name, params) = match s.split_once(':') {
            Some((name, params)) => (name, Some(params)),
            None => (s, None),
        };
        let workload = Workload::default_for(name).ok_or(ParseError::UnknownWorkload {
            name: Snippet::new(name),
        })?;
        let mut spec = Spec::with_defaults(workload);
        let keys = spec.workload.keys();
        let wl = spec.name();
        let mut seen = 0u32;
        for param in params
            .filter(|p| !p.is_empty())
            .into_iter()
            .flat_map(|p| p.split(','))
        {
            if param.is_empty() {
                return Err(ParseError::EmptyParam { workload: wl });
            }
            let (key, value) = param.split_once('=').ok_or(ParseError::MissingValue {
                workload: wl,
                key: Snippet::new(param),
            })?;
            let index = keys
                .iter()
                .position(|k| *k == key)
                .ok_or(ParseError::UnknownKey {
                    workload: wl,
                    key: Snippet::new(key),
                    valid: keys,
                })?;
            let key = keys[index];
            if seen & (1 << index) != 0 {
                return Err(ParseError::DuplicateKey { workload: wl, key });
            }
            seen |= 1 << index;
            spec.set(key, value)?;
        }
        Ok(spec)
    }

    /// Sets one known key from its text value.
    fn set(&mut self, key: &'static str, value: &str) -> Result<(), ParseError> {
        let arg = Arg {
            workload: self.name(),
            key,
            value,
        };
        match key {
            "size" => self.size = Some(arg.page_multiple()?),
            "phases" => self.phases = arg.integer_in(1, MAX_PHASES, "must be 1..=100000")? as u32,
            "seconds" => {
                self.phase_ms = arg.seconds(matches!(self.workload, Workload::Memcheck(_)))?
            }
            "seed" => self.seed = arg.integer_in(0, u64::MAX, "")?,
            _ => self.set_workload_key(arg)?,
        }
        Ok(())
    }

    /// Sets a key that belongs to the workload itself.
    fn set_workload_key(&mut self, arg: Arg<'_>) -> Result<(), ParseError> {
        match (&mut self.workload, arg.key) {
            (Workload::Hotset(p), "hot") => p.hot = Some(arg.page_multiple()?),
            (Workload::Hotset(p), "hot-frac") => p.hot_frac = arg.fraction()?,
            (Workload::Hotset(p), "verify") => p.verify = arg.flag()?,
            (Workload::Zipf(p), "items") => {
                p.items = Some(arg.integer_in(1, u64::MAX, "must be at least 1")?);
            }
            (Workload::Zipf(p), "item") => p.item = arg.item_size()?,
            (Workload::Zipf(p), "theta") => p.theta = arg.theta()?,
            (Workload::Zipf(p), "write-frac") => p.write_frac = arg.fraction()?,
            (Workload::Pmbench(p), "stddev") => {
                p.stddev_pages = Some(arg.integer_in(1, u64::MAX, "must be at least 1 page")?);
            }
            (Workload::Pmbench(p), "read-frac") => p.read_frac = arg.fraction()?,
            (Workload::Stream(p), "op") => p.op = arg.stream_op()?,
            (Workload::Memcheck(p), "rounds") => {
                p.rounds = arg.integer_in(1, MAX_ROUNDS, "must be 1..=1000000000")?;
            }
            // Keys come from the workload's own key table, so this is only
            // reached if the table and this match disagree.
            (w, _) => {
                return Err(ParseError::UnknownKey {
                    workload: arg.workload,
                    key: Snippet::new(arg.key),
                    valid: w.keys(),
                });
            }
        }
        Ok(())
    }
}

impl FromStr for Spec {
    type Err = ParseError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Spec::parse(s)
    }
}

/// One `key=value` pair being converted, with what errors need to name.
#[derive(Clone, Copy)]
struct Arg<'a> {
    workload: &'static str,
    key: &'static str,
    value: &'a str,
}

impl Arg<'_> {
    fn bad(&self) -> ParseError {
        ParseError::BadNumber {
            workload: self.workload,
            key: self.key,
            value: Snippet::new(self.value),
        }
    }

    fn out_of_range(&self, reason: &'static str) -> ParseError {
        ParseError::OutOfRange {
            workload: self.workload,
            key: self.key,
            value: Snippet::new(self.value),
            reason,
        }
    }

    fn number<T>(
        &self,
        r: Result<T, NumberError>,
        too_large: &'static str,
    ) -> Result<T, ParseError> {
        r.map_err(|e| match e {
            NumberError::Bad => self.bad(),
            NumberError::TooLarge => self.out_of_range(too_large),
        })
    }

    fn integer_in(&self, min: u64, max: u64, reason: &'static str) -> Result<u64, ParseError> {
        let v = self.number(number::parse_u64(self.value), reason)?;
        if !(min..=max).contains(&v) {
            return Err(self.out_of_range(reason));
        }
        Ok(v)
    }

    fn page_multiple(&self) -> Result<u64, ParseError> {
        const REASON: &str = "must be a non-zero multiple of 4 KiB";
        let v = self.number(number::parse_size(self.value), REASON)?;
        if v == 0 || v % crate::layout::PAGE_BYTES != 0 {
            return Err(self.out_of_range(REASON));
        }
        Ok(v)
    }

    fn item_size(&self) -> Result<u64, ParseError> {
        const REASON: &str = "must be a multiple of 8 bytes in 8..=64K";
        let v = self.number(number::parse_size(self.value), REASON)?;
        if v == 0 || v % 8 != 0 || v > MAX_ITEM {
            return Err(self.out_of_range(REASON));
        }
        Ok(v)
    }

    fn fraction(&self) -> Result<f64, ParseError> {
        const REASON: &str = "must be in [0, 1]";
        let v = self.number(number::parse_decimal(self.value), REASON)?;
        if v > 1.0 {
            return Err(self.out_of_range(REASON));
        }
        Ok(v)
    }

    fn theta(&self) -> Result<f64, ParseError> {
        const REASON: &str = "must be in (0, 5]";
        let v = self.number(number::parse_decimal(self.value), REASON)?;
        if v <= 0.0 || v > 5.0 {
            return Err(self.out_of_range(REASON));
        }
        Ok(v)
    }

    fn seconds(&self, zero_allowed: bool) -> Result<u64, ParseError> {
        let reason = if zero_allowed {
            "must be at most 86400 (0 = run `rounds` rounds)"
        } else {
            "must be in [0.001, 86400]"
        };
        let v = self.number(number::parse_millis(self.value), reason)?;
        if v > MAX_PHASE_MS || (v == 0 && !zero_allowed) {
            return Err(self.out_of_range(reason));
        }
        Ok(v)
    }

    fn flag(&self) -> Result<bool, ParseError> {
        match self.value {
            "0" => Ok(false),
            "1" => Ok(true),
            _ => Err(self.out_of_range("must be 0 or 1")),
        }
    }

    fn stream_op(&self) -> Result<StreamOp, ParseError> {
        match self.value {
            "read" => Ok(StreamOp::Read),
            "copy" => Ok(StreamOp::Copy),
            "write" => Ok(StreamOp::Write),
            _ => Err(self.out_of_range("must be read, copy or write")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::{HotsetParams, MemcheckParams, PmbenchParams, StreamParams, ZipfParams};

    fn err(s: &str) -> String {
        Spec::parse(s).unwrap_err().to_string()
    }

    #[test]
    fn parses_the_documented_example() {
        let spec = Spec::parse("hotset:size=256M,hot=32M,hot-frac=0.9,phases=3,seconds=2").unwrap();
        assert_eq!(
            spec,
            Spec {
                workload: Workload::Hotset(HotsetParams {
                    hot: Some(32 << 20),
                    hot_frac: 0.9,
                    verify: false,
                }),
                size: Some(256 << 20),
                phases: 3,
                phase_ms: 2000,
                seed: 0,
            }
        );
        assert_eq!(spec.name(), "hotset");
    }

    #[test]
    fn bare_names_take_defaults() {
        for name in crate::NAMES {
            let spec = Spec::parse(name).unwrap();
            assert_eq!(
                spec,
                Spec::with_defaults(Workload::default_for(name).unwrap())
            );
            assert_eq!(Spec::parse(&format!("{name}:")).unwrap(), spec);
        }
    }

    #[test]
    fn parses_every_workload_key() {
        let z = Spec::parse("zipf:items=1000,item=128,theta=1.2,write-frac=0.5,seed=0x10").unwrap();
        assert_eq!(
            z.workload,
            Workload::Zipf(ZipfParams {
                items: Some(1000),
                item: 128,
                theta: 1.2,
                write_frac: 0.5
            })
        );
        assert_eq!(z.seed, 16);
        let p = Spec::parse("pmbench:stddev=100,read-frac=1").unwrap();
        assert_eq!(
            p.workload,
            Workload::Pmbench(PmbenchParams {
                stddev_pages: Some(100),
                read_frac: 1.0
            })
        );
        let s = Spec::parse("stream:op=copy,seconds=0.25").unwrap();
        assert_eq!(
            s.workload,
            Workload::Stream(StreamParams { op: StreamOp::Copy })
        );
        assert_eq!(s.phase_ms, 250);
        let m = Spec::parse("memcheck:rounds=5,seconds=0,size=1G").unwrap();
        assert_eq!(m.workload, Workload::Memcheck(MemcheckParams { rounds: 5 }));
        assert_eq!((m.phase_ms, m.size), (0, Some(1 << 30)));
    }

    #[test]
    fn display_round_trips() {
        for s in [
            "hotset:size=256M,hot=32M,hot-frac=0.75,phases=4,seconds=1.5,seed=9",
            "zipf:items=12345,item=72,theta=0.99,write-frac=0.05",
            "pmbench:size=12288,stddev=3,read-frac=0.8",
            "stream:op=write,phases=1",
            "memcheck:rounds=3",
            "hotset",
            "hotset:verify=1,size=64M",
            "hotset:verify=0",
        ] {
            let spec = Spec::parse(s).unwrap();
            let again = Spec::parse(&spec.to_string()).unwrap();
            assert_eq!(again, spec, "{s} -> {spec}");
        }
    }

    #[test]
    fn hotset_verify_is_a_0_or_1_flag() {
        let verify = |s: &str| match Spec::parse(s).unwrap().workload {
            Workload::Hotset(p) => p.verify,
            w => panic!("{w:?}"),
        };
        assert!(!verify("hotset"));
        assert!(!verify("hotset:verify=0"));
        assert!(verify("hotset:verify=1,hot-frac=0.5"));
        // Shown in the canonical string only when on.
        let on = Spec::parse("hotset:verify=1").unwrap().to_string();
        assert!(on.ends_with(",hot-frac=0.9,verify=1"), "{on}");
        let off = Spec::parse("hotset:verify=0").unwrap().to_string();
        assert!(!off.contains("verify"), "{off}");
        for junk in ["2", "true", "yes", "", "01", " 1", "-1"] {
            assert_eq!(
                err(&format!("hotset:verify={junk}")),
                format!("hotset: verify={junk} out of range: must be 0 or 1")
            );
        }
        assert_eq!(
            err("hotset:verify=1,verify=0"),
            "hotset: duplicate key verify"
        );
        assert!(err("memcheck:verify=1").contains("unknown key \"verify\""));
    }

    #[test]
    fn unknown_workload_lists_names() {
        let e = err("hotsett:size=1G");
        assert!(e.contains("unknown workload \"hotsett\""), "{e}");
        assert!(e.contains("hotset, zipf, pmbench, stream, memcheck"), "{e}");
        assert_eq!(Spec::parse("  "), Err(ParseError::Empty));
        assert!(err("").contains("valid workloads"));
    }

    #[test]
    fn unknown_key_lists_valid_keys() {
        let e = err("hotset:hott=1M");
        assert!(e.contains("hotset: unknown key \"hott\""), "{e}");
        assert!(
            e.contains("size, phases, seconds, seed, hot, hot-frac"),
            "{e}"
        );
        // A key of another workload is unknown here.
        assert!(err("stream:theta=1").contains("unknown key \"theta\""));
    }

    #[test]
    fn bad_numbers_are_named() {
        assert_eq!(
            err("hotset:hot-frac=abc"),
            "hotset: bad number \"abc\" for hot-frac"
        );
        assert!(err("hotset:size=12Q").contains("bad number \"12Q\" for size"));
        assert!(err("zipf:items=-5").contains("bad number"));
        assert!(err("hotset:seed=1.5").contains("bad number"));
        assert!(err("hotset:seconds=0.0001").contains("bad number"));
    }

    #[test]
    fn out_of_range_values_are_named() {
        assert_eq!(
            err("hotset:hot-frac=1.5"),
            "hotset: hot-frac=1.5 out of range: must be in [0, 1]"
        );
        assert!(err("zipf:theta=0").contains("theta=0 out of range: must be in (0, 5]"));
        assert!(err("zipf:theta=5.01").contains("must be in (0, 5]"));
        assert!(
            err("hotset:size=1000")
                .contains("size=1000 out of range: must be a non-zero multiple of 4 KiB")
        );
        assert!(err("hotset:size=0").contains("multiple of 4 KiB"));
        assert!(err("hotset:size=99999999999999T").contains("out of range"));
        assert!(err("hotset:phases=0").contains("phases=0 out of range"));
        assert!(err("hotset:seconds=0").contains("seconds=0 out of range"));
        assert!(err("hotset:seconds=86400.001").contains("out of range"));
        assert!(err("zipf:item=12").contains("multiple of 8"));
        assert!(err("zipf:item=128K").contains("8..=64K"));
        assert!(err("zipf:items=0").contains("at least 1"));
        assert!(err("pmbench:stddev=0").contains("at least 1 page"));
        assert!(err("stream:op=fill").contains("must be read, copy or write"));
        assert!(err("memcheck:rounds=0").contains("rounds=0 out of range"));
    }

    #[test]
    fn duplicate_and_malformed_params() {
        assert_eq!(err("hotset:size=1G,size=2G"), "hotset: duplicate key size");
        assert!(err("hotset:size=1G,,hot=1M").contains("empty parameter"));
        assert!(err("hotset:size=1G,").contains("empty parameter"));
        assert_eq!(
            err("hotset:size"),
            "hotset: parameter \"size\" has no value (expected key=value)"
        );
        assert!(err("hotset:=5").contains("unknown key \"\""));
    }

    #[test]
    fn memcheck_allows_zero_seconds_only_for_itself() {
        assert_eq!(Spec::parse("memcheck:seconds=0").unwrap().phase_ms, 0);
        assert_eq!(Spec::parse("memcheck:seconds=3").unwrap().phase_ms, 3000);
        assert!(Spec::parse("stream:seconds=0").is_err());
    }

    #[test]
    fn from_str_matches_parse() {
        let a: Spec = "zipf:theta=0.5".parse().unwrap();
        assert_eq!(a, Spec::parse("zipf:theta=0.5").unwrap());
    }
}
