//! Read: the entities a request names, with the wildcards clients use, streamed back in bounded
//! chunks.

use super::*;

/// Where a Read's entities go: into chunks of [`READ_CHUNK`], each sent as it fills (waiting
/// while the client is [`READ_QUEUE`] chunks behind), up to [`MAX_READ_RESULTS`] in all.
pub(super) struct ReadSink<'a> {
    tx: &'a mpsc::Sender<Result<p4::ReadResponse, Status>>,
    buf: Vec<p4::Entity>,
    total: usize,
    sent_any: bool,
    /// The client went away.
    closed: bool,
    /// More than [`MAX_READ_RESULTS`] entities: the rest is dropped.
    exceeded: bool,
}

impl<'a> ReadSink<'a> {
    fn new(tx: &'a mpsc::Sender<Result<p4::ReadResponse, Status>>) -> Self {
        ReadSink {
            tx,
            buf: Vec::with_capacity(READ_CHUNK),
            total: 0,
            sent_any: false,
            closed: false,
            exceeded: false,
        }
    }

    fn push(&mut self, e: p4::Entity) {
        if self.stopped() {
            return;
        }
        if self.total == MAX_READ_RESULTS {
            self.exceeded = true;
            return;
        }
        self.total += 1;
        self.buf.push(e);
        if self.buf.len() == READ_CHUNK {
            self.flush();
        }
    }

    fn stopped(&self) -> bool {
        self.closed || self.exceeded
    }

    fn flush(&mut self) {
        if self.buf.is_empty() || self.closed {
            return;
        }
        let entities = std::mem::replace(&mut self.buf, Vec::with_capacity(READ_CHUNK));
        self.send(Ok(p4::ReadResponse { entities }));
    }

    fn send(&mut self, r: Result<p4::ReadResponse, Status>) {
        self.sent_any = true;
        if self.tx.blocking_send(r).is_err() {
            self.closed = true;
        }
    }
}

impl Inner {
    /// What a Read is refused for as a whole, before any work.
    pub(super) fn check_read(&self, req: &p4::ReadRequest) -> Result<(), Status> {
        self.check_device(req.device_id)?;
        Self::check_role(&req.role)?;
        if req.entities.len() > MAX_READ_ENTITIES {
            return Err(Status::resource_exhausted(format!(
                "a ReadRequest may name at most {MAX_READ_ENTITIES} entities, this one names {} \
                 (split it)",
                req.entities.len()
            )));
        }
        Ok(())
    }

    /// Answers `req` (already checked by [`Inner::check_read`]) on `tx`: the entities in
    /// chunks, then an error if an entity cannot be read or the answer would exceed
    /// [`MAX_READ_RESULTS`] entities.
    pub(super) fn read(
        &self,
        req: &p4::ReadRequest,
        tx: &mpsc::Sender<Result<p4::ReadResponse, Status>>,
    ) {
        self.rt_control().set_now((self.io.clock)());
        let mut sink = ReadSink::new(tx);
        for e in &req.entities {
            let r = match e.entity.as_ref() {
                None => Err(Status::invalid_argument(
                    "read of an entity with nothing set",
                )),
                Some(entity) => self
                    .read_one(entity, &mut sink)
                    .map_err(EntityError::into_status),
            };
            if let Err(status) = r {
                sink.flush();
                sink.send(Err(status));
                return;
            }
            if sink.stopped() {
                break;
            }
        }
        if sink.exceeded {
            sink.flush();
            sink.send(Err(Status::resource_exhausted(format!(
                "a Read answers at most {MAX_READ_RESULTS} entities: read less at once"
            ))));
            return;
        }
        sink.flush();
        if !sink.sent_any {
            sink.send(Ok(p4::ReadResponse::default()));
        }
    }

