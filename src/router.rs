//! The PHP class `RegionRouter`.
//!
//! A front controller runs `(new RegionRouter())->resolve($country)` on every request, so
//! both halves are fast paths:
//!
//! - `new`: the object is made by a lean `create_object`; a bare `new RegionRouter()`
//!   runs no constructor call (`get_constructor` marks the object as a default router and
//!   the engine skips the call), and every default router shares one `Reader` of the
//!   default path, so making one costs no reference count and no table load.
//! - `resolve()` is a raw handler: it reads its arguments straight from the call frame
//!   (no argument vector, no UTF-8 check: a country is any byte string) and answers from
//!   the table's memo of route arrays when there is no sticky key.
//!
//! The other methods are cold and use the macros.
//!
//! Each of these shortcuts reads engine internals, so each is on only when the extension
//! is built against a PHP version they were checked on (`engine::SHORTCUTS`); otherwise
//! ext-php-rs's object handlers and constructor and `resolve()`'s general path run.

// The constructor's PHP parameter is `$snapshotPath`, and the macro takes the PHP name
// from the Rust binding.
#![allow(non_snake_case)]

use std::alloc::Layout;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicPtr, Ordering};
use std::sync::{Arc, OnceLock};

use ext_php_rs::args::Arg;
use ext_php_rs::boxed::ZBox;
use ext_php_rs::builders::{ClassBuilder, FunctionBuilder};
use ext_php_rs::class::RegisteredClass;
use ext_php_rs::exception::PhpException;
use ext_php_rs::ffi::{
    ZEND_ACC_USE_GUARDS, ext_php_rs_executor_globals, ext_php_rs_zend_object_alloc,
    object_properties_init, zend_class_entry, zend_execute_data, zend_function, zend_object,
    zend_object_handlers, zend_object_std_dtor, zend_object_std_init, zend_string, zval,
};
use ext_php_rs::flags::{ClassFlags, DataType, MethodFlags};
use ext_php_rs::prelude::*;
use ext_php_rs::types::{ZendClassObject, ZendHashTable, ZendStr, Zval};
use ext_php_rs::zend::{ExecuteData, ExecutorGlobals, ce};

use parking_lot::Mutex;

use crate::engine::{
    self, IS_NULL, IS_OBJECT, IS_STRING, Z_EXPECTED_STRING, Z_EXPECTED_STRING_OR_NULL,
    ZEND_DO_FCALL, ZEND_INTERNAL_FUNCTION, ZEND_NEW,
};
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
    /// The reader of an explicit path; None for the default path (ini
    /// `dw_router.snapshot_path`), whose routers all share `DEFAULT_READER`.
    reader: Option<Reader>,
    /// The revision of the table this object's last `resolve()` answered from.
    answered: Option<u64>,
}

/// A source and the table last taken from it.
pub(crate) struct Reader {
    source: Arc<Source>,
    /// The table answers come from, and the source version it was taken at.
    loaded: Arc<Loaded>,
    version: u64,
}

/// The reader of the default path that every default router shares: the front
/// controller's `new RegionRouter()` on every request then makes no reference count and
/// takes no table, it only marks the object as a default router. A PHP thread holds it
/// only inside one `resolve()` (never across a call into PHP); in a ZTS build a thread
/// that finds it taken reads with a reader of its own instead of waiting.
pub(crate) static DEFAULT_READER: Mutex<Option<Reader>> = Mutex::new(None);

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
        let source = self.fresh_source();
        i64::try_from(source.table().revision()).unwrap_or(i64::MAX)
    }

    /// The etcd revision of the table this object's last `resolve()` answered from (the
    /// current one before any): what to report beside a route, since a reload may land
    /// between a `resolve()` and a `revision()`.
    #[php(name = "answeredRevision")]
    pub fn answered_revision(&self) -> i64 {
        match self.answered {
            Some(revision) => i64::try_from(revision).unwrap_or(i64::MAX),
            None => self.revision(),
        }
    }

    /// The parsed `policy/global` object, unknown fields included; [] when absent.
    pub fn policy(&self) -> ZBox<ZendHashTable> {
        values::policy_array(self.fresh_source().table().policy())
    }

    /// Counters and state of this router's source.
    pub fn stats(&self) -> ZBox<ZendHashTable> {
        let source = self.fresh_source();
        watch::settle();
        values::stats_to_array(source)
    }

    /// Re-checks the snapshot file now; true when the revision in use changed.
    /// Reloads normally happen by themselves, this is for scripts and tests.
    pub fn reload(&self) -> bool {
        let source = self.fresh_source();
        watch::settle();
        let before = source.table().revision();
        source.refresh();
        source.table().revision() != before
    }
}

