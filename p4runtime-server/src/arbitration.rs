//! Client arbitration (P4Runtime spec 5.3, 5.4, 16.2) for the default role, kept free of I/O so
//! its rules can be tested on their own.
//!
//! Spec semantics (the default): the primary is the live stream whose election id equals the
//! highest election id the server has ever seen. When the primary leaves there is no primary
//! until a client advertises an id at least that high. With [`Election::LiveHighest`] (BMv2's
//! behaviour, opt-in) the primary is simply the live stream with the highest id, so a client that
//! reconnects with a lower id after the primary left becomes primary; and an unset election id
//! counts as 0, as PI's server (simple_switch_grpc) has it: a stream without one can be primary,
//! requests without one are the id-0 stream's, and while no stream has arbitrated, a request
//! without an election id is accepted (PI proto/server/pi_server.cpp: StreamChannel's
//! convert_u128 of the unset Uint128; Write and SetForwardingPipelineConfig's "if there are no
//! connections, we accept all requests with no election_id"). The spec (section "Unset Election
//! ID") makes an unset id lower than any and never primary: so does the default rule.

use std::collections::BTreeMap;

use tonic::Code;

/// Which rule elects the primary.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Election {
    /// The spec: the highest election id ever seen.
    #[default]
    Spec,
    /// BMv2: the highest among live streams.
    LiveHighest,
}

/// A stream's identity inside the server.
pub type StreamId = u64;

/// Arbitration state of one (device, role).
#[derive(Debug, Default)]
pub struct Arbiter {
    rule: Election,
    /// Live streams that have sent an arbitration update, with their election ids (None = the
    /// client sent none: a backup that may only read and receive).
    streams: BTreeMap<StreamId, Option<u128>>,
    highest: Option<u128>,
}

impl Arbiter {
    /// An arbiter with `rule`.
    pub fn new(rule: Election) -> Self {
        Arbiter {
            rule,
            ..Arbiter::default()
        }
    }

    /// The primary stream, if there is one.
    pub fn primary(&self) -> Option<StreamId> {
        let target = match self.rule {
            Election::Spec => self.highest?,
            Election::LiveHighest => self.streams.values().flatten().max().copied()?,
        };
        self.streams
            .iter()
            .find(|(_, e)| **e == Some(target))
            .map(|(s, _)| *s)
    }

    /// The election id arbitration replies carry: the primary's, or the highest seen.
    pub fn reply_election_id(&self) -> Option<u128> {
        self.primary()
            .and_then(|s| self.streams[&s])
            .or(match self.rule {
                Election::Spec => self.highest,
                Election::LiveHighest => None,
            })
    }

    /// The status stream `s` is told: OK for the primary, ALREADY_EXISTS for a backup while
    /// there is a primary, NOT_FOUND when there is none.
    pub fn status_of(&self, s: StreamId) -> Code {
        match self.primary() {
            Some(p) if p == s => Code::Ok,
            Some(_) => Code::AlreadyExists,
            None => Code::NotFound,
        }
    }

    /// Stream `s` advertises `election_id`. Returns whether the primary changed; an id held by
    /// another live stream is refused (INVALID_ARGUMENT, with the wording finsy recognises).
    pub fn advertise(
        &mut self,
        s: StreamId,
        election_id: Option<u128>,
    ) -> Result<bool, (Code, String)> {
        // BMv2 (PI): an unset election id is 0.
        let election_id = match self.rule {
            Election::Spec => election_id,
            Election::LiveHighest => Some(election_id.unwrap_or(0)),
        };
        if let Some(e) = election_id
            && self
                .streams
                .iter()
                .any(|(other, id)| *other != s && *id == Some(e))
        {
            return Err((
                Code::InvalidArgument,
                format!("election id {e} is already used by another controller"),
            ));
        }
        let before = self.primary();
        self.streams.insert(s, election_id);
        if let Some(e) = election_id {
            self.highest = Some(self.highest.map_or(e, |h| h.max(e)));
        }
        Ok(self.primary() != before)
    }

    /// Stream `s` is gone. Returns whether the primary changed.
    pub fn remove(&mut self, s: StreamId) -> bool {
        let before = self.primary();
        self.streams.remove(&s);
        self.primary() != before
    }

    /// Whether a request carrying `election_id` comes from the primary (Write and
    /// SetForwardingPipelineConfig are allowed only then).
    pub fn is_primary_id(&self, election_id: Option<u128>) -> bool {
        if self.rule == Election::LiveHighest {
            // PI: with no arbitrated stream, only a request without an election id passes; with
            // streams, the request's id (unset = 0) must be the primary's.
            if self.streams.is_empty() {
                return election_id.is_none();
            }
            return self
                .primary()
                .is_some_and(|p| self.streams[&p] == Some(election_id.unwrap_or(0)));
        }
        match (self.primary(), election_id) {
            (Some(p), Some(e)) => self.streams[&p] == Some(e),
            _ => false,
        }
    }

