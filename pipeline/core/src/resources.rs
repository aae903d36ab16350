//! What a program would need on an RMT/Tofino-class target: match-action stages (from its table
//! dependency graph), PHV words, SRAM and TCAM. An estimate by a simple model, for comparing
//! with what papers report for their P4 programs; `pisa-switch --program NAME --resources`
//! prints it.
//!
//! The model is RMT's (Bosshart et al., SIGCOMM 2013), the reference P4TE and others use:
//! - 32 stages; a stage holds 106 SRAM blocks of 1K × 112 bits and 16 TCAM blocks of
//!   2K × 40 bits; one stateful read-modify-write per register per packet.
//! - A PHV of 64 × 8, 96 × 16 and 64 × 32-bit words (4,096 bits); a field takes the smallest word
//!   that holds it, wider fields several 32-bit words.
//! - A step's stage is one after the latest step it depends on (match or action dependency);
//!   ingress and egress each have their own critical path, and the total counts them one after
//!   the other (the conservative reading; RMT shares stages between the two).
//! - Memory: exact keys and action data in SRAM (key + action data + 8 bits of overhead per
//!   entry, two-way hashing at 80% load); ternary and LPM keys in TCAM (rounded up to 40-bit
//!   blocks), their action data in SRAM; registers `size × width` with the width rounded up to
//!   a register cell of the target (1, 8, 16, 32 or 64 bits: Tofino's, a 64-bit cell being a
//!   pair of 32), counters 64 bits and meters 128 bits of SRAM per cell.
//! - Register accesses: every step that uses a register is one access per packet. A register
//!   lives in one stage and allows one read-modify-write per packet, and an ingress register
//!   cannot be reached from egress (nor the reverse), so the report lists the registers used
//!   more than once or from the other pipeline: each needs a copy, a table or bridged metadata
//!   on a real target.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use crate::schema::Schema;
use crate::table::MatchKind;

/// Ingress or egress.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Gress {
    /// The ingress pipeline.
    Ingress,
    /// The egress pipeline.
    Egress,
}

/// One logical step of a program: the tables and externs it uses, and the steps it waits for.
#[derive(Clone, Debug)]
pub struct Step {
    /// A name for the report.
    pub name: &'static str,
    /// Where it runs.
    pub gress: Gress,
    /// Objects (tables, registers, meters, counters) it uses, by their schema names.
    pub uses: &'static [&'static str],
    /// Steps whose results it needs.
    pub after: &'static [&'static str],
}

/// What a program declares for the estimate.
#[derive(Clone, Debug)]
pub struct Layout {
    /// Its steps.
    pub steps: Vec<Step>,
    /// The PHV fields each pipeline carries: (gress, name, bits).
    pub phv: Vec<(Gress, &'static str, u16)>,
}

/// Stages in an RMT pipeline.
pub const STAGES: usize = 32;
/// SRAM bits per stage.
pub const SRAM_BITS_PER_STAGE: u64 = 106 * 1024 * 112;
/// TCAM bits per stage.
pub const TCAM_BITS_PER_STAGE: u64 = 16 * 2048 * 40;
/// PHV words: (bits, count).
pub const PHV_WORDS: [(u16, usize); 3] = [(8, 64), (16, 96), (32, 64)];

/// The estimate.
#[derive(Clone, Debug, Default)]
pub struct Estimate {
    /// Stage of each step (1-based), by gress.
    pub stages: BTreeMap<&'static str, (Gress, usize)>,
    /// Critical path per gress.
    pub ingress_stages: usize,
    /// Egress critical path.
    pub egress_stages: usize,
    /// PHV words used per gress: (8-bit, 16-bit, 32-bit).
    pub phv_words: BTreeMap<Gress, [usize; 3]>,
    /// SRAM and TCAM bits per object.
    pub memory: Vec<(String, u64, u64)>,
    /// Per register: the steps that access it, with their pipelines.
    pub register_accesses: BTreeMap<String, Vec<(&'static str, Gress)>>,
}

/// The register cell width of the target that holds `bits` (1, 8, 16, 32 or 64; wider values
/// take 64-bit cells).
pub fn register_width(bits: u16) -> u64 {
    match bits {
        0..=1 => 1,
        2..=8 => 8,
        9..=16 => 16,
        17..=32 => 32,
        _ => u64::from(bits).div_ceil(64) * 64,
    }
}

/// The pipeline an object's name places it in (`ingress.` or `egress.`, as the programs name
/// their objects after their P4 controls), if it says.
fn gress_of(name: &str) -> Option<Gress> {
    if name.starts_with("ingress.") {
        Some(Gress::Ingress)
    } else if name.starts_with("egress.") {
        Some(Gress::Egress)
    } else {
        None
    }
}

impl Estimate {
    /// The registers a real target could not place as declared: (name, accesses per packet,
    /// accesses from the other pipeline).
    pub fn register_conflicts(&self) -> Vec<(&str, usize, usize)> {
        self.register_accesses
            .iter()
            .filter_map(|(r, steps)| {
                let home = gress_of(r);
                let foreign = steps.iter().filter(|(_, g)| Some(*g) != home).count();
                (steps.len() > 1 || foreign > 0).then_some((r.as_str(), steps.len(), foreign))
            })
            .collect()
    }
}

impl Estimate {
    /// Total SRAM bits.
    pub fn sram_bits(&self) -> u64 {
        self.memory.iter().map(|m| m.1).sum()
    }

