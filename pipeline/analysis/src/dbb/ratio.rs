//! Exact rationals for the DBB compiler: an `i128` numerator over a positive `i128` denominator,
//! always in lowest terms, with checked arithmetic.
//!
//! Bandwidths arrive as decimal text (`2.5`, `10`, `1e3`) and every step of the compiler (max-flow,
//! ratios, SIR) must be exact, so nothing here goes through floating point. Arithmetic returns
//! `None` on overflow instead of wrapping or panicking; comparison never overflows (it multiplies
//! into 256 bits).

use std::cmp::Ordering;
use std::fmt;

/// A rational number `num / den` with `den > 0` and `gcd(num, den) = 1`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Ratio {
    num: i128,
    den: i128,
}

/// Why a decimal string is not a rational this type can hold.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ParseRatioError {
    /// Not of the form `-?digits(.digits)?([eE][+-]?digits)?`.
    #[error("{0:?} is not a decimal number")]
    Syntax(String),
    /// Numerator or denominator would not fit in 127 bits.
    #[error("{0:?} has too many digits for exact 128-bit arithmetic")]
    TooLarge(String),
}

/// Greatest common divisor (`gcd(0, 0) = 0`).
pub fn gcd(mut a: u128, mut b: u128) -> u128 {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

/// Least common multiple, `None` on overflow (`lcm(0, x) = 0`).
pub fn lcm(a: u128, b: u128) -> Option<u128> {
    if a == 0 || b == 0 {
        return Some(0);
    }
    (a / gcd(a, b)).checked_mul(b)
}

impl Ratio {
    /// Zero.
    pub const ZERO: Ratio = Ratio { num: 0, den: 1 };

    /// `num / den` in lowest terms; `None` if `den` is 0 or the result does not fit.
    pub fn new(num: i128, den: i128) -> Option<Ratio> {
        if den == 0 {
            return None;
        }
        let g = gcd(num.unsigned_abs(), den.unsigned_abs());
        // g >= 1 since den != 0. A magnitude of 2^127 (i128::MIN with g = 1) does not fit.
        let n = i128::try_from(num.unsigned_abs() / g).ok()?;
        let d = i128::try_from(den.unsigned_abs() / g).ok()?;
        let n = if (num < 0) != (den < 0) { -n } else { n };
        Some(Ratio { num: n, den: d })
    }

    /// The integer `n`.
    pub const fn from_integer(n: i128) -> Ratio {
        Ratio { num: n, den: 1 }
    }

    /// Numerator (sign carrier).
    pub const fn numer(&self) -> i128 {
        self.num
    }

    /// Denominator (always positive).
    pub const fn denom(&self) -> i128 {
        self.den
    }

    /// Whether the value is greater than zero.
    pub const fn is_positive(&self) -> bool {
        self.num > 0
    }

    /// Whether the value is zero.
    pub const fn is_zero(&self) -> bool {
        self.num == 0
    }

    /// Whether the value is an integer.
    pub const fn is_integer(&self) -> bool {
        self.den == 1
    }

    /// `self + rhs`, `None` on overflow.
    pub fn checked_add(self, rhs: Ratio) -> Option<Ratio> {
        // a/b + c/d = (a*(d/g) + c*(b/g)) / (b/g*d) with g = gcd(b, d): keeps intermediates small.
        let g = gcd(self.den as u128, rhs.den as u128) as i128;
        let num = self
            .num
            .checked_mul(rhs.den / g)?
            .checked_add(rhs.num.checked_mul(self.den / g)?)?;
        Ratio::new(num, (self.den / g).checked_mul(rhs.den)?)
    }

    /// `self - rhs`, `None` on overflow.
    pub fn checked_sub(self, rhs: Ratio) -> Option<Ratio> {
        self.checked_add(Ratio {
            num: rhs.num.checked_neg()?,
            den: rhs.den,
        })
    }

    /// `self * rhs`, `None` on overflow.
    pub fn checked_mul(self, rhs: Ratio) -> Option<Ratio> {
        // Cross-reduce first so that products of already-reduced factors stay small.
        let g1 = gcd(self.num.unsigned_abs(), rhs.den as u128).max(1) as i128;
        let g2 = gcd(rhs.num.unsigned_abs(), self.den as u128).max(1) as i128;
        Ratio::new(
            (self.num / g1).checked_mul(rhs.num / g2)?,
            (self.den / g2).checked_mul(rhs.den / g1)?,
        )
    }

    /// `self / rhs`, `None` on overflow or if `rhs` is zero.
    pub fn checked_div(self, rhs: Ratio) -> Option<Ratio> {
        if rhs.num == 0 {
            return None;
        }
        let inv = Ratio::new(rhs.den, rhs.num)?;
        self.checked_mul(inv)
    }

    /// Parses the decimal text of a JSON number exactly: `6`, `2.5`, `-3`, `0.125`, `1e3`,
    /// `2.5E-1`. A leading `+`, a bare `.5` or `5.` are rejected, as JSON rejects them.
    pub fn parse_decimal(text: &str) -> Result<Ratio, ParseRatioError> {
        let syntax = || ParseRatioError::Syntax(text.to_owned());
        let too_large = || ParseRatioError::TooLarge(text.to_owned());
        let (negative, rest) = match text.strip_prefix('-') {
            Some(r) => (true, r),
            None => (false, text),
        };
        let (mantissa, exponent) = match rest.find(['e', 'E']) {
            Some(i) => (&rest[..i], Some(&rest[i + 1..])),
            None => (rest, None),
        };
        let (int_part, frac_part) = match mantissa.split_once('.') {
            Some((i, f)) => (i, Some(f)),
            None => (mantissa, None),
        };
        let all_digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
        if !all_digits(int_part) || frac_part.is_some_and(|f| !all_digits(f)) {
            return Err(syntax());
        }
        let frac = frac_part.unwrap_or("");
        let mut num: i128 = 0;
        for b in int_part.bytes().chain(frac.bytes()) {
            num = num
                .checked_mul(10)
                .and_then(|n| n.checked_add(i128::from(b - b'0')))
                .ok_or_else(too_large)?;
        }
        // Value = num * 10^(exp - frac.len()).
        let exp: i64 = match exponent {
            None => 0,
            Some(e) => {
                let digits = e.strip_prefix(['+', '-']).unwrap_or(e);
                if !all_digits(digits) {
                    return Err(syntax());
                }
                let magnitude: i64 = digits.parse().map_err(|_| too_large())?;
                if e.starts_with('-') {
                    -magnitude
                } else {
                    magnitude
                }
            }
        };
        let shift = exp
            .checked_sub(i64::try_from(frac.len()).map_err(|_| too_large())?)
            .ok_or_else(too_large)?;
        let pow = u32::try_from(shift.unsigned_abs())
            .ok()
            .and_then(|s| 10i128.checked_pow(s));
        let value = match pow {
            _ if num == 0 => Some(Ratio::ZERO),
            None => None,
            Some(p) if shift >= 0 => num.checked_mul(p).map(Ratio::from_integer),
            Some(p) => Ratio::new(num, p),
        }
        .ok_or_else(too_large)?;
        Ok(if negative {
            Ratio {
                num: -value.num,
                den: value.den,
            }
        } else {
            value
        })
    }
}

/// `a * b` as a 256-bit `(high, low)` pair.
fn wide_mul(a: u128, b: u128) -> (u128, u128) {
    const LOW: u128 = u64::MAX as u128;
    let (a1, a0) = (a >> 64, a & LOW);
    let (b1, b0) = (b >> 64, b & LOW);
    let (p00, p01, p10, p11) = (a0 * b0, a0 * b1, a1 * b0, a1 * b1);
    let mid = (p00 >> 64) + (p01 & LOW) + (p10 & LOW);
    let low = (p00 & LOW) | (mid << 64);
    let high = p11 + (p01 >> 64) + (p10 >> 64) + (mid >> 64);
    (high, low)
}

impl Ord for Ratio {
    fn cmp(&self, other: &Ratio) -> Ordering {
        // a/b vs c/d with b, d > 0: compare a*d with c*b, by sign first, then magnitude.
        let sign = |n: i128| n.signum();
        match sign(self.num).cmp(&sign(other.num)) {
            Ordering::Equal => {}
            unequal => return unequal,
        }
        let lhs = wide_mul(self.num.unsigned_abs(), other.den as u128);
        let rhs = wide_mul(other.num.unsigned_abs(), self.den as u128);
        if self.num < 0 {
            rhs.cmp(&lhs)
        } else {
            lhs.cmp(&rhs)
        }
    }
}

impl PartialOrd for Ratio {
    fn partial_cmp(&self, other: &Ratio) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl fmt::Display for Ratio {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.den == 1 {
            write!(f, "{}", self.num)
        } else {
            write!(f, "{}/{}", self.num, self.den)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn r(n: i128, d: i128) -> Ratio {
        Ratio::new(n, d).unwrap()
    }

    #[test]
    fn new_reduces_and_normalises_sign() {
        assert_eq!(r(6, 4), r(3, 2));
        assert_eq!((r(6, -4).numer(), r(6, -4).denom()), (-3, 2));
        assert_eq!((r(0, -7).numer(), r(0, -7).denom()), (0, 1));
        assert_eq!(Ratio::new(1, 0), None);
        assert_eq!(Ratio::new(i128::MIN, 1), None);
    }

    #[test]
    fn parse_decimal_is_exact() {
        let p = |s| Ratio::parse_decimal(s);
        assert_eq!(p("6"), Ok(r(6, 1)));
        assert_eq!(p("2.5"), Ok(r(5, 2)));
        assert_eq!(p("0.10"), Ok(r(1, 10)));
        assert_eq!(p("-3"), Ok(r(-3, 1)));
        assert_eq!(p("-0.0"), Ok(Ratio::ZERO));
        assert_eq!(p("1e3"), Ok(r(1000, 1)));
        assert_eq!(p("2.5E-1"), Ok(r(1, 4)));
        assert_eq!(p("12.5e+1"), Ok(r(125, 1)));
        // 0.1 + 0.2 is exactly 0.3 here, unlike in f64.
        assert_eq!(
            p("0.1").unwrap().checked_add(p("0.2").unwrap()),
            Some(r(3, 10))
        );
        for bad in [
            "", "-", "+1", ".5", "5.", "1e", "1e+", "1.2.3", "0x10", "1 ", "NaN", "\"2\"",
        ] {
            assert!(matches!(p(bad), Err(ParseRatioError::Syntax(_))), "{bad:?}");
        }
        assert!(matches!(p("1e40"), Err(ParseRatioError::TooLarge(_))));
        assert!(matches!(p("1e-40"), Err(ParseRatioError::TooLarge(_))));
        assert!(matches!(
            p(&"9".repeat(40)),
            Err(ParseRatioError::TooLarge(_))
        ));
    }

    #[test]
    fn arithmetic_overflow_is_reported() {
        let big = Ratio::from_integer(i128::MAX);
        assert_eq!(big.checked_add(Ratio::from_integer(1)), None);
        assert_eq!(big.checked_mul(Ratio::from_integer(2)), None);
        assert_eq!(r(1, 3).checked_div(Ratio::ZERO), None);
        assert_eq!(big.checked_sub(big), Some(Ratio::ZERO));
    }

    #[test]
    fn comparison_does_not_overflow() {
        let a = r(i128::MAX, i128::MAX - 1); // just above 1
        let b = r(i128::MAX - 1, i128::MAX - 2); // further above 1
        assert!(a < b);
        assert!(Ratio::from_integer(1) < a);
        assert!(r(-i128::MAX, 3) < r(-i128::MAX, 4));
        assert!(r(-1, i128::MAX) < Ratio::ZERO);
    }

    proptest! {
        #[test]
        fn ops_match_integer_cross_multiplication(
            a in -1_000_000i128..1_000_000, b in 1i128..1_000_000,
            c in -1_000_000i128..1_000_000, d in 1i128..1_000_000,
        ) {
            let (x, y) = (r(a, b), r(c, d));
            prop_assert_eq!(x.cmp(&y), (a * d).cmp(&(c * b)));
            prop_assert_eq!(x.checked_add(y), Ratio::new(a * d + c * b, b * d));
            prop_assert_eq!(x.checked_sub(y), Ratio::new(a * d - c * b, b * d));
            prop_assert_eq!(x.checked_mul(y), Ratio::new(a * c, b * d));
            prop_assert_eq!(x.checked_div(y), Ratio::new(a * d, b * c));
            prop_assert_eq!(gcd(x.numer().unsigned_abs(), x.denom() as u128), 1);
        }

        #[test]
        fn parse_decimal_matches_integer_scaling(int in 0u64..1_000_000, frac in 0u32..10_000) {
            let text = format!("{int}.{frac:04}");
            let expected = r(i128::from(int) * 10_000 + i128::from(frac), 10_000);
            prop_assert_eq!(Ratio::parse_decimal(&text), Ok(expected));
            prop_assert_eq!(Ratio::parse_decimal(&format!("-{text}")), Ok(r(-expected.numer(), expected.denom())));
        }
    }
}
