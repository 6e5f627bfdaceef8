//! `ab`: two configurations compared in interleaved, paired slices (see DESIGN.md,
//! "Comparisons on noisy hosts").

mod compare;
pub mod paired;
mod slices;
mod stored;
pub mod within;

pub use compare::{
    candidate_first, compare, compare_planned, AbConfig, AbOutcome, AbResult, AbSpec, ArmResult,
    ArmSpec, Design, PlannedArm, Switch, AB_METHOD,
};
pub use paired::{AbRow, Arm, CarryOver, Centre, Looks, PairFacts, Paired, SliceFacts};
pub use stored::{check_stored, stored_result};
pub use within::{compare_templates, Gain, TemplateArm};
