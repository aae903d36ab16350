//! Notifications to the primary controller: packet-ins from the CPU port, digest lists (batched,
//! acknowledged), idle-timeout notifications; the threads that send them.

use super::*;

impl Inner {
    pub(super) fn packet_in_loop(&self) {
        while !self.stop.load(Ordering::Relaxed) {
            let frame = match self.io.packet_in.recv_timeout(Duration::from_millis(200)) {
                Ok(f) => f,
                Err(crossbeam::channel::RecvTimeoutError::Timeout) => continue,
                Err(crossbeam::channel::RecvTimeoutError::Disconnected) => break,
            };
            // The running program's header: a program loaded since has its own.
            let schema = self.schema();
            let (metadata, payload) = match schema.controller_header("packet_in") {
                Some(h) => {
                    let Some(values) = convert::unpack_header(&h.fields, &frame) else {
                        self.stats
                            .packet_ins_dropped
                            .fetch_add(1, Ordering::Relaxed);
                        continue;
                    };
                    let md = h
                        .fields
                        .iter()
                        .zip(values)
                        .map(|(f, v)| p4::PacketMetadata {
                            metadata_id: f.0,
                            value: if self.config.padded_packet_in {
                                crate::bytestring::padded(v, u32::from(f.2))
                            } else {
                                crate::bytestring::canonical(v)
                            },
                        })
                        .collect();
                    (md, frame[h.byte_len()..].to_vec())
                }
                None => (Vec::new(), frame),
            };
            let msg = p4::StreamMessageResponse {
                update: Some(p4::stream_message_response::Update::Packet(p4::PacketIn {
                    payload,
                    metadata,
                })),
            };
            let counter = if self.to_primary(msg) {
                &self.stats.packet_ins
            } else {
                &self.stats.packet_ins_dropped
            };
            counter.fetch_add(1, Ordering::Relaxed);
        }
    }

    pub(super) fn housekeeping_loop(&self) {
        let mut next_idle_scan = 0u64;
        while !self.stop.load(Ordering::Relaxed) {
            let now = (self.io.clock)();
            let busy_digests = self.pump_digests(now);
            // Idle timeouts are scanned at a quarter of the shortest timeout (5 ms to 1 s): the
            // scan reads every entry of the tables that have them.
            if now >= next_idle_scan {
                let step = self
                    .scan_idle(now)
                    .map_or(1_000_000_000, |t| (t / 4).clamp(5_000_000, 1_000_000_000));
                next_idle_scan = now + step;
            }
            // Tick fast only while there is something to watch: an idle switch must stay idle.
            let tick = if busy_digests {
                Duration::from_millis(5)
            } else {
                Duration::from_nanos(
                    next_idle_scan
                        .saturating_sub(now)
                        .clamp(5_000_000, 100_000_000),
                )
            };
            std::thread::sleep(tick);
        }
    }

    pub(super) fn has_primary(&self) -> bool {
        self.streams.lock().arbiter.primary().is_some()
    }

    pub(super) fn wall_ns(&self, now: u64) -> i64 {
        i64::try_from(now.saturating_add(self.epoch_offset_ns)).unwrap_or(i64::MAX)
    }