/// Makes `new RegionRouter(...)` cheap, as it runs on every request. Runs once per
/// process, at the first RINIT (the class is not registered yet when MINIT's user
/// callback runs), before any RegionRouter object exists.
///
/// - The macro-generated constructor's handler becomes `construct_handler`, which does
///   the same with no argument vector, no string copy and no setjmp.
/// - The objects' `get_constructor` handler becomes `get_constructor`, which lets a bare
///   `new RegionRouter()` skip the constructor call altogether (see there).
/// - The class's `create_object` and the objects' `free_obj` become `create_object` and
///   `free_object`: the same object layout as ext-php-rs's, without its generic lookups.
///
/// On a PHP version the shortcuts were not checked on (`engine::SHORTCUTS` false) it only
/// records the handler table, and ext-php-rs's handlers and constructor stay.
pub fn install_fast_paths() {
    let metadata = <RegionRouter as RegisteredClass>::get_metadata();
    let handlers = std::ptr::from_ref(metadata.handlers()).cast_mut();
    OUR_HANDLERS.store(handlers, Ordering::Relaxed);
    if !engine::SHORTCUTS {
        return;
    }
    let ce = std::ptr::from_ref(metadata.ce()).cast_mut();
    // SAFETY: the class entry is ours and registered; its constructor is the internal
    // function the macros built, whose handler we replace before any request runs.
    unsafe {
        let constructor = (*ce).constructor;
        if !constructor.is_null() {
            (*constructor).internal_function.handler = Some(construct_handler);
        }
    }
    // SAFETY: the handler table is the one ext-php-rs built for this class and gives
    // every RegionRouter object; no object exists yet, and the engine only reads the
    // table through raw pointers. Our create_object and free_obj make and free the same
    // ZendClassObject<RegionRouter> layout as ext-php-rs's, without its generic checks.
    unsafe {
        if let Some(standard) = (*handlers).get_constructor {
            let _ = STANDARD_GET_CONSTRUCTOR.set(standard);
            (*handlers).get_constructor = Some(get_constructor);
        }
        (*handlers).free_obj = Some(free_object);
        (*ce).__bindgen_anon_2.create_object = Some(create_object);
    }
}

/// The class's `create_object`: a ZendClassObject<RegionRouter> with no router yet (the
/// constructor, or `get_constructor` for a bare `new`, gives it one).
unsafe extern "C" fn create_object(ce: *mut zend_class_entry) -> *mut zend_object {
    // SAFETY: `ce` is this class's entry, passed by the engine. The block is sized as
    // zend_object_alloc sizes it (the object, whose `std` ends with one property slot,
    // adjusted to the class's declared properties and guard slot) and allocated with
    // emalloc, which bails out rather than return null for an 8-aligned layout (the
    // zeroing zend_object_alloc also does is left out: `obj` is written as None before
    // anything reads it, and zend_object_std_init initialises `std`).
    unsafe {
        let slots = i64::from((*ce).default_properties_count)
            - i64::from((*ce).ce_flags & ZEND_ACC_USE_GUARDS == 0);
        let size = std::mem::size_of::<ZendClassObject<RegionRouter>>() as i64
            + slots * std::mem::size_of::<zval>() as i64;
        let allocated = usize::try_from(size)
            .ok()
            .and_then(|size| Layout::from_size_align(size, 8).ok())
            .map_or(std::ptr::null_mut(), ext_php_rs::alloc::emalloc);
        let this = if allocated.is_null() {
            ext_php_rs_zend_object_alloc(std::mem::size_of::<ZendClassObject<RegionRouter>>(), ce)
        } else {
            allocated.cast()
        }
        .cast::<ZendClassObject<RegionRouter>>();
        std::ptr::write(&raw mut (*this).obj, None);
        let object = &raw mut (*this).std;
        zend_object_std_init(object, ce);
        object_properties_init(object, ce);
        (*object).handlers = OUR_HANDLERS.load(Ordering::Relaxed);
        object
    }
}

