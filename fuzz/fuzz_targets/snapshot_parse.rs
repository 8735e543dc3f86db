//! Feeds arbitrary bytes to the snapshot parser, the value parsers and the resolver.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| dw_routing_fuzz::exercise(data));
