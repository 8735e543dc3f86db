//! The PHP class `RegionRouter`.
//!
//! `resolve()` is the hot path and is written as a raw handler: it reads its arguments
//! straight from the call frame (no argument vector, no UTF-8 check: a country is any
//! byte string) and returns a route array. The other methods are cold and use the macros.

// The constructor's PHP parameter is `$snapshotPath`, and the macro takes the PHP name
// from the Rust binding.
#![allow(non_snake_case)]

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;

use ext_php_rs::args::Arg;
use ext_php_rs::boxed::ZBox;
use ext_php_rs::builders::{ClassBuilder, FunctionBuilder};
use ext_php_rs::class::RegisteredClass;
use ext_php_rs::exception::PhpException;
use ext_php_rs::ffi::{zend_execute_data, zend_string, zval};
use ext_php_rs::flags::{ClassFlags, DataType, MethodFlags};
use ext_php_rs::prelude::*;
use ext_php_rs::types::{ZendClassObject, ZendHashTable, ZendStr, Zval};
use ext_php_rs::zend::{ExecuteData, ExecutorGlobals, ce};

use crate::registry;
use crate::route_array;
use crate::source::{Loaded, Source};
use crate::values;
use crate::watch;

/// Routes a visitor's country to a catalog shard and an upstream origin, from the
/// snapshot that dw-agent keeps current.
#[php_class]
#[php(name = "RegionRouter", modifier = add_resolve, flags = ClassFlags::Final)]
pub struct RegionRouter {
    source: Arc<Source>,
    /// The table this object answers from, and the source version it was taken at.
    loaded: Arc<Loaded>,
    version: u64,
}

#[php_impl]
#[allow(non_snake_case)]
impl RegionRouter {
    /// Opens the router for a snapshot file (default: ini `dw_router.snapshot_path`).
    /// Cheap: every router for a path shares one process-wide table.
    // The PHP parameter is `$snapshotPath`; the macro takes the name from the binding.
    #[php(defaults(snapshotPath = None))]
    pub fn __construct(snapshotPath: Option<String>) -> Self {
        RegionRouter::open(snapshotPath.as_deref().map(str::as_bytes))
    }

    /// The etcd revision of the table in use; 0 when none was loaded.
    pub fn revision(&self) -> i64 {
        watch::ensure_fresh(&self.source);
        i64::try_from(self.source.table().revision()).unwrap_or(i64::MAX)
    }

    /// The parsed `policy/global` object, unknown fields included; [] when absent.
    pub fn policy(&self) -> ZBox<ZendHashTable> {
        watch::ensure_fresh(&self.source);
        values::policy_array(self.source.table().policy())
    }

    /// Counters and state of this router's source.
    pub fn stats(&self) -> ZBox<ZendHashTable> {
        watch::ensure_fresh(&self.source);
        values::stats_to_array(&self.source)
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

/// Swaps the macro-generated constructor's handler for `construct_handler`, which does
/// the same with no argument vector, no string copy and no setjmp: `new RegionRouter()`
/// runs on every request. Runs once per process, at the first RINIT (the class is not
/// registered yet when MINIT's user callback runs).
pub fn install_fast_constructor() {
    let ce = <RegionRouter as RegisteredClass>::get_metadata().ce();
    let ce = std::ptr::from_ref(ce).cast_mut();
    // SAFETY: the class entry is ours and registered; its constructor is the internal
    // function the macros built, whose handler we replace before any request runs.
    unsafe {
        let constructor = (*ce).constructor;
        if !constructor.is_null() {
            (*constructor).internal_function.handler = Some(construct_handler);
        }
    }
}

/// `RegionRouter::__construct(?string $snapshotPath = null)`
unsafe extern "C" fn construct_handler(ex: *mut zend_execute_data, _retval: *mut zval) {
    // SAFETY: the engine passes a valid frame for this call.
    let Some(ex) = (unsafe { ex.as_mut() }) else {
        return;
    };
    let outcome = catch_unwind(AssertUnwindSafe(|| construct_call(ex)));
    match outcome {
        Ok(_) => {}
        Err(_) => {
            PhpException::from_message("RegionRouter: internal error while constructing".into())
                .throw();
        }
    }
}

fn construct_call(ex: &mut ExecuteData) -> Result<(), Thrown> {
    let num_args = check_arg_count(ex, 0, 1)?;
    // SAFETY: the engine guarantees `num_args` arguments in the frame.
    let arg = if num_args == 1 {
        unsafe { ex.zend_call_arg(0) }
    } else {
        None
    };
    let path = string_param(arg, 1, true)?;
    let router = RegionRouter::open(path);
    let metadata = <RegionRouter as RegisteredClass>::get_metadata();
    // Only objects made by this class's create_object handler have the Rust payload.
    let object = ex
        .get_self()
        .filter(|object| std::ptr::eq(object.handlers, metadata.handlers()))
        .ok_or_else(|| throw_error("RegionRouter::__construct() called on a foreign object"))?;
    let offset = std::mem::offset_of!(ZendClassObject<RegionRouter>, std);
    // SAFETY: the handlers check above proves `object` is the `std` field of a
    // ZendClassObject<RegionRouter>, which sits `offset` bytes into it.
    let this = unsafe {
        &mut *std::ptr::from_mut(object)
            .cast::<u8>()
            .sub(offset)
            .cast::<ZendClassObject<RegionRouter>>()
    };
    this.obj = Some(router);
    Ok(())
}

impl RegionRouter {
    /// The router for `path` (None: ini `dw_router.snapshot_path`), its source fresh.
    fn open(path: Option<&[u8]>) -> RegionRouter {
        let source = match path {
            Some(path) => registry::source_for(path),
            None => registry::default_source(),
        };
        watch::ensure_fresh(&source);
        let (version, loaded) = source.current();
        RegionRouter {
            source,
            loaded,
            version,
        }
    }
}

fn add_resolve(builder: ClassBuilder) -> ClassBuilder {
    let resolve = FunctionBuilder::new("resolve", resolve_handler)
        .arg(Arg::new("country", DataType::String))
        .arg(
            Arg::new("stickyKey", DataType::String)
                .allow_null()
                .default("null"),
        )
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
        Ok(_) => {}
        Err(_) => {
            // A bug in the router must not take the worker down: answer fail-open.
            values::set_route(retval, &ini_fallback().0, &ini_fallback().1);
        }
    }
}

fn throw_error(message: &str) -> Thrown {
    PhpException::new(message.into(), 0, ce::error()).throw();
    Thrown
}

fn ini_fallback() -> &'static (String, String) {
    crate::ini::fallback()
}

