//! The stream channel: arbitration (primary and backups), packet-out, digest acknowledgements,
//! stream errors.

use super::*;

impl Inner {
    pub(super) fn arbitration_reply(
        &self,
        streams: &Streams,
        s: StreamId,
    ) -> p4::StreamMessageResponse {
        let code = streams.arbiter.status_of(s);
        let message = match code {
            Code::Ok => "you are the primary",
            Code::AlreadyExists => "a primary is connected: you are a backup",
            _ => "there is no primary",
        };
        p4::StreamMessageResponse {
            update: Some(p4::stream_message_response::Update::Arbitration(
                p4::MasterArbitrationUpdate {
                    device_id: self.config.device_id,
                    role: streams.role.get(&s).cloned().flatten(),
                    election_id: streams.arbiter.reply_election_id().map(uint128),
                    status: Some(rpc_status(code, message)),
                },
            )),
        }
    }

    /// Tells every arbitrated stream its status (after the primary changed).
    pub(super) fn notify_all(&self, streams: &Streams) {
        for s in streams.arbiter.streams() {
            if let Some(tx) = streams.tx.get(&s) {
                let _ = tx.try_send(Ok(self.arbitration_reply(streams, s)));
            }
        }
    }

    pub(super) fn on_arbitration(
        &self,
        s: StreamId,
        tx: &StreamTx,
        a: &p4::MasterArbitrationUpdate,
    ) -> Result<(), Status> {
        self.check_device(a.device_id)?;
        if let Some(role) = &a.role {
            Self::check_role(&role.name)?;
        }
        let mut streams = self.streams.lock();
        let changed = streams
            .arbiter
            .advertise(s, a.election_id.as_ref().map(u128_of))
            .map_err(|(code, msg)| Status::new(code, msg))?;
        streams.tx.insert(s, tx.clone());
        streams.role.insert(s, a.role.clone());
        if changed {
            self.notify_all(&streams);
            // The new primary starts with a clean digest slate.
            for d in self.digests.lock().values_mut() {
                d.outstanding = None;
            }
        } else {
            let _ = tx.try_send(Ok(self.arbitration_reply(&streams, s)));
        }
        Ok(())
    }

    pub(super) fn leave(&self, s: StreamId) {
        let mut streams = self.streams.lock();
        streams.tx.remove(&s);
        streams.role.remove(&s);
        if streams.arbiter.remove(s) {
            self.notify_all(&streams);
            // The new primary starts with a clean digest slate.
            for d in self.digests.lock().values_mut() {
                d.outstanding = None;
            }
        }
    }

    pub(super) fn stream_error(
        code: Code,
        message: String,
        packet: Option<p4::PacketOut>,
    ) -> p4::StreamMessageResponse {
        p4::StreamMessageResponse {
            update: Some(p4::stream_message_response::Update::Error(
                p4::StreamError {
                    canonical_code: code as i32,
                    message,
                    details: packet.map(|p| {
                        p4::stream_error::Details::PacketOut(p4::PacketOutError {
                            packet_out: Some(p),
                        })
                    }),
                    ..Default::default()
                },
            )),
        }
    }

    pub(super) fn on_packet_out(&self, s: StreamId, tx: &StreamTx, p: p4::PacketOut) {
        let refuse = |code, msg: String, p| {
            self.stats
                .packet_outs_refused
                .fetch_add(1, Ordering::Relaxed);
            let _ = tx.try_send(Ok(Self::stream_error(code, msg, Some(p))));
        };
        if self.streams.lock().arbiter.primary() != Some(s) {
            return refuse(
                Code::PermissionDenied,
                "packet-out from a backup controller: dropped".into(),
                p,
            );
        }
        let frame = match self.packet_out_frame(&p) {
            Ok(f) => f,
            Err(e) => return refuse(e.code, e.message, p),
        };
        if frame.len() > self.io.max_packet_out {
            // Cutting it would send a different packet than the controller asked for.
            self.stats
                .packet_outs_too_long
                .fetch_add(1, Ordering::Relaxed);
            return refuse(
                Code::InvalidArgument,
                format!(
                    "packet-out of {} bytes (header and payload) is longer than the {} bytes \
                     a buffer carries: dropped",
                    frame.len(),
                    self.io.max_packet_out
                ),
                p,
            );
        }
        if (self.io.packet_out)(frame) {
            self.stats.packet_outs.fetch_add(1, Ordering::Relaxed);
        } else {
            // The data plane is not taking packet-outs as fast as they come: drop and say so
            // rather than block the runtime that serves every other call.
            self.stats
                .packet_outs_dropped
                .fetch_add(1, Ordering::Relaxed);
            let _ = tx.try_send(Ok(Self::stream_error(
                Code::ResourceExhausted,
                "the CPU port's queue is full: packet-out dropped".into(),
                Some(p),
            )));
        }
    }

