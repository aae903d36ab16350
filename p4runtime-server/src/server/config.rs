//! The forwarding pipeline config: Set (VERIFY, VERIFY_AND_COMMIT, RECONCILE_AND_COMMIT,
//! VERIFY_AND_SAVE + COMMIT) for the programs this switch has, and Get.

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
            // The saved config becomes the current one; the writes made since VERIFY_AND_SAVE
            // stand (the program is the same, so there is nothing to replay them onto).
            if req.config.is_some() {
                return Err(Status::invalid_argument("COMMIT takes no config"));
            }
            let mut pc = self.pipeline_config.lock();
            let (cookie, device_config) = pc.saved.take().ok_or_else(|| {
                Status::failed_precondition("COMMIT without a config saved by VERIFY_AND_SAVE")
            })?;
            pc.cookie = cookie;
            pc.device_config = device_config;
            return Ok(());
        }
        let config = req.config.as_ref().ok_or_else(|| {
            Status::invalid_argument("SetForwardingPipelineConfig without a config")
        })?;
        let p4info = config
            .p4info
            .as_ref()
            .ok_or_else(|| Status::invalid_argument("config without a P4Info"))?;
        if fingerprint(p4info) != self.fingerprint {
            let theirs = fingerprint(p4info);
            let diff = theirs
                .iter()
                .find(|l| !self.fingerprint.contains(l))
                .or_else(|| self.fingerprint.iter().find(|l| !theirs.contains(l)))
                .cloned()
                .unwrap_or_default();
            return Err(Status::invalid_argument(format!(
                "this switch runs the fixed program {:?}; the P4Info given is not its P4Info \
                 (first difference: {diff}); get it with GetForwardingPipelineConfig or from \
                 pipeline/programs/p4info/{}.txt",
                self.schema.name, self.schema.name
            )));
        }
        let cookie = config.cookie.as_ref().map(|c| c.cookie);
        let mut pc = self.pipeline_config.lock();
        match action {
            A::Verify => {}
            A::VerifyAndSave => pc.saved = Some((cookie, config.p4_device_config.clone())),
            A::VerifyAndCommit => {
                self.commit_fresh();
                pc.cookie = cookie;
                pc.device_config = config.p4_device_config.clone();
            }
            A::ReconcileAndCommit => {
                pc.cookie = cookie;
                pc.device_config = config.p4_device_config.clone();
            }
            A::Commit | A::Unspecified => unreachable!("handled above"),
        }
        Ok(())
    }

    /// A fresh pipeline: forwarding state cleared (VERIFY_AND_COMMIT).
    pub(super) fn commit_fresh(&self) {
        self.control.set_now((self.io.clock)());
        self.control.clear();
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
                p4info: with_p4info.then(|| self.p4info.clone()),
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
