//! The hard-wired programs of pisa-switch, and the registry that names them.
//!
//! `basic` ([`basic`]) is L2 switching and IPv4/IPv6 routing with ECMP, an ACL and punting to the
//! CPU; the papers' mechanisms that build on its routing are [`hook::Mechanism`]s composed into it
//! (`hula`, `spray`, `dbb`, `p4qcn`, `pint`; `ecmp` is `basic` with flowlets and ECN marking), and
//! `p4te` is a program of its own with a switch-local agent. Each program has a fabric plan: what
//! every switch of a topology running it is told. [`REGISTRY`] names them all; `pisa-switch
//! --program`, the fabric controller and `pisa-sim` find programs there.

pub mod basic;
pub mod dbb;
pub mod ecmp;
pub mod hook;
pub mod hula;
pub mod p4qcn;
pub mod p4te;
pub mod pint;
pub mod pint_hpcc;
pub mod pint_latency;
mod plan_error;
pub mod spray;

use std::collections::BTreeMap;
use std::sync::Arc;

use basic::Options;
use hook::{ComposeError, Mechanism};
use pipeline::agent::Agent;
use pipeline::program::Program;
use pipeline::schema::Schema;
pub use plan_error::PlanError;
use topo::plan::SwitchPlan;
use topo::{Switch, Topology};

/// A fabric plan: given the whole topology and the switches that run the program, what each of
/// them is told, keyed by switch name.
pub type PlanFn = fn(&Topology, &[&Switch]) -> Result<BTreeMap<String, SwitchPlan>, PlanError>;

/// The fabric plan of `basic`, and the start of every plan that routes like it:
/// [`topo::plan::routed`], as a [`PlanFn`].
pub fn routed(t: &Topology, only: &[&Switch]) -> Result<BTreeMap<String, SwitchPlan>, PlanError> {
    Ok(topo::plan::routed(t, only))
}

/// How a registry entry's program is built.
#[derive(Clone, Copy, Debug)]
pub enum Build {
    /// `basic` with its options and one mechanism at its hooks ([`hook::Mechanism`]).
    Basic {
        /// The program's name (its P4Info name; presets of one program share it).
        name: &'static str,
        /// `basic`'s options.
        options: Options,
        /// `compose::<M>` for the mechanism `M` (`()` for none).
        compose: ComposeFn,
    },
    /// A program of its own.
    Own {
        /// The program's name (its P4Info name; presets of one program share it).
        name: &'static str,
        /// Builds it.
        build: fn() -> Arc<dyn Program>,
    },
}

/// Builds `basic` with the mechanism `M` as the program `name`: the [`Build::Basic`] of `M`.
pub type ComposeFn = fn(&'static str, Options) -> Result<Arc<dyn Program>, ComposeError>;

/// `basic` with `options` and the mechanism `M`, as the program `name` (version 0.1.0).
pub fn compose<M: Mechanism>(
    name: &'static str,
    options: Options,
) -> Result<Arc<dyn Program>, ComposeError> {
    Ok(Arc::new(basic::Basic::<M>::compose(
        name, "0.1.0", options,
    )?))
}

/// What the registry knows of a program: everything a switch, a fabric and the simulator need
/// to run it, under one name.
#[derive(Debug)]
pub struct Entry {
    /// The name `--program` and topology lines use.
    pub name: &'static str,
    /// One line on what it does.
    pub about: &'static str,
    /// How the program is built (its schema, hence its P4Info, comes with it).
    pub program: Build,
    /// Its fabric plan: what each switch of `topology` running this program is told (the
    /// traffic manager's settings and the table writes), keyed by switch name. Given the whole
    /// topology; returns plans for the switches in `switches` (those that run this program).
    pub plan: PlanFn,
    /// Switch parameters this entry fixes (`key=value` as on a topology line): a preset of
    /// another entry's program and plan, e.g. `spray-rr` is `spray` with `mode=rr`. A switch
    /// line that gives one of them another value is refused.
    pub preset: &'static [(&'static str, &'static str)],
    /// Its switch-local agent, if it has one (run by `pisa-switch` unless `--no-agent`, and by
    /// `pisa-sim` in virtual time).
    pub agent: Option<AgentFn>,
}

impl Entry {
    /// Builds the program.
    pub fn build(&self) -> Result<Arc<dyn Program>, ComposeError> {
        match self.program {
            Build::Basic {
                name,
                options,
                compose,
            } => compose(name, options),
            Build::Own { build, .. } => Ok(build()),
        }
    }

    /// The plans of `switches` (switches of `t` whose line names this entry), with the entry's
    /// preset applied to their lines first.
    pub fn plan(
        &self,
        t: &Topology,
        switches: &[&Switch],
    ) -> Result<BTreeMap<String, SwitchPlan>, PlanError> {
        if self.preset.is_empty() {
            return (self.plan)(t, switches);
        }
        let mut t = t.clone();
        for s in t.switches.iter_mut() {
            if !switches.iter().any(|x| x.name == s.name) {
                continue;
            }
            for &(key, value) in self.preset {
                match s.params.get(key) {
                    Some(given) if given != value => {
                        return Err(PlanError::ContradictsPreset {
                            switch: s.name.clone(),
                            key,
                            given: given.clone(),
                            scheme: self.name,
                            value,
                            program: self.program_name(),
                        });
                    }
                    _ => {
                        s.params.insert(key.to_string(), value.to_string());
                    }
                }
            }
        }
        let mine: Vec<&Switch> = t
            .switches
            .iter()
            .filter(|s| switches.iter().any(|x| x.name == s.name))
            .collect();
        (self.plan)(&t, &mine)
    }

    /// The name of the program this entry builds (for a preset, the program it presets).
    pub fn program_name(&self) -> &'static str {
        match self.program {
            Build::Basic { name, .. } => name,
            Build::Own { name, .. } => name,
        }
    }
}