    pub(super) fn packet_out_frame(&self, p: &p4::PacketOut) -> Result<Vec<u8>, EntityError> {
        let schema = self.schema();
        let Some(h) = schema.controller_header("packet_out") else {
            if !p.metadata.is_empty() {
                return Err(EntityError::invalid(
                    "this program has no packet_out header",
                ));
            }
            return Ok(p.payload.clone());
        };
        let mut values = vec![0u128; h.fields.len()];
        for m in &p.metadata {
            let i = h
                .fields
                .iter()
                .position(|f| f.0 == m.metadata_id)
                .ok_or_else(|| {
                    EntityError::invalid(format!("packet_out has no metadata id {}", m.metadata_id))
                })?;
            let f = &h.fields[i];
            values[i] = convert::value(&m.value, f.2, &format!("packet_out.{}", f.1))?;
        }
        let mut frame = convert::pack_header(&h.fields, &values);
        frame.extend_from_slice(&p.payload);
        Ok(frame)
    }

    pub(super) fn on_digest_ack(&self, tx: &StreamTx, ack: &p4::DigestListAck) {
        let mut digests = self.digests.lock();
        match digests.get_mut(&ack.digest_id) {
            Some(d) if d.outstanding.is_some_and(|(id, _)| id == ack.list_id) => {
                d.outstanding = None;
            }
            _ => {
                let msg = p4::StreamMessageResponse {
                    update: Some(p4::stream_message_response::Update::Error(
                        p4::StreamError {
                            canonical_code: Code::NotFound as i32,
                            message: format!(
                                "no outstanding digest list {} of digest {}",
                                ack.list_id, ack.digest_id
                            ),
                            details: Some(p4::stream_error::Details::DigestListAck(
                                p4::DigestListAckError {
                                    digest_list_ack: Some(*ack),
                                },
                            )),
                            ..Default::default()
                        },
                    )),
                };
                let _ = tx.try_send(Ok(msg));
            }
        }
    }

    pub(super) fn on_stream_message(
        &self,
        s: StreamId,
        tx: &StreamTx,
        msg: p4::StreamMessageRequest,
    ) -> Result<(), Status> {
        use p4::stream_message_request::Update as U;
        let arbitrated = self.streams.lock().arbiter.knows(s);
        match msg.update {
            Some(U::Arbitration(a)) => self.on_arbitration(s, tx, &a),
            _ if !arbitrated => Err(Status::failed_precondition(
                "the first message on a stream must be a MasterArbitrationUpdate",
            )),
            Some(U::Packet(p)) => {
                self.on_packet_out(s, tx, p);
                Ok(())
            }
            Some(U::DigestAck(a)) => {
                // Lists go to the primary; only its acks count.
                if self.streams.lock().arbiter.primary() == Some(s) {
                    self.on_digest_ack(tx, &a);
                }
                Ok(())
            }
            Some(U::Other(_)) | None => {
                let _ = tx.try_send(Ok(Self::stream_error(
                    Code::Unimplemented,
                    "unsupported stream message".into(),
                    None,
                )));
                Ok(())
            }
        }
    }

    /// Sends `msg` to the primary's stream; false if there is none or it is full.
    pub(super) fn to_primary(&self, msg: p4::StreamMessageResponse) -> bool {
        let streams = self.streams.lock();
        let Some(tx) = streams.arbiter.primary().and_then(|p| streams.tx.get(&p)) else {
            return false;
        };
        tx.try_send(Ok(msg)).is_ok()
    }
}
