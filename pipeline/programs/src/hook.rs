//! Mechanisms composed into `basic` by hooks.
//!
//! A mechanism (HULA, packet spraying, DBB, P4QCN's congestion point, PINT, or one of your own)
//! is a type implementing [`Mechanism`]: it declares its tables, registers and drop reasons
//! ([`Mechanism::declare`]), reads the headers `basic`'s parser extracted ([`Headers`]), may end
//! ingress early ([`Mechanism::before_parse`], [`Mechanism::parsed`]), may choose a routed
//! packet's next hop before `basic`'s LPM ([`Mechanism::steer`]) or after it
//! ([`Mechanism::routed`]), and acts in egress ([`Mechanism::egress`]). Every hook has a no-op
//! default. A program is [`Basic<M>`](super::basic::Basic) with one mechanism: the hooks are
//! monomorphised into `basic`'s stages, so there is no dynamic dispatch on the packet path, and
//! `Basic<()>` is `basic` itself.
//!
//! A mechanism that needs one of `basic`'s options (flowlets, ECN marking) asks for it in
//! `declare` and fails there with a [`ComposeError`]: an invalid combination is refused when the
//! program is built, never run wrongly.

use pipeline::frame::Frame;
use pipeline::metadata::{PortId, StdMeta};
use pipeline::program::Ctx;
use pipeline::schema::{RegisterIx, SchemaBuilder, SchemaError};

pub use super::basic::Headers;

/// What `basic` offers a mechanism when it declares itself.
#[derive(Clone, Copy, Debug)]
pub struct Base {
    /// The program's name (its P4Info name).
    pub program: &'static str,
    /// The index of `NoAction`, for tables whose default does nothing.
    pub no_action: usize,
    /// The flowlet registers, when `basic` keeps flowlets.
    pub flowlets: Option<FlowletRegisters>,
    /// Whether `basic` marks ECN in egress.
    pub ecn: bool,
}

impl Base {
    /// The flowlet registers, or the error that `mechanism` needs them.
    pub fn need_flowlets(&self, mechanism: &'static str) -> Result<FlowletRegisters, ComposeError> {
        self.flowlets.ok_or(ComposeError::Needs {
            program: self.program,
            mechanism,
            option: "flowlets",
        })
    }
}

/// The registers of `basic`'s flowlet switching.
#[derive(Clone, Copy, Debug)]
pub struct FlowletRegisters {
    /// Last packet of each flowlet cell, ns (48 bits).
    pub time: RegisterIx,
    /// Flowlet number of each cell (16 bits): a new flowlet re-hashes its ECMP choice.
    pub id: RegisterIx,
    /// The flowlet gap, ns, in cell 0 (0: flowlets off, plain per-flow ECMP).
    pub gap: RegisterIx,
}

/// Why a program could not be composed.
#[derive(Debug, thiserror::Error)]
pub enum ComposeError {
    /// The mechanism needs an option of `basic` that the program does not turn on.
    #[error(
        "program {program}: {mechanism} needs basic's {option}; turn it on in the program's options"
    )]
    Needs {
        /// The program.
        program: &'static str,
        /// The mechanism.
        mechanism: &'static str,
        /// The option it needs.
        option: &'static str,
    },
    /// The mechanism's schema objects clash with `basic`'s (a duplicate name, a bad width).
    #[error(transparent)]
    Schema(#[from] SchemaError),
}

/// Whether ingress goes on after a hook.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Next {
    /// `basic` goes on.
    Continue,
    /// The hook dealt with the packet (forwarded or dropped it); ingress ends here.
    Done,
}

/// What a mechanism decided for a routed packet, before `basic`'s LPM.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Steer {
    /// Nothing: `basic`'s route decides.
    Route,
    /// Leave by `port`, with the destination and source MACs of that link (`basic` rewrites the
    /// MACs and the TTL or hop limit as `set_nhop` does).
    Hop {
        /// Destination MAC, as a 48-bit value.
        dmac: u128,
        /// Source MAC, as a 48-bit value.
        smac: u128,
        /// Egress port.
        port: PortId,
    },
    /// The packet was dropped (the reason is set).
    Dropped,
}

/// A mechanism that `basic` runs at its hooks. See the module documentation.
pub trait Mechanism: Send + Sync + std::fmt::Debug + Sized + 'static {
    /// Whether the mechanism keeps its own flowlets: `basic` then leaves the selector hash per
    /// flow rather than per flowlet (HULA picks a new flowlet's hop itself).
    const OWN_FLOWLETS: bool = false;

    /// Declares the mechanism's schema objects after `basic`'s own, and keeps their indices.
    fn declare(b: &mut SchemaBuilder, base: &Base) -> Result<Self, ComposeError>;

    /// Ingress, before the parser (after the CPU port's `packet_out`).
    #[inline]
    fn before_parse(&self, _cx: &mut Ctx<'_>, _pkt: &mut Frame<'_>, _md: &mut StdMeta) -> Next {
        Next::Continue
    }

    /// Ingress, right after the parser, before `basic`'s port meter and tables.
    #[inline]
    fn parsed(
        &self,
        _cx: &mut Ctx<'_>,
        _pkt: &mut Frame<'_>,
        _md: &mut StdMeta,
        _h: &Headers,
    ) -> Next {
        Next::Continue
    }

    /// A routed packet's next hop, before `basic`'s LPM (`flow_hash`: CRC-32 of the 5-tuple).
    #[inline]
    fn steer(&self, _cx: &mut Ctx<'_>, _md: &mut StdMeta, _h: &Headers, _flow_hash: u64) -> Steer {
        Steer::Route
    }

    /// After `basic`'s route chose a next hop (`set_nhop`) and set `md.egress_spec`.
    #[inline]
    fn routed(
        &self,
        _cx: &mut Ctx<'_>,
        _pkt: &mut Frame<'_>,
        _md: &mut StdMeta,
        _h: &Headers,
        _flow_hash: u64,
    ) {
    }

    /// Egress, after `basic`'s ECN marking and before its `port_tx` count.
    #[inline]
    fn egress(&self, _cx: &mut Ctx<'_>, _pkt: &mut Frame<'_>, _md: &mut StdMeta) {}
}

/// No mechanism: `basic` alone.
impl Mechanism for () {
    fn declare(_b: &mut SchemaBuilder, _base: &Base) -> Result<Self, ComposeError> {
        Ok(())
    }
}
