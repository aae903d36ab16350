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
    /// The DBB compiler cannot make dispatch lists for a pair of ToRs.
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

/// For callers whose errors are still text (`?` into `Result<_, String>`).
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
