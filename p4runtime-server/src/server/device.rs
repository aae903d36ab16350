//! What the service needs of the data plane besides its control API: the CPU port, the clock,
//! and, on a switch that takes programs from controllers, the loader.

use std::sync::Arc;

use crate::proto::p4::config::v1 as p4i;

/// How the service reaches the data plane besides the control API.
pub struct DeviceIo {
    /// Injects a frame (controller header + payload) as if it came from the CPU port. Must not
    /// block (it runs on the service's async runtime): false when the data plane's queue is full
    /// and the frame was dropped.
    pub packet_out: Box<dyn Fn(Vec<u8>) -> bool + Send + Sync>,
    /// The longest frame (controller header + payload) `packet_out` takes: a buffer's worth.
    /// A longer packet-out is refused with an INVALID_ARGUMENT stream error carrying the packet,
    /// never cut.
    pub max_packet_out: usize,
    /// Frames the data plane sent to the CPU port (controller header + payload).
    pub packet_in: crossbeam::channel::Receiver<Vec<u8>>,
    /// The data plane's clock in ns (the one hit times and digests are stamped with).
    pub clock: Arc<dyn Fn() -> u64 + Send + Sync>,
    /// Loads programs that controllers send (`None`: the switch runs one fixed program).
    pub loader: Option<Loader>,
}

/// How a switch that takes programs over P4Runtime loads one (SetForwardingPipelineConfig
/// with a P4Info and a device config, p4c's BMv2 JSON).
pub struct Loader {
    /// Builds the program's pipeline from the P4Info (its ids) and the device config, without
    /// running it; the error says why the config was refused.
    pub build: Box<BuildFn>,
    /// Runs a pipeline `build` made, in place of the running one.
    pub install: Box<InstallFn>,
    /// The device config of the program the switch started with (empty for none), so that
    /// the same config sent again is known as the same program.
    pub running: Vec<u8>,
}

/// [`Loader::build`].
pub type BuildFn =
    dyn Fn(&p4i::P4Info, &[u8]) -> Result<Arc<pipeline::runtime::Pipeline>, String> + Send + Sync;

/// [`Loader::install`].
pub type InstallFn = dyn Fn(Arc<pipeline::runtime::Pipeline>) -> Result<(), String> + Send + Sync;

/// The data plane's longest packet-out with its default buffers (4,096 bytes less 256 of
/// headroom), for a [`DeviceIo`] with no data plane behind it.
pub const DEFAULT_MAX_PACKET_OUT: usize = 3840;

impl DeviceIo {
    /// A device with no data plane behind it (tests, control-plane-only tools): packet-outs are
    /// accepted and dropped, no packet-in ever comes, and the clock counts from now.
    pub fn detached() -> DeviceIo {
        let epoch = std::time::Instant::now();
        DeviceIo {
            packet_out: Box::new(|_| true),
            max_packet_out: DEFAULT_MAX_PACKET_OUT,
            packet_in: crossbeam::channel::never(),
            clock: Arc::new(move || u64::try_from(epoch.elapsed().as_nanos()).unwrap_or(u64::MAX)),
            loader: None,
        }
    }
}

impl std::fmt::Debug for Loader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Loader").finish_non_exhaustive()
    }
}

impl std::fmt::Debug for DeviceIo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DeviceIo").finish_non_exhaustive()
    }
}