/// The objects' `free_obj`: drops the router (two reference counts at most), then the
/// standard part. A panic in the drop cannot escape into the engine.
unsafe extern "C" fn free_object(object: *mut zend_object) {
    // SAFETY: the engine frees a live object of ours, once; `class_object` checks it is
    // a ZendClassObject<RegionRouter> before its payload is dropped in place.
    unsafe {
        if let Some(this) = object.as_mut().and_then(class_object) {
            let _ = catch_unwind(AssertUnwindSafe(|| {
                std::ptr::drop_in_place(&raw mut this.obj);
            }));
        }
        zend_object_std_dtor(object);
    }
}

/// The handler table of RegionRouter objects (null until the first RINIT, when no object
/// exists yet): an object with this table is a ZendClassObject<RegionRouter>, whether
/// our create_object or ext-php-rs's made it.
static OUR_HANDLERS: AtomicPtr<zend_object_handlers> = AtomicPtr::new(std::ptr::null_mut());

type GetConstructor = unsafe extern "C" fn(*mut zend_object) -> *mut zend_function;

/// The engine's `zend_std_get_constructor`, which our handler defers to.
static STANDARD_GET_CONSTRUCTOR: OnceLock<GetConstructor> = OnceLock::new();

/// The object handler the engine asks for a class's constructor, right after creating an
/// object in `new`.
///
/// For a bare `new RegionRouter()` (no argument) it makes the object a default router on
/// the spot and answers "no constructor", so the engine skips the call: what the
/// constructor would have done costs no call frame. Anything else (arguments,
/// Reflection's `newInstance()`, `new` in a constant expression) gets the real
/// constructor.
///
/// A bare `new` is recognised from the engine's state as ZEND_NEW leaves it: the current
/// frame is user code, its saved opline is a ZEND_NEW with no argument followed by the
/// constructor call, and that opline's result slot already holds this very object. When
/// any of that does not hold, the answer is the standard one, so a wrong guess can only
/// cost speed.
unsafe extern "C" fn get_constructor(object: *mut zend_object) -> *mut zend_function {
    // SAFETY: the engine passes the object it is constructing.
    if unsafe { is_bare_new(object) } {
        let opened = catch_unwind(AssertUnwindSafe(|| open_default_in(object)));
        if matches!(opened, Ok(true)) {
            return std::ptr::null_mut();
        }
    }
    match STANDARD_GET_CONSTRUCTOR.get() {
        // SAFETY: the engine's own handler, called as the engine would.
        Some(standard) => unsafe { standard(object) },
        None => std::ptr::null_mut(),
    }
}

/// Whether the engine is executing a `new` with no argument that created `object`.
unsafe fn is_bare_new(object: *mut zend_object) -> bool {
    // SAFETY: every pointer is checked for null before it is read; a user-code frame's
    // opline is valid (ZEND_NEW saves it before creating the object), and a ZEND_NEW
    // opline's result is a slot of that frame.
    unsafe {
        let Some(globals) = ext_php_rs_executor_globals().as_ref() else {
            return false;
        };
        let Some(frame) = globals.current_execute_data.as_ref() else {
            return false;
        };
        let Some(function) = frame.func.as_ref() else {
            return false;
        };
        if function.type_ == ZEND_INTERNAL_FUNCTION {
            return false;
        }
        let Some(opline) = frame.opline.as_ref() else {
            return false;
        };
        // No positional argument, and the next opline is the constructor call itself:
        // exactly when ZEND_NEW skips that call for a class without a constructor. An
        // unpacked or named argument puts a SEND between them, so those are never skipped.
        if opline.opcode != ZEND_NEW
            || opline.extended_value != 0
            || (*std::ptr::from_ref(opline).add(1)).opcode != ZEND_DO_FCALL
        {
            return false;
        }
        let result = std::ptr::from_ref(frame)
            .cast::<u8>()
            .add(opline.result.var as usize)
            .cast::<zval>();
        (*result).u1.v.type_ == IS_OBJECT && std::ptr::eq((*result).value.obj, object)
    }
}

/// Makes `object` a default router; false if it is not ours.
fn open_default_in(object: *mut zend_object) -> bool {
    // SAFETY: a live object the engine handed us.
    let Some(object) = (unsafe { object.as_mut() }) else {
        return false;
    };
    let Some(this) = class_object(object) else {
        return false;
    };
    if this.obj.is_none() {
        this.obj = Some(RegionRouter::open(None));
    }
    true
}

