//! The P4Runtime service (`common::Fixture`): the stream channel (packet-out, packet-in,
//! digests and their acks, idle timeouts). Each test names the p4runtime.md items it covers.

mod common;
use common::*;

/// Packet-in metadata as stratum_bmv2 sends it, padded to the field's width, when asked
/// (`--padded-packet-in`); canonical otherwise (the test above).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn padded_packet_in_metadata_when_asked() {
    use p4::stream_message_response::Update as U;
    let config = ServerConfig {
        padded_packet_in: true,
        ..ServerConfig::default()
    };
    let f = Fixture::with_config("basic", config);
    let mut c = f.client(1).await;
    // ingress_port 7 (9 bits: two bytes), then the 7-bit _pad (one byte).
    f.packet_ins
        .send([vec![0x03, 0x80], vec![0x55; 30]].concat())
        .unwrap();
    match c.next_event(Duration::from_secs(2)).await {
        Some(Ok(p4::StreamMessageResponse {
            update: Some(U::Packet(p)),
        })) => {
            let md: Vec<_> = p.metadata.iter().map(|m| m.value.clone()).collect();
            assert_eq!(md, [vec![0, 7], vec![0]]);
        }
        other => panic!("expected a packet-in, got {other:?}"),
    }
}

/// Items 22, 24, 25: packet-out encoding, packet-in decoding, digests with acks, idle timeouts.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stream_packet_io_digests_and_idle_timeouts() {
    use p4::stream_message_response::Update as U;
    let f = Fixture::new(Election::Spec, 1);
    let mut c = f.client(1).await;
    // Packet-out: egress_port 3 and _pad, header packed into two bytes before the payload.
    c.packet_out(vec![0xaa; 20], &[(1, 3), (2, 0)])
        .await
        .unwrap();
    let frame = f.packet_outs.recv_timeout(Duration::from_secs(2));
    let Ok(frame) = frame else {
        panic!("{:?}", c.next_event(Duration::from_secs(1)).await)
    };
    assert_eq!(&frame[..2], &[0x01, 0x80]);
    assert_eq!(frame.len(), 22);
    // A packet-out with a metadata id the header lacks: a stream error, nothing injected.
    c.packet_out(vec![0xaa; 20], &[(9, 1)]).await.unwrap();
    match c.next_event(Duration::from_secs(2)).await {
        Some(Ok(p4::StreamMessageResponse {
            update: Some(U::Error(e)),
        })) => assert_eq!(e.canonical_code, Code::InvalidArgument as i32),
        other => panic!("expected a stream error, got {other:?}"),
    }
    assert!(f.packet_outs.try_recv().is_err());
    // Issue 10, defect 6: a packet-out longer than a buffer carries is refused whole with
    // INVALID_ARGUMENT and the packet, not cut (2 header bytes + 3,838 fit; one more does not).
    c.packet_out(vec![0xbb; 3838], &[(1, 3), (2, 0)])
        .await
        .unwrap();
    let fits = f.packet_outs.recv_timeout(Duration::from_secs(2)).unwrap();
    assert_eq!(fits.len(), 3840);
    c.packet_out(vec![0xcc; 3839], &[(1, 3), (2, 0)])
        .await
        .unwrap();
    match c.next_event(Duration::from_secs(2)).await {
        Some(Ok(p4::StreamMessageResponse {
            update: Some(U::Error(e)),
        })) => {
            assert_eq!(e.canonical_code, Code::InvalidArgument as i32, "{e:?}");
            match e.details {
                Some(p4::stream_error::Details::PacketOut(p4::PacketOutError {
                    packet_out: Some(p),
                })) => assert_eq!(p.payload, vec![0xcc; 3839]),
                other => panic!("the error carries the packet: {other:?}"),
            }
        }
        other => panic!("expected a stream error, got {other:?}"),
    }
    assert!(
        f.packet_outs.try_recv().is_err(),
        "the over-long packet-out reached the data plane"
    );
    // Packet-in: ingress_port 7.
    f.packet_ins
        .send([vec![0x03, 0x80], vec![0x55; 30]].concat())
        .unwrap();
    match c.next_event(Duration::from_secs(2)).await {
        Some(Ok(p4::StreamMessageResponse {
            update: Some(U::Packet(p)),
        })) => {
            assert_eq!(p.payload, vec![0x55; 30]);
            assert_eq!(p.metadata[0].metadata_id, 1);
            assert_eq!(p.metadata[0].value, vec![7]);
        }
        other => panic!("expected a packet-in, got {other:?}"),
    }
    // Digests: unconfigured ones are dropped; configured ones arrive in lists and wait for acks.
    let learn = f
        .control
        .schema()
        .digests
        .iter()
        .position(|d| d.name == "ingress.mac_learn");
    let learn = learn.unwrap() as u16;
    let digests = &f.control.externs().digests;
    digests.push(learn, &[0x0200_0000_0001, 1], 0);
    // The service drains the queue at least every 100 ms; unconfigured digests are dropped.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let digest_id = f.id("digest", "ingress.mac_learn");
    c.write(
        vec![update(
            p4::update::Type::Insert,
            E::DigestEntry(p4::DigestEntry {
                digest_id,
                config: Some(p4::digest_entry::Config {
                    max_timeout_ns: 200_000_000,
                    max_list_size: 2,
                    ack_timeout_ns: 10_000_000_000,
                }),
            }),
        )],
        Atomicity::ContinueOnError,
    )
    .await
    .unwrap();
    tokio::time::sleep(Duration::from_millis(150)).await;
    digests.push(learn, &[0x0200_0000_0002, 2], 0);
    digests.push(learn, &[0x0200_0000_0002, 2], 0);
    digests.push(learn, &[0x0200_0000_0003, 3], 0);
    let list = match c.next_event(Duration::from_secs(2)).await {
        Some(Ok(p4::StreamMessageResponse {
            update: Some(U::Digest(l)),
        })) => l,
        other => panic!("expected a digest list, got {other:?}"),
    };
    assert_eq!(list.digest_id, digest_id);
    assert_eq!(
        list.data.len(),
        2,
        "duplicates folded, the unconfigured one dropped"
    );
    digests.push(learn, &[0x0200_0000_0004, 4], 0);
    assert!(
        c.next_event(Duration::from_millis(300)).await.is_none(),
        "no new list before the ack"
    );
    c.ack_digest(digest_id, list.list_id).await.unwrap();
    match c.next_event(Duration::from_secs(2)).await {
        Some(Ok(p4::StreamMessageResponse {
            update: Some(U::Digest(l)),
        })) => assert_eq!(l.data.len(), 1),
        other => panic!("expected a second digest list, got {other:?}"),
    }
    // Idle timeout: an smac entry with a 500 ms timeout is reported when it has been idle that
    // long, by its key and timeout without its action, and again after each further timeout
    // while it stays idle (P4Runtime 9.1.8), not at every scan.
    c.write(
        vec![update(
            p4::update::Type::Insert,
            E::TableEntry(p4::TableEntry {
                table_id: f.id("table", "ingress.smac"),
                r#match: vec![p4::FieldMatch {
                    field_id: 1,
                    field_match_type: Some(p4::field_match::FieldMatchType::Exact(
                        p4::field_match::Exact {
                            value: vec![2, 0, 0, 0, 0, 9],
                        },
                    )),
                }],
                action: Some(p4::TableAction {
                    r#type: Some(p4::table_action::Type::Action(p4::Action {
                        action_id: f.id("action", "NoAction"),
                        params: vec![],
                    })),
                }),
                idle_timeout_ns: 500_000_000,
                ..Default::default()
            }),
        )],
        Atomicity::ContinueOnError,
    )
    .await
    .unwrap();
    let started = Instant::now();
    for round in 1..=2u32 {
        match c.next_event(Duration::from_secs(3)).await {
            Some(Ok(p4::StreamMessageResponse {
                update: Some(U::IdleTimeoutNotification(n)),
            })) => {
                assert_eq!(n.table_entry.len(), 1);
                assert_eq!(n.table_entry[0].idle_timeout_ns, 500_000_000);
                assert_eq!(n.table_entry[0].action, None, "no action in a notification");
            }
            other => panic!("expected idle timeout notification {round}, got {other:?}"),
        }
        // Not before `round` whole timeouts (less a scan's slack).
        assert!(
            started.elapsed() >= Duration::from_millis(450) * round,
            "notification {round} after {:?}",
            started.elapsed()
        );
        if round == 1 {
            // Not again within the next 300 ms: the next report waits for another timeout.
            assert!(
                c.next_event(Duration::from_millis(300)).await.is_none(),
                "reported again before another timeout"
            );
        }
    }
}
