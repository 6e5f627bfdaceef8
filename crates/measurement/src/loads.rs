//! A sweep's list of offered loads (`--loads`, an experiment file's `loads`): `5000,10k`,
//! `10,20,...,100%`. One item is a rate in req/s (`5000`, `5k`) or a share of the calibrated
//! capacity with a trailing `%`; a `%` ending the whole list makes every item a share.
//! `a,b,...,z` continues the step b − a up to z.

use crate::error::{invalid, LabError};
use crate::load_spec::Load;

/// The most loads one `...` may add (a typo such as `1,2,...,1e9` is refused, not expanded).
const MAX_STEPS: f64 = 10_000.0;

/// One item, read by [`Load`]'s own parser (as `--rate` is): its value (req/s, or percent)
/// and whether it is a percentage.
fn item(x: &str, all_pct: bool) -> Result<(f64, bool), LabError> {
    let text = if all_pct && !x.ends_with('%') {
        format!("{x}%")
    } else {
        x.to_string()
    };
    match text.parse::<Load>() {
        Ok(Load::Rps(r)) => Ok((r, false)),
        Ok(Load::OfCapacity(f)) => Ok((f * 100.0, true)),
        Err(e) => Err(invalid(format!(
            "--loads: cannot parse '{}': {e}",
            crate::error::clip(x)
        ))),
    }
}

/// Parses a list of loads (see the module's documentation); at least one.
pub fn parse_loads(s: &str) -> Result<Vec<Load>, LabError> {
    let t = s.trim();
    let all_pct = t.ends_with('%');
    let items: Vec<&str> = t
        .split(',')
        .map(str::trim)
        .filter(|x| !x.is_empty())
        .collect();
    let mut vals: Vec<(f64, bool)> = Vec::new();
    let mut i = 0;
    while i < items.len() {
        if items[i] != "..." {
            vals.push(item(items[i], all_pct)?);
            i += 1;
            continue;
        }
        let (Some(&(b, p)), Some(&(a, _)), Some(z)) = (
            vals.last(),
            vals.len().checked_sub(2).and_then(|k| vals.get(k)),
            items.get(i + 1),
        ) else {
            return Err(invalid(
                "--loads: '...' needs two values before it and one after",
            ));
        };
        let (z, _) = item(z, all_pct)?;
        let step = b - a;
        if step <= 0.0 || (z - b) / step > MAX_STEPS {
            return Err(invalid(format!(
                "--loads: cannot step from {a} and {b} to {z}"
            )));
        }
        let mut x = b + step;
        while x <= z + step * 1e-9 {
            vals.push((x, p));
            x += step;
        }
        i += 2;
    }
    if vals.is_empty() {
        return Err(invalid("--loads: no load given"));
    }
    Ok(vals
        .into_iter()
        .map(|(v, pct)| {
            if pct {
                Load::OfCapacity(v / 100.0)
            } else {
                Load::Rps(v)
            }
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loads_step_and_take_percent_from_the_list() {
        let l = parse_loads("10,20,...,50%").unwrap();
        assert_eq!(l, [0.1, 0.2, 0.3, 0.4, 0.5].map(Load::OfCapacity).to_vec());
        // A trailing % on the list makes every value a percentage; on one value, that one.
        assert_eq!(
            parse_loads("20%, 1000").unwrap(),
            vec![Load::OfCapacity(0.2), Load::Rps(1000.0)]
        );
        assert_eq!(
            parse_loads("1000, 20%").unwrap(),
            vec![Load::OfCapacity(10.0), Load::OfCapacity(0.2)]
        );
        assert_eq!(parse_loads("5k").unwrap(), vec![Load::Rps(5000.0)]);
        assert_eq!(
            parse_loads("1000,2000,...,4000").unwrap(),
            [1000.0, 2000.0, 3000.0, 4000.0].map(Load::Rps).to_vec()
        );
        for bad in ["", "x", "10,...", "-5", "10,5,...,100", "1,2,...,1e9", "0"] {
            let e = parse_loads(bad).unwrap_err();
            assert!(
                e.is_invalid() && e.to_string().starts_with("--loads"),
                "{bad}"
            );
        }
    }
}
