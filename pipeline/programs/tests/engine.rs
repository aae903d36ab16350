//! Tests of engine modules (the command parser, the RMT resource estimate, the packet driver)
//! that need a real program to run on: the engine knows none, so they live with the programs.

mod commands {
    use pipeline::commands::*;
    use pipeline::control::{ActionSpec, Entity, TableAction};
    use pipeline::pre::Replica;
    use pipeline::program::Program;
    use pipeline::schema::Schema;
    use pipeline::table::FieldMatch;
    use programs::basic::Basic;

    fn basic() -> std::sync::Arc<Schema> {
        Basic::new().schema().clone()
    }

    #[test]
    fn values() {
        assert_eq!(parse_value("10"), Ok(10));
        assert_eq!(parse_value("0x1f"), Ok(31));
        assert_eq!(parse_value("10.0.0.1"), Ok(0x0a00_0001));
        assert_eq!(parse_value("02:00:00:00:00:fe"), Ok(0x0200_0000_00fe));
        assert_eq!(
            parse_value("2001:db8::1"),
            Ok(0x2001_0db8_0000_0000_0000_0000_0000_0001)
        );
        assert!(parse_value("zz").is_err());
    }

    #[test]
    fn clone_sessions_with_several_replicas_and_a_class() {
        let s = basic();
        let Ok(Command::Write(u)) = parse_line(&s, "mirroring_add_replicas 5 510:1 68:2 cos=3")
        else {
            panic!()
        };
        let Entity::CloneSession {
            session_id,
            session,
        } = &u[0].entity
        else {
            panic!()
        };
        assert_eq!(*session_id, 5);
        assert_eq!(
            session.replicas,
            [Replica { port: 510, rid: 1 }, Replica { port: 68, rid: 2 }]
        );
        assert_eq!(session.class_of_service, 3);
        assert!(parse_line(&s, "mirroring_add_replicas 5 510:1 cos=8").is_err());
    }

    #[test]
    fn table_commands() {
        let s = basic();
        let c = parse_line(
            &s,
            "table_add l2_exact l2_forward 02:00:00:00:00:02 => 2  # comment",
        )
        .unwrap();
        let Command::Write(u) = c else { panic!() };
        let Entity::TableEntry(e) = &u[0].entity else {
            panic!()
        };
        assert_eq!(e.matches, vec![(1, FieldMatch::Exact(0x0200_0000_0002))]);
        let fwd = s.actions[s.action_by_name("l2_forward").unwrap()].id;
        assert_eq!(
            e.action,
            Some(TableAction::Action(ActionSpec {
                action_id: fwd,
                params: vec![(1, 2)]
            }))
        );
        let c = parse_line(&s, "table_add acl ingress.drop 0&&&0 0&&&0 0x800&&&0xffff 0&&&0 10.0.0.0&&&255.0.0.0 6&&&0xff 0&&&0 23&&&0xffff => 5").unwrap();
        let Command::Write(u) = c else { panic!() };
        let Entity::TableEntry(e) = &u[0].entity else {
            panic!()
        };
        assert_eq!(e.priority, i32::MAX as u32 - 5);
        assert_eq!(e.matches.len(), 4);
        let c = parse_line(
            &s,
            "table_indirect_add_with_group ipv4_lpm 10.0.2.0/24 => 1",
        )
        .unwrap();
        let Command::Write(u) = c else { panic!() };
        let Entity::TableEntry(e) = &u[0].entity else {
            panic!()
        };
        assert_eq!(e.action, Some(TableAction::Group(1)));
        assert_eq!(parse_line(&s, "   # only a comment"), Ok(Command::Nothing));
        assert!(
            matches!(parse_line(&s, "set_queue_rate 1000 3"), Ok(Command::Other(v, a)) if v == "set_queue_rate" && a == ["1000", "3"])
        );
        assert!(parse_line(&s, "table_add nope x 1 => 2").is_err());
        assert!(parse_line(&s, "table_add l2_exact l2_forward 1 => 2 3").is_err());
    }

