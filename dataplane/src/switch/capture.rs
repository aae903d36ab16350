//! Capture: per port, a pcap file of what it received and one of what it sent, written by the
//! worker that owns the port (so the lock is uncontended), each frame once.

use std::collections::HashMap;
use std::io;
use std::path::Path;
use std::sync::Mutex;

use pipeline::metadata::PortId;

use crate::pcap::PcapWriter;

/// A capture file, written by the worker that owns the port (the lock is uncontended).
pub(super) type Capture = Mutex<PcapWriter<io::BufWriter<std::fs::File>>>;

pub(super) fn capture(c: &Capture, now: u64, bytes: &[u8]) {
    if let Ok(mut w) = c.lock() {
        let _ = w.write(now, bytes);
    }
}

/// Opens `port<N>-in.pcap` and `port<N>-out.pcap` in `dir` for each port of `ids` (none without a
/// directory), or `<name>_in.pcap` and `<name>_out.pcap` for a port `names` names (BMv2's
/// files); indexed by port number, `nports` long.
pub(super) fn open(
    dir: Option<&Path>,
    names: &HashMap<PortId, String>,
    ids: &[PortId],
    nports: usize,
) -> io::Result<Vec<Option<(Capture, Capture)>>> {
    let mut pcap = Vec::new();
    pcap.resize_with(nports, || None);
    let Some(dir) = dir else {
        return Ok(pcap);
    };
    // The error names the file: the switch's start fails with it (`--pcap DIR`).
    let at =
        |path: &Path, e: io::Error| io::Error::new(e.kind(), format!("{}: {e}", path.display()));
    std::fs::create_dir_all(dir).map_err(|e| at(dir, e))?;
    for &id in ids {
        let open = |what: &str| -> io::Result<Capture> {
            let path = match names.get(&id) {
                Some(name) => dir.join(format!("{name}_{what}.pcap")),
                None => dir.join(format!("port{id}-{what}.pcap")),
            };
            let f = std::fs::File::create(&path).map_err(|e| at(&path, e))?;
            Ok(Mutex::new(
                PcapWriter::new(io::BufWriter::new(f)).map_err(|e| at(&path, e))?,
            ))
        };
        pcap[usize::from(id)] = Some((open("in")?, open("out")?));
    }
    Ok(pcap)
}
