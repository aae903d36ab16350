//! Path tracing, the switch side: the per-hop Encoding Module (PINT §4.2) and the Recording
//! Module's view of which hops acted on a packet.
//!
//! Each packet carries a digest of [`Budget::bits`] bits per instance. For every instance the
//! packet belongs to one *layer*, chosen by h(packet ID):
//!
//! - **Baseline**: hop `i` overwrites the digest with h(M_i, packet) iff g(packet, i) < 1/i.
//!   This is reservoir sampling: the last writer is uniform over the k hops, and the collector
//!   finds it as the largest `i ≤ k` that passed the test.
//! - **XOR with probability p = 2^-m**: hop `i` XORs h(M_i, packet) into the digest iff bit `i`
//!   of the AND of m pseudo-random k-bit vectors drawn from g is set (the paper's fast variant;
//!   each bit is set with probability p, independently across hops).
//!
//! Nothing here needs the path length: a hop only knows its own hop number.

use super::hash::{Hashes, below};

/// The longest path the encoder supports: the paper's fast decoder assumes k fits in a few
/// machine words ("e.g., k ≤ 256").
pub const MAX_HOPS: u32 = 256;
const WORDS: usize = (MAX_HOPS / 64) as usize;

/// A packet's digest bit budget: `instances` independent repetitions of a `bits`-bit hash, packed
/// instance 0 in the low bits (the paper's "two independent 4-bit hashes" for an 8-bit budget is
/// [`Budget::SPLIT_2X4`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Budget {
    bits: u8,
    instances: u8,
}

impl Budget {
    /// One 8-bit hash per packet.
    pub const SINGLE_8: Budget = Budget {
        bits: 8,
        instances: 1,
    };
    /// Two independent 4-bit hashes in an 8-bit budget (PINT §4.2, "multiple instantiations").
    pub const SPLIT_2X4: Budget = Budget {
        bits: 4,
        instances: 2,
    };

    /// `instances` × `bits`; `None` unless 1 ≤ bits, 1 ≤ instances and the total fits 32 bits.
    pub const fn new(bits: u8, instances: u8) -> Option<Budget> {
        if bits == 0 || instances == 0 || bits as u32 * instances as u32 > 32 {
            None
        } else {
            Some(Budget { bits, instances })
        }
    }

    /// Bits per instance.
    pub const fn bits(self) -> u8 {
        self.bits
    }

    /// Number of independent instances.
    pub const fn instances(self) -> u8 {
        self.instances
    }

    /// Total digest bits.
    pub const fn total_bits(self) -> u32 {
        self.bits as u32 * self.instances as u32
    }

    fn mask(self) -> u32 {
        if self.bits >= 32 {
            u32::MAX
        } else {
            (1 << self.bits) - 1
        }
    }

    /// Instance `instance`'s field of `digest`.
    pub fn field(self, digest: u32, instance: u8) -> u32 {
        let shift = u32::from(self.bits) * u32::from(instance);
        digest.checked_shr(shift).unwrap_or(0) & self.mask()
    }

    /// `digest` with instance `instance`'s field replaced by `value`.
    pub fn with_field(self, digest: u32, instance: u8, value: u32) -> u32 {
        let shift = u32::from(self.bits) * u32::from(instance);
        let mask = self.mask().checked_shl(shift).unwrap_or(0);
        (digest & !mask) | (value.checked_shl(shift).unwrap_or(0) & mask)
    }
}

/// One XOR layer: its share of packets and its action probability p = 2^-`log2_inv_p`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct XorLayer {
    /// Relative weight of this layer in the layer choice.
    pub weight: u32,
    /// m, with p = 2^-m: the number of k-bit vectors ANDed (1..=64).
    pub log2_inv_p: u8,
}

/// How packets are spread over layers. A packet's layer is h(packet ID) mapped onto the weights.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct LayerConfig {
    /// Relative weight of the Baseline layer (τ after normalising).
    pub baseline_weight: u32,
    /// The XOR layers, in order.
    pub xor: Vec<XorLayer>,
}

/// The layer one instance of a packet belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Layer {
    /// Reservoir sampling: the last hop that passes g < 1/i wrote the digest.
    Baseline,
    /// XOR layer number `index` (0-based) with p = 2^-`log2_inv_p`.
    Xor {
        /// Index into [`LayerConfig::xor`].
        index: u8,
        /// m, with p = 2^-m.
        log2_inv_p: u8,
    },
}

