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
use ext_php_rs::builders::{ClassBuilder, FunctionBuilder};
use ext_php_rs::exception::PhpException;
use ext_php_rs::flags::{ClassFlags, DataType, MethodFlags};
use ext_php_rs::prelude::*;
use ext_php_rs::class::RegisteredClass;
use ext_php_rs::ffi::{zend_execute_data, zval};
use ext_php_rs::boxed::ZBox;
use ext_php_rs::types::{ZendClassObject, ZendHashTable, ZendStr, Zval};
use ext_php_rs::zend::{ExecuteData, ce};

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
        let source = match snapshotPath {
            Some(path) => registry::source_for(path.as_bytes()),
            None => registry::default_source(),
        };
        watch::ensure_fresh(&source);
        let (version, loaded) = source.current();
        RegionRouter { source, loaded, version }
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
        Ok(Ok(())) => {}
        Ok(Err(error)) => error.throw(),
        Err(_) => {
            let _ = PhpException::from_message("RegionRouter: internal error while constructing".into())
                .throw();
        }
    }
}

/// An argument error, thrown as PHP's own argument handling would throw it.
enum CallError {
    Count(String),
    Type(String),
}

impl CallError {
    fn throw(self) {
        let (message, class) = match self {
            CallError::Count(message) => (message, ce::argument_count_error()),
            CallError::Type(message) => (message, ce::type_error()),
        };
        let _ = PhpException::new(message, 0, class).throw();
    }
}

fn construct_call(ex: &mut ExecuteData) -> Result<(), CallError> {
    // SAFETY: `This.u2.num_args` is the argument count the engine set for this frame.
    let num_args = unsafe { ex.This.u2.num_args } as usize;
    if num_args > 1 {
        return Err(CallError::Count(format!(
            "RegionRouter::__construct() expects at most 1 argument, {num_args} given"
        )));
    }
    let path = if num_args == 1 {
        // SAFETY: the engine guarantees `num_args` arguments in the frame.
        match unsafe { ex.zend_call_arg(0) } {
            Some(z) if z.dereference().is_null() => None,
            Some(z) => Some(string_arg(z).ok_or_else(|| {
                CallError::Type(format!(
                    "RegionRouter::__construct(): Argument #1 ($snapshotPath) must be of type ?string, {} given",
                    type_name(z)
                ))
            })?),
            None => None,
        }
    } else {
        None
    };
    let source = match path {
        Some(path) => registry::source_for(path),
        None => registry::default_source(),
    };
    watch::ensure_fresh(&source);
    let (version, loaded) = source.current();
    let Some(object) = ex.get_self() else {
        return Err(CallError::Type("RegionRouter::__construct() called without an object".into()));
    };
    let metadata = <RegionRouter as RegisteredClass>::get_metadata();
    // Only objects made by this class's create_object handler have the Rust payload.
    if !std::ptr::eq(object.handlers, metadata.handlers()) {
        return Err(CallError::Type("RegionRouter::__construct() called on a foreign object".into()));
    }
    let offset = std::mem::offset_of!(ZendClassObject<RegionRouter>, std);
    // SAFETY: the handlers check above proves `object` is the `std` field of a
    // ZendClassObject<RegionRouter>, which sits `offset` bytes into it.
    let this = unsafe {
        &mut *std::ptr::from_mut(object)
            .cast::<u8>()
            .sub(offset)
            .cast::<ZendClassObject<RegionRouter>>()
    };
    this.obj = Some(RegionRouter { source, loaded, version });
    Ok(())
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
        Ok(Err(error)) => error.throw(),
        Err(_) => {
            // A bug in the router must not take the worker down: answer fail-open.
            values::set_route(retval, &ini_fallback().0, &ini_fallback().1);
        }
    }
}

fn ini_fallback() -> &'static (String, String) {
    crate::ini::fallback()
}

