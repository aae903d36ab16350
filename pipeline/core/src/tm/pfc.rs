//! The traffic manager's priority flow control: the packet and byte thresholds that pause an
//! ingress port's upstream and resume it ([`PortConfig::pfc_xoff`], [`PortConfig::pfc_xon`],
//! [`SharedBuffer`]), the frames to send, and what a received PAUSE/PFC frame does to a port's
//! transmit side (and how long it held it).

use std::sync::atomic::Ordering;

use super::*;

impl<B> TrafficManager<B> {
    pub(super) fn release_shared(&self, ingress: PortId, qid: usize, len: u64) {
        let Some(sb) = &self.shared else { return };
        self.pool_bytes.fetch_sub(len, Ordering::AcqRel);
        let Some(ing) = self.ports.get(usize::from(ingress)) else {
            return;
        };
        let occ = ing.ingress_bytes[qid].fetch_sub(len, Ordering::AcqRel) - len;
        let bit = 1u8 << qid;
        if occ <= sb.xon_bytes && ing.pfc_state.load(Ordering::Acquire) & bit != 0 {
            ing.pfc_state.fetch_and(!bit, Ordering::AcqRel);
            ing.pfc_dirty.store(true, Ordering::Release);
        }
    }

    /// A packet that arrived on `ingress` left its egress queue: the packet PFC threshold's
    /// accounting, and XON once fewer than the resume threshold remain ([`PortConfig::pfc_xon`];
    /// A-QCN-9 in docs/p4qcn.md).
    pub(super) fn release_ingress(&self, ingress: PortId, qid: usize) {
        if !self.count_ingress.load(Ordering::Relaxed) {
            return;
        }
        let Some(ing) = self.ports.get(usize::from(ingress)) else {
            return;
        };
        // Saturating: packets queued before counting began were never counted.
        let occ =
            match ing.ingress_packets[qid]
                .fetch_update(Ordering::AcqRel, Ordering::Relaxed, |v| v.checked_sub(1))
            {
                Ok(prev) => prev - 1,
                Err(_) => 0,
            };
        let xoff = ing.limits.pfc_xoff_packets.load(Ordering::Relaxed);
        let bit = 1u8 << qid;
        let resume_under = || match ing.limits.pfc_xon_packets.load(Ordering::Relaxed) {
            0 => default_pfc_xon(xoff),
            xon => xon.min(xoff),
        };
        if (xoff == 0 || occ < resume_under())
            && self.shared.is_none_or(|s| s.xoff_bytes.is_none())
            && ing.pfc_state.load(Ordering::Acquire) & bit != 0
        {
            ing.pfc_state.fetch_and(!bit, Ordering::AcqRel);
            ing.pfc_dirty.store(true, Ordering::Release);
        }
    }

    /// Packets of class `qid` that arrived on `port` and are queued in the switch (counted once
    /// some port has a packet PFC threshold).
    pub fn ingress_packets(&self, port: PortId, qid: usize) -> u32 {
        self.ports
            .get(usize::from(port))
            .and_then(|p| p.ingress_packets.get(qid))
            .map_or(0, |c| c.load(Ordering::Acquire))
    }

    /// A PFC frame `port` should send now (as an ingress port that is congesting the pool), as
    /// (class enable vector, per-class quanta), or None. XOFF classes carry the configured pause
    /// time, XON classes 0. The owner of `port` calls this and transmits the frame first.
    pub fn pfc_to_send(&self, port: PortId) -> Option<(u16, [u16; 8])> {
        let pause_quanta = self.pause_quanta();
        let p = self.ports.get(usize::from(port))?;
        if !p.pfc_dirty.swap(false, Ordering::AcqRel) {
            return None;
        }
        let state = p.pfc_state.load(Ordering::Acquire);
        let mut quanta = [0u16; 8];
        for (c, q) in quanta.iter_mut().enumerate() {
            if state & (1 << c) != 0 {
                *q = pause_quanta;
            }
        }
        // Every class is named: paused ones with their time, the others resume.
        Some((0x00ff, quanta))
    }

    /// The PFC policy of `port` as an ingress port, asked by its owner on each transmit turn:
    /// the frame to send now, if any, as (class enable vector, per-class quanta). That is a
    /// change of XOFF/XON state, or a refresh of the paused classes once half their pause time
    /// has passed since `last_xoff` (when the last XOFF went out), so the sender stays paused.
    pub fn pfc_due(&self, port: PortId, last_xoff: u64, now_ns: u64) -> Option<(u16, [u16; 8])> {
        if let Some(frame) = self.pfc_to_send(port) {
            return Some(frame);
        }
        let classes = self.pfc_paused_classes(port);
        if classes == 0 || now_ns.saturating_sub(last_xoff) <= self.pause_ns(port) / 2 {
            return None;
        }
        let q = self.pause_quanta();
        Some((
            u16::from(classes),
            std::array::from_fn(|c| if classes & (1 << c) != 0 { q } else { 0 }),
        ))
    }

