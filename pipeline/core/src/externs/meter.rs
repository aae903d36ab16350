//! Three-colour meters: trTCM (RFC 2698) and srTCM (RFC 2697), in packets or bytes.
//!
//! Time comes in as `now_ns`; nothing here reads a clock. Token counts are kept in
//! "nano-tokens" (tokens x 10^9) in `u128`, so a refill is `elapsed_ns * rate` with rates in
//! units per second, exactly, with no division and no drift however small the steps are; a
//! bucket holds at most `burst * 10^9`. Comparisons like the RFCs' `Tc(t) - B >= 0` become
//! `tc >= B * 10^9`, which is the RFC's integer token rule with fractional refill carried over.
//!
//! Buckets start full when a cell is configured (or reset). Since full buckets cannot grow, the
//! first `execute` afterwards only records the reference time. If `now_ns` is earlier than the
//! last time seen (clocks of different workers are not perfectly ordered) the elapsed time is
//! taken as 0 and the reference time is kept, so nothing is ever refilled twice.
//!
//! Concurrency: each cell's state (two token counts and a timestamp) must change together, so
//! it sits behind its own `parking_lot::Mutex`. Uncontended, locking is a single CAS and
//! unlocking a single release store, cheaper than a lock-free scheme over 40+ bytes of state;
//! contention only arises when several workers meter the same flow at the same instant, and then
//! the critical section is a few dozen instructions. The lock's acquire/release ordering makes
//! data-plane updates and control-plane (re)configuration of a cell linearizable. Each cell is
//! padded to its own cache line so different meters never false-share.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use parking_lot::Mutex;

/// Nano-tokens per token (and nanoseconds per second).
const NANO: u128 = 1_000_000_000;

/// Packet colour, with the numeric values v1model and P4Runtime use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(u8)]
pub enum Color {
    /// Conforming to the committed rate.
    Green = 0,
    /// Exceeding the committed rate (or burst) but within the peak rate / excess burst.
    Yellow = 1,
    /// Violating.
    Red = 2,
}

impl Color {
    /// Decodes a colour from its numeric value (e.g. read from packet metadata).
    pub fn from_value(v: u64) -> Option<Self> {
        match v {
            0 => Some(Self::Green),
            1 => Some(Self::Yellow),
            2 => Some(Self::Red),
            _ => None,
        }
    }
}

/// What a meter's rates and bursts count.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MeterUnit {
    /// Each packet costs one token, whatever its length.
    Packets,
    /// Each packet costs its length in bytes.
    Bytes,
}

/// The metering algorithm.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MeterAlgorithm {
    /// Two Rate Three Color Marker, RFC 2698 (CIR/CBS and PIR/PBS).
    TrTcm,
    /// Single Rate Three Color Marker, RFC 2697 (CIR, CBS, EBS).
    SrTcm,
}

/// A meter configuration in P4Runtime `MeterConfig` units: rates in units per second, bursts
/// in units (packets or bytes according to the meter's [`MeterUnit`]).
///
/// For trTCM: CIR = `cir`, CBS = `cburst`, PIR = `pir`, PBS = `pburst`.
/// For srTCM: CIR = `cir`, CBS = `cburst`, EBS = `pburst`; `pir` is ignored.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct MeterConfig {
    /// Committed information rate, units per second.
    pub cir: u64,
    /// Committed burst size, units.
    pub cburst: u64,
    /// Peak information rate, units per second (trTCM only).
    pub pir: u64,
    /// Peak burst size (trTCM) or excess burst size (srTCM), units.
    pub pburst: u64,
}

/// Why a meter operation was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MeterError {
    /// The index is not below the array size.
    #[error("meter index {index} out of range (size {size})")]
    OutOfRange {
        /// The index asked for.
        index: usize,
        /// The array size.
        size: usize,
    },
    /// The configuration is not valid for the meter's algorithm.
    #[error("invalid meter config: {0}")]
    InvalidConfig(&'static str),
}

