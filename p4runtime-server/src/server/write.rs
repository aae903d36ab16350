//! Write: a batch of updates staged (validated, expanded into the control plane's updates), applied
//! with the batch's atomicity, and answered with per-update errors (p4runtime.md item 12).

use super::*;

impl Inner {
    pub(super) fn write(&self, req: &p4::WriteRequest) -> Result<(), Status> {
        self.write_checked(req, true)
    }

    /// A Write; `arbitrated` false skips the primary check (in-process drivers with no
    /// StreamChannel: [`Service::write_as_primary`]).
    pub(super) fn write_checked(
        &self,
        req: &p4::WriteRequest,
        arbitrated: bool,
    ) -> Result<(), Status> {
        self.check_device(req.device_id)?;
        Self::check_role(&req.role)?;
        // One write (or pipeline change) at a time: the service's own state (digest configs,
        // one-shot groups) is read and changed along with the batch.
        let _serial = self.write_lock.lock();
        if arbitrated {
            self.check_primary(req.election_id.as_ref())?;
        }
        use p4::write_request::Atomicity as A;
        let atomicity = match A::try_from(req.atomicity) {
            Ok(A::ContinueOnError) => Atomicity::ContinueOnError,
            Ok(A::RollbackOnError) => Atomicity::RollbackOnError,
            Ok(A::DataplaneAtomic) => Atomicity::DataplaneAtomic,
            Err(_) => {
                return Err(Status::invalid_argument(format!(
                    "atomicity {}",
                    req.atomicity
                )));
            }
        };
        self.rt_control().set_now((self.io.clock)());
        let n = req.updates.len();
        let mut results: Vec<Option<Result<(), EntityError>>> = vec![None; n];
        let mut staged: Vec<(usize, Staged)> = Vec::with_capacity(n);
        for (i, u) in req.updates.iter().enumerate() {
            match self.stage(u) {
                Ok(s) => staged.push((i, s)),
                Err(e) => results[i] = Some(Err(e)),
            }
        }
        let all_or_none = atomicity != Atomicity::ContinueOnError;
        let aborted = || {
            Err(EntityError::new(
                Code::Aborted,
                "another update of the batch failed",
            ))
        };
        if all_or_none && results.iter().any(Option::is_some) {
            for (i, _) in &staged {
                results[*i] = Some(aborted());
            }
            return self.write_result(results);
        }
        // Digest configs are validated in order against a copy of the configs; the changes are
        // applied to the live state (which also holds the batching state) with the batch.
        let mut configs: BTreeMap<u32, p4::digest_entry::Config> = self
            .digests
            .lock()
            .iter()
            .map(|(id, d)| (*id, d.config))
            .collect();
        let mut digest_changes = Vec::new();
        let mut value_sets = Vec::new();
        let mut updates = Vec::new();
        let mut expanded = Vec::new();
        for (i, s) in staged {
            match s {
                Staged::Control(x) => {
                    let range = updates.len()..updates.len() + x.updates.len();
                    updates.extend(x.updates.iter().cloned());
                    expanded.push((i, range, x));
                }
                Staged::Digest(kind, id, config) => {
                    let r = self.stage_digest(&mut configs, kind, id, config);
                    if r.is_ok() {
                        digest_changes.push((id, configs.get(&id).copied()));
                    }
                    results[i] = Some(r);
                }
                Staged::ValueSet(set, members) => {
                    value_sets.push((set, members));
                    results[i] = Some(Ok(()));
                }
            }
        }
        let digest_failed = results.iter().any(|r| matches!(r, Some(Err(_))));
        if all_or_none && digest_failed {
            for r in &mut results {
                if matches!(r, Some(Ok(()))) {
                    *r = Some(aborted());
                }
            }
            for (i, _, _) in &expanded {
                results[*i] = Some(aborted());
            }
            return self.write_result(results);
        }
        let outcome = self.rt_control().write(&updates, atomicity);
        let control_failed = outcome.iter().any(Result::is_err);
        let mut one_shot = false;
        for (i, range, x) in expanded {
            let r = outcome[range]
                .iter()
                .find_map(|r| r.clone().err())
                .map_or(Ok(()), |e| Err(EntityError::from(e)));
            if r.is_ok()
                && let Some((key, form)) = x.form
            {
                self.port_forms.lock().insert(key, form);
            }
            one_shot |= x.one_shot;
            results[i] = Some(r);
        }
        if all_or_none && control_failed {
            // Nothing was applied.
            for r in &mut results {
                if matches!(r, Some(Ok(()))) {
                    *r = Some(aborted());
                }
            }
        } else {
            if one_shot {
                self.collect_one_shot_garbage();
            }
            let externs = self.rt_control().externs().clone();
            for (set, members) in value_sets {
                // Checked when staged: it fits.
                let _ = externs.value_sets[set].replace(&members);
            }
            let mut live = self.digests.lock();
            for (id, config) in digest_changes {
                match config {
                    None => {
                        live.remove(&id);
                    }
                    Some(c) => live.entry(id).or_insert_with(|| DigestState::new(c)).config = c,
                }
            }
        }
        self.write_result(results)
    }

