//! BMv2's `standard` service, its indexed externs: counters, meters and registers by name and
//! index, and the counter values and meter rates the table calls share.

use pipeline::control::{Entity, UpdateKind, WriteError};
use pipeline::externs::{CounterData, MeterConfig};

use super::code::*;
use super::program::View;
use super::standard::update;
use super::value::{Struct, TType, Value};
use super::{Fail, Reply, Runtime};

pub(super) fn counter_value(d: CounterData) -> Struct {
    Struct::new()
        .with(1, Value::I64(d.bytes as i64))
        .with(2, Value::I64(d.packets as i64))
}

pub(super) fn counter_data(s: &Struct) -> Result<CounterData, Fail> {
    Ok(CounterData {
        bytes: u64::try_from(s.int(1)?).unwrap_or(0),
        packets: u64::try_from(s.int(2)?).unwrap_or(0),
    })
}

/// BMv2's rates (committed, then peak; units per microsecond and a burst) as a meter config.
pub(super) fn meter_config(list: &[Value]) -> Result<MeterConfig, Fail> {
    if list.len() != 2 {
        return Err(Fail::Code(
            BAD_RATES_LIST,
            format!("a two-rate meter takes 2 rates, not {}", list.len()),
        ));
    }
    let mut rb = Vec::new();
    for v in list {
        let Value::Struct(s) = v else {
            return Err(Fail::App("a rate must be a struct".into()));
        };
        let rate = s.double(1)?;
        if !(rate.is_finite() && rate >= 0.0) {
            return Err(Fail::Code(INVALID_INFO_RATE_VALUE, format!("rate {rate}")));
        }
        let burst = u64::try_from(s.int(2)?)
            .map_err(|_| Fail::Code(INVALID_BURST_SIZE_VALUE, "negative burst".into()))?;
        rb.push(((rate * 1e6).round() as u64, burst));
    }
    if rb[0].0 > rb[1].0 {
        return Err(Fail::Code(
            INVALID_INFO_RATE_VALUE,
            "the committed rate exceeds the peak rate".into(),
        ));
    }
    Ok(MeterConfig {
        cir: rb[0].0,
        cburst: rb[0].1,
        pir: rb[1].0,
        pburst: rb[1].1,
    })
}

/// A meter config as BMv2's rate list (empty when unconfigured).
pub(super) fn rates(c: Option<MeterConfig>) -> Value {
    let rate = |r: u64, b: u64| {
        Struct::new()
            .with(1, Value::Double(r as f64 / 1e6))
            .with(2, Value::I32(i32::try_from(b).unwrap_or(i32::MAX)))
    };
    Value::structs(
        c.map(|c| vec![rate(c.cir, c.cburst), rate(c.pir, c.pburst)])
            .unwrap_or_default(),
    )
}

