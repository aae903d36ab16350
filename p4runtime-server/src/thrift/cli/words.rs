//! The words of `simple_switch_CLI`'s lines: names resolved by dot-suffix, numbers and values
//! packed to a field's width, meter rates, port and LAG maps, argument structs, and the names of
//! the error codes the CLI prints.

use pipeline::commands::parse_value;

use crate::thrift::program::bytes;
use crate::thrift::value::{Struct, Value};

/// `full` is `name`, or ends with `.name` (the CLI takes any unique dot-suffix of a name).
pub(super) fn names(full: &str, name: &str) -> bool {
    full == name
        || full
            .strip_suffix(name)
            .is_some_and(|head| head.ends_with('.'))
}

/// The one of `all` that `name` names: itself, else its unique dot-suffix.
pub(super) fn resolve<'n>(
    kind: &str,
    all: impl Iterator<Item = &'n str>,
    name: &str,
) -> Result<&'n str, String> {
    let mut found: Vec<&str> = Vec::new();
    for n in all {
        if n == name {
            return Ok(n);
        }
        if names(n, name) && !found.contains(&n) {
            found.push(n);
        }
    }
    match found.as_slice() {
        [one] => Ok(*one),
        [] => Err(format!("Invalid {kind} name ({name})")),
        many => Err(format!(
            "{kind} name {name} is ambiguous: {}",
            many.join(", ")
        )),
    }
}

/// An integer argument as the CLI reads one (decimal).
pub(super) fn int(s: &str, what: &str) -> Result<i32, String> {
    s.parse()
        .map_err(|_| format!("Bad format for {what} ({s}), expected an integer"))
}

/// A value as the CLI takes it (decimal, `0x`, `0b`, `0o`; IPv4, IPv6 and MAC addresses).
pub(super) fn number(s: &str) -> Result<u128, String> {
    let radix = |p: &str, r: u32| {
        s.strip_prefix(p)
            .map(|d| u128::from_str_radix(d, r).map_err(|_| format!("bad value {s}")))
    };
    if let Some(v) = radix("0b", 2).or_else(|| radix("0o", 8)) {
        return v;
    }
    parse_value(s).map_err(|e| e.to_string())
}

/// `s` as `width` bits, packed as BMv2 takes them.
pub(super) fn packed(s: &str, width: u8, what: &str) -> Result<Value, String> {
    let v = number(s).map_err(|e| format!("{what}: {e}"))?;
    if width < 128 && v >> width != 0 {
        return Err(format!("{what}: {s} does not fit {width} bits"));
    }
    Ok(Value::Bytes(bytes(v, width)))
}

/// BMv2's rates, `<rate>:<burst>` (units per µs, units), as BmMeterRateConfigs.
pub(super) fn rates(words: &[&str]) -> Result<Value, String> {
    if words.len() != 2 {
        return Err(format!(
            "Invalid number of rates, expected 2 but got {} (<rate>:<burst> committed, then peak)",
            words.len()
        ));
    }
    let rate = |w: &str| -> Option<Struct> {
        let (r, b) = w.split_once(':')?;
        let (r, b) = (r.parse::<f64>().ok()?, b.parse::<i32>().ok()?);
        Some(
            Struct::new()
                .with(1, Value::Double(r))
                .with(2, Value::I32(b)),
        )
    };
    let list = words
        .iter()
        .map(|w| rate(w).ok_or_else(|| format!("Error while parsing rate {w} (<rate>:<burst>)")))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Value::structs(list))
}

/// Ports as BMv2's port map: '1' at position i from the right is port i.
pub(super) fn port_map(words: &[&str], what: &str) -> Result<String, String> {
    let mut ports = words
        .iter()
        .map(|w| {
            w.parse::<u16>()
                .ok()
                .filter(|&p| p < 512)
                .ok_or_else(|| format!("'{w}' is not a valid {what} number"))
        })
        .collect::<Result<Vec<_>, _>>()?;
    ports.sort_unstable();
    if let Some(w) = ports.windows(2).find(|w| w[0] == w[1]) {
        return Err(format!("Found duplicate {what} number '{}'", w[0]));
    }
    let Some(&top) = ports.last() else {
        return Ok(String::new());
    };
    Ok((0..=top)
        .rev()
        .map(|p| if ports.contains(&p) { '1' } else { '0' })
        .collect())
}