    /// OK, or UNKNOWN with one p4.v1.Error per update (p4runtime.md item 12), in details that
    /// stay within [`MAX_DETAILS_BYTES`] however large the batch (see [`error_details`]).
    pub(super) fn write_result(
        &self,
        results: Vec<Option<Result<(), EntityError>>>,
    ) -> Result<(), Status> {
        let results: Vec<Result<(), EntityError>> = results
            .into_iter()
            .map(|r| r.unwrap_or_else(|| Err(EntityError::new(Code::Internal, "not processed"))))
            .collect();
        let mut failed = results
            .iter()
            .enumerate()
            .filter_map(|(i, r)| r.as_ref().err().map(|e| (i, e)));
        let Some((first, first_err)) = failed.next() else {
            return Ok(());
        };
        let n_failed = 1 + failed.count();
        // The summary also travels as grpc-message (percent-encoded): keep it short.
        let summary = clip(
            &format!(
                "{n_failed} of {} updates failed; the first is update {first}: {}",
                results.len(),
                first_err.message
            ),
            MAX_SUMMARY_CHARS,
        );
        let details = error_details(&results, &summary);
        Err(Status::with_details(
            Code::Unknown,
            summary,
            bytes::Bytes::from(details),
        ))
    }

    pub(super) fn stage(&self, u: &p4::Update) -> Result<Staged, EntityError> {
        use p4::entity::Entity as E;
        let kind = convert::update_kind(u.r#type)?;
        let entity = u
            .entity
            .as_ref()
            .and_then(|e| e.entity.as_ref())
            .ok_or_else(|| EntityError::invalid("update without an entity"))?;
        let schema = &self.rt_schema();
        let control = |entity| Ok(Staged::Control(Expanded::one(Update { kind, entity })));
        match entity {
            E::TableEntry(te) => self.stage_table_entry(kind, te),
            E::ActionProfileMember(m) => {
                reserved(m.member_id)?;
                let action = match (&m.action, kind) {
                    (_, UpdateKind::Delete) => None,
                    (Some(a), _) => Some(convert::action(schema, a)?),
                    (None, _) => return Err(EntityError::invalid("member without an action")),
                };
                control(Entity::Member {
                    profile_id: m.action_profile_id,
                    member_id: m.member_id,
                    action,
                })
            }
            E::ActionProfileGroup(g) => {
                reserved(g.group_id)?;
                let members = g
                    .members
                    .iter()
                    .map(|m| {
                        reserved(m.member_id)?;
                        if m.watch_kind.is_some() {
                            return Err(EntityError::unimplemented("member watch ports"));
                        }
                        let w = match m.weight {
                            0 => 1,
                            w => u32::try_from(w)
                                .map_err(|_| EntityError::invalid(format!("member weight {w}")))?,
                        };
                        Ok((m.member_id, w))
                    })
                    .collect::<Result<Vec<_>, _>>()?;
                let max_size = u32::try_from(g.max_size)
                    .map_err(|_| EntityError::invalid(format!("max_size {}", g.max_size)))?;
                control(Entity::Group {
                    profile_id: g.action_profile_id,
                    group_id: g.group_id,
                    members,
                    max_size,
                })
            }
            E::CounterEntry(c) => control(Entity::Counter {
                counter_id: c.counter_id,
                index: convert::index(c.index.as_ref())?,
                data: c
                    .data
                    .as_ref()
                    .map(convert::counter_data)
                    .transpose()?
                    .unwrap_or_default(),
            }),
            E::DirectCounterEntry(c) => {
                let te = c
                    .table_entry
                    .as_ref()
                    .ok_or_else(|| EntityError::invalid("direct counter without a table entry"))?;
                control(Entity::DirectCounter {
                    entry: convert::table_entry(schema, te)?,
                    data: c
                        .data
                        .as_ref()
                        .map(convert::counter_data)
                        .transpose()?
                        .unwrap_or_default(),
                })
            }
            E::MeterEntry(m) => {
                let algorithm = schema
                    .meter_by_id(m.meter_id)
                    .map(|i| schema.meters[i].algorithm)
                    .ok_or_else(|| {
                        EntityError::new(Code::NotFound, format!("meter id {}", m.meter_id))
                    })?;
                control(Entity::Meter {
                    meter_id: m.meter_id,
                    index: convert::index(m.index.as_ref())?,
                    config: m
                        .config
                        .as_ref()
                        .map(|c| convert::meter_config(c, algorithm))
                        .transpose()?,
                })
            }
            E::DirectMeterEntry(m) => {
                let te = m
                    .table_entry
                    .as_ref()
                    .ok_or_else(|| EntityError::invalid("direct meter without a table entry"))?;
                let entry = convert::table_entry(schema, te)?;
                let table = schema.table_by_id(entry.table_id).unwrap_or_default();
                let algorithm = convert::direct_meter_algorithm(schema, table);
                control(Entity::DirectMeter {
                    entry,
                    config: m
                        .config
                        .as_ref()
                        .map(|c| convert::meter_config(c, algorithm))
                        .transpose()?,
                })
            }
            E::RegisterEntry(r) => {
                let def = schema
                    .register_by_id(r.register_id)
                    .map(|i| &schema.registers[i])
                    .ok_or_else(|| {
                        EntityError::new(Code::NotFound, format!("register id {}", r.register_id))
                    })?;
                control(Entity::Register {
                    register_id: r.register_id,
                    index: convert::index(r.index.as_ref())?,
                    value: convert::register_value(r.data.as_ref(), def.bitwidth, def.name)?,
                })
            }
            E::PacketReplicationEngineEntry(p) => {
                use p4::packet_replication_engine_entry::Type as T;
                match &p.r#type {
                    Some(T::MulticastGroupEntry(g)) => {
                        let (replicas, form) = convert::replicas(&g.replicas)?;
                        let mut x = Expanded::one(Update {
                            kind,
                            entity: Entity::MulticastGroup {
                                group_id: g.multicast_group_id,
                                replicas,
                                metadata: g.metadata.clone(),
                            },
                        });
                        x.form = Some(((false, g.multicast_group_id), form));
                        Ok(Staged::Control(x))
                    }
                    Some(T::CloneSessionEntry(s)) => {
                        let (session, form) = convert::clone_session(s)?;
                        let mut x = Expanded::one(Update {
                            kind,
                            entity: Entity::CloneSession {
                                session_id: s.session_id,
                                session,
                            },
                        });
                        x.form = Some(((true, s.session_id), form));
                        Ok(Staged::Control(x))
                    }
                    None => Err(EntityError::invalid("replication entry without a type")),
                }
            }
            E::DigestEntry(d) => Ok(Staged::Digest(kind, d.digest_id, d.config)),
            E::ValueSetEntry(v) => {
                let schema = self.rt_schema();
                let set = schema.value_set_by_id(v.value_set_id).ok_or_else(|| {
                    EntityError::new(Code::NotFound, format!("value set id {}", v.value_set_id))
                })?;
                if kind != UpdateKind::Modify {
                    return Err(EntityError::invalid(
                        "a value set is written with MODIFY (it replaces the members)",
                    ));
                }
                // Each field fits its width (`value_set_members`), so a member fits the set;
                // what is left to refuse here, so that applying cannot fail: a member given
                // twice, and more members than the set holds.
                let mut members = convert::value_set_members(&schema, set, v)?;
                members.sort_unstable();
                let def = &schema.value_sets[set];
                if members.windows(2).any(|w| w[0] == w[1]) {
                    return Err(EntityError::new(
                        Code::AlreadyExists,
                        format!("{}: a member given twice", def.name),
                    ));
                }
                if members.len() > def.size {
                    return Err(EntityError::new(
                        Code::ResourceExhausted,
                        format!(
                            "{}: {} members in a set of {}",
                            def.name,
                            members.len(),
                            def.size
                        ),
                    ));
                }
                Ok(Staged::ValueSet(set, members))
            }
            E::ExternEntry(_) => Err(EntityError::unimplemented("architecture-specific externs")),
        }
    }