/// The mutable state of one configured meter cell.
#[derive(Debug)]
struct State {
    config: MeterConfig,
    /// CBS in nano-tokens.
    cap_c: u128,
    /// PBS (trTCM) or EBS (srTCM) in nano-tokens.
    cap_2: u128,
    /// Committed bucket, nano-tokens.
    tc: u128,
    /// Peak (trTCM) or excess (srTCM) bucket, nano-tokens.
    t2: u128,
    /// Time of the latest refill; `None` until the first `execute` after (re)configuration.
    last_ns: Option<u64>,
}

impl State {
    fn full(config: MeterConfig) -> Self {
        let cap_c = u128::from(config.cburst) * NANO;
        let cap_2 = u128::from(config.pburst) * NANO;
        Self {
            config,
            cap_c,
            cap_2,
            tc: cap_c,
            t2: cap_2,
            last_ns: None,
        }
    }

    /// Advances the reference time to `now_ns` and returns the elapsed ns (0 if time went back).
    #[inline]
    fn advance(&mut self, now_ns: u64) -> u64 {
        match self.last_ns {
            Some(last) if now_ns <= last => 0,
            Some(last) => {
                self.last_ns = Some(now_ns);
                now_ns - last
            }
            None => {
                self.last_ns = Some(now_ns);
                0
            }
        }
    }
}

/// One cell on its own cache line.
#[derive(Debug)]
#[repr(align(64))]
struct Cell(Mutex<Option<State>>, AtomicBool);

/// An array of meters sharing a unit and an algorithm, configured per index.
#[derive(Debug)]
pub struct MeterArray {
    cells: Box<[Cell]>,
    /// How many cells are configured: with none, `execute` answers GREEN without touching a
    /// cell. Each cell's `AtomicBool` is the same hint per cell, so an unconfigured cell costs no
    /// lock. Both are written under the cell's lock; `execute` reads them relaxed (a packet racing
    /// a configuration change may see either the old or the new configuration).
    configured: AtomicUsize,
    unit: MeterUnit,
    algorithm: MeterAlgorithm,
}

impl MeterArray {
    /// Creates `size` unconfigured meters (an unconfigured meter marks everything green).
    pub fn new(size: usize, unit: MeterUnit, algorithm: MeterAlgorithm) -> Self {
        Self {
            cells: (0..size)
                .map(|_| Cell(Mutex::new(None), AtomicBool::new(false)))
                .collect(),
            configured: AtomicUsize::new(0),
            unit,
            algorithm,
        }
    }

    /// Number of meters.
    pub fn size(&self) -> usize {
        self.cells.len()
    }

    /// The unit rates and bursts are counted in.
    pub fn unit(&self) -> MeterUnit {
        self.unit
    }

    /// The algorithm of every meter in the array.
    pub fn algorithm(&self) -> MeterAlgorithm {
        self.algorithm
    }

    fn cell(&self, index: usize) -> Result<&Cell, MeterError> {
        self.cells.get(index).ok_or(MeterError::OutOfRange {
            index,
            size: self.cells.len(),
        })
    }

    /// Checks `config` for this array's algorithm.
    ///
    /// trTCM needs CBS > 0, PBS > 0 and PIR >= CIR (RFC 2698). srTCM needs CBS > 0; EBS may be
    /// 0 (then nothing is ever yellow in colour-blind mode). Rates may be 0 (a bucket that
    /// never refills).
    pub fn validate(&self, config: &MeterConfig) -> Result<(), MeterError> {
        if config.cburst == 0 {
            return Err(MeterError::InvalidConfig("committed burst must be > 0"));
        }
        if self.algorithm == MeterAlgorithm::TrTcm {
            if config.pburst == 0 {
                return Err(MeterError::InvalidConfig("peak burst must be > 0"));
            }
            if config.pir < config.cir {
                return Err(MeterError::InvalidConfig("PIR must be >= CIR"));
            }
        }
        Ok(())
    }

