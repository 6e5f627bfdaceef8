//! An experiment's configuration as the store keeps it (`experiments.config`), typed like a
//! run's [`RunConfig`]: every kind's keys are one struct's fields, declared beside its loop
//! ([`SweepConfig`], [`TuneConfig`], [`AbConfig`], [`ColocateConfig`], [`RepeatConfig`]), which
//! writes what it asked for through serde rather than a `json!` around its parts; a reader
//! gets the same types back through [`ExperimentConfig`]. The JSON is the shape the loops have always stored (the keys of each kind, a
//! `null` where an option was not given), so older stores read as before.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::ab::AbConfig;
use crate::colocate::ColocateConfig;
use crate::repeat::RepeatConfig;
use crate::sweep::SweepConfig;
use crate::tune::TuneConfig;
use measurement::RunConfig;

/// One experiment's configuration; which kind it is, the store's `kind` column says (a
/// sweep's configuration also serves `demo` and `find-max`).
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(untagged)]
pub enum ExperimentConfig {
    Sweep(SweepConfig),
    Tune(TuneConfig),
    Ab(AbConfig),
    /// Boxed: two sides of run options are twice any other kind.
    Colocate(Box<ColocateConfig>),
    Repeat(RepeatConfig),
}

impl ExperimentConfig {
    /// The JSON object the store keeps.
    pub fn to_json(&self) -> Value {
        measurement::run_config::stored(self)
    }

    /// A stored configuration read back, when it has one of the shapes above (older stores'
    /// experiments are read leniently through [`RunConfig::of`] instead).
    pub fn of(v: &Value) -> Option<ExperimentConfig> {
        serde_json::from_value(v.clone()).ok()
    }

    /// The options every run of the experiment shares (a colocation's first side's).
    pub fn run(&self) -> &RunConfig {
        match self {
            ExperimentConfig::Sweep(c) => &c.run,
            ExperimentConfig::Tune(c) => &c.run,
            ExperimentConfig::Ab(c) => &c.run,
            ExperimentConfig::Colocate(c) => &c.a.run,
            ExperimentConfig::Repeat(c) => &c.run,
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::colocate::ColocateSide;
    use crate::knob::Axis;
    use crate::slo::Slo;
    use crate::tune::TuneStepKind;
    use measurement::load_spec::Load;

    fn run_config() -> RunConfig {
        RunConfig {
            label: Some("nightly".into()),
            rate_rps: Some(4000.0),
            connections: Some(4),
            ..RunConfig::default()
        }
    }

    /// The typed configurations write exactly the JSON the loops wrote with `json!`, and
    /// read back to the same JSON.
    #[test]
    fn each_kind_keeps_its_stored_shape_and_reads_back() {
        let run = run_config();
        let slo = Slo::parse("p99<=1ms", measurement::ViewChoice::Auto).unwrap();
        let loads = vec![Load::Rps(1000.0), Load::OfCapacity(0.5)];
        let cases = [
            (
                ExperimentConfig::Sweep(SweepConfig {
                    axes: Vec::new(),
                    loads: loads.clone(),
                    repeat: 2,
                    slo: Some(slo.clone()),
                    find_max: false,
                    max_steps: 8,
                    run: run.clone(),
                    label: run.label.clone(),
                }),
                json!({
                    "axes": Vec::<Axis>::new(), "loads": loads, "repeat": 2,
                    "slo": Some(&slo), "find_max": false, "max_steps": 8,
                    "run": run, "label": run.label,
                }),
            ),
            (
                ExperimentConfig::Tune(TuneConfig {
                    steps: vec![TuneStepKind::Rt],
                    load: Load::OfCapacity(0.8),
                    slo: None,
                    run: run.clone(),
                }),
                json!({"steps": [TuneStepKind::Rt], "load": Load::OfCapacity(0.8), "slo": null,
                       "run": run}),
            ),
            (
                ExperimentConfig::Ab(AbConfig {
                    baseline: "nullrpc://".into(),
                    candidate: "nullrpc:// --server-work det:60us".into(),
                    run: run.clone(),
                    slice: "1s".into(),
                    settle: "100ms".into(),
                    gap: "50ms".into(),
                    pairs: 20,
                    until_decided: None,
                    tolerance: 0.1,
                    label: None,
                }),
                json!({"baseline": "nullrpc://", "candidate": "nullrpc:// --server-work det:60us",
                       "run": run, "slice": "1s", "settle": "100ms", "gap": "50ms", "pairs": 20,
                       "until_decided": null, "tolerance": 0.1, "label": null}),
            ),
            (
                ExperimentConfig::Colocate(Box::new(ColocateConfig {
                    a: ColocateSide {
                        loads: loads.clone(),
                        slo: None,
                        run: run.clone(),
                    },
                    b: ColocateSide {
                        loads: loads.clone(),
                        slo: Some(slo.clone()),
                        run: RunConfig::default(),
                    },
                })),
                json!({"a": {"loads": loads, "slo": null, "run": run},
                       "b": {"loads": loads, "slo": slo, "run": RunConfig::default()}}),
            ),
            (
                ExperimentConfig::Repeat(RepeatConfig {
                    repeat: 3,
                    run: run.clone(),
                    label: run.label.clone(),
                }),
                json!({"repeat": 3, "run": run, "label": "nightly"}),
            ),
        ];
        for (typed, written) in cases {
            assert_eq!(typed.to_json(), written, "{typed:?}");
            let back = ExperimentConfig::of(&written).expect("reads back");
            assert_eq!(back.to_json(), written);
            assert_eq!(
                std::mem::discriminant(&back),
                std::mem::discriminant(&typed)
            );
            assert_eq!(back.run(), typed.run());
        }
        assert!(ExperimentConfig::of(&json!({"repeat": "three"})).is_none());
    }
}
