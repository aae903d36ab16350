//! Stateful externs: registers, counters, meters, hashes and random numbers.
//!
//! # Sharing model
//!
//! Externs are *not* snapshotted like tables: one instance per extern lives for the life of the
//! loaded program and is read and written **in place**, through `&self`, by every data-plane
//! worker and by the control plane at the same time. All types here are `Sync`; none needs
//! `&mut self` except the per-worker [`Rng`].
//!
//! | extern | data plane (workers) | control plane | synchronisation |
//! |---|---|---|---|
//! | [`Register`] | `read`, `write`, `rmw` | `read`, `write`, `reset` | one `AtomicU64` per cell, `Relaxed`; `rmw` is a CAS loop, so no update is lost |
//! | [`Counter`] | `count(shard = worker index, ..)` | `read` (sums shards), `write`, `reset_all` | per-worker shards, single writer each: `Relaxed` load + store; readers sum with `Relaxed` loads |
//! | [`MeterArray`] | `execute(now_ns, ..)` | `configure`, `config`, `reset` | per-cell `parking_lot::Mutex` (acquire/release), cells cache-line padded |
//! | [`HashFn`] | `hash`, `hash_range` | built at load time | immutable, tables are compile-time `static`s |
//! | [`Rng`] | owned by one worker, `&mut` | seeds it at worker start | none needed |
//! | [`ValueSet`] | `contains` | `replace`, `add`, `remove`, `clear` | the members behind an `ArcSwap`: lock-free reads, copy-on-write changes (`rcu`) |
//!
//! `Relaxed` is enough for registers and counters because their cells publish no other memory:
//! each cell is individually atomic (linearizable), and, as on a hardware pipeline, there is no
//! ordering between accesses to different cells. A control-plane read concurrent with traffic
//! sees some recent value of each cell; exact values once traffic stops. Control-plane writes
//! racing with data-plane updates of the same counter cell are best effort (see
//! [`Counter::write`]); register and meter writes are atomic per cell.
//!
//! Nothing here reads a clock or does I/O: time arrives as `now_ns` and randomness from the
//! caller's [`Rng`].

mod counter;
mod hash;
mod meter;
mod random;
mod register;
mod value_set;

pub use counter::{Counter, CounterData, CounterKind};
pub use hash::{HashAlgorithm, HashFn, hash_range};
pub use meter::{Color, MeterAlgorithm, MeterArray, MeterConfig, MeterError, MeterUnit};
pub use random::Rng;
pub use register::{MAX_REGISTER_BITS, Register};
pub use value_set::{ValueSet, ValueSetError};

#[cfg(test)]
mod tests {
    use super::*;

    /// The sharing model relies on these being shareable between worker threads.
    #[test]
    fn externs_are_send_and_sync() {
        fn assert_sync<T: Send + Sync>() {}
        assert_sync::<Register>();
        assert_sync::<Counter>();
        assert_sync::<MeterArray>();
        assert_sync::<HashFn>();
        fn assert_send<T: Send>() {}
        assert_send::<Rng>();
    }

    /// Rough per-call costs; run with
    /// `cargo test --release -p pipeline --lib externs::tests::perf -- --ignored --nocapture`.
    #[test]
    #[ignore = "timing smoke test, meaningful only in release builds"]
    fn perf() {
        use std::hint::black_box;
        use std::time::Instant;
        const N: u32 = 10_000_000;
        fn time(name: &str, mut f: impl FnMut(u32)) {
            let t = Instant::now();
            for i in 0..N {
                f(i);
            }
            println!(
                "{name}: {:.2} ns/call",
                t.elapsed().as_secs_f64() * 1e9 / f64::from(N)
            );
        }
        let r = Register::new(1024, 32);
        time("register rmw", |i| {
            black_box(r.rmw(black_box(i as usize & 1023), |v| v + 1));
        });
        let c = Counter::new(1024, CounterKind::Both, 4);
        time("counter count", |i| {
            black_box(c.count(1, black_box(i as usize & 1023), 64));
        });
        let m = MeterArray::new(1024, MeterUnit::Bytes, MeterAlgorithm::TrTcm);
        for idx in 0..1024 {
            m.configure(
                idx,
                Some(MeterConfig {
                    cir: 1_000_000,
                    cburst: 10_000,
                    pir: 2_000_000,
                    pburst: 20_000,
                }),
            )
            .unwrap();
        }
        time("meter execute", |i| {
            black_box(m.execute(black_box(i as usize & 1023), u64::from(i) * 100, 64, None));
        });
        let h = HashFn::new(HashAlgorithm::Crc32, 0);
        let mut rng = Rng::new(1);
        let mut tuple = [7u8; 13];
        time("crc32 13 bytes", |i| {
            tuple[0] = i as u8;
            black_box(h.hash(black_box(&tuple), &mut rng));
        });
        time("rng range", |_| {
            black_box(rng.range(0, 999));
        });
    }
}
