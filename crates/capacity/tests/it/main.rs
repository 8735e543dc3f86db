//! dw-capacity's integration tests, one binary (docs/testing.md): plans on small tables,
//! and the predictor against the userland twin as its oracle.

mod buckets;
mod plans;
mod twin_oracle;