    /// When the owner of `port` must come back to refresh its XOFF (None: nothing paused).
    pub fn pfc_refresh_at(&self, port: PortId, last_xoff: u64, now_ns: u64) -> Option<u64> {
        (self.pfc_paused_classes(port) != 0).then(|| {
            last_xoff
                .saturating_add(self.pause_ns(port) / 2)
                .max(now_ns.saturating_add(1))
        })
    }

    /// The pause time XOFF frames carry, in quanta.
    pub fn pause_quanta(&self) -> u16 {
        self.shared.map_or(0xffff, |s| s.pause_quanta)
    }

    /// How long an XOFF sent on `port` lasts at its link speed, ns.
    pub fn pause_ns(&self, port: PortId) -> u64 {
        let bps = self
            .ports
            .get(usize::from(port))
            .map_or(1, |p| p.limits.link_bps.load(Ordering::Relaxed).max(1));
        let q = u128::from(self.pause_quanta());
        u64::try_from(q * 512 * NANO / u128::from(bps)).unwrap_or(u64::MAX)
    }

    /// Whether `port` has a PFC frame waiting to be sent (its owner should be woken).
    #[inline]
    pub fn pfc_pending(&self, port: PortId) -> bool {
        (self.shared.is_some() || self.count_ingress.load(Ordering::Relaxed))
            && self
                .ports
                .get(usize::from(port))
                .is_some_and(|p| p.pfc_dirty.load(Ordering::Relaxed))
    }

    /// Asks again for the PFC frame of `port` (one that could not be sent).
    pub fn pfc_retry(&self, port: PortId) {
        if let Some(p) = self.ports.get(usize::from(port)) {
            p.pfc_dirty.store(true, Ordering::Release);
        }
    }

    /// Whether the TM runs a shared buffer.
    pub fn shared_buffer(&self) -> bool {
        self.shared.is_some()
    }

    /// Whether `port` is sending XOFF for any class (for refreshing pauses before they expire).
    pub fn pfc_paused_classes(&self, port: PortId) -> u8 {
        self.ports
            .get(usize::from(port))
            .map_or(0, |p| p.pfc_state.load(Ordering::Acquire))
    }

    /// Whether `port` honours received PAUSE/PFC frames: set on the port
    /// ([`PortConfig::pfc`]), or the TM runs a shared buffer with PFC thresholds.
    pub fn pfc_enabled(&self, port: PortId) -> bool {
        self.ports.get(usize::from(port)).is_some_and(|p| {
            p.limits.pfc.load(Ordering::Relaxed)
                || p.limits.pfc_xoff_packets.load(Ordering::Relaxed) != 0
                || self.shared.is_some_and(|s| s.xoff_bytes.is_some())
        })
    }

    /// A PFC (or 802.3x PAUSE, as class vector 0xff) frame received on `port` at `now_ns`: pauses
    /// or resumes the named classes of that port's transmit side, if the port honours them
    /// ([`TrafficManager::pfc_enabled`]); otherwise it is ignored (a peer cannot stop a port
    /// that was not set up for flow control). Returns whether it was honoured.
    pub fn pause_received(
        &self,
        port: PortId,
        class_enable: u16,
        quanta: [u16; 8],
        now_ns: u64,
    ) -> bool {
        if !self.pfc_enabled(port) {
            return false;
        }
        let Some(p) = self.ports.get(usize::from(port)) else {
            return false;
        };
        let bps = u128::from(p.limits.link_bps.load(Ordering::Relaxed).max(1));
        for (c, &q) in quanta.iter().enumerate() {
            if class_enable & (1 << c) == 0 {
                continue;
            }
            let ns = u128::from(q) * 512 * NANO / bps;
            let until = if q == 0 {
                0
            } else {
                now_ns + u64::try_from(ns).unwrap_or(u64::MAX / 2)
            };
            // The time paused: the new pause's length, less what an earlier one granted and
            // this frame cut short (or replaced).
            let old = p.paused_until[c].swap(until, Ordering::AcqRel);
            let granted = until.saturating_sub(now_ns);
            let withdrawn = old.saturating_sub(now_ns);
            p.paused_ns[c].store(
                p.paused_ns[c]
                    .load(Ordering::Relaxed)
                    .wrapping_add(granted)
                    .wrapping_sub(withdrawn),
                Ordering::Relaxed,
            );
        }
        true
    }

    /// How long received PFC has held class `qid` of `port` paused up to `now_ns`, ns (0 for no
    /// such port or class). Counts pauses honoured ([`TrafficManager::pause_received`]); a
    /// class paused with nothing queued for it counts too, as on a switch's PFC statistics.
    pub fn paused_ns(&self, port: PortId, qid: usize, now_ns: u64) -> u64 {
        let Some(p) = self.ports.get(usize::from(port)) else {
            return 0;
        };
        let (Some(total), Some(until)) = (p.paused_ns.get(qid), p.paused_until.get(qid)) else {
            return 0;
        };
        let to_come = until.load(Ordering::Acquire).saturating_sub(now_ns);
        total.load(Ordering::Relaxed).wrapping_sub(to_come)
    }
}
