//! dwctl: placeholder until the control-plane issue lands.
