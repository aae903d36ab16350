//! DCTCP of our own (`bpf/dctcp.bpf.c`): RFC 8257's sender and receiver as a BPF struct_ops
//! `tcp_congestion_ops` named [`NAME`], for kernels without the dctcp module. [`Dctcp::ensure`]
//! opens the object from memory, loads it (CO-RE relocates it against the running kernel's BTF)
//! and registers it by attaching its struct_ops map; the registration lasts as long as the
//! returned guard (the kernel removes it when the link's file descriptor closes, also when the
//! process dies), and every socket of every namespace can then select it with
//! `setsockopt(TCP_CONGESTION, "pisa_dctcp")`.
//!
//! Registration is global and names are unique, so loading is idempotent: when the name is
//! registered already (another run holds it), or another run registers it between our check and
//! our attach, the guard borrows that registration and holds nothing. A borrowed registration
//! ends with its owner; runs that overlap should start from the same owner (`pisa-fabric
//! experiment` loads it once for all its hosts).

use std::sync::Mutex;

use libbpf_rs::{MapCore, ObjectBuilder, PrintLevel};

use crate::traffic::available_congestion_controls;

/// The congestion control's name (`TCP_CONGESTION`, `ss -ti`).
pub const NAME: &str = "pisa_dctcp";

/// The compiled BPF object (build.rs).
pub const OBJECT: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/dctcp.bpf.o"));

/// Whether a congestion control of our name is registered in the kernel now.
pub fn registered() -> bool {
    available_congestion_controls().iter().any(|c| c == NAME)
}

/// libbpf's messages while we load, to say why loading failed in one line.
static LOG: Mutex<String> = Mutex::new(String::new());

fn collect(_level: PrintLevel, msg: String) {
    if let Ok(mut log) = LOG.lock() {
        // Bounded: the verifier's log of a refused program can be long.
        if log.len() < 64 * 1024 {
            log.push_str(&msg);
        }
    }
}

/// The last few non-empty lines of libbpf's messages, joined.
fn log_tail() -> String {
    let log = LOG.lock().map(|l| l.clone()).unwrap_or_default();
    let lines: Vec<&str> = log.lines().filter(|l| !l.trim().is_empty()).collect();
    lines[lines.len().saturating_sub(4)..].join(" | ")
}

/// Our DCTCP's registration: owned (we attached it; dropping unregisters it) or borrowed.
pub struct Dctcp {
    // Drops first: the link's end unregisters the congestion control.
    link: Option<libbpf_rs::Link>,
    _object: Option<libbpf_rs::Object>,
}

impl std::fmt::Debug for Dctcp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Dctcp")
            .field("name", &NAME)
            .field("owned", &self.owned())
            .finish()
    }
}

impl Dctcp {
    /// Makes sure [`NAME`] is registered: borrows a registration that exists, else loads and
    /// registers ours. The error says why it could not be loaded (no BTF, no struct_ops, the
    /// verifier's refusal, no privileges), with libbpf's last messages.
    pub fn ensure() -> Result<Dctcp, String> {
        if registered() {
            return Ok(Dctcp {
                link: None,
                _object: None,
            });
        }
        if let Ok(mut log) = LOG.lock() {
            log.clear();
        }
        let previous = libbpf_rs::set_print(Some((PrintLevel::Info, collect)));
        let attached = Self::load_and_attach();
        libbpf_rs::set_print(previous);
        match attached {
            Ok((object, link)) => Ok(Dctcp {
                link: Some(link),
                _object: Some(object),
            }),
            // Another run registered it between our check and our attach.
            Err(_) if registered() => Ok(Dctcp {
                link: None,
                _object: None,
            }),
            Err(e) => {
                let tail = log_tail();
                Err(if tail.is_empty() {
                    e
                } else {
                    format!("{e} ({tail})")
                })
            }
        }
    }

    fn load_and_attach() -> Result<(libbpf_rs::Object, libbpf_rs::Link), String> {
        let open = ObjectBuilder::default()
            .name(NAME)
            .map_err(|e| format!("naming the BPF object {NAME}: {e}"))?
            .open_memory(OBJECT)
            .map_err(|e| format!("opening the BPF object: {e}"))?;
        let mut object = open
            .load()
            .map_err(|e| format!("loading the BPF object: {e}"))?;
        let link = object
            .maps_mut()
            .find(|m| m.name() == NAME)
            .ok_or_else(|| format!("the BPF object has no struct_ops map {NAME}"))?
            .attach_struct_ops()
            .map_err(|e| format!("registering {NAME} (struct_ops): {e}"))?;
        Ok((object, link))
    }

    /// Whether this guard registered it (and unregisters it when it drops).
    pub fn owned(&self) -> bool {
        self.link.is_some()
    }
}