    /// The streams that have arbitrated.
    pub fn streams(&self) -> impl Iterator<Item = StreamId> + '_ {
        self.streams.keys().copied()
    }

    /// Whether stream `s` has sent its arbitration update.
    pub fn knows(&self, s: StreamId) -> bool {
        self.streams.contains_key(&s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn highest_is_primary_and_backups_are_told_so() {
        let mut a = Arbiter::new(Election::Spec);
        assert_eq!(a.advertise(1, Some(5)), Ok(true));
        assert_eq!(a.status_of(1), Code::Ok);
        assert_eq!(a.advertise(2, Some(3)), Ok(false));
        assert_eq!(a.status_of(2), Code::AlreadyExists);
        assert_eq!(a.reply_election_id(), Some(5));
        assert!(a.is_primary_id(Some(5)));
        assert!(!a.is_primary_id(Some(3)));
        assert!(!a.is_primary_id(None));
        // A higher id takes over.
        assert_eq!(a.advertise(3, Some(9)), Ok(true));
        assert_eq!(a.status_of(1), Code::AlreadyExists);
        assert_eq!(a.reply_election_id(), Some(9));
    }

    #[test]
    fn an_id_in_use_is_refused() {
        let mut a = Arbiter::new(Election::Spec);
        a.advertise(1, Some(5)).unwrap();
        let (code, msg) = a.advertise(2, Some(5)).unwrap_err();
        assert_eq!(code, Code::InvalidArgument);
        assert!(msg.contains("election id") && msg.contains("used"));
        // The same stream may repeat its own id.
        assert_eq!(a.advertise(1, Some(5)), Ok(false));
    }

    #[test]
    fn spec_rule_leaves_no_primary_until_the_highest_id_returns() {
        let mut a = Arbiter::new(Election::Spec);
        a.advertise(1, Some(10)).unwrap();
        a.advertise(2, Some(4)).unwrap();
        assert!(a.remove(1));
        assert_eq!(a.primary(), None);
        assert_eq!(a.status_of(2), Code::NotFound);
        assert_eq!(a.reply_election_id(), Some(10));
        // The backup becomes primary by advertising the highest id seen (or more).
        assert_eq!(a.advertise(2, Some(10)), Ok(true));
        assert_eq!(a.status_of(2), Code::Ok);
        // A reconnect with the same id after everyone left (PTF's setUp) is primary again.
        let mut b = Arbiter::new(Election::Spec);
        b.advertise(1, Some(1)).unwrap();
        b.remove(1);
        assert_eq!(b.advertise(2, Some(1)), Ok(true));
    }

    #[test]
    fn live_highest_rule_fails_over_to_the_best_backup() {
        let mut a = Arbiter::new(Election::LiveHighest);
        a.advertise(1, Some(10)).unwrap();
        a.advertise(2, Some(4)).unwrap();
        assert!(a.remove(1));
        assert_eq!(a.primary(), Some(2));
        assert_eq!(a.status_of(2), Code::Ok);
        assert!(a.is_primary_id(Some(4)));
    }

    #[test]
    fn live_highest_takes_an_unset_id_as_zero_as_pi_does() {
        // PI's demo controller (proto/demo_grpc): SetForwardingPipelineConfig before any
        // stream, then a stream and Writes, never an election id.
        let mut a = Arbiter::new(Election::LiveHighest);
        assert!(a.is_primary_id(None));
        assert!(!a.is_primary_id(Some(1)));
        assert_eq!(a.advertise(1, None), Ok(true));
        assert_eq!(a.status_of(1), Code::Ok);
        assert!(a.is_primary_id(None));
        assert!(a.is_primary_id(Some(0)));
        // A second id-less stream holds the same id 0.
        assert_eq!(a.advertise(2, None).unwrap_err().0, Code::InvalidArgument);
        // A higher id takes over; requests without an id are then refused.
        assert_eq!(a.advertise(3, Some(5)), Ok(true));
        assert!(!a.is_primary_id(None));
        assert!(a.is_primary_id(Some(5)));
    }

    #[test]
    fn no_election_id_is_a_backup() {
        let mut a = Arbiter::new(Election::Spec);
        assert_eq!(a.advertise(1, None), Ok(false));
        assert_eq!(a.status_of(1), Code::NotFound);
        a.advertise(2, Some(1)).unwrap();
        assert_eq!(a.status_of(1), Code::AlreadyExists);
    }
}
