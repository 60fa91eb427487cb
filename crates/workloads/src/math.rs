//! Small `f64` math for `no_std`: `core` has no `ln`, `exp`, `powf` or
//! `sqrt` without `std`, and the samplers need them (only at setup time,
//! never per access). Accuracy is a few ulps, checked against `std` in tests.

/// High part of ln 2 with trailing zero bits, so `k * LN2_HI` is exact
/// (fdlibm's split).
const LN2_HI: f64 = f64::from_bits(0x3fe6_2e42_fee0_0000);
/// ln 2 − `LN2_HI`.
const LN2_LO: f64 = f64::from_bits(0x3dea_39ef_3579_3c76);
const LOG2_E: f64 = core::f64::consts::LOG2_E;
const SQRT_2: f64 = core::f64::consts::SQRT_2;
/// 2^54, used to scale subnormals into the normal range.
const TWO_54: f64 = 18_014_398_509_481_984.0;
const MANTISSA_MASK: u64 = (1 << 52) - 1;
const EXP_BIAS: i64 = 1023;

/// Natural logarithm. `NaN` for negative inputs, `-inf` for zero.
pub fn ln(x: f64) -> f64 {
    if x.is_nan() || x < 0.0 {
        return f64::NAN;
    }
    if x == 0.0 {
        return f64::NEG_INFINITY;
    }
    if x == f64::INFINITY {
        return x;
    }
    let (mut bits, mut e) = (x.to_bits(), 0i64);
    if bits >> 52 == 0 {
        bits = (x * TWO_54).to_bits();
        e = -54;
    }
    e += ((bits >> 52) & 0x7ff) as i64 - EXP_BIAS;
    let mut m = f64::from_bits((bits & MANTISSA_MASK) | ((EXP_BIAS as u64) << 52));
    if m > SQRT_2 {
        m *= 0.5;
        e += 1;
    }
    // ln m = 2 atanh(s) with s = (m-1)/(m+1), |s| <= 0.1716.
    let s = (m - 1.0) / (m + 1.0);
    let s2 = s * s;
    let mut series = 0.0;
    for k in (1..=11).rev() {
        series = series * s2 + 1.0 / f64::from(2 * k + 1);
    }
    let ln_m = 2.0 * s + 2.0 * s * s2 * series;
    let ef = e as f64;
    ef * LN2_HI + (ln_m + ef * LN2_LO)
}

/// e^x.
pub fn exp(x: f64) -> f64 {
    if x.is_nan() {
        return x;
    }
    if x > 709.782_712_893_384 {
        return f64::INFINITY;
    }
    if x < -745.133_219_101_941_2 {
        return 0.0;
    }
    let k = round_to_i64(x * LOG2_E);
    let kf = k as f64;
    let r = (x - kf * LN2_HI) - kf * LN2_LO;
    // |r| <= ln2/2: Taylor series to r^13 is below half an ulp.
    let mut p = 1.0;
    for n in (1..=13).rev() {
        p = 1.0 + p * r / f64::from(n);
    }
    scale_by_pow2(p, k)
}

/// e^x − 1, accurate near zero.
pub fn exp_m1(x: f64) -> f64 {
    if abs(x) >= 0.5 {
        return exp(x) - 1.0;
    }
    // x (1 + x/2 (1 + x/3 (1 + ...))) to x^18.
    let mut p = 1.0;
    for n in (2..=18).rev() {
        p = 1.0 + p * x / f64::from(n);
    }
    x * p
}

/// (e^x − 1) / x, with its limit 1 at x = 0.
pub fn exp_m1_over_x(x: f64) -> f64 {
    if x == 0.0 { 1.0 } else { exp_m1(x) / x }
}

/// x^y for x ≥ 0 (`NaN` for negative x, which no caller needs).
pub fn powf(x: f64, y: f64) -> f64 {
    if y == 0.0 {
        return 1.0;
    }
    if x == 0.0 {
        return if y > 0.0 { 0.0 } else { f64::INFINITY };
    }
    exp(y * ln(x))
}