/// Builds a program's agent for a switch running it.
pub type AgentFn = fn(&Arc<Schema>) -> Box<dyn Agent>;

/// `basic`'s options in the registry: none, flowlets and ECN, ECN alone.
const PLAIN: Options = Options {
    flowlets: false,
    ecn: false,
};
const FLOWLETS_ECN: Options = Options {
    flowlets: true,
    ecn: true,
};
const ECN: Options = Options {
    flowlets: false,
    ecn: true,
};

/// Every program this build has. Adding a program is one module (a [`hook::Mechanism`], or a
/// [`Program`] of its own) and one entry here; a preset is one entry with its `preset`.
pub static REGISTRY: &[Entry] = &[
    Entry {
        name: "basic",
        about: "L2, IPv4/IPv6 LPM routing with an ECMP selector, ternary ACL, punt to CPU",
        program: Build::Basic {
            name: "basic",
            options: PLAIN,
            compose: compose::<()>,
        },
        plan: routed,
        preset: &[],
        agent: None,
    },
    Entry {
        name: "ecmp",
        about: "basic's routing with ECMP per flowlet and DCTCP-style ECN marking (the papers' baseline)",
        program: Build::Basic {
            name: "ecmp",
            options: FLOWLETS_ECN,
            compose: compose::<()>,
        },
        plan: ecmp::plan,
        preset: &[],
        agent: None,
    },
    Entry {
        name: "hula",
        about: "HULA: probes from the ToRs' packet generators, per-ToR best hops, flowlets (the papers' baseline)",
        program: Build::Basic {
            name: "hula",
            options: FLOWLETS_ECN,
            compose: compose::<hula::Hula>,
        },
        plan: hula::plan,
        preset: &[],
        agent: None,
    },
    Entry {
        name: "p4te",
        about: "P4TE: in-band monitoring, load-aware flowlet routing and fake-ACK rate control",
        program: Build::Own {
            name: "p4te",
            build: p4te::build,
        },
        plan: p4te::plan::plan,
        preset: &[],
        agent: Some(p4te::agent::build),
    },
    Entry {
        name: "p4te-nra",
        about: "P4TE without rate adaptation (the same program; its plan turns FACKs off)",
        program: Build::Own {
            name: "p4te",
            build: p4te::build,
        },
        plan: p4te::plan::plan,
        preset: &[("rate_control", "off")],
        agent: Some(p4te::agent::build),
    },
    Entry {
        name: "p4qcn",
        about: "P4QCN: congestion points send feedback packets to the source (two-point); PFC with pfc=on",
        program: P4QCN,
        plan: p4qcn::plan,
        preset: &[],
        agent: None,
    },
    Entry {
        name: "p4qcn-pfc",
        about: "P4QCN's two-point congestion points and PFC at Q_PFC",
        program: P4QCN,
        plan: p4qcn::plan,
        preset: &[("cp", "two-point"), ("pfc", "on")],
        agent: None,
    },
    Entry {
        name: "p4qcn-3pt",
        about: "QCN's three-point baseline on p4qcn: congestion points mark CE, the receiver (NP) answers",
        program: P4QCN,
        plan: p4qcn::plan,
        preset: &[("cp", "three-point"), ("pfc", "off")],
        agent: None,
    },
    Entry {
        name: "pfc",
        about: "PFC alone at Q_PFC (the p4qcn program with its congestion points off)",
        program: P4QCN,
        plan: p4qcn::plan,
        preset: &[("cp", "off"), ("pfc", "on")],
        agent: None,
    },
    Entry {
        name: "p4qcn-off",
        about: "the p4qcn program with congestion points and PFC off (plain UDP and TCP)",
        program: P4QCN,
        plan: p4qcn::plan,
        preset: &[("cp", "off"), ("pfc", "off")],
        agent: None,
    },
    Entry {
        name: "spray",
        about: "packet spraying over equal-cost next hops (PLTS), the mode from mode= (random, counter, rr, rr-prefix; default random)",
        program: SPRAY,
        plan: spray::plan,
        preset: &[],
        agent: None,
    },
    Entry {
        name: "spray-random",
        about: "PLTS-Random: a uniformly random next hop per packet (RPS, DBB's baseline)",
        program: SPRAY,
        plan: spray::plan,
        preset: &[("mode", "random")],
        agent: None,
    },
    Entry {
        name: "spray-counter",
        about: "PLTS-Counter: the next hop whose port has sent the fewest bytes",
        program: SPRAY,
        plan: spray::plan,
        preset: &[("mode", "counter")],
        agent: None,
    },
    Entry {
        name: "spray-rr",
        about: "PLTS-RR: round robin over the next hops per flow",
        program: SPRAY,
        plan: spray::plan,
        preset: &[("mode", "rr")],
        agent: None,
    },
    Entry {
        name: "spray-rr-prefix",
        about: "round robin over the next hops per destination prefix",
        program: SPRAY,
        plan: spray::plan,
        preset: &[("mode", "rr-prefix")],
        agent: None,
    },
    Entry {
        name: "dbb",
        about: "DBB: per ToR pair, deterministic bandwidth-proportional dispatch cycles, the counter from counter= (shared, independent; default shared)",
        program: DBB,
        plan: dbb::plan,
        preset: &[],
        agent: None,
    },
    Entry {
        name: "dbb-shared",
        about: "DBB with one circular counter per ToR pair",
        program: DBB,
        plan: dbb::plan,
        preset: &[("counter", "shared")],
        agent: None,
    },
    Entry {
        name: "dbb-independent",
        about: "DBB with one circular counter per flow",
        program: DBB,
        plan: dbb::plan,
        preset: &[("counter", "independent")],
        agent: None,
    },
    Entry {
        name: "pint",
        about: "PINT path tracing: every hop encodes its switch ID into an 8-bit digest in the IPv4 ID, the last hop exports it",
        program: Build::Basic {
            name: "pint",
            options: PLAIN,
            compose: compose::<pint::Pint>,
        },
        plan: pint::plan,
        preset: &[],
        agent: None,
    },
];