    /// A table entry update; a one-shot action set becomes a hidden group of hidden members,
    /// created with the entry and removed with it (or when the entry is modified away from it).
    pub(super) fn stage_table_entry(
        &self,
        kind: UpdateKind,
        te: &p4::TableEntry,
    ) -> Result<Staged, EntityError> {
        let schema = &self.rt_schema();
        let mut entry = convert::table_entry(schema, te)?;
        if kind != UpdateKind::Delete
            && let Some(control::TableAction::Member(id) | control::TableAction::Group(id)) =
                entry.action
        {
            reserved(id)?;
        }
        let set = convert::action_set(schema, te)?;
        let mut x = Expanded::one(Update {
            kind,
            entity: Entity::TableEntry(entry.clone()),
        });
        // Replacing or removing an entry of a table with a selector may orphan its one-shot
        // group: collected after the batch.
        let table = schema.table_by_id(entry.table_id).unwrap_or_default();
        let selector = schema.tables[table]
            .implementation
            .is_some_and(|p| schema.action_profiles[p].selector);
        x.one_shot = selector && kind != UpdateKind::Insert && !entry.is_default;
        let Some(set) = set else {
            return Ok(Staged::Control(x));
        };
        if kind == UpdateKind::Delete {
            return Ok(Staged::Control(x));
        }
        let profile = schema.tables[table]
            .implementation
            .map(|p| &schema.action_profiles[p])
            .filter(|p| p.selector)
            .ok_or_else(|| {
                EntityError::invalid(format!(
                    "{} has no action selector: no one-shot action sets",
                    schema.tables[table].name
                ))
            })?;
        let mut updates = Vec::new();
        let mut members = Vec::new();
        for (action, weight) in set {
            let id = self.next_one_shot_id();
            updates.push(Update {
                kind: UpdateKind::Insert,
                entity: Entity::Member {
                    profile_id: profile.id,
                    member_id: id,
                    action: Some(action),
                },
            });
            members.push((id, weight));
        }
        let group_id = self.next_one_shot_id();
        updates.push(Update {
            kind: UpdateKind::Insert,
            entity: Entity::Group {
                profile_id: profile.id,
                group_id,
                members: members.clone(),
                max_size: 0,
            },
        });
        entry.action = Some(control::TableAction::Group(group_id));
        updates.push(Update {
            kind,
            entity: Entity::TableEntry(entry),
        });
        x.one_shot = true;
        x.updates = updates;
        Ok(Staged::Control(x))
    }