    #[test]
    fn other_objects() {
        let s = basic();
        for line in [
            "act_prof_create_member ecmp_selector 1 set_nhop 02:00:00:00:01:03 02:00:00:00:00:fe 3",
            "act_prof_create_group ecmp_selector 1 1:2 2",
            "mc_group_create 5 1:1 2:2 3",
            "mirroring_add 7 9 64",
            "register_write flow_last_seen 3 99",
            "meter_set port_meter 1 1000 100 2000 200",
            "table_set_default ipv4_lpm punt_to_cpu",
            "table_delete l2_exact 02:00:00:00:00:02",
        ] {
            assert!(
                matches!(parse_line(&s, line), Ok(Command::Write(_))),
                "{line}"
            );
        }
    }
}

mod resources {
    use pipeline::resources::*;

    #[test]
    fn stages_follow_the_dependency_graph_and_fields_fill_the_smallest_words() {
        let program = programs::by_name("p4te").unwrap();
        let layout = Layout {
            steps: vec![
                Step {
                    name: "a",
                    gress: Gress::Ingress,
                    uses: &["ingress.down_v4"],
                    after: &[],
                },
                Step {
                    name: "b",
                    gress: Gress::Ingress,
                    uses: &["ingress.rc_seq"],
                    after: &["a"],
                },
                Step {
                    name: "c",
                    gress: Gress::Ingress,
                    uses: &[],
                    after: &["a", "b"],
                },
                Step {
                    name: "d",
                    gress: Gress::Egress,
                    uses: &["egress.port_tx"],
                    after: &["c"],
                },
            ],
            phv: vec![
                (Gress::Ingress, "x", 1),
                (Gress::Ingress, "y", 9),
                (Gress::Ingress, "z", 128),
            ],
        };
        let e = estimate(program.schema(), &layout).unwrap();
        assert_eq!((e.ingress_stages, e.egress_stages), (3, 1));
        assert_eq!(e.phv_words[&Gress::Ingress], [1, 1, 4]);
        // An LPM table of 4,096 32-bit keys: TCAM 4,096 x 40 bits; a register 65,536 x 32 bits.
        assert_eq!(e.memory[0].2, 4096 * 40);
        assert_eq!(e.memory[1].1, 65_536 * 32);
        let bad = Layout {
            steps: vec![Step {
                name: "a",
                gress: Gress::Ingress,
                uses: &["nope"],
                after: &[],
            }],
            phv: vec![],
        };
        assert!(estimate(program.schema(), &bad).is_err());
        let cycle = Layout {
            steps: vec![
                Step {
                    name: "a",
                    gress: Gress::Ingress,
                    uses: &[],
                    after: &["b"],
                },
                Step {
                    name: "b",
                    gress: Gress::Ingress,
                    uses: &[],
                    after: &["a"],
                },
            ],
            phv: vec![],
        };
        assert!(estimate(program.schema(), &cycle).is_err());
    }

    #[test]
    fn p4te_register_accesses_and_target_widths_are_pinned() {
        let program = programs::by_name("p4te").unwrap();
        let e = estimate(program.schema(), &program.layout().unwrap()).unwrap();
        // Target cells: 17 bits take 32, 10 take 16, 48 take 64, 2 take 8, 1 stays 1.
        assert_eq!(
            [1, 2, 10, 17, 32, 48, 64, 65].map(register_width),
            [1, 8, 16, 32, 32, 64, 64, 128]
        );
        let mem = |name: &str| e.memory.iter().find(|m| m.0 == name).unwrap().1;
        assert_eq!(mem("ingress.last_win"), 65_536 * 32);
        assert_eq!(mem("ingress.flowlet_port"), 8_192 * 16);
        assert_eq!(mem("ingress.flowlet_last_seen"), 8_192 * 64);
        // Every register access per packet, as the code makes them: rcSeq is read by the
        // anti-repeat step and moved by a passing FACK; edge_port is read for the ingress port,
        // the egress port, and again at egress; rate adaptation's egress switch is read at
        // ingress too. Each needs a copy or bridged metadata on a real target.
        assert_eq!(
            e.register_conflicts(),
            [
                ("egress.rate_control", 2, 1),
                ("ingress.edge_port", 3, 1),
                ("ingress.rc_seq", 2, 0),
            ]
        );
        let registers = program.schema().registers.len();
        assert_eq!(e.register_accesses.len(), registers);
    }
}