/// Square root (Newton's method from an exponent-halving guess).
pub fn sqrt(x: f64) -> f64 {
    if x.is_nan() || x < 0.0 {
        return f64::NAN;
    }
    if x == 0.0 || x == f64::INFINITY {
        return x;
    }
    if x.to_bits() >> 52 == 0 {
        // Subnormal: sqrt(x * 2^54) / 2^27.
        return sqrt(x * TWO_54) / 134_217_728.0;
    }
    // Halving the biased exponent gives a guess within a factor of 1.5.
    let mut g = f64::from_bits((x.to_bits() >> 1) + 0x1ff8_0000_0000_0000);
    for _ in 0..6 {
        g = 0.5 * (g + x / g);
    }
    g
}

/// |x|.
pub fn abs(x: f64) -> f64 {
    f64::from_bits(x.to_bits() & !(1 << 63))
}

/// Rounds half away from zero; saturates at the `i64` range.
pub fn round_to_i64(x: f64) -> i64 {
    if x >= 0.0 {
        (x + 0.5) as i64
    } else {
        (x - 0.5) as i64
    }
}

/// p · 2^k for the range `exp` produces (k in about −1075..=1024).
fn scale_by_pow2(p: f64, k: i64) -> f64 {
    let pow2 = |e: i64| f64::from_bits(((e + EXP_BIAS) as u64) << 52);
    if (-1022..=1023).contains(&k) {
        p * pow2(k)
    } else {
        // Two steps keep each factor a normal number.
        let half = k / 2;
        p * pow2(half) * pow2(k - half)
    }
}