fn resolve_call(ex: &mut ExecuteData, retval: &mut Zval) -> Result<(), CallError> {
    // SAFETY: `This.u2.num_args` is the argument count the engine set for this frame.
    let num_args = unsafe { ex.This.u2.num_args } as usize;
    if !(1..=2).contains(&num_args) {
        let expectation = if num_args == 0 { "at least 1 argument" } else { "at most 2 arguments" };
        return Err(CallError::Count(format!(
            "RegionRouter::resolve() expects {expectation}, {num_args} given"
        )));
    }
    // SAFETY: the engine guarantees `num_args` arguments in the frame.
    let country = unsafe { ex.zend_call_arg(0) };
    let strict = caller_is_strict(ex);
    let Some(country) = country.as_deref().and_then(|z| string_arg_coerced(z, strict)) else {
        return Err(CallError::Type(format!(
            "RegionRouter::resolve(): Argument #1 ($country) must be of type string, {} given",
            country.as_deref().map_or("nothing", type_name)
        )));
    };
    let sticky_key = if num_args == 2 {
        // SAFETY: as above.
        match unsafe { ex.zend_call_arg(1) } {
            Some(z) if z.dereference().is_null() => None,
            Some(z) => Some(string_arg_coerced(z, strict).ok_or_else(|| {
                CallError::Type(format!(
                    "RegionRouter::resolve(): Argument #2 ($stickyKey) must be of type ?string, {} given",
                    type_name(z)
                ))
            })?),
            None => None,
        }
    } else {
        None
    };
    let uninitialised =
        || CallError::Type("RegionRouter::resolve() called on an uninitialised RegionRouter".into());
    let this = ex.get_object::<RegionRouter>().ok_or_else(uninitialised)?;
    let router = this.obj.as_mut().ok_or_else(uninitialised)?;
    watch::ensure_fresh(&router.source);
    if router.source.version() != router.version {
        (router.version, router.loaded) = router.source.current();
    }
    let loaded = &router.loaded;
    match loaded.resolve(&country, sticky_key.as_deref()) {
        Some(route) => {
            route_array::set_table_route(retval, loaded, route.region_index, route.origin_index)
        }
        None => route_array::set_fallback_route(retval),
    }
    Ok(())
}

/// PHP's name for a value's type, as its own argument errors print it.
fn type_name(zval: &Zval) -> &'static str {
    use ext_php_rs::flags::DataType as T;
    match zval.dereference().get_type() {
        T::Null => "null",
        T::False | T::True | T::Bool => "bool",
        T::Long => "int",
        T::Double => "float",
        T::String => "string",
        T::Array => "array",
        T::Object(_) => "object",
        T::Resource => "resource",
        _ => "mixed",
    }
}

/// True when the calling code declared `strict_types=1`: then only strings are accepted,
/// as for any internal function.
fn caller_is_strict(ex: &ExecuteData) -> bool {
    const ZEND_ACC_STRICT_TYPES: u32 = 1 << 31;
    // SAFETY: the previous frame and its function, when present, are live for this call.
    unsafe {
        let prev = ex.prev_execute_data;
        if prev.is_null() || (*prev).func.is_null() {
            return false;
        }
        (*(*prev).func).common.fn_flags & ZEND_ACC_STRICT_TYPES != 0
    }
}

/// A string argument; in coercive mode an int, float or bool is converted as PHP would.
fn string_arg_coerced(zval: &Zval, strict: bool) -> Option<std::borrow::Cow<'_, [u8]>> {
    if let Some(bytes) = string_arg(zval) {
        return Some(std::borrow::Cow::Borrowed(bytes));
    }
    let value = zval.dereference();
    if strict || !(value.is_long() || value.is_double() || value.is_bool()) {
        return None;
    }
    Some(std::borrow::Cow::Owned(php_string_of(value)))
}

unsafe extern "C" {
    fn zval_get_string_func(value: *mut zval) -> *mut ext_php_rs::ffi::zend_string;
}

/// The engine's own string conversion (so a float prints as PHP prints it).
fn php_string_of(value: &Zval) -> Vec<u8> {
    // SAFETY: `value` is a live scalar zval; the engine returns a new string reference,
    // which is copied and then released.
    unsafe {
        let converted = zval_get_string_func(std::ptr::from_ref(value).cast_mut());
        if converted.is_null() {
            return Vec::new();
        }
        let bytes = (*converted).as_bytes().to_vec();
        ext_php_rs::ffi::ext_php_rs_zend_string_release(converted);
        bytes
    }
}

fn string_arg(zval: &Zval) -> Option<&[u8]> {
    zval.dereference().zend_str().map(ZendStr::as_bytes)
}