/// An indexed extern's name and index arguments, resolved: (P4Info id, cells, index).
fn cell(
    mut defs: impl Iterator<Item = (u32, &'static str, usize)>,
    a: &Struct,
    with_index: bool,
) -> Result<(u32, usize, Option<u64>), Fail> {
    let name = a.string(2)?;
    let (id, _, size) = defs
        .find(|(_, n, _)| *n == name)
        .ok_or_else(|| Fail::Code(INVALID_NAME, format!("no {name}")))?;
    if !with_index {
        return Ok((id, size, None));
    }
    let i = a.int(3)?;
    match u64::try_from(i) {
        Ok(i) if (i as usize) < size => Ok((id, size, Some(i))),
        _ => Err(Fail::Code(
            INVALID_INDEX,
            format!("{name}[{i}]: {size} cells"),
        )),
    }
}

fn extern_err(e: WriteError) -> Fail {
    let code = match e {
        WriteError::NotFound(_) => INVALID_NAME,
        WriteError::OutOfRange(_) => INVALID_INDEX,
        _ => EXTERN_ERROR,
    };
    Fail::Code(code, e.to_string())
}

pub(super) fn counter_read(_rt: &Runtime, v: &View, a: &Struct) -> Reply {
    let defs = v.schema.counters.iter().map(|c| (c.id, c.name, c.size));
    let (id, _, index) = cell(defs, a, true)?;
    let c = v
        .control
        .read_counters(Some(id), index)
        .map_err(extern_err)?;
    Ok(Some(Value::Struct(counter_value(
        c.first().map(|c| c.value).unwrap_or_default(),
    ))))
}

pub(super) fn counter_write(rt: &Runtime, v: &View, a: &Struct, reset: bool) -> Reply {
    let defs = v.schema.counters.iter().map(|c| (c.id, c.name, c.size));
    let (id, _, index) = cell(defs, a, !reset)?;
    let data = if reset {
        CounterData::default()
    } else {
        counter_data(a.strukt(4)?)?
    };
    rt.write_with(&v.control, || {
        Ok::<_, Fail>(update(
            UpdateKind::Modify,
            Entity::Counter {
                counter_id: id,
                index,
                data,
            },
        ))
    })?
    .map_err(extern_err)?;
    Ok(None)
}

pub(super) fn meter_set(rt: &Runtime, v: &View, a: &Struct, index: Option<i64>) -> Reply {
    let defs = v.schema.meters.iter().map(|m| (m.id, m.name, m.size));
    let (id, _, index) = cell(defs, a, index.is_some())?;
    let config = meter_config(a.list(if index.is_some() { 4 } else { 3 })?)?;
    rt.write_with(&v.control, || {
        Ok::<_, Fail>(update(
            UpdateKind::Modify,
            Entity::Meter {
                meter_id: id,
                index,
                config: Some(config),
            },
        ))
    })?
    .map_err(|e| match extern_err(e) {
        // MeterOperationErrorCode's catch-all is 6 (3 is BAD_RATES_LIST).
        Fail::Code(EXTERN_ERROR, why) => Fail::Code(METER_ERROR, why),
        f => f,
    })?;
    Ok(None)
}

pub(super) fn meter_get(v: &View, a: &Struct) -> Reply {
    let defs = v.schema.meters.iter().map(|m| (m.id, m.name, m.size));
    let (id, _, index) = cell(defs, a, true)?;
    let m = v.control.read_meters(Some(id), index).map_err(extern_err)?;
    Ok(Some(rates(m.first().and_then(|c| c.value))))
}

pub(super) fn register_read(v: &View, a: &Struct, all: bool) -> Reply {
    let defs = v.schema.registers.iter().map(|r| (r.id, r.name, r.size));
    let (id, _, index) = cell(defs, a, !all)?;
    let cells = v
        .control
        .read_registers(Some(id), index)
        .map_err(extern_err)?;
    Ok(Some(if all {
        Value::List(
            TType::I64,
            cells.iter().map(|c| Value::I64(c.value as i64)).collect(),
        )
    } else {
        Value::I64(cells.first().map_or(0, |c| c.value as i64))
    }))
}

pub(super) fn register_write(rt: &Runtime, v: &View, a: &Struct, reset: bool) -> Reply {
    let defs = v.schema.registers.iter().map(|r| (r.id, r.name, r.size));
    let (id, _, index) = cell(defs, a, !reset)?;
    let width = v
        .schema
        .registers
        .iter()
        .find(|r| r.id == id)
        .map_or(64, |r| r.bitwidth);
    // BMv2 keeps the value's low `bitwidth` bits.
    let value = if reset {
        0
    } else {
        let raw = a.int(4)? as u64;
        if width >= 64 {
            raw
        } else {
            raw & ((1u64 << width) - 1)
        }
    };
    rt.write_with(&v.control, || {
        Ok::<_, Fail>(update(
            UpdateKind::Modify,
            Entity::Register {
                register_id: id,
                index,
                value: u128::from(value),
            },
        ))
    })?
    .map_err(extern_err)?;
    Ok(None)
}

/// A parser value set call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum VsetOp {
    Add,
    Remove,
    Get,
    Clear,
}

/// `bm_parse_vset_*`: a value is the member's bytes, big-endian, as many as the set's width
/// takes (BMv2's compressed form). Value sets are the externs' own state, outside the
/// table snapshots, so they change at once.
pub(super) fn parse_vset(v: &View, a: &Struct, op: VsetOp) -> Reply {
    /// ParseVSetOperationErrorCode's ERROR.
    const VSET_ERROR: i32 = 2;
    let name = a.string(2)?;
    let set = v
        .schema
        .value_sets
        .iter()
        .position(|d| d.name == name)
        .ok_or_else(|| Fail::Code(INVALID_NAME, format!("no parser value set {name}")))?;
    let vs = &v.control.externs().value_sets[set];
    let value = || -> Result<u128, Fail> {
        let bytes = a.bytes(3)?;
        if bytes.len() > 16 {
            return Err(Fail::Code(
                VSET_ERROR,
                format!("{name}: a value of {} bytes", bytes.len()),
            ));
        }
        Ok(bytes
            .iter()
            .fold(0u128, |acc, &b| (acc << 8) | u128::from(b)))
    };
    let err = |e: pipeline::externs::ValueSetError| Fail::Code(VSET_ERROR, format!("{name}: {e}"));
    match op {
        VsetOp::Add => vs.add(value()?).map(|_| None).map_err(err),
        VsetOp::Remove => {
            vs.remove(value()?);
            Ok(None)
        }
        VsetOp::Clear => {
            vs.clear();
            Ok(None)
        }
        VsetOp::Get => {
            let n = vs.width().div_ceil(8) as usize;
            Ok(Some(Value::List(
                TType::String,
                vs.members()
                    .into_iter()
                    .map(|m| Value::Bytes(m.to_be_bytes()[16 - n..].to_vec()))
                    .collect(),
            )))
        }
    }
}