/// Inverse of the standard normal CDF (Acklam's rational approximation,
/// relative error below 1.2e-9) for p in (0, 1).
pub fn normal_quantile(p: f64) -> f64 {
    const A: [f64; 6] = [
        -3.969_683_028_665_376e1,
        2.209_460_984_245_205e2,
        -2.759_285_104_469_687e2,
        1.383_577_518_672_69e2,
        -3.066_479_806_614_716e1,
        2.506_628_277_459_239,
    ];
    const B: [f64; 5] = [
        -5.447_609_879_822_406e1,
        1.615_858_368_580_409e2,
        -1.556_989_798_598_866e2,
        6.680_131_188_771_972e1,
        -1.328_068_155_288_572e1,
    ];
    const C: [f64; 6] = [
        -7.784_894_002_430_293e-3,
        -3.223_964_580_411_365e-1,
        -2.400_758_277_161_838,
        -2.549_732_539_343_734,
        4.374_664_141_464_968,
        2.938_163_982_698_783,
    ];
    const D: [f64; 4] = [
        7.784_695_709_041_462e-3,
        3.224_671_290_700_398e-1,
        2.445_134_137_142_996,
        3.754_408_661_907_416,
    ];
    const P_LOW: f64 = 0.024_25;
    let tail = |q: f64| {
        let num = ((((C[0] * q + C[1]) * q + C[2]) * q + C[3]) * q + C[4]) * q + C[5];
        let den = (((D[0] * q + D[1]) * q + D[2]) * q + D[3]) * q + 1.0;
        num / den
    };
    if p <= 0.0 {
        f64::NEG_INFINITY
    } else if p >= 1.0 {
        f64::INFINITY
    } else if p < P_LOW {
        tail(sqrt(-2.0 * ln(p)))
    } else if p > 1.0 - P_LOW {
        -tail(sqrt(-2.0 * ln(1.0 - p)))
    } else {
        let q = p - 0.5;
        let r = q * q;
        let num = (((((A[0] * r + A[1]) * r + A[2]) * r + A[3]) * r + A[4]) * r + A[5]) * q;
        let den = ((((B[0] * r + B[1]) * r + B[2]) * r + B[3]) * r + B[4]) * r + 1.0;
        num / den
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rel_err(got: f64, want: f64) -> f64 {
        if want == 0.0 {
            got.abs()
        } else {
            ((got - want) / want).abs()
        }
    }

    /// Inputs spread over many binades, including subnormals and huge values.
    fn samples() -> Vec<f64> {
        let mut v = vec![
            f64::MIN_POSITIVE,
            5e-324,
            1e-310,
            1e-300,
            1e-20,
            0.1,
            0.5,
            0.999_999,
            1.0,
            1.000_001,
            core::f64::consts::E,
            10.0,
            1e10,
            1e300,
            f64::MAX,
        ];
        let mut x = 1e-12;
        while x < 1e12 {
            v.push(x);
            x *= 1.37;
        }
        v
    }

    #[test]
    fn ln_matches_std() {
        for x in samples() {
            let (got, want) = (ln(x), x.ln());
            let tol = if want.abs() < 1e-3 { 1e-12 } else { 4e-16 };
            assert!(rel_err(got, want) <= tol, "ln({x}) = {got}, want {want}");
        }
        assert!(ln(-1.0).is_nan());
        assert_eq!(ln(0.0), f64::NEG_INFINITY);
        assert_eq!(ln(1.0), 0.0);
    }

    #[test]
    fn exp_matches_std() {
        let mut x = -745.0;
        while x < 709.7 {
            let (got, want) = (exp(x), x.exp());
            let tol = if x < -708.0 { 1e-5 } else { 1e-15 };
            assert!(rel_err(got, want) <= tol, "exp({x}) = {got}, want {want}");
            x += 0.731;
        }
        assert_eq!(exp(0.0), 1.0);
        assert_eq!(exp(1000.0), f64::INFINITY);
        assert_eq!(exp(-1000.0), 0.0);
        assert!(exp(f64::NAN).is_nan());
    }

    #[test]
    fn exp_m1_matches_std() {
        for x in [
            -3.0, -0.49, -1e-5, -1e-300, 0.0, 1e-12, 1e-6, 0.01, 0.3, 0.49, 0.5, 2.0,
        ] {
            let (got, want) = (exp_m1(x), x.exp_m1());
            assert!(
                rel_err(got, want) <= 1e-15,
                "exp_m1({x}) = {got}, want {want}"
            );
        }
        assert_eq!(exp_m1_over_x(0.0), 1.0);
        assert!(rel_err(exp_m1_over_x(1e-3), (1e-3f64).exp_m1() / 1e-3) < 1e-15);
    }

    #[test]
    fn powf_matches_std() {
        for x in samples().into_iter().filter(|&x| x > 1e-300 && x < 1e300) {
            for y in [-2.5, -0.99, -0.01, 0.01, 0.5, 0.99, 1.0, 1.2, 3.0] {
                let (got, want) = (powf(x, y), x.powf(y));
                if want.is_finite() && want > 1e-300 {
                    // Error grows with |y ln x|, as in any exp(y ln x).
                    let tol = 2e-16 * (1.0 + (y * x.ln()).abs()) + 2e-16;
                    assert!(rel_err(got, want) <= tol, "{x}^{y} = {got}, want {want}");
                }
            }
        }
        assert_eq!(powf(0.0, 2.0), 0.0);
        assert_eq!(powf(0.0, -1.0), f64::INFINITY);
        assert_eq!(powf(7.0, 0.0), 1.0);
    }

    #[test]
    fn sqrt_matches_std() {
        for x in samples() {
            let (got, want) = (sqrt(x), x.sqrt());
            assert!(
                rel_err(got, want) <= 2.3e-16,
                "sqrt({x}) = {got}, want {want}"
            );
        }
        assert_eq!(sqrt(0.0), 0.0);
        assert!(sqrt(-1.0).is_nan());
        assert_eq!(sqrt(4.0), 2.0);
    }

    #[test]
    fn rounding_and_abs() {
        assert_eq!(round_to_i64(2.5), 3);
        assert_eq!(round_to_i64(-2.5), -3);
        assert_eq!(round_to_i64(2.49), 2);
        assert_eq!(abs(-3.5), 3.5);
        assert_eq!(abs(3.5), 3.5);
    }

    #[test]
    fn normal_quantile_known_values() {
        let cases = [
            (0.5, 0.0),
            (0.975, 1.959_963_984_540_054),
            (0.025, -1.959_963_984_540_054),
            (0.841_344_746_068_542_9, 1.0),
            (0.001, -3.090_232_306_167_813_5),
            (0.999_9, 3.719_016_485_455_709),
            (0.1, -1.281_551_565_544_600_4),
        ];
        for (p, want) in cases {
            let got = normal_quantile(p);
            assert!(
                (got - want).abs() < 1e-8,
                "quantile({p}) = {got}, want {want}"
            );
        }
        assert_eq!(normal_quantile(0.0), f64::NEG_INFINITY);
        assert_eq!(normal_quantile(1.0), f64::INFINITY);
    }
}
