//! dw_router: the PHP extension