    /// Moves digests from the data plane into lists for the primary. Returns whether any digest
    /// is configured.
    pub(super) fn pump_digests(&self, now: u64) -> bool {
        let control = self.control();
        let schema = self.schema();
        let queue = &control.externs().digests;
        // Lock order: `streams` before `digests` (arbitration changes take them in that order),
        // so ask about the primary before taking `digests`, never while holding it. Holding
        // `digests` while waiting for `streams` deadlocked against an arbitration or a stream
        // leaving, which froze the whole service (issue 16).
        let primary = self.has_primary();
        let mut digests = self.digests.lock();
        while let Some(m) = queue.pop() {
            let Some(def) = schema.digests.get(usize::from(m.digest)) else {
                continue;
            };
            let Some(d) = digests.get_mut(&def.id) else {
                continue; // not configured: the controller did not ask for it
            };
            let values = m.values().to_vec();
            if d.pending.len() < 65536 && d.pending_set.insert(values.clone()) {
                if d.pending.is_empty() {
                    d.first_pending_ns = now;
                }
                d.pending.push(values);
            }
        }
        let mut lists = Vec::new();
        // Without a primary the digests wait (up to the pending limit) rather than go nowhere.
        for (&id, d) in digests.iter_mut().filter(|_| primary) {
            if let Some((_, sent)) = d.outstanding {
                let ack_timeout = u64::try_from(d.config.ack_timeout_ns).unwrap_or(0);
                if now.saturating_sub(sent) < ack_timeout {
                    continue;
                }
                d.outstanding = None;
            }
            if d.pending.is_empty() {
                continue;
            }
            let max_size = usize::try_from(d.config.max_list_size).unwrap_or(1).max(1);
            let timeout = u64::try_from(d.config.max_timeout_ns).unwrap_or(0);
            if d.pending.len() < max_size && now.saturating_sub(d.first_pending_ns) < timeout {
                continue;
            }
            let take = d.pending.len().min(max_size);
            let batch: Vec<Vec<u128>> = d.pending.drain(..take).collect();
            for v in &batch {
                d.pending_set.remove(v);
            }
            d.first_pending_ns = now;
            let list_id = d.next_list_id;
            d.next_list_id += 1;
            d.outstanding = Some((list_id, now));
            lists.push(p4::DigestList {
                digest_id: id,
                list_id,
                data: batch.into_iter().map(|v| digest_data(&v)).collect(),
                timestamp: self.wall_ns(now),
            });
        }
        let any = !digests.is_empty();
        drop(digests);
        for l in lists {
            let msg = p4::StreamMessageResponse {
                update: Some(p4::stream_message_response::Update::Digest(l)),
            };
            if self.to_primary(msg) {
                self.stats.digest_lists.fetch_add(1, Ordering::Relaxed);
            }
        }
        any
    }

    /// Reports entries idle for longer than their timeout, and again after each further timeout
    /// while they stay idle (P4Runtime 9.1.8; an entry is marked reported only when a primary
    /// took the notification). An entry is reported by its key fields, its metadata and its
    /// timeout, without its action, as the spec requires and as PI's server sends it. Returns
    /// the shortest idle timeout among the entries, if any has one.
    pub(super) fn scan_idle(&self, now: u64) -> Option<u64> {
        let tables: Vec<u32> = self
            .schema()
            .tables
            .iter()
            .filter(|t| t.idle_timeout)
            .map(|t| t.id)
            .collect();
        if tables.is_empty() {
            return None;
        }
        self.control().set_now(now);
        let mut shortest: Option<u64> = None;
        let mut expired: Vec<p4::TableEntry> = Vec::new();
        let mut keys = Vec::new();
        let mut reported = self.idle_reported.lock();
        let mut live = HashSet::new();
        for id in tables {
            let Ok(entries) = self.control().read_entries(Some(id), false, false) else {
                continue;
            };
            for e in entries {
                if e.idle_timeout_ns == 0 {
                    continue;
                }
                shortest = Some(shortest.map_or(e.idle_timeout_ns, |s| s.min(e.idle_timeout_ns)));
                let key = (id, format!("{:?}/{}", e.matches, e.priority));
                live.insert(key.clone());
                let elapsed = e.elapsed_since_hit_ns.unwrap_or(0);
                match reported.get(&key) {
                    // Hit again since the report: re-arm.
                    Some(&at) if elapsed < at => {
                        reported.remove(&key);
                    }
                    // Still idle: reported again once another whole timeout has passed.
                    Some(&at) if elapsed < at.saturating_add(e.idle_timeout_ns) => continue,
                    _ => {}
                }
                if elapsed >= e.idle_timeout_ns {
                    keys.push((key, elapsed));
                    let mut msg = convert::table_entry_msg(&self.schema(), &e, false);
                    msg.action = None;
                    expired.push(msg);
                }
            }
        }
        reported.retain(|k, _| live.contains(k));
        if !expired.is_empty() {
            let msg = p4::StreamMessageResponse {
                update: Some(
                    p4::stream_message_response::Update::IdleTimeoutNotification(
                        p4::IdleTimeoutNotification {
                            table_entry: expired,
                            timestamp: self.wall_ns(now),
                        },
                    ),
                ),
            };
            if self.to_primary(msg) {
                reported.extend(keys);
                self.stats
                    .idle_notifications
                    .fetch_add(1, Ordering::Relaxed);
            }
        }
        shortest
    }
}
