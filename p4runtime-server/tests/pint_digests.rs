//! PINT's records over P4Runtime (docs/pint.md, "How records reach the collector"): a controller
//! enables the sink's `egress.pint_record` digest (`Client::enable_digest`, what `pisa-ctl
//! digests` does) and receives every record the switch exports, field for field, in the form
//! `pisa-pint decode` reads.

mod common;
use analysis::pint::collector::SinkRecord;
use common::*;
use p4runtime_server::client::digest_values;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s4_1_sink_records_reach_a_p4runtime_controller_intact() {
    use p4::stream_message_response::Update as U;
    let f = Fixture::with_program("pint", Election::Spec, 1);
    let mut c = f.client(1).await;
    let id = c
        .enable_digest("egress.pint_record", 64, 1_000_000, 10_000_000_000)
        .await
        .unwrap();
    assert_eq!(id, f.id("digest", "egress.pint_record"));
    assert!(c.enable_digest("egress.nothing", 1, 1, 1).await.is_err());
    let record = f
        .control
        .schema()
        .digests
        .iter()
        .position(|d| d.name == "egress.pint_record")
        .unwrap() as u16;
    // Records as the sink exports them, full-width values included.
    let sent: Vec<SinkRecord> = (0..40u64)
        .map(|i| SinkRecord {
            packet_id: u64::MAX - i * 0x1234_5678_9abc,
            hops: 1 + (i % 5) as u32,
            digest: (i * 37 % 256) as u32,
            flow: (0x0a00_0101, 0x0a00_0201 + i as u32 % 2, 17, 10_000, 5001),
            query: (i % 2) as u8,
        })
        .collect();
    for r in &sent {
        f.control.externs().digests.push(record, &r.values(), 0);
    }
    let mut got = Vec::new();
    while got.len() < sent.len() {
        match c.next_event(Duration::from_secs(3)).await {
            Some(Ok(p4::StreamMessageResponse {
                update: Some(U::Digest(d)),
            })) => {
                assert_eq!(d.digest_id, id);
                for e in &d.data {
                    let v = digest_values(e).expect("a struct of bitstrings");
                    let r = SinkRecord::from_values(&v).expect("8 fields");
                    // What `pisa-ctl digests` prints is what `pisa-pint decode` parses.
                    let line: Vec<String> = v.iter().map(u128::to_string).collect();
                    assert_eq!(SinkRecord::parse_line(&line.join(" ")), Some(r));
                    got.push(r);
                }
                c.ack_digest(d.digest_id, d.list_id).await.unwrap();
            }
            other => panic!("expected a digest list, got {other:?}"),
        }
    }
    assert_eq!(got, sent);
}
