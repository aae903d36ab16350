//! Why a fabric plan cannot be made: the error of [`crate::PlanFn`], [`crate::Entry::plan`] and
//! [`crate::fabric_plan`].
//!
//! Each variant says what is wrong and, where it is one switch's, which switch, so a caller (the
//! fabric controller, `pisa-sim`, a test) can tell a bad line in a topology from a fabric that
//! does not fit a program's tables, and point at the line.

use analysis::dbb::CompileError;
use analysis::pint::fabric::ConfigError;
use std::collections::BTreeSet;

/// Why a fabric plan cannot be made.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PlanError {
    /// A switch's line names a program this build does not have.
    #[error("switch {switch}: no program {program} (this build has: {known})")]
    UnknownProgram {
        /// The switch.
        switch: String,
        /// The program its line names.
        program: String,
        /// The programs this build has, comma-separated.
        known: String,
    },
    /// A switch's line gives a key that its scheme (a preset entry of the registry) fixes
    /// another value.
    #[error(
        "switch {switch}: {key}={given} contradicts the scheme {scheme}, which sets \
         {key}={value} (use the scheme {program} with {key}=, or leave {key}= out)"
    )]
    ContradictsPreset {
        /// The switch.
        switch: String,
        /// The key.
        key: &'static str,
        /// The value its line gives.
        given: String,
        /// The preset entry the line names.
        scheme: &'static str,
        /// The value the preset sets.
        value: &'static str,
        /// The program the preset is a variant of.
        program: &'static str,
    },
    /// A key that takes a number has a value that is not one.
    #[error("switch {switch}: {key}={value} is not a number")]
    NotANumber {
        /// The switch.
        switch: String,
        /// The key.
        key: String,
        /// The value as given.
        value: String,
    },
    /// A key that takes one of a few words has another value.
    #[error("switch {switch}: {key}={value}: {expected}")]
    BadValue {
        /// The switch.
        switch: String,
        /// The key.
        key: String,
        /// The value as given.
        value: String,
        /// The values it takes.
        expected: &'static str,
    },
    /// A number (given, or derived from the keys given) outside what the program accepts.
    #[error("switch {switch}: {key}={value} is out of range ({range})")]
    OutOfRange {
        /// The switch.
        switch: String,
        /// The key.
        key: String,
        /// Its value (given or derived).
        value: u64,
        /// What it may be.
        range: &'static str,
    },
    /// Two keys of a switch's line contradict each other: `key` must not exceed `limit_key`.
    #[error("switch {switch}: {key}={value} exceeds {limit_key}={limit}")]
    Exceeds {
        /// The switch.
        switch: String,
        /// The key that is too large.
        key: String,
        /// Its value (given or derived).
        value: u64,
        /// The key it must not exceed.
        limit_key: String,
        /// That key's value (given or derived).
        limit: u64,
    },
    /// The fabric has more ToRs than the program's tables can number.
    #[error("{program}: {tors} ToRs (at most {max})")]
    TooManyTors {
        /// The program.
        program: &'static str,
        /// The fabric's ToRs.
        tors: usize,
        /// The most the program takes.
        max: usize,
    },
    /// The fabric's ToRs make more ToR pairs than the program's tables can number.
    #[error("{program}: {tors} ToRs make {pairs} pairs (at most {max})")]
    TooManyPairs {
        /// The program.
        program: &'static str,
        /// The fabric's ToRs.
        tors: usize,
        /// The ordered pairs they make.
        pairs: usize,
        /// The most pairs the program takes.
        max: usize,
    },
    /// A switch has more equal-cost next hops toward a ToR than one of the program's groups
    /// holds.
    #[error(
        "switch {switch}: {count} next hops toward {toward} ({program} groups hold at most {max})"
    )]
    TooManyNextHops {
        /// The program.
        program: &'static str,
        /// The switch.
        switch: String,
        /// The ToR they lead to.
        toward: String,
        /// The next hops.
        count: usize,
        /// The most a group holds.
        max: usize,
    },
    /// A switch's plan needs more entries than the program's tables hold.
    #[error("{program}: switch {switch}: {needs} (the tables hold {holds})")]
    TablesFull {
        /// The program.
        program: &'static str,
        /// The switch.
        switch: String,
        /// What the plan needs.
        needs: String,
        /// What the tables hold.
        holds: String,
    },
    /// The program needs one set of up ports at a switch (every host not below it reached over
    /// the same ports), and the topology gives it several.
    #[error(
        "switch {switch}: hosts are reached up over different port sets ({first:?} and \
         {other:?}); {program} needs one set of up ports"
    )]
    UpPortsDiffer {
        /// The program.
        program: &'static str,
        /// The switch.
        switch: String,
        /// One set of up ports.
        first: BTreeSet<u16>,
        /// Another.
        other: BTreeSet<u16>,
    },
    /// A plan was asked for a switch the topology does not have (a caller's mistake).
    #[error("no switch {switch} in the topology")]
    NoSwitch {
        /// The switch asked for.
        switch: String,
    },
    /// The DBB compiler cannot make dispatch lists for a pair of ToRs (the text of the warning
    /// a plan gives when that pair falls back to ECMP).
    #[error("dbb: ToR pair {src} -> {dst}: {error}")]
    Dbb {
        /// The source ToR.
        src: String,
        /// The destination ToR.
        dst: String,
        /// Why (its text is part of this error's; boxed, as it is large).
        error: Box<CompileError>,
    },
    /// The PINT keys of the `pint` switches do not parse or do not agree.
    #[error(transparent)]
    Pint(#[from] ConfigError),
}

