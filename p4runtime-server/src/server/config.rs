//! The forwarding pipeline config: Set (VERIFY, VERIFY_AND_COMMIT, RECONCILE_AND_COMMIT,
//! VERIFY_AND_SAVE + COMMIT), for the program the switch runs and, on a switch with a
//! [`Loader`], for any program a controller sends; and Get.

use super::*;

impl Inner {
    pub(super) fn set_pipeline(
        &self,
        req: &p4::SetForwardingPipelineConfigRequest,
    ) -> Result<(), Status> {
        use p4::set_forwarding_pipeline_config_request::Action as A;
        self.check_device(req.device_id)?;
        Self::check_role(&req.role)?;
        let _serial = self.write_lock.lock();
        self.check_primary(req.election_id.as_ref())?;
        let action = A::try_from(req.action)
            .ok()
            .filter(|a| *a != A::Unspecified)
            .ok_or_else(|| Status::invalid_argument(format!("action {}", req.action)))?;
        if action == A::Commit {
            // The saved config becomes the current one, with the writes made since
            // VERIFY_AND_SAVE (spec: "the forwarding state in the target is updated by
            // replaying the write requests to the target device since the last config was
            // saved"): for the same program they went to the running one; for another, to the
            // saved program (Inner::rt), which goes into service as it is.
            if req.config.is_some() {
                return Err(Status::invalid_argument("COMMIT takes no config"));
            }
            let saved = self.pipeline_config.lock().saved.take().ok_or_else(|| {
                Status::not_found("COMMIT without a config saved by VERIFY_AND_SAVE")
            })?;
            if let Some((pipe, p4info)) = saved.program {
                self.install(
                    pipe,
                    p4info,
                    device_data(&saved.device_config).to_vec(),
                    false,
                )?;
            }
            let mut pc = self.pipeline_config.lock();
            pc.cookie = saved.cookie;
            pc.device_config = saved.device_config;
            return Ok(());
        }
        let config = req.config.as_ref().ok_or_else(|| {
            Status::invalid_argument("SetForwardingPipelineConfig without a config")
        })?;
        let p4info = config
            .p4info
            .as_ref()
            .ok_or_else(|| Status::invalid_argument("config without a P4Info"))?;
        let theirs = fingerprint(p4info);
        let running = self.prog.load_full();
        // Another program (or the same one with other ids): built now, run at commit. The same
        // P4Info is the same program on a fixed-program switch; on one that loads programs, only
        // with no device config or the running one (a P4Info may name none of a program's
        // objects, when all its tables are hidden).
        let same_config = {
            let pc = self.pipeline_config.lock();
            config.p4_device_config.is_empty() || config.p4_device_config == pc.device_config
        };
        let program = if theirs == running.fingerprint && (self.io.loader.is_none() || same_config)
        {
            None
        } else if let Some(loader) = &self.io.loader {
            let pipe = (loader.build)(p4info, &device_data(&config.p4_device_config))
                .map_err(|e| Status::invalid_argument(format!("the pipeline config: {e}")))?;
            // Every object the P4Info names is the program's, as the program has it.
            let ours = fingerprint(&crate::p4info::p4info(pipe.control.schema()));
            if let Some(diff) = theirs.iter().find(|l| !ours.contains(l)) {
                return Err(Status::invalid_argument(format!(
                    "the P4Info does not describe the device config's program: {diff}"
                )));
            }
            Some((pipe, p4info.clone()))
        } else {
            let diff = theirs
                .iter()
                .find(|l| !running.fingerprint.contains(l))
                .or_else(|| running.fingerprint.iter().find(|l| !theirs.contains(l)))
                .cloned()
                .unwrap_or_default();
            let name = running.schema.name;
            return Err(Status::invalid_argument(format!(
                "this switch runs the fixed program {name:?}; the P4Info given is not its P4Info \
                 (first difference: {diff}); get it with GetForwardingPipelineConfig or from \
                 pipeline/programs/p4info/{name}.txt"
            )));
        };
        let cookie = config.cookie.as_ref().map(|c| c.cookie);
        match action {
            A::Verify => {}
            A::VerifyAndSave => {
                self.pipeline_config.lock().saved = Some(Saved {
                    cookie,
                    device_config: config.p4_device_config.clone(),
                    program,
                });
            }
            A::VerifyAndCommit => {
                match program {
                    Some((pipe, p4info)) => self.install(
                        pipe,
                        p4info,
                        device_data(&config.p4_device_config).to_vec(),
                        true,
                    )?,
                    None => self.commit_fresh(),
                }
                let mut pc = self.pipeline_config.lock();
                pc.cookie = cookie;
                pc.device_config = config.p4_device_config.clone();
            }
            A::ReconcileAndCommit => {
                if program.is_some() {
                    return Err(Status::unimplemented(
                        "RECONCILE_AND_COMMIT to another program: its forwarding state cannot \
                         be carried over; use VERIFY_AND_COMMIT",
                    ));
                }
                let mut pc = self.pipeline_config.lock();
                pc.cookie = cookie;
                pc.device_config = config.p4_device_config.clone();
            }
            A::Commit | A::Unspecified => unreachable!("handled above"),
        }
        Ok(())
    }

