//! Link events: a switch-to-switch link failing or coming back during a run.

use pipeline::metadata::PortId;

use super::{Event, Peer, Sim};

/// A switch-to-switch link going down or coming back up at a time. While it is down, frames
/// either end sends onto it are lost (counted as the port's `link_drops`); frames already on the
/// wire arrive. Both ends' agents are told at once ([`pipeline::agent::Agent::port_status`]): the link
/// monitoring the paper leaves to other schemes ([X]: detection takes no time).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LinkEvent {
    /// When, ns.
    pub at_ns: u64,
    /// One end: a switch and its port.
    pub switch: String,
    /// The port.
    pub port: PortId,
    /// Up (true) or down.
    pub up: bool,
}

impl LinkEvent {
    /// `SWITCH:PORT@MS` (virtual milliseconds), as `pisa-sim --link-down`/`--link-up` take it.
    pub fn parse(text: &str, up: bool) -> Result<LinkEvent, String> {
        let bad = || format!("{text:?}: SWITCH:PORT@MS, e.g. leaf1:3@50");
        let (end, ms) = text.split_once('@').ok_or_else(bad)?;
        let (switch, port) = end.rsplit_once(':').ok_or_else(bad)?;
        let ms: f64 = ms.parse().map_err(|_| bad())?;
        if switch.is_empty() || !(ms.is_finite() && ms >= 0.0) {
            return Err(bad());
        }
        Ok(LinkEvent {
            at_ns: (ms * 1e6) as u64,
            switch: switch.to_string(),
            port: port.parse().map_err(|_| bad())?,
            up,
        })
    }
}

impl Sim {
    /// Schedules `events` at both ends of each link; an event must name a switch-to-switch link.
    pub(super) fn schedule_link_events(&mut self, events: &[LinkEvent]) -> Result<(), String> {
        for e in events {
            let sw = self
                .switches
                .iter()
                .position(|s| s.name == e.switch)
                .ok_or_else(|| format!("link event: no switch {}", e.switch))?;
            let Some((_, Peer::Switch(to, p))) = self.switches[sw]
                .peer
                .get(usize::from(e.port))
                .copied()
                .flatten()
            else {
                return Err(format!(
                    "link event: {}:{} is not a link to another switch",
                    e.switch, e.port
                ));
            };
            for (sw, port) in [(sw, e.port), (to, p)] {
                self.schedule(e.at_ns, Event::Link { sw, port, up: e.up });
            }
        }
        Ok(())
    }

    /// Switch `sw`'s `port` goes down or comes up: its departures are lost or carried again
    /// from now, and its agent is told.
    pub(super) fn set_link(&mut self, sw: usize, port: PortId, up: bool) {
        let s = &mut self.switches[sw];
        s.down[usize::from(port)] = !up;
        if let Some(a) = &mut s.agent {
            a.port_status(&s.pipeline.control, self.now, u32::from(port), up);
        }
    }
}