impl PlanError {
    /// The switch the error is about, where it is one switch's.
    pub fn switch(&self) -> Option<&str> {
        match self {
            PlanError::UnknownProgram { switch, .. }
            | PlanError::ContradictsPreset { switch, .. }
            | PlanError::NotANumber { switch, .. }
            | PlanError::BadValue { switch, .. }
            | PlanError::OutOfRange { switch, .. }
            | PlanError::Exceeds { switch, .. }
            | PlanError::TooManyNextHops { switch, .. }
            | PlanError::TablesFull { switch, .. }
            | PlanError::UpPortsDiffer { switch, .. }
            | PlanError::NoSwitch { switch } => Some(switch),
            PlanError::Pint(ConfigError::BadValue { switch, .. })
            | PlanError::Pint(ConfigError::Disagree { switch, .. }) => Some(switch),
            PlanError::TooManyTors { .. }
            | PlanError::TooManyPairs { .. }
            | PlanError::Dbb { .. }
            | PlanError::Pint(_) => None,
        }
    }
}

/// For callers whose errors are still text (`?` into `Result<_, String>`): the simulator's
/// fabric (`sim::fabric`).
impl From<PlanError> for String {
    fn from(e: PlanError) -> String {
        e.to_string()
    }
}

/// `key=value` of switch `s`'s line as a number, if given.
pub(crate) fn number<T: std::str::FromStr>(
    s: &topo::Switch,
    key: &str,
) -> Result<Option<T>, PlanError> {
    s.params
        .get(key)
        .map(|v| {
            v.parse().map_err(|_| PlanError::NotANumber {
                switch: s.name.clone(),
                key: key.to_string(),
                value: v.clone(),
            })
        })
        .transpose()
}

/// [`PlanError::BadValue`] for `key=value` of switch `s`'s line.
pub(crate) fn bad_value(
    s: &topo::Switch,
    key: &str,
    value: &str,
    expected: &'static str,
) -> PlanError {
    PlanError::BadValue {
        switch: s.name.clone(),
        key: key.to_string(),
        value: value.to_string(),
        expected,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fabric_plan;
    use topo::{LinkProps, Topology, leaf_spine};

    /// 2 leaves, 2 spines, one host per leaf, every switch running `program`, leaf1 with
    /// `key=value` on its line.
    fn fabric(program: &str, key: &str, value: &str) -> Topology {
        let mut t = leaf_spine(2, 2, 1, 1.0, LinkProps::default());
        for s in &mut t.switches {
            s.program = program.into();
            if s.name == "leaf1" {
                s.params.insert(key.into(), value.into());
            }
        }
        t
    }

    fn error(program: &str, key: &str, value: &str) -> PlanError {
        fabric_plan(&fabric(program, key, value)).unwrap_err()
    }

    #[test]
    fn each_error_names_the_switch_the_key_and_the_value() {
        let e = error("hula", "tau_us", "5000000");
        assert!(
            matches!(&e, PlanError::OutOfRange { key, value: 5_000_000, .. } if key == "tau_us"),
            "{e:?}"
        );
        assert_eq!(
            e.to_string(),
            "switch leaf1: tau_us=5000000 is out of range (probe_us, tau_us and keep_alive_us \
             must be 1..4000000)"
        );
        let e = error("p4qcn", "q_max", "0");
        assert!(
            matches!(&e, PlanError::Exceeds { key, limit: 0, .. } if key == "q_min"),
            "{e:?}"
        );
        assert_eq!(e.switch(), Some("leaf1"));
        let e = error("p4qcn", "q_min", "lots");
        assert_eq!(e.to_string(), "switch leaf1: q_min=lots is not a number");
        let e = error("p4te", "rate_control", "maybe");
        assert_eq!(e.to_string(), "switch leaf1: rate_control=maybe: on or off");
        let e = error("pint", "pint_pfc_xoff", "0");
        assert_eq!(
            e.to_string(),
            "switch leaf1: pint_pfc_xoff=0: a number of packets, at least 1"
        );
        let e = error("pint", "pint_bits", "3");
        assert_eq!(
            e.to_string(),
            "switch leaf1: bad pint_bits=3 (expected 8 or 2x4)"
        );
        assert_eq!(e.switch(), Some("leaf1"));
        let e = error("nonesuch", "k", "v");
        assert!(
            matches!(&e, PlanError::UnknownProgram { program, .. } if program == "nonesuch"),
            "{e:?}"
        );
        assert!(
            e.to_string().contains("(this build has: basic, ecmp"),
            "{e}"
        );
    }
}
