//! The twins that state their guard: one exempt (moves no load), one with its prediction
//! inputs. Both go through the write path's gate.

use dw_ctl_plan::guard::{ExemptReason, Guard, NoLoad, StatesGuard, stated};

/// What dwctl's `PredictInputs` stands for here.
#[derive(Debug, Clone, PartialEq)]
struct Inputs {
    allow_overload: bool,
}

struct DecommissionArgs;

impl StatesGuard for DecommissionArgs {
    type Inputs = Inputs;
    fn guard(&self) -> Guard<Inputs> {
        Guard::Exempt(ExemptReason::MovesNoLoad(NoLoad::Registration))
    }
}

struct MoveLoadArgs {
    allow_overload: bool,
}

impl StatesGuard for MoveLoadArgs {
    type Inputs = Inputs;
    fn guard(&self) -> Guard<Inputs> {
        Guard::Predict(Inputs {
            allow_overload: self.allow_overload,
        })
    }
}

fn main() {
    assert_eq!(
        stated(&DecommissionArgs),
        Guard::Exempt(ExemptReason::MovesNoLoad(NoLoad::Registration))
    );
    let moves = MoveLoadArgs {
        allow_overload: false,
    };
    assert_eq!(
        stated(&moves),
        Guard::Predict(Inputs {
            allow_overload: false
        })
    );
    // A guard value states itself.
    let exempt: Guard<Inputs> = Guard::Exempt(ExemptReason::StageAbort);
    assert_eq!(stated(&exempt), exempt);
}