    pub(super) fn stage_digest(
        &self,
        digests: &mut BTreeMap<u32, p4::digest_entry::Config>,
        kind: UpdateKind,
        id: u32,
        config: Option<p4::digest_entry::Config>,
    ) -> Result<(), EntityError> {
        if self.rt_schema().digest_by_id(id).is_none() {
            return Err(EntityError::new(Code::NotFound, format!("digest id {id}")));
        }
        let exists = digests.contains_key(&id);
        match (kind, exists) {
            (UpdateKind::Insert, true) => {
                return Err(EntityError::new(
                    Code::AlreadyExists,
                    format!("digest {id} is configured already"),
                ));
            }
            (UpdateKind::Modify | UpdateKind::Delete, false) => {
                return Err(EntityError::new(
                    Code::NotFound,
                    format!("digest {id} is not configured"),
                ));
            }
            _ => {}
        }
        if kind == UpdateKind::Delete {
            digests.remove(&id);
            return Ok(());
        }
        let c = config.ok_or_else(|| EntityError::invalid("digest entry without a config"))?;
        if c.max_timeout_ns < 0 || c.max_list_size < 0 || c.ack_timeout_ns < 0 {
            return Err(EntityError::invalid("digest config with a negative value"));
        }
        digests.insert(id, c);
        Ok(())
    }
}

/// Longest status message of a failed Write, in characters.
const MAX_SUMMARY_CHARS: usize = 256;

/// Longest per-update message in details that list only the failed updates.
const MAX_INDEXED_MESSAGE_CHARS: usize = 120;

/// The type URL of a p4.v1.Error detail.
const ERROR_TYPE_URL: &str = "type.googleapis.com/p4.v1.Error";

