//! A new writing command whose request states neither its prediction inputs nor why it
//! is exempt: the write path's gate does not take it.

use dw_ctl_plan::guard::stated;

struct DecommissionArgs {
    origin: String,
}

fn main() {
    let args = DecommissionArgs {
        origin: "fra-old".into(),
    };
    let _guard = stated(&args);
    println!("{}", args.origin);
}