/// The ports and LAGs of `mc_node_create`/`mc_node_update` after their first argument:
/// `<ports...> [| <lags...>]`.
pub(super) fn ports_and_lags(words: &[&str]) -> Result<(Value, Value), String> {
    let (ports, lags) = match words.iter().position(|w| *w == "|") {
        Some(i) => (&words[..i], &words[i + 1..]),
        None => (words, &[][..]),
    };
    Ok((
        Value::str(port_map(ports, "port")?),
        Value::str(port_map(lags, "lag")?),
    ))
}

/// A call's arguments with cxt_id 0 in field 1 and `args` from field 2 (`standard` and
/// `simple_pre_lag`).
pub(super) fn numbered(args: Vec<Value>) -> Struct {
    let mut s = Struct::new().with(1, Value::I32(0));
    for (i, a) in args.into_iter().enumerate() {
        s = s.with(i as i16 + 2, a);
    }
    s
}

/// A call's arguments from field 1 (`simple_switch`, the device manager).
pub(super) fn fields(args: Vec<Value>) -> Struct {
    let mut s = Struct::new();
    for (i, a) in args.into_iter().enumerate() {
        s = s.with(i as i16 + 1, a);
    }
    s
}

/// The names of an exception's codes, as the CLI prints them, for `method`'s exception.
pub(super) fn code_name(method: &str, code: i32) -> String {
    const TABLE: &[&str] = &[
        "TABLE_FULL",
        "INVALID_HANDLE",
        "EXPIRED_HANDLE",
        "COUNTERS_DISABLED",
        "METERS_DISABLED",
        "AGEING_DISABLED",
        "INVALID_TABLE_NAME",
        "INVALID_ACTION_NAME",
        "WRONG_TABLE_TYPE",
        "INVALID_MBR_HANDLE",
        "MBR_STILL_USED",
        "MBR_ALREADY_IN_GRP",
        "MBR_NOT_IN_GRP",
        "INVALID_GRP_HANDLE",
        "GRP_STILL_USED",
        "EMPTY_GRP",
        "DUPLICATE_ENTRY",
        "BAD_MATCH_KEY",
        "INVALID_METER_OPERATION",
        "DEFAULT_ACTION_IS_CONST",
        "DEFAULT_ENTRY_IS_CONST",
        "NO_DEFAULT_ENTRY",
        "INVALID_ACTION_PROFILE_NAME",
        "NO_ACTION_PROFILE_SELECTION",
        "IMMUTABLE_TABLE_ENTRIES",
        "BAD_ACTION_DATA",
    ];
    let names: &[&str] = if method.starts_with("bm_mt_") {
        if code == 100 {
            return "ERROR".into();
        }
        TABLE
    } else if method.starts_with("bm_counter_") {
        &["INVALID_COUNTER_NAME", "INVALID_INDEX", "ERROR"]
    } else if method.starts_with("bm_meter_") {
        &[
            "INVALID_METER_NAME",
            "INVALID_INDEX",
            "BAD_RATES_LIST",
            "INVALID_INFO_RATE_VALUE",
            "INVALID_BURST_SIZE_VALUE",
            "ERROR",
        ]
    } else if method.starts_with("bm_register_") {
        &["INVALID_REGISTER_NAME", "INVALID_INDEX", "ERROR"]
    } else if method.starts_with("bm_mc_") {
        &[
            "TABLE_FULL",
            "INVALID_MGID",
            "INVALID_MGRP_HANDLE",
            "INVALID_L1_HANDLE",
            "ERROR",
        ]
    } else if method.starts_with("mirroring_") {
        &["SESSION_NOT_FOUND"]
    } else if method.starts_with("bm_parse_vset_") {
        &["INVALID_PARSE_VSET_NAME", "ERROR"]
    } else if method.starts_with("bm_set_crc") {
        &[
            "INVALID_CALCULATION_NAME",
            "WRONG_TYPE_CALCULATION",
            "INVALID_CONFIG",
        ]
    } else if method.starts_with("bm_dev_mgr_") {
        &["ERROR"]
    } else {
        &["CONFIG_SWAP_DISABLED", "ONGOING_SWAP", "NO_ONGOING_SWAP"]
    };
    usize::try_from(code - 1)
        .ok()
        .and_then(|i| names.get(i))
        .map_or_else(|| format!("error code {code}"), |n| (*n).to_string())
}
