//! The exponential variate the simulator draws most, inlined into its loops.

use rand::Rng;
use rand_distr::{Distribution, Exp, Exp1};

/// An exponential distribution of a given mean: the same numbers as `rand_distr::Exp` with
/// rate `1/mean` (its ziggurat sample of [`Exp1`] times `1/λ`, computed as it computes it),
/// drawn inline.
///
/// Why: `Exp::sample` reaches the ziggurat through `Rng::sample`, which the compiler leaves
/// out of line; a call per variate cost a sixth of a simulated request (the generator's state
/// goes to memory and back on every call). [`Exp1`]'s own `sample` is inlined.
#[derive(Clone, Copy, Debug)]
pub(crate) struct InlineExp {
    /// 1/λ exactly as `Exp::new(λ)` stores it.
    scale: f64,
}

impl InlineExp {
    /// Rate `lambda` per ns; `Exp::new`'s checks and error.
    pub(crate) fn new(lambda: f64) -> Result<Self, rand_distr::ExpError> {
        Exp::new(lambda)?;
        Ok(Self {
            scale: 1.0 / lambda,
        })
    }

    #[inline(always)]
    pub(crate) fn sample<R: Rng + ?Sized>(&self, rng: &mut R) -> f64 {
        let x: f64 = Exp1.sample(rng);
        x * self.scale
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand_xoshiro::Xoshiro256PlusPlus;

    #[test]
    fn the_numbers_are_those_of_rand_distr_exp() {
        for mean in [1.0, 50_000.0, 1e9 / 56_000.0, 3.7e-3] {
            let (mut a, mut b) = (
                Xoshiro256PlusPlus::seed_from_u64(11),
                Xoshiro256PlusPlus::seed_from_u64(11),
            );
            let ours = InlineExp::new(1.0 / mean).unwrap();
            let theirs = Exp::new(1.0 / mean).unwrap();
            for _ in 0..200_000 {
                assert_eq!(
                    ours.sample(&mut a).to_bits(),
                    theirs.sample(&mut b).to_bits()
                );
            }
        }
        assert!(InlineExp::new(-1.0).is_err());
        assert!(InlineExp::new(f64::NAN).is_err());
    }
}