fn resolve_call(ex: &mut ExecuteData, retval: &mut Zval) -> Result<(), Thrown> {
    let num_args = check_arg_count(ex, 1, 2)?;
    // SAFETY: the engine guarantees `num_args` arguments in the frame.
    let (country_arg, sticky_arg) = unsafe {
        (
            ex.zend_call_arg(0),
            if num_args == 2 {
                ex.zend_call_arg(1)
            } else {
                None
            },
        )
    };
    let country = string_param(country_arg, 1, false)?.unwrap_or_default();
    let sticky_key = string_param(sticky_arg, 2, true)?;
    let uninitialised =
        || throw_error("RegionRouter::resolve() called on an uninitialised RegionRouter");
    let this = ex.get_object::<RegionRouter>().ok_or_else(uninitialised)?;
    let router = this.obj.as_mut().ok_or_else(uninitialised)?;
    watch::ensure_fresh(&router.source);
    if router.source.version() != router.version {
        (router.version, router.loaded) = router.source.current();
    }
    let loaded = &router.loaded;
    match loaded.resolve(country, sticky_key) {
        Some(route) => {
            route_array::set_table_route(retval, loaded, route.region_index, route.origin_index)
        }
        None => route_array::set_fallback_route(retval),
    }
    Ok(())
}

unsafe extern "C" {
    fn zend_parse_arg_str_slow(arg: *mut zval, dest: *mut *mut zend_string, arg_num: u32) -> bool;
    fn zend_wrong_parameter_type_error(num: u32, expected_type: u32, arg: *mut zval);
    fn zend_wrong_parameters_count_error(min_num_args: u32, max_num_args: u32);
}

// zend_expected_type (Zend/zend_API.h, Z_EXPECTED_TYPES).
const Z_EXPECTED_STRING: u32 = 4;
const Z_EXPECTED_STRING_OR_NULL: u32 = 5;

/// The engine has thrown (an argument error, or a deprecation turned into an exception).
struct Thrown;

/// Checks the argument count as ZEND_PARSE_PARAMETERS would, with the engine's message.
fn check_arg_count(ex: &ExecuteData, min: u32, max: u32) -> Result<u32, Thrown> {
    // SAFETY: `This.u2.num_args` is the argument count the engine set for this frame.
    let num_args = unsafe { ex.This.u2.num_args };
    if num_args < min || num_args > max {
        // SAFETY: called from the internal function whose frame is current.
        unsafe { zend_wrong_parameters_count_error(min, max) };
        return Err(Thrown);
    }
    Ok(num_args)
}

/// A `string` (or `?string`) parameter, parsed by the engine's own rules: strings as
/// they are; in coercive mode ints, floats, bools, Stringable objects (and null, with
/// PHP's deprecation) converted; under strict_types only strings. Any byte string is
/// fine: no UTF-8 check. `Ok(None)` is a null for a nullable parameter.
fn string_param(
    arg: Option<&mut Zval>,
    number: u32,
    nullable: bool,
) -> Result<Option<&[u8]>, Thrown> {
    let Some(arg) = arg else {
        return Ok(None);
    };
    if arg.is_string() {
        return Ok(arg.zend_str().map(ZendStr::as_bytes));
    }
    if nullable && arg.is_null() {
        return Ok(None);
    }
    let mut dest: *mut zend_string = std::ptr::null_mut();
    let arg_ptr: *mut zval = std::ptr::from_mut(arg);
    // SAFETY: `arg` is a live argument slot of the current frame; the engine may convert it
    // in place, and `dest` then points at a string owned by that slot for the call.
    unsafe {
        if zend_parse_arg_str_slow(arg_ptr, &mut dest, number) && !dest.is_null() {
            return Ok(Some((*dest).as_bytes()));
        }
        if !ExecutorGlobals::has_exception() {
            let expected = if nullable {
                Z_EXPECTED_STRING_OR_NULL
            } else {
                Z_EXPECTED_STRING
            };
            zend_wrong_parameter_type_error(number, expected, arg_ptr);
        }
    }
    Err(Thrown)
}