/// The program behind the `p4qcn` entries.
const P4QCN: Build = Build::Basic {
    name: "p4qcn",
    options: PLAIN,
    compose: compose::<p4qcn::P4qcn>,
};
/// The program behind the `spray` entries.
const SPRAY: Build = Build::Basic {
    name: "spray",
    options: ECN,
    compose: compose::<spray::Spray>,
};
/// The program behind the `dbb` entries.
const DBB: Build = Build::Basic {
    name: "dbb",
    options: ECN,
    compose: compose::<dbb::Dbb>,
};

/// The registry entry of `name`.
pub fn lookup(name: &str) -> Option<&'static Entry> {
    REGISTRY.iter().find(|e| e.name == name)
}

/// The program called `name`, built. Every registry entry composes (a test builds them all),
/// so a failure here is a bug in the registry, and panics with the reason.
pub fn by_name(name: &str) -> Option<Arc<dyn Program>> {
    lookup(name).map(|e| {
        e.build()
            .unwrap_or_else(|err| panic!("the registry entry {name} does not build: {err}"))
    })
}

/// Names of the programs this build has.
pub fn names() -> impl Iterator<Item = &'static str> {
    REGISTRY.iter().map(|e| e.name)
}

/// The name a topology line (or `pisa-fabric experiment --schemes`) gives a switch that is a
/// Linux router in place of a `pisa-switch` process: `pisa-fabric` sets it up with the kernel's
/// multipath routes (an L4 hash) and tbf shaping. It runs no program, so it has no registry
/// entry and no fabric plan, and `pisa-sim` cannot simulate it.
pub const KERNEL: &str = "kernel";

/// Whether `program` names a Linux router ([`KERNEL`]) rather than a program.
pub fn is_kernel(program: &str) -> bool {
    program == KERNEL
}

/// The plan of every switch of `t`, each by the fabric plan of the program its line names.
/// Linux routers ([`KERNEL`]) get none: `pisa-fabric` sets their routes up itself.
pub fn fabric_plan(t: &Topology) -> Result<BTreeMap<String, SwitchPlan>, PlanError> {
    let mut by_program: BTreeMap<&str, Vec<&Switch>> = BTreeMap::new();
    for s in t.switches.iter().filter(|s| !is_kernel(&s.program)) {
        by_program.entry(s.program.as_str()).or_default().push(s);
    }
    let mut out = BTreeMap::new();
    for (program, switches) in by_program {
        let entry = lookup(program).ok_or_else(|| PlanError::UnknownProgram {
            switch: switches[0].name.clone(),
            program: program.to_string(),
            known: names().collect::<Vec<_>>().join(", "),
        })?;
        out.extend(entry.plan(t, &switches)?);
    }
    Ok(out)
}