mod driver {
    use pipeline::commands::{Command, parse_line};
    use pipeline::control::Atomicity;
    use pipeline::driver::*;
    use pipeline::metadata::PortId;
    use pipeline::runtime::Worker;
    use pipeline::runtime::{Config, Pipeline};
    use pipeline::tm::TrafficManager;
    use sim::{BUF_SIZE, VecBuffers};

    /// Every port exists; frames that leave are collected per port.
    #[derive(Debug, Default)]
    struct Collect {
        bufs: VecBuffers,
        woken: Vec<PortId>,
    }

    impl Buffers for Collect {
        type Buf = Vec<u8>;
        fn bytes<'a>(&'a self, b: &'a Vec<u8>) -> &'a [u8] {
            b
        }
        fn bytes_mut<'a>(&'a self, b: &'a mut Vec<u8>) -> &'a mut [u8] {
            b
        }
        fn alloc(&mut self) -> Option<Vec<u8>> {
            self.bufs.alloc()
        }
        fn free(&mut self, b: Vec<u8>) {
            self.bufs.free(b);
        }
        fn headroom(&self) -> usize {
            sim::HEADROOM
        }
    }

    impl Env for Collect {
        fn has_port(&self, _port: PortId) -> bool {
            true
        }
        fn wake(&mut self, port: PortId) {
            self.woken.push(port);
        }
    }

    /// Issue 10, defect 2: a frame that grew into its headroom (an AF_PACKET port restores a
    /// VLAN tag in front of it, so it starts at 252 of a 4096-byte buffer and is 3,844 bytes
    /// long) used to be copied to offset 256 for each replica, 4 bytes past the buffer's end,
    /// and the worker panicked. Replicas now fit and are intact.
    #[test]
    fn replicas_of_a_frame_that_grew_into_its_headroom_fit_their_buffers() {
        let pipe = Pipeline::new(programs::by_name("basic").unwrap(), 1, Config::default());
        let c = &pipe.control;
        for line in [
            "table_add l2_exact l2_multicast 02:00:00:00:00:aa => 1",
            "mc_group_create 1 2 3 4",
        ] {
            let Command::Write(u) = parse_line(c.schema(), line).unwrap() else {
                panic!("{line}")
            };
            assert!(
                c.write(&u, Atomicity::ContinueOnError)
                    .iter()
                    .all(Result::is_ok)
            );
        }
        let len = 3844;
        let start = BUF_SIZE - len;
        assert_eq!(start, 252);
        let mut buf = vec![0u8; BUF_SIZE];
        let frame: Vec<u8> = (0..len).map(|i| (i % 251) as u8).collect();
        buf[start..].copy_from_slice(&frame);
        buf[start..start + 6].copy_from_slice(&[2, 0, 0, 0, 0, 0xaa]);
        buf[start + 12..start + 14].copy_from_slice(&[0x88, 0xb5]);
        let want = buf[start..].to_vec();
        let tm = TrafficManager::new(8, pipeline::tm::PortConfig::default(), None);
        let mut env = Collect::default();
        let mut d = Driver::new(Worker::new(pipe.clone(), 0, 1));
        d.begin_batch();
        d.receive(&mut env, &tm, 1, Pkt { buf, start, len }, 0);
        let mut out = Vec::new();
        for port in [2, 3, 4] {
            let mut tx = PortTx::new(&tm, port);
            d.transmit(&mut env, &tm, &mut tx, 1, usize::MAX);
            out.extend(
                tx.out
                    .drain(..)
                    .map(|f| (port, f.buf[f.start..f.start + f.len].to_vec())),
            );
        }
        d.end_batch();
        assert_eq!(out.len(), 3);
        assert!(
            out.iter().all(|(_, f)| *f == want),
            "every replica is the frame"
        );
    }
}
