//! p4c's BMv2 JSON for the v1model, loaded onto the pisa-switch engine.
//!
//! [`load`] reads the JSON that `p4c --target bmv2 --arch v1model` writes (format 2.x, as
//! `docs/JSON_format.md` of p4lang/behavioral-model describes it) and compiles it, once, into a
//! [`Bmv2Program`]: an ordinary [`pipeline::program::Program`] whose tables are the engine's own
//! (so P4Runtime, the text commands, counters, meters, action selectors and the traffic manager
//! serve it as they serve a hard-wired program) and whose parser, actions and controls are
//! compiled trees of resolved references, run without allocating.
//!
//! What the loader does not run it refuses at load time with the JSON path of the construct
//! ([`LoadError`]); it never runs a program differently from what the JSON says. What is run and
//! what is refused is listed in `docs/bmv2.md`.

mod action;
mod bits;
mod control;
mod error;
mod expr;
mod ids;
mod json;
mod layout;
mod live;
mod load;
mod parse;
mod phv;
mod program;
mod tables;

pub use error::LoadError;
pub use ids::{ControllerHeader, P4Ids, ValueSetIds};
pub use load::{load, load_with_ids};
pub use program::{Bmv2Program, Empty};