    /// Runs another program: the data plane swaps to it, then the service serves it, with
    /// the P4Info the controller gave. With `fresh` (VERIFY_AND_COMMIT) its tables start
    /// empty; without (COMMIT) it keeps what was written to it since VERIFY_AND_SAVE.
    fn install(
        &self,
        pipe: Arc<pipeline::runtime::Pipeline>,
        p4info: p4i::P4Info,
        device_config: Vec<u8>,
        fresh: bool,
    ) -> Result<(), Status> {
        let loader = self
            .io
            .loader
            .as_ref()
            .ok_or_else(|| Status::internal("no loader"))?;
        let control = pipe.control.clone();
        (loader.install)(pipe)
            .map_err(|e| Status::internal(format!("loading the program: {e}")))?;
        let schema = control.schema().clone();
        self.prog.store(Arc::new(Prog {
            control,
            schema,
            device_config: Arc::from(device_config),
            fingerprint: fingerprint(&p4info),
            p4info,
        }));
        if fresh {
            self.commit_fresh();
        } else {
            // The old program's idle-timeout reports mean nothing for the new one; the entries,
            // and the digest configs and port forms written since VERIFY_AND_SAVE, stand.
            self.idle_reported.lock().clear();
        }
        Ok(())
    }

    /// A fresh pipeline: forwarding state cleared (VERIFY_AND_COMMIT).
    pub(super) fn commit_fresh(&self) {
        self.control().set_now((self.io.clock)());
        self.control().clear();
        self.port_forms.lock().clear();
        self.digests.lock().clear();
        self.idle_reported.lock().clear();
    }

    pub(super) fn get_pipeline(
        &self,
        req: &p4::GetForwardingPipelineConfigRequest,
    ) -> Result<p4::GetForwardingPipelineConfigResponse, Status> {
        use p4::get_forwarding_pipeline_config_request::ResponseType as R;
        self.check_device(req.device_id)?;
        let kind = R::try_from(req.response_type).map_err(|_| {
            Status::invalid_argument(format!("response_type {}", req.response_type))
        })?;
        let pc = self.pipeline_config.lock().clone();
        let cookie = pc
            .cookie
            .map(|cookie| p4::forwarding_pipeline_config::Cookie { cookie });
        let with_p4info = matches!(kind, R::All | R::P4infoAndCookie);
        let with_device = matches!(kind, R::All | R::DeviceConfigAndCookie);
        Ok(p4::GetForwardingPipelineConfigResponse {
            config: Some(p4::ForwardingPipelineConfig {
                p4info: with_p4info.then(|| self.prog.load().p4info.clone()),
                p4_device_config: if with_device {
                    pc.device_config
                } else {
                    Vec::new()
                },
                cookie,
            }),
        })
    }
}