/// e↑↑n (tetration), saturating.
fn tower(n: u32) -> f64 {
    (0..n).fold(1.0f64, |x, _| x.exp().min(1e300))
}

impl LayerConfig {
    /// Only the Baseline layer: the paper's reference scheme (≈ k ln k packets).
    pub fn baseline_only() -> LayerConfig {
        LayerConfig {
            baseline_weight: 1,
            xor: Vec::new(),
        }
    }

    /// The layered scheme of the published PINT design for paths of up to `max_hops` hops:
    /// Baseline on half of the packets (τ = 1/2), and L = log*(max_hops) XOR layers sharing the
    /// other half equally, layer ℓ (1-based) acting with p_ℓ = e↑↑(ℓ−1)/max_hops rounded to the
    /// nearest power of two (fast variant) and capped at 1/2. See docs/pint.md for which parts
    /// are the paper's and which are ours.
    pub fn pint(max_hops: u32) -> LayerConfig {
        let d = f64::from(max_hops.clamp(2, MAX_HOPS));
        // log* with the natural logarithm: how many times ln must be applied to reach ≤ 1.
        let mut layers = 0u32;
        let mut x = d;
        while x > 1.0 {
            x = x.ln();
            layers += 1;
        }
        let xor = (1..=layers.max(1))
            .map(|l| {
                let p = (tower(l - 1) / d).min(0.5);
                let m = (-p.log2()).round().clamp(1.0, 63.0) as u8;
                XorLayer {
                    weight: 1,
                    log2_inv_p: m,
                }
            })
            .collect::<Vec<_>>();
        LayerConfig {
            baseline_weight: xor.len() as u32,
            xor,
        }
    }

    fn total_weight(&self) -> u64 {
        u64::from(self.baseline_weight) + self.xor.iter().map(|l| u64::from(l.weight)).sum::<u64>()
    }

    /// The layer of `packet_id`'s instance `instance`, from h(packet ID).
    pub fn choose(&self, hashes: Hashes, packet_id: u64, instance: u8) -> Layer {
        let total = self.total_weight().max(1);
        let r = ((u128::from(hashes.layer(packet_id, instance)) * u128::from(total)) >> 64) as u64;
        let mut acc = u64::from(self.baseline_weight);
        if r < acc {
            return Layer::Baseline;
        }
        for (index, l) in self.xor.iter().enumerate() {
            acc += u64::from(l.weight);
            if r < acc {
                return Layer::Xor {
                    index: index as u8,
                    log2_inv_p: l.log2_inv_p,
                };
            }
        }
        Layer::Baseline
    }
}

/// A set of hop numbers in 1..=[`MAX_HOPS`]: which hops acted on a packet.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct HopMask([u64; WORDS]);

impl HopMask {
    /// Is `hop` in the set?
    pub fn contains(&self, hop: u32) -> bool {
        (1..=MAX_HOPS).contains(&hop)
            && self.0[((hop - 1) / 64) as usize] >> ((hop - 1) % 64) & 1 == 1
    }

    /// Adds `hop` (ignored outside 1..=[`MAX_HOPS`]).
    pub fn insert(&mut self, hop: u32) {
        if (1..=MAX_HOPS).contains(&hop) {
            self.0[((hop - 1) / 64) as usize] |= 1 << ((hop - 1) % 64);
        }
    }

    /// Removes `hop`.
    pub fn remove(&mut self, hop: u32) {
        if (1..=MAX_HOPS).contains(&hop) {
            self.0[((hop - 1) / 64) as usize] &= !(1 << ((hop - 1) % 64));
        }
    }

    /// Number of hops in the set.
    pub fn len(&self) -> u32 {
        self.0.iter().map(|w| w.count_ones()).sum()
    }

    /// Is the set empty?
    pub fn is_empty(&self) -> bool {
        self.0.iter().all(|&w| w == 0)
    }

    /// The hops in increasing order, in O(number of set bits) word operations.
    pub fn iter(&self) -> impl Iterator<Item = u32> + '_ {
        self.0.iter().enumerate().flat_map(|(w, &word)| {
            let mut rest = word;
            std::iter::from_fn(move || {
                (rest != 0).then(|| {
                    let bit = rest.trailing_zeros();
                    rest &= rest - 1;
                    w as u32 * 64 + bit + 1
                })
            })
        })
    }
}