/// The shortest type URL of a p4.v1.Error detail: Any unpacking (Python, C++, Go, Java, prost)
/// compares only what follows the last '/'. Used for the successful updates of a batch too
/// large for the full form, 16 bytes each instead of 35.
const ERROR_TYPE_URL_SHORT: &str = "/p4.v1.Error";

/// The error space of details that list only the failed updates of a batch: their `code` is the
/// update's index in the batch.
pub const UPDATE_INDEX_SPACE: &str = "pisa-switch.update-index";

/// `s` cut to at most `max` characters, non-ASCII and control characters as '?': the status
/// message travels percent-encoded in grpc-message, so each of those would cost 3 to 12 bytes of
/// the metadata budget.
fn clip(s: &str, max: usize) -> String {
    let mut out: String = s
        .chars()
        .take(max)
        .map(|c| {
            if c == ' ' || c.is_ascii_graphic() {
                c
            } else {
                '?'
            }
        })
        .collect();
    if s.chars().nth(max).is_some() {
        out.push_str("...");
    }
    out
}

fn error_any(type_url: &str, e: &p4::Error) -> prost_types::Any {
    prost_types::Any {
        type_url: type_url.into(),
        value: e.encode_to_vec(),
    }
}

/// The encoded google.rpc.Status of a failed Write, at most [`MAX_DETAILS_BYTES`]: the first of
/// these forms that fits.
/// 1. One p4.v1.Error per update, in order, with messages (what p4runtime.md item 12 asks).
/// 2. The same with every detail in the shortest type URL; then also without the failures'
///    messages (about 230 failing updates, or 320 updates in all, fit).
/// 3. The same, ending at the last failure (clients skip OK details, so the missing trailing ones
///    tell them nothing less).
/// 4. Only the failed updates, in order, as many as fit: each with space
///    [`UPDATE_INDEX_SPACE`], its index in `code` and in its message.
///
/// Without such a bound, a batch of 1,000 updates took 35 KB of details, which a client with
/// gRPC's default 8 KiB metadata limit (p4runtime-shell, tonic) cannot receive at all.
pub(super) fn error_details(results: &[Result<(), EntityError>], summary: &str) -> Vec<u8> {
    let status = |details| {
        rpc::Status {
            code: Code::Unknown as i32,
            message: summary.to_string(),
            details,
        }
        .encode_to_vec()
    };
    let error = |e: &EntityError, with_message: bool| p4::Error {
        canonical_code: e.code as i32,
        message: if with_message {
            e.message.clone()
        } else {
            String::new()
        },
        ..Default::default()
    };
    // Clients unpack by the name after the type URL's last `/`, so the short URL serves every
    // entry of the compact forms, failures included (150 failures then take ~3 KB, not ~6).
    let positional = |results: &[Result<(), EntityError>], url: &str, with_messages: bool| {
        results
            .iter()
            .map(|r| match r {
                Ok(()) => error_any(url, &p4::Error::default()),
                Err(e) => error_any(url, &error(e, with_messages)),
            })
            .collect::<Vec<_>>()
    };
    for (ok_url, with_messages) in [
        (ERROR_TYPE_URL, true),
        (ERROR_TYPE_URL_SHORT, true),
        (ERROR_TYPE_URL_SHORT, false),
    ] {
        let bytes = status(positional(results, ok_url, with_messages));
        if bytes.len() <= MAX_DETAILS_BYTES {
            return bytes;
        }
    }
    if let Some(last) = results.iter().rposition(Result::is_err) {
        let bytes = status(positional(&results[..=last], ERROR_TYPE_URL_SHORT, false));
        if bytes.len() <= MAX_DETAILS_BYTES {
            return bytes;
        }
    }
    let mut len = status(Vec::new()).len();
    let mut details = Vec::new();
    for (i, r) in results.iter().enumerate() {
        let Err(e) = r else { continue };
        let any = error_any(
            ERROR_TYPE_URL,
            &p4::Error {
                canonical_code: e.code as i32,
                message: clip(
                    &format!("update {i}: {}", e.message),
                    MAX_INDEXED_MESSAGE_CHARS,
                ),
                space: UPDATE_INDEX_SPACE.into(),
                code: i32::try_from(i).unwrap_or(i32::MAX),
                details: None,
            },
        );
        let cost =
            1 + prost::encoding::encoded_len_varint(any.encoded_len() as u64) + any.encoded_len();
        if len + cost > MAX_DETAILS_BYTES {
            break;
        }
        len += cost;
        details.push(any);
    }
    status(details)
}