/// The RegionRouter object around `object`, if `object` is one (made by this class's
/// create_object handler), initialised or not.
#[inline(always)]
fn class_object(object: &mut zend_object) -> Option<&mut ZendClassObject<RegionRouter>> {
    if !std::ptr::eq(object.handlers, OUR_HANDLERS.load(Ordering::Relaxed)) {
        return None;
    }
    let offset = std::mem::offset_of!(ZendClassObject<RegionRouter>, std);
    // SAFETY: the handlers check above proves `object` is the `std` field of a
    // ZendClassObject<RegionRouter>, which sits `offset` bytes into it.
    Some(unsafe {
        &mut *std::ptr::from_mut(object)
            .cast::<u8>()
            .sub(offset)
            .cast::<ZendClassObject<RegionRouter>>()
    })
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
    if let Some(path) = path
        && !path.starts_with(b"/")
    {
        // A relative path would be resolved against whatever directory the process was
        // in when the path was first used, and remembered so: after a chdir the same
        // spelling would still answer from the old file. So only absolute paths.
        return Err(throw_value_error(&format!(
            "RegionRouter::__construct(): Argument #1 ($snapshotPath) must be an absolute path, \"{}\" given",
            dw_routing::quoted(&String::from_utf8_lossy(path))
        )));
    }
    let router = RegionRouter::open(path);
    // Only objects made by this class's create_object handler have the Rust payload.
    let this = ex
        .get_self()
        .and_then(class_object)
        .ok_or_else(|| throw_error("RegionRouter::__construct() called on a foreign object"))?;
    this.obj = Some(router);
    Ok(())
}

impl RegionRouter {
    /// The router for `path` (None: ini `dw_router.snapshot_path`). An explicit path's
    /// reader takes its table now, its source made fresh.
    fn open(path: Option<&[u8]>) -> RegionRouter {
        match path {
            Some(path) => RegionRouter {
                answered: None,
                reader: Some(Reader::open(registry::source_for(path))),
            },
            // Nothing to open: the shared reader serves it, and the first method called
            // makes the source fresh, as for every router.
            None => RegionRouter {
                reader: None,
                answered: None,
            },
        }
    }

    /// This router's source, made fresh (its watch set up in this process).
    fn fresh_source(&self) -> &Source {
        let source = match &self.reader {
            Some(reader) => &reader.source,
            None => registry::default_source(),
        };
        watch::ensure_fresh(source);
        source
    }

    /// Routes `country` and sets `retval` to the route array.
    #[inline(always)]
    fn resolve_into(&mut self, retval: &mut Zval, country: &[u8], sticky_key: Option<&[u8]>) {
        let mut shared;
        let reader = match &mut self.reader {
            Some(reader) => reader,
            None => {
                shared = DEFAULT_READER.try_lock();
                match shared.as_mut().and_then(|shared| shared.as_mut()) {
                    Some(reader) => reader,
                    None => {
                        drop(shared);
                        self.answered =
                            Some(resolve_with_default_reader(retval, country, sticky_key));
                        return;
                    }
                }
            }
        };
        self.answered = Some(reader.resolve_into(retval, country, sticky_key));
    }
}

/// Moves the shared default reader to its source's current table, if another is in use.
/// Called by the watcher after a reload, so that a worker idle between requests does not
/// keep the replaced table alive beside the new one (it is freed on the watcher thread,
/// off the request path). Never waits: a request holding the reader moves it itself.
pub(crate) fn refresh_default_reader() {
    let Some(mut shared) = DEFAULT_READER.try_lock() else {
        return;
    };
    if let Some(reader) = shared.as_mut()
        && reader.source.version() != reader.version
    {
        (reader.version, reader.loaded) = reader.source.current();
    }
}

/// `resolve()` for a default router when the shared reader does not exist yet (the first
/// call in a process) or another thread holds it.
#[cold]
#[inline(never)]
fn resolve_with_default_reader(
    retval: &mut Zval,
    country: &[u8],
    sticky_key: Option<&[u8]>,
) -> u64 {
    let open = || Reader::open(registry::default_source().clone());
    match DEFAULT_READER.try_lock() {
        Some(mut shared) => shared
            .get_or_insert_with(open)
            .resolve_into(retval, country, sticky_key),
        None => open().resolve_into(retval, country, sticky_key),
    }
}

impl Reader {
    /// A reader of `source`, its source fresh.
    fn open(source: Arc<Source>) -> Reader {
        watch::ensure_fresh(&source);
        let (version, loaded) = source.current();
        Reader {
            source,
            loaded,
            version,
        }
    }

