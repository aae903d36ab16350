//! Fabrics as data: the topology format and its generators ([`topo`]), what each switch of a
//! fabric is told ([`plan`]), and the ToRs' address prefixes ([`tors`]). Both the namespace
//! tooling (`pisa-fabric`) and the simulator (`pisa-sim`) read topologies and program switches
//! from these, so a fabric behaves the same in both.

pub mod plan;
pub mod topo;
pub mod tors;