    /// Sets (`Some`) or clears (`None`) the configuration of meter `index`. A new configuration
    /// starts with full buckets.
    pub fn configure(&self, index: usize, config: Option<MeterConfig>) -> Result<(), MeterError> {
        let cell = self.cell(index)?;
        let state = match config {
            Some(c) => {
                self.validate(&c)?;
                Some(State::full(c))
            }
            None => None,
        };
        let mut guard = cell.0.lock();
        match (guard.is_some(), state.is_some()) {
            (false, true) => {
                self.configured.fetch_add(1, Ordering::Relaxed);
            }
            (true, false) => {
                self.configured.fetch_sub(1, Ordering::Relaxed);
            }
            _ => {}
        }
        cell.1.store(state.is_some(), Ordering::Relaxed);
        *guard = state;
        Ok(())
    }

    /// The configuration of meter `index`, `None` if unconfigured or out of range.
    pub fn config(&self, index: usize) -> Option<MeterConfig> {
        self.cells.get(index)?.0.lock().as_ref().map(|s| s.config)
    }

    /// Refills the buckets of meter `index` (keeping its configuration).
    pub fn reset(&self, index: usize) -> Result<(), MeterError> {
        let cell = self.cell(index)?;
        let mut g = cell.0.lock();
        if let Some(s) = g.as_mut() {
            *s = State::full(s.config);
        }
        Ok(())
    }

    /// Refills the buckets of every meter.
    pub fn reset_all(&self) {
        for i in 0..self.cells.len() {
            let _ = self.reset(i);
        }
    }

    /// Meters a packet of `len_bytes` bytes arriving at `now_ns` on meter `index`.
    ///
    /// `color_aware_input` is `None` for colour-blind mode or the pre-colour for colour-aware
    /// mode. Unconfigured and out-of-range meters return [`Color::Green`].
    #[inline]
    pub fn execute(
        &self,
        index: usize,
        now_ns: u64,
        len_bytes: u32,
        color_aware_input: Option<Color>,
    ) -> Color {
        if self.configured.load(Ordering::Relaxed) == 0 {
            return Color::Green;
        }
        let Some(cell) = self.cells.get(index) else {
            return Color::Green;
        };
        if !cell.1.load(Ordering::Relaxed) {
            return Color::Green;
        }
        let mut guard = cell.0.lock();
        let Some(s) = guard.as_mut() else {
            return Color::Green;
        };
        let elapsed = u128::from(s.advance(now_ns));
        let need = match self.unit {
            MeterUnit::Packets => NANO,
            MeterUnit::Bytes => u128::from(len_bytes) * NANO,
        };
        let pre = color_aware_input.unwrap_or(Color::Green);
        match self.algorithm {
            MeterAlgorithm::TrTcm => {
                if elapsed > 0 {
                    let add_c = elapsed * u128::from(s.config.cir);
                    let add_p = elapsed * u128::from(s.config.pir);
                    s.tc = s.tc.saturating_add(add_c).min(s.cap_c);
                    s.t2 = s.t2.saturating_add(add_p).min(s.cap_2);
                }
                // RFC 2698 section 3; colour-blind is colour-aware with every packet green.
                if pre == Color::Red || s.t2 < need {
                    Color::Red
                } else if pre == Color::Yellow || s.tc < need {
                    s.t2 -= need;
                    Color::Yellow
                } else {
                    s.t2 -= need;
                    s.tc -= need;
                    Color::Green
                }
            }
            MeterAlgorithm::SrTcm => {
                if elapsed > 0 {
                    // Tokens go to C until it holds CBS, the overflow to E up to EBS.
                    let add = elapsed * u128::from(s.config.cir);
                    let room_c = s.cap_c - s.tc;
                    if add <= room_c {
                        s.tc += add;
                    } else {
                        s.tc = s.cap_c;
                        s.t2 = s.t2.saturating_add(add - room_c).min(s.cap_2);
                    }
                }
                // RFC 2697 section 3; colour-blind is colour-aware with every packet green.
                if pre == Color::Green && s.tc >= need {
                    s.tc -= need;
                    Color::Green
                } else if pre != Color::Red && s.t2 >= need {
                    s.t2 -= need;
                    Color::Yellow
                } else {
                    Color::Red
                }
            }
        }
    }
}

#[cfg(test)]
mod tests;