/// Does hop `hop` of XOR layer `index` (p = 2^-`m`) act on `packet_id`? The AND of m vector
/// words of g, tested at the hop's bit.
pub fn xor_acts(hashes: Hashes, packet_id: u64, instance: u8, index: u8, m: u8, hop: u32) -> bool {
    if !(1..=MAX_HOPS).contains(&hop) {
        return false;
    }
    let word = ((hop - 1) / 64) as u8;
    let bit = (hop - 1) % 64;
    (0..m).all(|round| hashes.g_word(packet_id, instance, index, round, word) >> bit & 1 == 1)
}

/// The Recording Module's fast variant: all hops of a `k`-hop path that act on `packet_id` in
/// XOR layer `index`, as the AND of m k-bit vectors (O(m · k/64) word operations).
pub fn xor_mask(hashes: Hashes, packet_id: u64, instance: u8, index: u8, m: u8, k: u32) -> HopMask {
    let k = k.min(MAX_HOPS);
    let mut mask = HopMask::default();
    for w in 0..k.div_ceil(64) {
        let mut word = u64::MAX;
        for round in 0..m {
            word &= hashes.g_word(packet_id, instance, index, round, w as u8);
        }
        let valid = k - w * 64;
        if valid < 64 {
            word &= (1u64 << valid) - 1;
        }
        mask.0[w as usize] = word;
    }
    mask
}

/// Does Baseline hop `hop` overwrite `packet_id`'s digest? iff g(packet, hop) < 1/hop.
pub fn baseline_writes(hashes: Hashes, packet_id: u64, instance: u8, hop: u32) -> bool {
    hop >= 1 && below(hashes.g_bits(packet_id, hop, instance), 1, u64::from(hop))
}

/// The hop whose value a Baseline packet of a `k`-hop path carries: the last writer, the largest
/// `i ≤ k` with g < 1/i. Hop 1 always writes, so there is one for every k ≥ 1.
pub fn baseline_writer(hashes: Hashes, packet_id: u64, instance: u8, k: u32) -> u32 {
    (2..=k)
        .rev()
        .find(|&i| baseline_writes(hashes, packet_id, instance, i))
        .unwrap_or(1)
}

/// Path tracing's configuration, the same at every switch and at the collector.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct PathTracing {
    /// The global hashes (their seed).
    pub hashes: Hashes,
    /// The digest's bit budget.
    pub budget: Budget,
    /// The layers.
    pub layers: LayerConfig,
}

impl PathTracing {
    /// The paper's layered scheme for paths of up to `max_hops` hops.
    pub fn new(seed: u64, budget: Budget, max_hops: u32) -> PathTracing {
        PathTracing {
            hashes: Hashes::new(seed),
            budget,
            layers: LayerConfig::pint(max_hops),
        }
    }

    /// The Encoding Module at hop `hop` (1-based) of switch `switch_id`: the packet's new digest.
    pub fn encode_hop(&self, packet_id: u64, hop: u32, switch_id: u32, digest: u32) -> u32 {
        encode_hop(
            self.hashes,
            &self.layers,
            self.budget,
            packet_id,
            hop,
            switch_id,
            digest,
        )
    }
}

/// The Encoding Module, sans-IO: given packet `packet_id` at hop `hop` (1-based) of switch
/// `switch_id` carrying `digest`, the digest it leaves with. Each instance of `budget` is
/// encoded independently in its own layer. Hop 0 (not a hop) leaves the digest unchanged.
pub fn encode_hop(
    hashes: Hashes,
    layers: &LayerConfig,
    budget: Budget,
    packet_id: u64,
    hop: u32,
    switch_id: u32,
    digest: u32,
) -> u32 {
    let mut out = digest;
    for inst in 0..budget.instances() {
        let acts = match layers.choose(hashes, packet_id, inst) {
            Layer::Baseline => baseline_writes(hashes, packet_id, inst, hop).then_some(false),
            Layer::Xor { index, log2_inv_p } => {
                xor_acts(hashes, packet_id, inst, index, log2_inv_p, hop).then_some(true)
            }
        };
        if let Some(xor) = acts {
            let v = hashes.value(switch_id, packet_id, inst, budget.bits());
            let old = budget.field(out, inst);
            out = budget.with_field(out, inst, if xor { old ^ v } else { v });
        }
    }
    out
}
