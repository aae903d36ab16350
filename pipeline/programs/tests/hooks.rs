//! Adding a program as docs/programs.md describes it: a mechanism in one module (`toy` below)
//! and one registry entry (`TOY`), run on `basic` through its hooks. Also: an invalid
//! combination is refused when the program is built, and every registry entry composes.

use std::sync::Arc;

use pipeline::runtime::{Config, Pipeline};
use programs::basic::Options;
use programs::hook::{ComposeError, Mechanism};
use programs::{Build, Entry, REGISTRY, compose};
use sim::SimSwitch;
use topo::{LinkProps, leaf_spine};

mod common;
use common::{drops, write_line};

/// The toy mechanism: a "discard" service in the switch. UDP datagrams to port 9 (RFC 863) are
/// counted per ingress port and dropped with their own reason; everything else is `basic`'s.
mod toy {
    use pipeline::externs::CounterKind;
    use pipeline::frame::Frame;
    use pipeline::metadata::{DropReason, PORT_BITS, StdMeta};
    use pipeline::program::Ctx;
    use pipeline::schema::{CounterIx, SchemaBuilder};
    use programs::hook::{Base, ComposeError, Headers, Mechanism, Next};

    /// The discard port.
    pub(crate) const PORT: u16 = 9;

    #[derive(Debug)]
    pub(crate) struct Discard {
        discarded: CounterIx,
        reason: DropReason,
    }

    impl Mechanism for Discard {
        fn declare(b: &mut SchemaBuilder, _base: &Base) -> Result<Self, ComposeError> {
            Ok(Discard {
                discarded: b.counter("ingress.discarded", CounterKind::Packets, 1 << PORT_BITS),
                reason: b.drop_reason("discard_service"),
            })
        }

        fn parsed(
            &self,
            cx: &mut Ctx<'_>,
            _pkt: &mut Frame<'_>,
            md: &mut StdMeta,
            h: &Headers,
        ) -> Next {
            if h.ip_proto != 17 || h.l4_dport != PORT {
                return Next::Continue;
            }
            cx.count(self.discarded, usize::from(md.ingress_port));
            md.mark_to_drop(self.reason);
            Next::Done
        }
    }
}

/// The one registry line of the toy program.
static TOY: Entry = Entry {
    name: "toy",
    about: "basic with a discard service on UDP port 9",
    program: Build::Basic {
        name: "toy",
        options: Options {
            flowlets: false,
            ecn: false,
        },
        compose: compose::<toy::Discard>,
    },
    plan: programs::routed,
    preset: &[],
    agent: None,
};

fn udp(dst_port: u16) -> Vec<u8> {
    let mut out = Vec::new();
    etherparse::PacketBuilder::ethernet2([2, 0, 0, 0, 0, 1], [2, 0, 0, 0, 0, 0xfe])
        .ipv4([10, 0, 1, 1], [10, 0, 2, 1], 64)
        .udp(40_000, dst_port)
        .write(&mut out, &[0u8; 32])
        .expect("frame");
    out
}

#[test]
fn a_toy_mechanism_in_one_module_and_one_registry_line() {
    let program = TOY.build().expect("the toy program composes");
    let schema = program.schema().clone();
    assert_eq!(schema.name, "toy");
    // basic's objects and the toy's, side by side.
    assert!(schema.table_by_name("ingress.ipv4_lpm").is_some());
    assert!(
        schema
            .counters
            .iter()
            .any(|c| c.name == "ingress.discarded")
    );
    let pipe = Pipeline::new(program, 1, Config::default());
    for line in [
        "act_prof_create_member ecmp_selector 1 set_nhop 02:00:00:00:00:02 02:00:00:00:00:fe 2",
        "table_indirect_add ipv4_lpm 10.0.2.0/24 => 1",
    ] {
        write_line(&pipe.control, line);
    }
    let mut sw = SimSwitch::new(pipe.clone());
    let out = sw.inject(1, &udp(53), 1_000);
    assert_eq!(out.len(), 1, "basic routes what the toy leaves alone");
    assert_eq!(out[0].port, 2);
    assert!(sw.inject(1, &udp(toy::PORT), 2_000).is_empty());
    assert_eq!(drops(&pipe.control, "discard_service"), 1);
    // Its plan is basic's routes: the fabric controller can program it like any other.
    let mut t = leaf_spine(
        2,
        2,
        1,
        1.0,
        LinkProps {
            rate_bps: 100_000_000,
            delay_us: 10,
            buffer: 64,
        },
    );
    for s in &mut t.switches {
        s.program = "toy".into();
    }
    let switches: Vec<_> = t.switches.iter().collect();
    let plans = TOY.plan(&t, &switches).expect("plans");
    assert_eq!(plans.len(), t.switches.len());
}

#[test]
fn an_invalid_combination_fails_when_the_program_is_built() {
    // HULA keeps its flowlets in basic's flowlet cells: without them it cannot run.
    let entry = Entry {
        name: "hula-no-flowlets",
        about: "",
        program: Build::Basic {
            name: "hula-no-flowlets",
            options: Options {
                flowlets: false,
                ecn: true,
            },
            compose: compose::<programs::hula::Hula>,
        },
        plan: programs::routed,
        preset: &[],
        agent: None,
    };
    let e = entry.build().expect_err("refused");
    assert!(matches!(e, ComposeError::Needs { .. }), "{e:?}");
    assert_eq!(
        e.to_string(),
        "program hula-no-flowlets: hula needs basic's flowlets; turn it on in the program's options"
    );
    // A mechanism whose objects clash with basic's is refused with the schema's reason.
    #[derive(Debug)]
    struct Clash;
    impl Mechanism for Clash {
        fn declare(
            b: &mut pipeline::schema::SchemaBuilder,
            _base: &programs::hook::Base,
        ) -> Result<Self, ComposeError> {
            b.register("ingress.flow_last_seen", 48, 16);
            Ok(Clash)
        }
    }
    let e = compose::<Clash>("clash", Options::default()).expect_err("refused");
    assert!(matches!(e, ComposeError::Schema(_)), "{e:?}");
    assert!(e.to_string().contains("ingress.flow_last_seen"), "{e}");
}

#[test]
fn every_registry_entry_composes_and_presets_share_their_program() {
    for entry in REGISTRY {
        let program: Arc<dyn pipeline::program::Program> = entry
            .build()
            .unwrap_or_else(|e| panic!("{}: {e}", entry.name));
        assert_eq!(
            program.schema().name,
            entry.program_name(),
            "{}",
            entry.name
        );
        if !entry.preset.is_empty() {
            let base = programs::lookup(entry.program_name()).expect("preset's program");
            assert!(
                base.preset.is_empty(),
                "{}: a preset of a preset",
                entry.name
            );
        }
    }
}
