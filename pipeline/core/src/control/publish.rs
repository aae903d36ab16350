//! Publication: validated operations are applied to the private standby copy (this cannot fail),
//! which is then published with one atomic pointer swap; the old copy catches up once its last
//! reader has left. In-place extern writes are deferred to the end of their batch.

use super::*;

/// How long [`Control::catch_up`] waits for the last reader of the old copy.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Patience {
    /// A few spins and pauses (after a write: a worker usually drops its snapshot within a
    /// batch); if a reader is still there, the next write catches up.
    Brief,
    /// Until the readers leave (the writer needs the copy now).
    Full,
}

/// Spins before the writer pauses.
const SPINS: u32 = 64;
/// Pauses a brief catch-up allows (with `std::thread::yield_now` as the pause, about as long as
/// a worker's batch).
const BRIEF_PAUSES: u32 = 16;

impl Control {
    /// Applies a batch. Returns one result per update, in order.
    pub fn write(&self, updates: &[Update], atomicity: Atomicity) -> Vec<Result<(), WriteError>> {
        let mut w = self.writer.lock();
        let mut standby = self.take_standby(&mut w);
        let state = Arc::get_mut(&mut standby).expect("standby copy is private");
        let mut ops = Vec::new();
        let mut in_place = Vec::new();
        let mut results = Vec::with_capacity(updates.len());
        let mut failed = false;
        // The ids removed by earlier batches leave quarantine now: `take_standby` caught the
        // other copy up, so no worker holds a snapshot in which their old entries still match
        // (and counts into their direct counters and meters). A new entry that reuses one starts
        // from the state `InPlace::NewEntry` gives it (issue 10, defect 7).
        if state.tables.iter().any(|t| t.matcher.has_unreleased()) {
            let _ = state.apply(&self.schema, &Op::ReleaseFreedIds);
            ops.push(Op::ReleaseFreedIds);
        }
        for u in updates {
            let r = self.stage(state, u, &mut ops, &mut in_place);
            failed |= r.is_err();
            results.push(r);
        }
        if failed && atomicity != Atomicity::ContinueOnError {
            // Roll back: the standby copy goes back to what is published, and nothing is applied
            // in place. Updates that would have succeeded are reported as aborted.
            *state = State::clone(&self.current.load());
            for r in &mut results {
                if r.is_ok() {
                    *r = Err(WriteError::Aborted(
                        "another update of the batch failed".into(),
                    ));
                }
            }
            w.standby = Some(standby);
            return results;
        }
        for p in in_place {
            self.apply_in_place(p);
        }
        if ops.is_empty() {
            w.standby = Some(standby);
            return results;
        }
        let old = self.current.swap(standby);
        w.lagging = Some((old, ops));
        // Catch the old copy up now if its readers are gone already; otherwise the next write does.
        self.catch_up(&mut w, Patience::Brief);
        results
    }

    /// Checks that the two copies of the state hold the same (tests and fuzzing): waits for the
    /// standby copy to catch up (so call it with no snapshot held), then compares it with the
    /// current one. Returns the first differing line of each.
    pub fn check_copies(&self) -> Result<(), String> {
        let mut w = self.writer.lock();
        let standby = self.take_standby(&mut w);
        let (a, b) = (self.current.load().canonical(), standby.canonical());
        w.standby = Some(standby);
        if a == b {
            return Ok(());
        }
        let (x, y) = a
            .lines()
            .zip(b.lines())
            .find(|(x, y)| x != y)
            .unwrap_or(("(shorter)", "(shorter)"));
        Err(format!("the copies differ:\ncurrent: {x}\nstandby: {y}"))
    }

    /// The standby copy, caught up with the current one.
    pub(super) fn take_standby(&self, w: &mut Writer) -> Arc<State> {
        if let Some(s) = w.standby.take() {
            return s;
        }
        self.catch_up(w, Patience::Full);
        w.standby.take().expect("caught up")
    }

    /// Waits for the lagging copy's readers to leave (for as long as `patience` says), then
    /// replays its ops. While it waits it spins, then calls the writer's pause
    /// ([`Control::set_pause`]).
    pub(super) fn catch_up(&self, w: &mut Writer, patience: Patience) {
        let Some((mut old, ops)) = w.lagging.take() else {
            return;
        };
        let mut tries = 0u32;
        loop {
            if let Some(state) = Arc::get_mut(&mut old) {
                for op in &ops {
                    let r = state.apply(&self.schema, op);
                    debug_assert!(r.is_ok(), "replay of {op:?} failed: {r:?}");
                }
                w.standby = Some(old);
                return;
            }
            tries += 1;
            if patience == Patience::Brief && tries > SPINS + BRIEF_PAUSES {
                w.lagging = Some((old, ops));
                return;
            }
            if tries <= SPINS {
                std::hint::spin_loop();
            } else {
                (w.pause)();
            }
        }
    }

    pub(super) fn apply_in_place(&self, p: InPlace) {
        let x = &self.externs;
        match p {
            InPlace::Counter {
                direct,
                idx,
                cells,
                data,
            } => {
                let c = if direct {
                    &x.direct_counters[idx]
                } else {
                    &x.counters[idx]
                };
                for i in cells {
                    c.write(i, data);
                }
            }
            InPlace::Meter {
                direct,
                idx,
                cells,
                config,
            } => {
                let m = if direct {
                    &x.direct_meters[idx]
                } else {
                    &x.meters[idx]
                };
                for i in cells {
                    // Validated before: cannot fail.
                    let _ = m.configure(i, config);
                }
            }
            InPlace::Register { idx, cells, value } => {
                for i in cells {
                    x.registers[idx].write_wide(i, value);
                }
            }
            InPlace::NewEntry {
                table,
                id,
                counter,
                meter,
            } => {
                let t = &self.schema.tables[table];
                let i = id as usize;
                if let Some(c) = t.direct_counter {
                    x.direct_counters[c].write(i, counter.unwrap_or_default());
                }
                if let Some(m) = t.direct_meter {
                    let _ = x.direct_meters[m].configure(i, meter);
                }
                if let Some(h) = &x.hit_times[table] {
                    h.reset(id, self.now_ns.load(std::sync::atomic::Ordering::Relaxed));
                }
            }
        }
    }

    /// Removes every entry, member, group, multicast group and clone session and restores the
    /// initial defaults (SetForwardingPipelineConfig VERIFY_AND_COMMIT). Externs are reset too.
    pub fn clear(&self) {
        let mut w = self.writer.lock();
        self.generation
            .fetch_add(1, std::sync::atomic::Ordering::AcqRel);
        let mut standby = self.take_standby(&mut w);
        let state = Arc::get_mut(&mut standby).expect("standby copy is private");
        let _ = state.apply(&self.schema, &Op::Clear);
        let old = self.current.swap(standby);
        w.lagging = Some((old, vec![Op::Clear]));
        self.catch_up(&mut w, Patience::Brief);
        let x = &self.externs;
        x.counters
            .iter()
            .chain(&x.direct_counters)
            .for_each(Counter::reset_all);
        for m in x.meters.iter().chain(&x.direct_meters) {
            for i in 0..m.size() {
                let _ = m.configure(i, None);
            }
        }
        x.registers.iter().for_each(Register::reset);
        x.value_sets
            .iter()
            .for_each(crate::externs::ValueSet::clear);
    }
}