impl Inner {
    /// The control plane Write and Read act on: the program VERIFY_AND_SAVE'd and not yet
    /// committed, if it is another program, else the running one. The spec: after
    /// VERIFY_AND_SAVE "any subsequent Read / Write requests must refer to fields in the new
    /// config"; BMv2 runs runtime requests on the config load_new_config loaded (bm_sim
    /// context.cpp, `p4objects_rt`), which swap_configs (COMMIT) puts in service with its
    /// entries.
    pub(super) fn rt_control(&self) -> Arc<Control> {
        let pc = self.pipeline_config.lock();
        match pc.saved.as_ref().and_then(|s| s.program.as_ref()) {
            Some((pipe, _)) => pipe.control.clone(),
            None => self.control(),
        }
    }

    /// [`Inner::rt_control`]'s schema (a program's schema is its control plane's).
    pub(super) fn rt_schema(&self) -> Arc<Schema> {
        self.rt_control().schema().clone()
    }
}

/// The program in a device config: the config itself (p4c's BMv2 JSON), or, when it is the legacy
/// `p4.tmp.P4DeviceConfig` wrapper PI's demo controller and older scripts send
/// (`{bool reassign = 1; Extras extras = 2; bytes device_data = 3;}`), its device_data. PI decides
/// the same way: it parses the config as a P4DeviceConfig and takes device_data when that
/// succeeds, the bytes as they are otherwise (proto/frontend/src/device_mgr.cpp, in
/// pipeline_config_set: `if (p4_device_config.ParseFromString(config.p4_device_config()))`). JSON
/// text (its first non-blank byte `{`, a protobuf start-group tag) never parses as one; the
/// wrapper's reassign and extras (bmv2's Thrift port, notification socket, CPU interface) are
/// ignored.
pub(crate) fn device_data(config: &[u8]) -> std::borrow::Cow<'_, [u8]> {
    if config.iter().find(|b| !b.is_ascii_whitespace()) == Some(&b'{') {
        return config.into();
    }
    legacy_device_data(config).map_or(config.into(), Into::into)
}

fn legacy_device_data(b: &[u8]) -> Option<Vec<u8>> {
    use prost::Message;
    /// PI's `p4.tmp.P4DeviceConfig` (proto/p4/tmp/p4config.proto): its field 3; the others (1,
    /// `reassign`; 2, `extras`) are skipped as unknown.
    #[derive(Clone, PartialEq, prost::Message)]
    struct LegacyDeviceConfig {
        #[prost(bytes = "vec", tag = "3")]
        device_data: Vec<u8>,
    }
    // An empty config parses as an empty P4DeviceConfig in PI too, but then has no program.
    LegacyDeviceConfig::decode(b)
        .ok()
        .map(|c| c.device_data)
        .filter(|d| !d.is_empty())
}

#[cfg(test)]
mod tests {
    use super::device_data;

    #[test]
    fn legacy_wrapper_is_unwrapped_and_json_is_not() {
        let json = b"{\n  \"header_types\": []\n}";
        assert_eq!(&*device_data(json), json);
        // {reassign: true, extras {kv {"port": "9090"}}, device_data: json}, as PI serializes it.
        let entry: Vec<u8> = [&[0x0a, 4][..], &b"port"[..], &[0x12, 4][..], &b"9090"[..]].concat();
        let kv: Vec<u8> = [&[0x0a, entry.len() as u8][..], &entry[..]].concat();
        let mut wrapped = vec![0x08, 0x01, 0x12, kv.len() as u8];
        wrapped.extend_from_slice(&kv);
        wrapped.extend_from_slice(&[0x1a, json.len() as u8]);
        wrapped.extend_from_slice(json);
        assert_eq!(&*device_data(&wrapped), json);
        // Not protobuf: left alone (the loader reports it).
        assert_eq!(&*device_data(b"\xff\xff"), b"\xff\xff");
    }
}
