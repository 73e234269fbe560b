//! Mean, sample standard deviation and the Student-t confidence interval of a mean.

use super::{check_no_nan, Interval, Stat};
use statrs::distribution::{ContinuousCDF, StudentsT};

/// Arithmetic mean; undefined for no values or NaN.
pub fn mean(values: &[f64]) -> Stat<f64> {
    if values.is_empty() {
        return Stat::undefined("the mean of no values");
    }
    if let Some(reason) = check_no_nan(values, "values") {
        return Stat::Undefined(reason);
    }
    let n = values.len() as f64;
    let rough = values.iter().sum::<f64>() / n;
    if !rough.is_finite() && values.iter().all(|v| v.is_finite()) {
        // The sum of finite values overflowed (e.g. 1e308 + 1e308): Σ v/n cannot, but for
        // rounding at the very edge (3 x f64::MAX), which the clamp to [min, max] (where
        // every mean lies) takes back.
        let (lo, hi) = values.iter().fold((f64::MAX, f64::MIN), |(lo, hi), &v| (lo.min(v), hi.max(v)));
        return Stat::Defined(values.iter().map(|v| v / n).sum::<f64>().clamp(lo, hi));
    }
    // One correction pass removes most rounding error of the sum (identical values then
    // give exactly that value, and an sd of exactly 0).
    Stat::Defined(rough + values.iter().map(|v| v - rough).sum::<f64>() / n)
}

/// Sample standard deviation (n - 1 denominator); undefined for n < 2 or NaN.
pub fn sd(values: &[f64]) -> Stat<f64> {
    if values.len() < 2 {
        return Stat::undefined(format!("a sample standard deviation needs 2 values, got {}", values.len()));
    }
    mean(values).map(|m| {
        let squares: f64 = values.iter().map(|v| (v - m).powi(2)).sum();
        (squares / (values.len() as f64 - 1.0)).sqrt()
    })
}

/// Two-sided Student-t interval for the mean: mean ± t_{(1+c)/2, n-1} · sd/√n, equal to
/// `scipy.stats.t.interval(confidence, n-1, loc=mean, scale=sem)`. Undefined for n < 2,
/// NaN, or a confidence outside (0, 1). Identical values give a zero-width interval
/// (scipy returns NaN there because its scale must be > 0).
pub fn t_interval(values: &[f64], confidence: f64) -> Stat<Interval> {
    if let Err(reason) = super::bootstrap::check_confidence(confidence) {
        return Stat::Undefined(reason);
    }
    let (m, s) = match (mean(values), sd(values)) {
        (Stat::Defined(m), Stat::Defined(s)) => (m, s),
        (Stat::Undefined(reason), _) | (_, Stat::Undefined(reason)) => return Stat::Undefined(reason),
    };
    let n = values.len() as f64;
    let student = StudentsT::new(0.0, 1.0, n - 1.0).expect("n >= 2");
    let half_width = student_quantile(&student, (1.0 + confidence) / 2.0) * s / n.sqrt();
    Stat::Defined(Interval { lo: m - half_width, hi: m + half_width })
}

/// The p-quantile of a Student t distribution (statrs; agrees with scipy's `t.ppf` to
/// ~1e-12 relative, limited by statrs's incomplete beta function).
fn student_quantile(student: &StudentsT, p: f64) -> f64 {
    student.inverse_cdf(p)
}

#[cfg(test)]
mod tests {
    use super::*;
    use approx::assert_relative_eq;

    // References: numpy 2.4.6 mean / std(ddof=1) and scipy 1.17.1
    // scipy.stats.t.interval(c, n-1, loc=mean, scale=std(ddof=1)/sqrt(n)).
    fn check(values: &[f64], confidence: f64, want: [f64; 4]) {
        assert_relative_eq!(mean(values).unwrap(), want[0], max_relative = 1e-14);
        assert_relative_eq!(sd(values).unwrap(), want[1], max_relative = 1e-14);
        let interval = t_interval(values, confidence).unwrap();
        assert_relative_eq!(interval.lo, want[2], max_relative = 1e-12);
        assert_relative_eq!(interval.hi, want[3], max_relative = 1e-12);
    }