    /// Routes `country` into `retval`; returns the revision of the table it answered from.
    #[inline(always)]
    fn resolve_into(
        &mut self,
        retval: &mut Zval,
        country: &[u8],
        sticky_key: Option<&[u8]>,
    ) -> u64 {
        watch::ensure_fresh(&self.source);
        if self.source.version() != self.version {
            (self.version, self.loaded) = self.source.current();
        }
        let loaded = &self.loaded;
        let revision = loaded.table.revision();
        let memo = match sticky_key {
            None => loaded.routes.memo(&loaded.table, country),
            Some(_) => None,
        };
        if let Some(memo) = memo {
            let array = memo.load(Ordering::Acquire);
            if !array.is_null() {
                route_array::set_memoized_route(retval, array);
                return revision;
            }
        }
        let array = match loaded.resolve(country, sticky_key) {
            Some(route) => {
                route_array::set_table_route(retval, loaded, route.region_index, route.origin_index)
            }
            None => route_array::set_fallback_route(retval),
        };
        if let (Some(memo), Some(array)) = (memo, array) {
            memo.store(array, Ordering::Release);
        }
        revision
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

fn throw_value_error(message: &str) -> Thrown {
    PhpException::new(message.into(), 0, ce::value_error()).throw();
    Thrown
}

fn throw_error(message: &str) -> Thrown {
    PhpException::new(message.into(), 0, ce::error()).throw();
    Thrown
}

fn ini_fallback() -> &'static (String, String) {
    crate::ini::fallback()
}

fn resolve_call(ex: &mut ExecuteData, retval: &mut Zval) -> Result<(), Thrown> {
    if resolve_common(ex, retval) {
        return Ok(());
    }
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
    let this = ex
        .get_self()
        .and_then(class_object)
        .ok_or_else(uninitialised)?;
    let router = this.obj.as_mut().ok_or_else(uninitialised)?;
    router.resolve_into(retval, country, sticky_key);
    Ok(())
}

/// `resolve()` as a front controller calls it: one or two string arguments (the second
/// may be null) on a constructed router. Reads the frame directly and answers; false,
/// having touched nothing, for any other call, which then takes the general path.
#[inline(always)]
fn resolve_common(ex: &mut ExecuteData, retval: &mut Zval) -> bool {
    if !engine::SHORTCUTS {
        return false;
    }
    // SAFETY: `This.u2.num_args` is the argument count the engine set for this frame,
    // and that many argument slots follow the frame (ZEND_CALL_ARG).
    let (country, sticky_key) = unsafe {
        let num_args = ex.This.u2.num_args;
        if num_args != 1 && num_args != 2 {
            return false;
        }
        let Some(country) = ex.zend_call_arg(0).and_then(|arg| string_bytes(arg)) else {
            return false;
        };
        let sticky_key = if num_args == 2 {
            let Some(arg) = ex.zend_call_arg(1) else {
                return false;
            };
            if arg.u1.v.type_ == IS_NULL {
                None
            } else {
                let Some(key) = string_bytes(arg) else {
                    return false;
                };
                Some(key)
            }
        } else {
            None
        };
        (country, sticky_key)
    };
    // SAFETY: `This` of a method frame holds the object the method was called on.
    let object = unsafe {
        if ex.This.u1.v.type_ != IS_OBJECT {
            return false;
        }
        ex.This.value.obj.as_mut()
    };
    let Some(router) = object
        .and_then(class_object)
        .and_then(|this| this.obj.as_mut())
    else {
        return false;
    };
    router.resolve_into(retval, country, sticky_key);
    true
}

/// The bytes of a string zval; None for any other type.
#[inline(always)]
fn string_bytes(arg: &Zval) -> Option<&[u8]> {
    // SAFETY: a zval of type IS_STRING holds a live zend_string.
    unsafe {
        if arg.u1.v.type_ != IS_STRING {
            return None;
        }
        arg.value.str_.as_ref().map(ZendStr::as_bytes)
    }
}

unsafe extern "C" {
    fn zend_parse_arg_str_slow(arg: *mut zval, dest: *mut *mut zend_string, arg_num: u32) -> bool;
    fn zend_wrong_parameter_type_error(num: u32, expected_type: u32, arg: *mut zval);
    fn zend_wrong_parameters_count_error(min_num_args: u32, max_num_args: u32);
}

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