    /// Total TCAM bits.
    pub fn tcam_bits(&self) -> u64 {
        self.memory.iter().map(|m| m.2).sum()
    }

    /// Share of the PHV's bits the words of `gress` take.
    pub fn phv_share(&self, gress: Gress) -> f64 {
        let w = self.phv_words.get(&gress).copied().unwrap_or_default();
        let bits: usize = w
            .iter()
            .zip(PHV_WORDS)
            .map(|(n, (b, _))| n * usize::from(b))
            .sum();
        bits as f64 / 4096.0
    }
}

fn phv_words(fields: impl Iterator<Item = u16>) -> [usize; 3] {
    let mut w = [0usize; 3];
    for bits in fields {
        match bits {
            0..=8 => w[0] += 1,
            9..=16 => w[1] += 1,
            17..=32 => w[2] += 1,
            _ => w[2] += usize::from(bits.div_ceil(32)),
        }
    }
    w
}

/// Estimates `layout` of a program with `schema`. Errors name a step or object that does not
/// exist.
pub fn estimate(schema: &Schema, layout: &Layout) -> Result<Estimate, String> {
    let mut e = Estimate::default();
    let by_name: BTreeMap<&str, &Step> = layout.steps.iter().map(|s| (s.name, s)).collect();
    fn stage_of(
        name: &'static str,
        by_name: &BTreeMap<&str, &Step>,
        memo: &mut BTreeMap<&'static str, (Gress, usize)>,
        depth: usize,
    ) -> Result<usize, String> {
        if let Some((_, s)) = memo.get(name) {
            return Ok(*s);
        }
        let step = by_name.get(name).ok_or_else(|| format!("no step {name}"))?;
        if depth > by_name.len() {
            return Err(format!("a dependency cycle through {name}"));
        }
        let mut s = 1;
        for a in step.after {
            let d = stage_of(a, by_name, memo, depth + 1)?;
            // A step of the other pipeline does not delay this one's stage count.
            let same = by_name.get(a).is_some_and(|x| x.gress == step.gress);
            if same {
                s = s.max(d + 1);
            }
        }
        memo.insert(step.name, (step.gress, s));
        Ok(s)
    }
    for s in &layout.steps {
        stage_of(s.name, &by_name, &mut e.stages, 0)?;
    }
    for (g, s) in e.stages.values() {
        match g {
            Gress::Ingress => e.ingress_stages = e.ingress_stages.max(*s),
            Gress::Egress => e.egress_stages = e.egress_stages.max(*s),
        }
    }
    for g in [Gress::Ingress, Gress::Egress] {
        e.phv_words.insert(
            g,
            phv_words(layout.phv.iter().filter(|f| f.0 == g).map(|f| f.2)),
        );
    }
    let mut seen = std::collections::BTreeSet::new();
    for s in &layout.steps {
        for &o in s.uses {
            if schema.registers.iter().any(|r| r.name == o) {
                e.register_accesses
                    .entry(o.to_string())
                    .or_default()
                    .push((s.name, s.gress));
            }
            if !seen.insert(o) {
                continue;
            }
            e.memory.push(object_memory(schema, o)?);
        }
    }
    Ok(e)
}

fn object_memory(schema: &Schema, name: &str) -> Result<(String, u64, u64), String> {
    if let Some(i) = schema.table_by_name(name) {
        let t = &schema.tables[i];
        let key: u64 = t.fields.iter().map(|f| u64::from(f.bitwidth)).sum();
        let data: u64 = t
            .actions
            .iter()
            .map(|a| {
                schema.actions[a.action]
                    .params
                    .iter()
                    .map(|p| u64::from(p.bitwidth))
                    .sum::<u64>()
            })
            .max()
            .unwrap_or(0);
        let ternary = t.fields.iter().any(|f| {
            matches!(
                f.kind,
                MatchKind::Ternary | MatchKind::Lpm | MatchKind::Range
            )
        });
        let n = t.size as u64;
        let (mut sram, tcam) = if ternary {
            (n * (data + 8), n * key.div_ceil(40) * 40)
        } else {
            (n * (key + data + 8) * 10 / 8, 0)
        };
        if t.direct_counter.is_some() {
            sram += n * 64;
        }
        if t.direct_meter.is_some() {
            sram += n * 128;
        }
        return Ok((t.name.to_string(), sram, tcam));
    }
    if let Some(r) = schema.registers.iter().find(|r| r.name == name) {
        return Ok((
            r.name.to_string(),
            r.size as u64 * register_width(u16::from(r.bitwidth)),
            0,
        ));
    }
    if let Some(m) = schema.meters.iter().find(|m| m.name == name) {
        return Ok((m.name.to_string(), m.size as u64 * 128, 0));
    }
    if let Some(c) = schema.counters.iter().find(|c| c.name == name) {
        return Ok((c.name.to_string(), c.size as u64 * 64, 0));
    }
    Err(format!("no table, register, meter or counter {name}"))
}

/// The report as text.
pub fn report(name: &str, e: &Estimate) -> String {
    let mut s = String::new();
    let total = e.ingress_stages + e.egress_stages;
    let _ = writeln!(
        s,
        "{name}: an RMT estimate (pipeline::resources; docs/p4te.md says how)\n\
         stages: ingress {} + egress {} = {total} of {STAGES}",
        e.ingress_stages, e.egress_stages
    );
    for (g, label) in [(Gress::Ingress, "ingress"), (Gress::Egress, "egress")] {
        let mut steps: Vec<_> = e.stages.iter().filter(|(_, (x, _))| *x == g).collect();
        steps.sort_by_key(|(n, (_, st))| (*st, **n));
        let list: Vec<String> = steps
            .iter()
            .map(|(n, (_, st))| format!("{st}:{n}"))
            .collect();
        let _ = writeln!(s, "  {label}: {}", list.join(" "));
    }
    for g in [Gress::Ingress, Gress::Egress] {
        let w = e.phv_words[&g];
        let _ = writeln!(
            s,
            "phv {g:?}: {} x 8b, {} x 16b, {} x 32b words = {:.1}% of 4096 bits",
            w[0],
            w[1],
            w[2],
            100.0 * e.phv_share(g)
        );
    }
    let _ = writeln!(
        s,
        "memory: SRAM {:.1} KiB ({:.2}% of one stage's), TCAM {:.1} KiB ({:.2}% of one stage's)",
        e.sram_bits() as f64 / 8192.0,
        100.0 * e.sram_bits() as f64 / SRAM_BITS_PER_STAGE as f64,
        e.tcam_bits() as f64 / 8192.0,
        100.0 * e.tcam_bits() as f64 / TCAM_BITS_PER_STAGE as f64,
    );
    for (o, sram, tcam) in &e.memory {
        let _ = writeln!(s, "  {o}: SRAM {sram} bits, TCAM {tcam} bits");
    }
    let conflicts = e.register_conflicts();
    let _ = writeln!(
        s,
        "register accesses: {} registers, {} accessed more than once per packet or from the \
         other pipeline",
        e.register_accesses.len(),
        conflicts.len()
    );
    for (r, n, foreign) in conflicts {
        let steps: Vec<&str> = e.register_accesses[r].iter().map(|(st, _)| *st).collect();
        let _ = writeln!(
            s,
            "  {r}: {n} accesses ({}), {foreign} from the other pipeline",
            steps.join(", ")
        );
    }
    s
}
