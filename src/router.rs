//! The PHP class `RegionRouter`.
//!
//! `resolve()` is the hot path and is written as a raw handler: it reads its arguments
//! straight from the call frame (no argument vector, no UTF-8 check: a country is any
//! byte string) and returns a route array. The other methods are cold and use the macros.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;

use ext_php_rs::args::Arg;
use ext_php_rs::builders::{ClassBuilder, FunctionBuilder};
use ext_php_rs::exception::PhpException;
use ext_php_rs::flags::{ClassFlags, DataType, MethodFlags};
use ext_php_rs::prelude::*;
use ext_php_rs::types::{ZendStr, Zval};
use ext_php_rs::zend::{ExecuteData, ce};

use crate::registry;
use crate::source::Source;
use crate::values;
use crate::watch;

/// Routes a visitor's country to a catalog shard and an upstream origin, from the
/// snapshot that dw-agent keeps current.
#[php_class]
#[php(name = "RegionRouter", modifier = add_resolve, flags = ClassFlags::Final)]
pub struct RegionRouter {
    source: Arc<Source>,
}

#[php_impl]
#[allow(non_snake_case)]
impl RegionRouter {
    /// Opens the router for a snapshot file (default: ini `dw_router.snapshot_path`).
    /// Cheap: every router for a path shares one process-wide table.
    // The PHP parameter is `$snapshotPath`; the macro takes the name from the binding.
    #[php(defaults(snapshotPath = None))]
    pub fn __construct(snapshotPath: Option<String>) -> Self {
        let source = match snapshotPath {
            Some(path) => registry::source_for(path.as_bytes()),
            None => registry::default_source(),
        };
        watch::ensure_fresh(&source);
        RegionRouter { source }
    }

    /// The etcd revision of the table in use; 0 when none was loaded.
    pub fn revision(&self) -> i64 {
        watch::ensure_fresh(&self.source);
        i64::try_from(self.source.table().revision()).unwrap_or(i64::MAX)
    }

    /// The parsed `policy/global` object, unknown fields included; [] when absent.
    pub fn policy(&self) -> Zval {
        watch::ensure_fresh(&self.source);
        values::object_to_zval(&self.source.table().policy().raw)
    }

    /// Counters and state of this router's source.
    pub fn stats(&self) -> Zval {
        watch::ensure_fresh(&self.source);
        values::stats_to_zval(&self.source)
    }

    /// Re-checks the snapshot file now; true when the revision in use changed.
    /// Reloads normally happen by themselves, this is for scripts and tests.
    pub fn reload(&self) -> bool {
        watch::ensure_fresh(&self.source);
        let before = self.source.table().revision();
        self.source.refresh();
        self.source.table().revision() != before
    }
}

fn add_resolve(builder: ClassBuilder) -> ClassBuilder {
    let resolve = FunctionBuilder::new("resolve", resolve_handler)
        .arg(Arg::new("country", DataType::String))
        .arg(Arg::new("stickyKey", DataType::String).allow_null().default("null"))
        .not_required()
        .required_args(1)
        .returns(DataType::Array, false, false)
        .docs(&[
            "Resolves a visitor's country to ['shard' => string, 'origin' => string].",
            "Never fails: an unknown country goes through policy.default and",
            "policy.failover, then to the ini fallback route.",
        ]);
    builder.method(resolve, MethodFlags::Public)
}

/// `RegionRouter::resolve(string $country, ?string $stickyKey = null): array`
extern "C" fn resolve_handler(ex: &mut ExecuteData, retval: &mut Zval) {
    let outcome = catch_unwind(AssertUnwindSafe(|| resolve_call(ex, retval)));
    match outcome {
        Ok(Ok(())) => {}
        Ok(Err(message)) => {
            let _ = PhpException::new(message, 0, ce::type_error()).throw();
        }
        Err(_) => {
            // A bug in the router must not take the worker down: answer fail-open.
            values::set_route(retval, &ini_fallback().0, &ini_fallback().1);
        }
    }
}

fn ini_fallback() -> &'static (String, String) {
    crate::ini::fallback()
}

fn resolve_call(ex: &mut ExecuteData, retval: &mut Zval) -> Result<(), String> {
    // SAFETY: `This.u2.num_args` is the argument count the engine set for this frame.
    let num_args = unsafe { ex.This.u2.num_args } as usize;
    if !(1..=2).contains(&num_args) {
        return Err(format!(
            "RegionRouter::resolve() expects 1 or 2 arguments, {num_args} given"
        ));
    }
    // SAFETY: the engine guarantees `num_args` arguments in the frame.
    let country = unsafe { ex.zend_call_arg(0) }.and_then(|z| string_arg(z));
    let Some(country) = country else {
        return Err("RegionRouter::resolve(): Argument #1 ($country) must be of type string".into());
    };
    let sticky_key = if num_args == 2 {
        // SAFETY: as above.
        match unsafe { ex.zend_call_arg(1) } {
            Some(z) if z.dereference().is_null() => None,
            Some(z) => Some(string_arg(z).ok_or(
                "RegionRouter::resolve(): Argument #2 ($stickyKey) must be of type ?string",
            )?),
            None => None,
        }
    } else {
        None
    };
    let Some(this) = ex.get_object::<RegionRouter>() else {
        return Err("RegionRouter::resolve() called on an uninitialised RegionRouter".into());
    };
    let Some(router) = this.obj.as_ref() else {
        return Err("RegionRouter::resolve() called on an uninitialised RegionRouter".into());
    };
    watch::ensure_fresh(&router.source);
    let table = router.source.table();
    match table.resolve(country, sticky_key) {
        Some(route) => values::set_route(retval, route.shard, route.origin),
        None => {
            let (shard, origin) = ini_fallback();
            values::set_route(retval, shard, origin);
        }
    }
    Ok(())
}

fn string_arg(zval: &Zval) -> Option<&[u8]> {
    zval.dereference().zend_str().map(ZendStr::as_bytes)
}
