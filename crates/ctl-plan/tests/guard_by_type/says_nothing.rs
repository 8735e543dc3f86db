//! A writing request that claims to state its guard but says nothing: the trait's one
//! method has no default.

use dw_ctl_plan::guard::{StatesGuard, stated};

struct DecommissionArgs;

impl StatesGuard for DecommissionArgs {
    type Inputs = ();
}

fn main() {
    let _guard = stated(&DecommissionArgs);
}
