//! One-shot action sets: table entries that carry their own action set become hidden groups of the
//! table's selector, created and removed with their entry and collected after each batch.

use super::*;

impl Inner {
    pub(super) fn next_one_shot_id(&self) -> u32 {
        let n = self.next_one_shot.fetch_add(1, Ordering::Relaxed);
        ONE_SHOT_BASE | (n & !ONE_SHOT_BASE)
    }

    /// Removes the one-shot groups no entry refers to any more, and hidden members in no
    /// group (what a replaced, deleted or failed one-shot entry leaves behind).
    pub(super) fn collect_one_shot_garbage(&self) {
        let schema = &self.rt_schema();
        let Ok(groups) = self.rt_control().read_groups(None) else {
            return;
        };
        let hidden_members: Vec<(u32, u32)> = self
            .control()
            .read_members(None)
            .unwrap_or_default()
            .into_iter()
            .filter(|m| m.1 >= ONE_SHOT_BASE)
            .map(|m| (m.0, m.1))
            .collect();
        if hidden_members.is_empty() && !groups.iter().any(|g| g.1 >= ONE_SHOT_BASE) {
            return;
        }
        let mut referenced = HashSet::new();
        for t in &schema.tables {
            let Some(p) = t.implementation else { continue };
            let pid = schema.action_profiles[p].id;
            for e in self
                .control()
                .read_entries(Some(t.id), false, false)
                .unwrap_or_default()
            {
                if let Some(control::TableAction::Group(g)) = e.action
                    && g >= ONE_SHOT_BASE
                {
                    referenced.insert((pid, g));
                }
            }
        }
        let mut deletes = Vec::new();
        let mut in_live_group = HashSet::new();
        for (pid, g, members) in &groups {
            if *g < ONE_SHOT_BASE {
                continue;
            }
            if referenced.contains(&(*pid, *g)) {
                in_live_group.extend(members.iter().map(|m| (*pid, m.0)));
            } else {
                deletes.push(group_removal(*pid, *g));
            }
        }
        for (pid, m) in hidden_members {
            if !in_live_group.contains(&(pid, m)) {
                deletes.push(Update {
                    kind: UpdateKind::Delete,
                    entity: Entity::Member {
                        profile_id: pid,
                        member_id: m,
                        action: None,
                    },
                });
            }
        }
        if !deletes.is_empty() {
            let _ = self
                .rt_control()
                .write(&deletes, Atomicity::ContinueOnError);
        }
    }

    /// One-shot groups by (profile id, group id) with their actions and weights, for reads.
    pub(super) fn one_shot_sets(&self) -> HashMap<(u32, u32), Vec<(control::ActionSpec, u32)>> {
        let Ok(groups) = self.rt_control().read_groups(None) else {
            return HashMap::new();
        };
        if !groups.iter().any(|g| g.1 >= ONE_SHOT_BASE) {
            return HashMap::new();
        }
        let actions: HashMap<(u32, u32), control::ActionSpec> = self
            .control()
            .read_members(None)
            .unwrap_or_default()
            .into_iter()
            .filter(|m| m.1 >= ONE_SHOT_BASE)
            .map(|(p, m, a)| ((p, m), a))
            .collect();
        groups
            .into_iter()
            .filter(|g| g.1 >= ONE_SHOT_BASE)
            .map(|(p, g, members)| {
                let set = members
                    .iter()
                    .filter_map(|(m, w)| Some((actions.get(&(p, *m))?.clone(), *w)))
                    .collect();
                ((p, g), set)
            })
            .collect()
    }

    /// `msg` with its one-shot group shown as the action set it was written as.
    pub(super) fn show_one_shot(
        &self,
        sets: &HashMap<(u32, u32), Vec<(control::ActionSpec, u32)>>,
        msg: &mut p4::TableEntry,
    ) {
        let Some(p4::table_action::Type::ActionProfileGroupId(g)) =
            msg.action.as_ref().and_then(|a| a.r#type.as_ref())
        else {
            return;
        };
        if *g < ONE_SHOT_BASE {
            return;
        }
        let schema = &self.rt_schema();
        let profile = schema
            .table_by_id(msg.table_id)
            .and_then(|t| schema.tables[t].implementation)
            .map(|p| schema.action_profiles[p].id);
        if let Some(set) = profile.and_then(|p| sets.get(&(p, *g))) {
            msg.action = Some(convert::action_set_msg(set));
        }
    }
}