    #[test]
    fn the_mean_of_finite_values_does_not_overflow() {
        // 1e308 + 1e308 overflows to inf; the mean is 1e308 (each value halved, then summed).
        assert_eq!(mean(&[1e308, 1e308]).unwrap(), 1e308);
        assert_eq!(mean(&[f64::MAX, f64::MAX, f64::MAX]).unwrap(), f64::MAX);
        assert_eq!(mean(&[-1e308, -1e308]).unwrap(), -1e308);
    }

    #[test]
    fn intervals_match_scipy() {
        // -> 0.2914285714285714, 0.2226678072397363, (0.0854951966155994, 0.49736194624154345)
        check(
            &[0.2, 0.45, 0.1, 0.6, 0.33, -0.05, 0.41],
            0.95,
            [0.2914285714285714, 0.2226678072397363, 0.0854951966155994, 0.49736194624154345],
        );
        // -> 1.5, 0.7071067811865476, (-4.853102368087347, 7.853102368087347)
        check(&[1.0, 2.0], 0.95, [1.5, std::f64::consts::FRAC_1_SQRT_2, -4.853102368087347, 7.853102368087347]);
        // -> 3.0333333333333337, 0.30550504633038916, (1.2827555392706647, 4.783911127396003)
        check(&[3.1, 2.7, 3.3], 0.99, [3.0333333333333337, 0.30550504633038916, 1.2827555392706647, 4.783911127396003]);
        // [(i*7919) % 1009 / 1009 for i in range(200)], 90%
        // -> 0.5022893954410307, 0.29102034889517425, (0.4682828816138, 0.5362959092682613)
        let values: Vec<f64> = (0..200).map(|i| f64::from((i * 7919) % 1009) / 1009.0).collect();
        check(&values, 0.90, [0.5022893954410307, 0.29102034889517425, 0.4682828816138, 0.5362959092682613]);
    }

    #[test]
    fn student_quantiles_match_scipy() {
        // scipy 1.17.1: scipy.stats.t.ppf(p, df) for p = 0.95, 0.975, 0.995
        let table: [(f64, [f64; 3]); 8] = [
            (1.0, [6.313751514675037, 12.706204736174694, 63.656741162871526]),
            (2.0, [2.9199855803537242, 4.302652729749462, 9.924843200918287]),
            (3.0, [2.3533634348018233, 3.1824463052837078, 5.840909309733355]),
            (5.0, [2.0150483733330233, 2.5705818356363146, 4.032142983555228]),
            (10.0, [1.8124611228116756, 2.228138851986274, 3.16927267261695]),
            (30.0, [1.697260886593957, 2.0422724563012378, 2.7499956535672254]),
            (100.0, [1.6602343260853392, 1.9839715185235518, 2.6258905214380173]),
            (1000.0, [1.6463788172854643, 1.9623390808264083, 2.580754698065951]),
        ];
        for (df, quantiles) in table {
            let student = StudentsT::new(0.0, 1.0, df).unwrap();
            for (p, want) in [0.95, 0.975, 0.995].into_iter().zip(quantiles) {
                assert_relative_eq!(student_quantile(&student, p), want, max_relative = 1e-12);
            }
        }
    }

    #[test]
    fn identical_values_give_a_zero_width_interval() {
        let interval = t_interval(&[0.4, 0.4, 0.4], 0.95).unwrap();
        assert_eq!((interval.lo, interval.hi), (0.4, 0.4));
    }

    #[test]
    fn degenerate_inputs_are_undefined() {
        assert!(!mean(&[]).is_defined());
        assert!(!mean(&[1.0, f64::NAN]).is_defined());
        assert!(!sd(&[1.0]).is_defined());
        assert!(!t_interval(&[1.0], 0.95).is_defined());
        assert!(!t_interval(&[1.0, 2.0], 1.0).is_defined());
        assert!(!t_interval(&[1.0, 2.0], f64::NAN).is_defined());
    }
}