    pub(super) fn read_one(
        &self,
        entity: &p4::entity::Entity,
        out: &mut ReadSink<'_>,
    ) -> Result<(), EntityError> {
        use p4::entity::Entity as E;
        let schema = &self.rt_schema();
        let c = &self.rt_control();
        let push = |out: &mut ReadSink<'_>, e: E| out.push(p4::Entity { entity: Some(e) });
        let nonzero = |id: u32| (id != 0).then_some(id);
        match entity {
            E::TableEntry(te) => {
                let with_counter = te.counter_data.is_some();
                let with_meter = te.meter_config.is_some();
                let with_hit = te.time_since_last_hit.is_some();
                let entries = if te.is_default_action {
                    if te.table_id == 0 {
                        return Err(EntityError::invalid(
                            "a default-entry read needs a table id",
                        ));
                    }
                    vec![c.read_default(te.table_id)?]
                } else if te.table_id != 0 && !te.r#match.is_empty() {
                    let key = convert::table_entry(schema, te)?;
                    match c.read_entry_by_key(&key, with_counter, with_meter) {
                        Ok(e) => vec![e],
                        Err(control::WriteError::NotFound(_)) => Vec::new(),
                        Err(e) => return Err(e.into()),
                    }
                } else {
                    c.read_entries(nonzero(te.table_id), with_counter, with_meter)?
                };
                let sets = self.one_shot_sets();
                for e in &entries {
                    let mut msg = convert::table_entry_msg(schema, e, with_hit);
                    self.show_one_shot(&sets, &mut msg);
                    push(out, E::TableEntry(msg));
                }
            }
            E::ActionProfileMember(m) => {
                for (pid, mid, action) in c.read_members(nonzero(m.action_profile_id))? {
                    if (m.member_id != 0 && m.member_id != mid) || mid >= ONE_SHOT_BASE {
                        continue;
                    }
                    let msg = p4::ActionProfileMember {
                        action_profile_id: pid,
                        member_id: mid,
                        action: Some(convert::action_msg(&action)),
                    };
                    push(out, E::ActionProfileMember(msg));
                }
            }
            E::ActionProfileGroup(g) => {
                for (pid, gid, members) in c.read_groups(nonzero(g.action_profile_id))? {
                    if (g.group_id != 0 && g.group_id != gid) || gid >= ONE_SHOT_BASE {
                        continue;
                    }
                    let profile = schema
                        .profile_by_id(pid)
                        .map(|p| &schema.action_profiles[p]);
                    let max = profile.map_or(0, |p| p.max_group_size as u32);
                    let msg = convert::group_msg(pid, gid, &members, max);
                    push(out, E::ActionProfileGroup(msg));
                }
            }
            // Cells read back in the same wire form a client writes them in.
            E::CounterEntry(ce) => {
                let index = convert::index(ce.index.as_ref())?;
                for cell in c.read_counters(nonzero(ce.counter_id), index)? {
                    let e = Entity::Counter {
                        counter_id: cell.id,
                        index: Some(cell.index),
                        data: cell.value,
                    };
                    push(out, convert::entity_msg(schema, &e));
                }
            }
            E::MeterEntry(me) => {
                let index = convert::index(me.index.as_ref())?;
                for cell in c.read_meters(nonzero(me.meter_id), index)? {
                    let e = Entity::Meter {
                        meter_id: cell.id,
                        index: Some(cell.index),
                        config: cell.value,
                    };
                    push(out, convert::entity_msg(schema, &e));
                }
            }
            E::RegisterEntry(re) => {
                let index = convert::index(re.index.as_ref())?;
                for cell in c.read_registers(nonzero(re.register_id), index)? {
                    let e = Entity::Register {
                        register_id: cell.id,
                        index: Some(cell.index),
                        value: cell.value,
                    };
                    push(out, convert::entity_msg(schema, &e));
                }
            }
            E::DirectCounterEntry(dc) => {
                let sets = self.one_shot_sets();
                for e in self.direct_entries(dc.table_entry.as_ref(), true, false)? {
                    let data = e.counter_data.map(convert::counter_data_msg);
                    let mut te = convert::table_entry_msg(schema, &e, false);
                    self.show_one_shot(&sets, &mut te);
                    te.counter_data = None;
                    let msg = p4::DirectCounterEntry {
                        table_entry: Some(te),
                        data,
                    };
                    push(out, E::DirectCounterEntry(msg));
                }
            }
            E::DirectMeterEntry(dm) => {
                let sets = self.one_shot_sets();
                for e in self.direct_entries(dm.table_entry.as_ref(), false, true)? {
                    let mut te = convert::table_entry_msg(schema, &e, false);
                    self.show_one_shot(&sets, &mut te);
                    let config = te.meter_config.take();
                    let msg = p4::DirectMeterEntry {
                        table_entry: Some(te),
                        config,
                        counter_data: None,
                    };
                    push(out, E::DirectMeterEntry(msg));
                }
            }
            E::PacketReplicationEngineEntry(p) => {
                use p4::packet_replication_engine_entry::Type as T;
                let forms = self.port_forms.lock().clone();
                match &p.r#type {
                    Some(T::MulticastGroupEntry(g)) => {
                        for (id, group) in c.read_multicast_groups(nonzero(g.multicast_group_id))? {
                            let form = forms.get(&(false, id)).copied().unwrap_or_default();
                            let msg = p4::MulticastGroupEntry {
                                multicast_group_id: id,
                                replicas: convert::replicas_msg(&group.replicas, form),
                                metadata: group.metadata.clone(),
                            };
                            push(
                                out,
                                E::PacketReplicationEngineEntry(p4::PacketReplicationEngineEntry {
                                    r#type: Some(T::MulticastGroupEntry(msg)),
                                }),
                            );
                        }
                    }
                    Some(T::CloneSessionEntry(s)) => {
                        for (id, session) in c.read_clone_sessions(nonzero(s.session_id))? {
                            let form = forms.get(&(true, id)).copied().unwrap_or_default();
                            let msg = convert::clone_session_msg(id, &session, form);
                            push(
                                out,
                                E::PacketReplicationEngineEntry(p4::PacketReplicationEngineEntry {
                                    r#type: Some(T::CloneSessionEntry(msg)),
                                }),
                            );
                        }
                    }
                    None => {
                        return Err(EntityError::invalid(
                            "replication entry read without a type",
                        ));
                    }
                }
            }
            E::DigestEntry(d) => {
                let digests = self.digests.lock();
                if d.digest_id != 0 && schema.digest_by_id(d.digest_id).is_none() {
                    return Err(EntityError::new(
                        Code::NotFound,
                        format!("digest id {}", d.digest_id),
                    ));
                }
                for (&id, s) in digests.iter() {
                    if d.digest_id == 0 || d.digest_id == id {
                        let msg = p4::DigestEntry {
                            digest_id: id,
                            config: Some(s.config),
                        };
                        push(out, E::DigestEntry(msg));
                    }
                }
            }
            E::ValueSetEntry(v) => {
                let sets: Vec<usize> = if v.value_set_id == 0 {
                    (0..schema.value_sets.len()).collect()
                } else {
                    vec![schema.value_set_by_id(v.value_set_id).ok_or_else(|| {
                        EntityError::new(Code::NotFound, format!("value set id {}", v.value_set_id))
                    })?]
                };
                let externs = self.rt_control().externs().clone();
                for set in sets {
                    let members = externs.value_sets[set].members();
                    push(
                        out,
                        E::ValueSetEntry(convert::value_set_msg(schema, set, &members)),
                    );
                }
            }
            E::ExternEntry(_) => {
                return Err(EntityError::unimplemented("architecture-specific externs"));
            }
        }
        Ok(())
    }

    /// Entries a direct-resource read names: one entry by key, every entry of a table (table id
    /// and no match: p4runtime.md item 18), or every entry of every table with the resource.
    pub(super) fn direct_entries(
        &self,
        te: Option<&p4::TableEntry>,
        counter: bool,
        meter: bool,
    ) -> Result<Vec<control::TableEntry>, EntityError> {
        let schema = &self.rt_schema();
        let c = &self.rt_control();
        let has = |t: usize| {
            let d = &schema.tables[t];
            (counter && d.direct_counter.is_some()) || (meter && d.direct_meter.is_some())
        };
        let table_id = te.map_or(0, |t| t.table_id);
        if table_id == 0 {
            let mut out = Vec::new();
            for (i, t) in schema.tables.iter().enumerate() {
                if has(i) {
                    out.extend(c.read_entries(Some(t.id), counter, meter)?);
                }
            }
            return Ok(out);
        }
        let table = schema
            .table_by_id(table_id)
            .ok_or_else(|| EntityError::new(Code::NotFound, format!("table id {table_id}")))?;
        if !has(table) {
            return Err(EntityError::invalid(format!(
                "{} has no direct {}",
                schema.tables[table].name,
                if counter { "counter" } else { "meter" }
            )));
        }
        // A non-zero table id came from `te`.
        let Some(te) = te else {
            return Err(EntityError::invalid(
                "a direct resource read without a table entry",
            ));
        };
        if te.r#match.is_empty() && !te.is_default_action {
            return Ok(c.read_entries(Some(table_id), counter, meter)?);
        }
        let key = convert::table_entry(schema, te)?;
        match c.read_entry_by_key(&key, counter, meter) {
            Ok(e) => Ok(vec![e]),
            Err(control::WriteError::NotFound(_)) => Ok(Vec::new()),
            Err(e) => Err(e.into()),
        }
    }
}
