//! dw-agent: placeholder until the agent issue lands.
