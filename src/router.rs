//! The PHP class `RegionRouter` and the reader it answers from.
//!
//! A front controller runs `(new RegionRouter())->resolve($country)` on every request, so
//! both halves are fast paths:
//!
//! - `new`: the object is made by the lean handlers of `objects`; a bare
//!   `new RegionRouter()` runs no constructor call, and every default router shares one
//!   `Reader` of the default path, so making one costs no reference count and no table load.
//! - `resolve()` reads its arguments straight from the call frame (no argument vector, no
//!   UTF-8 check: a country is any byte string) and answers from the table's memo of route
//!   arrays when there is no sticky key (`loaded`).
//!
//! `resolve()` is one path, in this order: `resolve_handler` (the method), `resolve` (its
//! arguments, read from the frame or parsed by `args`), `RegionRouter::answer` (the
//! router's reader, or the shared one), `Reader::answer` (a fresh table), and the table's
//! `Loaded::answer` (the memo, or the core's `Table::resolve` and a route array). The
//! other methods are cold and use the macros.
//!
//! Each shortcut reads engine internals, so each is on only when the extension is built
//! against a PHP version they were checked on, and can be turned off alone (`engine`);
//! otherwise ext-php-rs's object handlers and constructor and the parsed arguments run.

// The constructor's PHP parameter is `$snapshotPath`, and the macro takes the PHP name
// from the Rust binding.
#![allow(non_snake_case)]

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;

use ext_php_rs::args::Arg;
use ext_php_rs::binary_slice::BinarySlice;
use ext_php_rs::boxed::ZBox;
use ext_php_rs::builders::{ClassBuilder, FunctionBuilder};
use ext_php_rs::class::RegisteredClass;
use ext_php_rs::exception::{PhpException, PhpResult};
use ext_php_rs::ffi::{IS_NULL, IS_OBJECT, zend_execute_data, zend_function, zval};
use ext_php_rs::flags::{ClassFlags, DataType, MethodFlags};
use ext_php_rs::prelude::*;
use ext_php_rs::types::{ZendHashTable, Zval};
use ext_php_rs::zend::{ExecuteData, ce};

use parking_lot::Mutex;

use crate::args::{self, Thrown};
use crate::engine::{self, Shortcut};
use crate::loaded::Loaded;
use crate::objects::{self, LeanClass, class_object};
use crate::source::Source;
use crate::{registry, route_array, values, watch};

/// Routes a visitor's country to a catalog shard and an upstream origin, from the
/// snapshot that dw-agent keeps current.
#[php_class]
#[php(name = "RegionRouter", modifier = add_resolve_method, flags = ClassFlags::Final)]
pub struct RegionRouter {
    /// The reader of an explicit path; None for the default path (ini
    /// `dw_router.snapshot_path`), whose routers all share `DEFAULT_READER`.
    reader: Option<Reader>,
    /// The revision of the table this object's last `resolve()` answered from.
    answered: Option<u64>,
}

/// A source and the table last taken from it.
struct Reader {
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
static DEFAULT_READER: Mutex<Option<Reader>> = Mutex::new(None);

#[php_impl]
#[allow(non_snake_case)]
impl RegionRouter {
    /// Opens the router for a snapshot file (default: ini `dw_router.snapshot_path`).
    /// Cheap: every router for a path shares one process-wide table.
    // The PHP parameter is `$snapshotPath`; the macro takes the name from the binding.
    // With the frame-arguments shortcut on, `construct_handler` runs instead.
    #[php(defaults(snapshotPath = None))]
    pub fn __construct(snapshotPath: Option<String>) -> PhpResult<Self> {
        let path = snapshotPath.as_deref().map(str::as_bytes);
        if let Some(message) = path.and_then(relative_path_refusal) {
            return Err(PhpException::new(message, 0, ce::value_error()));
        }
        Ok(RegionRouter::open(path))
    }

    /// The etcd revision of the table in use; 0 when none was loaded.
    pub fn revision(&mut self) -> i64 {
        i64::try_from(self.shown_table().revision()).unwrap_or(i64::MAX)
    }

    /// The etcd revision of the table this object's last `resolve()` answered from (the
    /// current one before any): what to report beside a route, since a reload may land
    /// between a `resolve()` and a `revision()`.
    #[php(name = "answeredRevision")]
    pub fn answered_revision(&mut self) -> i64 {
        match self.answered {
            Some(revision) => i64::try_from(revision).unwrap_or(i64::MAX),
            None => self.revision(),
        }
    }

    /// The parsed `policy/global` object, unknown fields included; [] when absent.
    pub fn policy(&mut self) -> ZBox<ZendHashTable> {
        values::policy_array(self.shown_table().table.policy())
    }

    /// The ids of the stages the table in use applies (a staged rollout's cohort); [] on
    /// a node that serves current routing. Compare `revision()` with `answeredRevision()`
    /// before reporting it beside an answer.
    pub fn stages(&self) -> ZBox<ZendHashTable> {
        values::stage_ids(self.fresh_source().table().table.stages())
    }

    /// Counters and state of this router's source.
    pub fn stats(&mut self) -> ZBox<ZendHashTable> {
        let source = self.fresh_source().clone();
        watch::settle();
        let shown = self.shown_table();
        values::stats_to_array(&source, &shown)
    }

    /// The answers `resolve()` counted on this node (docs/traffic.md): every worker of
    /// every process tree that shares this one's counter file, per label set, with the
    /// overflow. Not in `stats()`, which health checks call often: it reads the whole file.
    pub fn traffic(&self) -> ZBox<ZendHashTable> {
        values::traffic_array()
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

    /// How `resolve($geo, $stickyKey, $bucket)` answers from the table in use, step by
    /// step, with why each step before the answer was skipped and, given a bucket, what
    /// it did (docs/routing.md, "Explaining a route", "Buckets"). For debugging: it
    /// allocates, and is never on the request path. A negative bucket is a ValueError.
    pub fn explain(
        &self,
        geo: BinarySlice<'_, u8>,
        stickyKey: Option<BinarySlice<'_, u8>>,
        bucket: Option<i64>,
    ) -> PhpResult<ZBox<ZendHashTable>> {
        let bucket = bucket
            .map(|bucket| {
                u64::try_from(bucket).map_err(|_| {
                    PhpException::new(
                        "RegionRouter::explain(): Argument #3 ($bucket) must be greater than or equal to 0".into(),
                        0,
                        ce::value_error(),
                    )
                })
            })
            .transpose()?;
        let source = self.fresh_source();
        let loaded = source.table();
        Ok(values::explanation_array(
            &loaded,
            &geo,
            stickyKey.as_deref().copied(),
            bucket,
        ))
    }

    /// Visitor buckets' N of the table in use (`policy/global`'s `buckets`), 0 when off:
    /// what the `dw_bucket` cookie helper draws a bucket below.
    pub fn buckets(&mut self) -> i64 {
        self.shown_table()
            .table
            .buckets()
            .map_or(0, |n| i64::from(n.get()))
    }

    /// The page-cache tags of the answer `resolve($geo, $stickyKey, $bucket)` gives from
    /// the table this object's last `resolve()` answered from (docs/routing.md, "Cache
    /// tags"): pass the arguments that `resolve()` was given. `dw:b` comes last when the
    /// bucket picked the origin (buckets on, the bucket below N, no sticky key, the
    /// answering region has an assignment); a sticky key changes no other tag. Null when
    /// no `resolve()` was made, when the table in use is no longer that one (a reload
    /// came between: compared by revision, the one `answeredRevision()` reports), or when
    /// that answer was fail-open with no table (revision 0). A negative bucket is a
    /// ValueError. Cold: it allocates, and `resolve()` does no work for it.
    #[php(name = "cacheTags")]
    pub fn cache_tags(
        &mut self,
        geo: BinarySlice<'_, u8>,
        stickyKey: Option<BinarySlice<'_, u8>>,
        bucket: Option<i64>,
    ) -> PhpResult<Option<Vec<String>>> {
        let bucket = bucket
            .map(|bucket| {
                u64::try_from(bucket).map_err(|_| {
                    PhpException::new(
                        "RegionRouter::cacheTags(): Argument #3 ($bucket) must be greater than or equal to 0".into(),
                        0,
                        ce::value_error(),
                    )
                })
            })
            .transpose()?;
        let Some(answered) = self.answered.filter(|revision| *revision != 0) else {
            return Ok(None);
        };
        let shown = self.shown_table();
        Ok((shown.revision() == answered).then(|| {
            shown
                .table
                .cache_tags_bucketed(&geo, stickyKey.as_deref().copied(), bucket)
        }))
    }
}

impl LeanClass for RegionRouter {
    /// A bare `new RegionRouter()` is a default router.
    fn bare_new() -> RegionRouter {
        RegionRouter::open(None)
    }
}

/// The message refusing a relative `path`: it would be resolved against whatever directory
/// the process was in when the path was first used, and remembered so: after a chdir the
/// same spelling would still answer from the old file. None for an absolute path.
fn relative_path_refusal(path: &[u8]) -> Option<String> {
    (!path.starts_with(b"/")).then(|| {
        format!(
            "RegionRouter::__construct(): Argument #1 ($snapshotPath) must be an absolute path, \"{}\" given",
            dw_routing::quoted(&String::from_utf8_lossy(path))
        )
    })
}

/// Makes `new RegionRouter(...)` and `resolve()` cheap, as they run on every request.
/// Runs once per process, at the first RINIT (the class is not registered yet when
/// MINIT's user callback runs), before any RegionRouter object exists.
///
/// - The object handlers become the lean ones of `objects`, which let a bare
///   `new RegionRouter()` skip the constructor call altogether.
/// - The macro-generated constructor's handler becomes `construct_handler`, which does
///   the same with no argument vector, no string copy and no setjmp; `resolve()`'s
///   handler becomes the one that reads its arguments from the frame.
///
/// Each only when its shortcut is on (`engine`); else ext-php-rs's stay.
pub fn install_fast_paths() {
    objects::install::<RegionRouter>();
    if !engine::enabled(Shortcut::FrameArguments) {
        return;
    }
    let ce = std::ptr::from_ref(<RegionRouter as RegisteredClass>::get_metadata().ce()).cast_mut();
    // SAFETY: the handler types differ only in taking references where the engine's take
    // pointers, which have the same representation; the engine never passes null.
    let read_frame = unsafe {
        std::mem::transmute::<
            extern "C" fn(&mut ExecuteData, &mut Zval),
            unsafe extern "C" fn(*mut zend_execute_data, *mut zval),
        >(resolve_handler::<true>)
    };
    // SAFETY: the class entry is ours and registered; its constructor and `resolve` are
    // the internal functions the macros and `add_resolve_method` built, whose handlers we
    // replace before any request runs.
    unsafe {
        let constructor = (*ce).constructor;
        if !constructor.is_null() {
            (*constructor).internal_function.handler = Some(construct_handler);
        }
        let methods: &ZendHashTable = &(*ce).function_table;
        if let Some(method) = methods.get("resolve") {
            let function = method.value.ptr.cast::<zend_function>();
            if !function.is_null() {
                (*function).internal_function.handler = Some(read_frame);
            }
        }
    }
}

/// `RegionRouter::__construct(?string $snapshotPath = null)`
unsafe extern "C" fn construct_handler(ex: *mut zend_execute_data, _retval: *mut zval) {
    // SAFETY: the engine passes a valid frame for this call.
    let Some(ex) = (unsafe { ex.as_mut() }) else {
        return;
    };
    let outcome = catch_unwind(AssertUnwindSafe(|| construct(ex)));
    if outcome.is_err() {
        PhpException::from_message("RegionRouter: internal error while constructing".into())
            .throw();
    }
}

fn construct(ex: &mut ExecuteData) -> Result<(), Thrown> {
    let num_args = args::check_count(ex, 0, 1)?;
    // SAFETY: the engine guarantees `num_args` arguments in the frame.
    let arg = if num_args == 1 {
        unsafe { ex.zend_call_arg(0) }
    } else {
        None
    };
    let path = args::string(arg, 1, true)?;
    if let Some(message) = path.and_then(relative_path_refusal) {
        return Err(args::throw_value_error(&message));
    }
    let router = RegionRouter::open(path);
    // Only objects of this class have the Rust payload.
    let this = ex
        .get_self()
        .and_then(class_object::<RegionRouter>)
        .ok_or_else(|| {
            args::throw_error("RegionRouter::__construct() called on a foreign object")
        })?;
    this.obj = Some(router);
    Ok(())
}

fn add_resolve_method(builder: ClassBuilder) -> ClassBuilder {
    let resolve = FunctionBuilder::new("resolve", resolve_handler::<false>)
        .arg(Arg::new("country", DataType::String))
        .arg(
            Arg::new("stickyKey", DataType::String)
                .allow_null()
                .default("null"),
        )
        .arg(
            Arg::new("bucket", DataType::Long)
                .allow_null()
                .default("null"),
        )
        .not_required()
        .required_args(1)
        .returns(DataType::Array, false, false)
        .docs(&[
            "Resolves a visitor's country to ['shard' => string, 'origin' => string].",
            "A sticky key wins where given, then a visitor bucket (below buckets()),",
            "then the country. Never fails: an unknown country goes through",
            "policy.default and policy.failover, then to the ini fallback route.",
        ]);
    builder.method(resolve, MethodFlags::Public)
}

/// `RegionRouter::resolve(string $country, ?string $stickyKey = null, ?int $bucket =
/// null): array`; with
/// `READ_FRAME`, the common calls' arguments are read from the frame (see `resolve`).
extern "C" fn resolve_handler<const READ_FRAME: bool>(ex: &mut ExecuteData, retval: &mut Zval) {
    let outcome = catch_unwind(AssertUnwindSafe(
        #[inline(always)]
        || resolve::<READ_FRAME>(ex, retval),
    ));
    if outcome.is_err() {
        // A bug in the router must not take the worker down: answer fail-open.
        let (shard, origin) = crate::ini::fallback();
        route_array::set_built_route(retval, shard, origin);
    }
}

/// A `resolve()` call: the router it was called on and its arguments.
struct Call<'a> {
    router: &'a mut RegionRouter,
    country: &'a [u8],
    sticky_key: Option<&'a [u8]>,
    bucket: Option<u64>,
}

/// Reads the call's arguments (from the frame for the common calls, with `READ_FRAME`;
/// else parsed as the engine would) and answers it.
///
/// The front controller's calls (one or two arguments) take the path they took before
/// buckets: their frame is read as it was, and nothing about a bucket is looked at; a call
/// with a third argument is recognised only after that read declined it.
#[inline(always)]
fn resolve<const READ_FRAME: bool>(ex: &mut ExecuteData, retval: &mut Zval) -> Result<(), Thrown> {
    if READ_FRAME && let Some((router, country, sticky_key)) = read_frame(ex) {
        router.answer::<false>(retval, country, sticky_key, 0);
        return Ok(());
    }
    answer_other_call::<READ_FRAME>(ex, retval)
}

/// A call with a bucket, or whose arguments are parsed: out of line, so that the common
/// calls' path stays as it was.
#[inline(never)]
fn answer_other_call<const READ_FRAME: bool>(
    ex: &mut ExecuteData,
    retval: &mut Zval,
) -> Result<(), Thrown> {
    let call = match READ_FRAME.then(|| read_frame_with_bucket(ex)).flatten() {
        Some(call) => call,
        None => parse_arguments(ex)?,
    };
    let Call {
        router,
        country,
        sticky_key,
        bucket,
    } = call;
    match bucket {
        None => router.answer::<false>(retval, country, sticky_key, 0),
        Some(bucket) => router.answer::<true>(retval, country, sticky_key, bucket),
    }
    Ok(())
}

/// A front controller's call read from its frame: the router, the country, the sticky key.
type FrameCall<'a> = (&'a mut RegionRouter, &'a [u8], Option<&'a [u8]>);

/// The router and the arguments of a call as a front controller makes it (one or two
/// string arguments, the second possibly null, on a constructed router), read straight
/// from the frame; None, having touched nothing, for any other call.
#[inline(always)]
fn read_frame(ex: &mut ExecuteData) -> Option<FrameCall<'_>> {
    // SAFETY: `This.u2.num_args` is the argument count the engine set for this frame,
    // and that many argument slots follow the frame (ZEND_CALL_ARG).
    let (country, sticky_key) = unsafe {
        let num_args = ex.This.u2.num_args;
        if num_args != 1 && num_args != 2 {
            return None;
        }
        let country = ex
            .zend_call_arg(0)
            .and_then(|arg| args::string_bytes(arg))?;
        let sticky_key = if num_args == 2 {
            let arg = ex.zend_call_arg(1)?;
            if u32::from(arg.u1.v.type_) == IS_NULL {
                None
            } else {
                Some(args::string_bytes(arg)?)
            }
        } else {
            None
        };
        (country, sticky_key)
    };
    Some((frame_router(ex)?, country, sticky_key))
}

/// A call with three arguments read from the frame: a string, a string or null, then a
/// bucket (null or an int from 0); None, having touched nothing, for any other.
fn read_frame_with_bucket(ex: &mut ExecuteData) -> Option<Call<'_>> {
    // SAFETY: as in `read_frame`.
    let (country, sticky_key, bucket) = unsafe {
        if ex.This.u2.num_args != 3 {
            return None;
        }
        let country = ex
            .zend_call_arg(0)
            .and_then(|arg| args::string_bytes(arg))?;
        let arg = ex.zend_call_arg(1)?;
        let sticky_key = if u32::from(arg.u1.v.type_) == IS_NULL {
            None
        } else {
            Some(args::string_bytes(arg)?)
        };
        let bucket = args::frame_bucket(ex.zend_call_arg(2)?)?;
        (country, sticky_key, bucket)
    };
    Some(Call {
        router: frame_router(ex)?,
        country,
        sticky_key,
        bucket,
    })
}

/// The constructed router a method frame was called on, if it is one.
#[inline(always)]
fn frame_router(ex: &mut ExecuteData) -> Option<&mut RegionRouter> {
    // SAFETY: `This` of a method frame holds the object the method was called on.
    let object = unsafe {
        if u32::from(ex.This.u1.v.type_) != IS_OBJECT {
            return None;
        }
        ex.This.value.obj.as_mut()
    };
    object
        .and_then(class_object::<RegionRouter>)
        .and_then(|this| this.obj.as_mut())
}

/// The call's arguments parsed by the engine's rules, and its router; Thrown (the engine
/// has thrown) when they do not fit.
fn parse_arguments(ex: &mut ExecuteData) -> Result<Call<'_>, Thrown> {
    let num_args = args::check_count(ex, 1, 3)?;
    // SAFETY: the engine guarantees `num_args` arguments in the frame.
    let (country_arg, sticky_arg, bucket_arg) = unsafe {
        (
            ex.zend_call_arg(0),
            if num_args >= 2 {
                ex.zend_call_arg(1)
            } else {
                None
            },
            if num_args == 3 {
                ex.zend_call_arg(2)
            } else {
                None
            },
        )
    };
    let country = args::string(country_arg, 1, false)?.unwrap_or_default();
    let sticky_key = args::string(sticky_arg, 2, true)?;
    let bucket = args::bucket(bucket_arg, "RegionRouter::resolve", 3)?;
    let uninitialised =
        || args::throw_error("RegionRouter::resolve() called on an uninitialised RegionRouter");
    let this = ex
        .get_self()
        .and_then(class_object::<RegionRouter>)
        .ok_or_else(uninitialised)?;
    let router = this.obj.as_mut().ok_or_else(uninitialised)?;
    Ok(Call {
        router,
        country,
        sticky_key,
        bucket,
    })
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

    /// The table this router shows to `revision()`, `stats()` and `policy()`: its
    /// reader's (the shared one for a default router), moved to the source's current
    /// table the way `resolve()` moves it. So a table once shown is the one the next
    /// `resolve()` answers from, or an older one is never used again: a reload swaps the
    /// table and then bumps the version, and reading the table directly could show the
    /// new one while a reader still on the old version answers from the old (issue 21).
    fn shown_table(&mut self) -> Arc<Loaded> {
        match &mut self.reader {
            Some(reader) => {
                reader.sync();
                reader.loaded.clone()
            }
            None => {
                let source = registry::default_source();
                watch::ensure_fresh(source);
                match DEFAULT_READER.try_lock() {
                    Some(mut shared) => {
                        let reader = shared.get_or_insert_with(|| Reader::open(source.clone()));
                        reader.sync();
                        reader.loaded.clone()
                    }
                    // Another thread answers with it (ZTS): this object's next answer
                    // then comes from a reader opened at the current table, as this.
                    None => source.current().1,
                }
            }
        }
    }

    /// This router's source, made fresh (its watch set up in this process).
    fn fresh_source(&self) -> &Arc<Source> {
        let source = match &self.reader {
            Some(reader) => &reader.source,
            None => registry::default_source(),
        };
        watch::ensure_fresh(source);
        source
    }

    /// Sets `retval` to the route for `country` from this router's reader's table or the
    /// shared default one's: `Loaded::answer`, or with `BUCKETED` `Loaded::answer_with_bucket`
    /// (`bucket` is read only then). Scalars, not a closure: a closure the cold paths take
    /// is stored to the stack on the hot one (five instructions a call, measured).
    ///
    /// The two readers are two paths, each with its own copy of `Reader::answer`: one
    /// path choosing between them made the compiler keep the lock guard's drop flag and
    /// the reader's address on the stack (ten instructions more per call, BENCHMARKS.md).
    #[inline(always)]
    fn answer<const BUCKETED: bool>(
        &mut self,
        retval: &mut Zval,
        country: &[u8],
        sticky_key: Option<&[u8]>,
        bucket: u64,
    ) {
        let revision = match &mut self.reader {
            Some(reader) => reader.answer::<BUCKETED>(retval, country, sticky_key, bucket),
            None => match DEFAULT_READER.try_lock() {
                Some(mut shared) => match shared.as_mut() {
                    Some(reader) => reader.answer::<BUCKETED>(retval, country, sticky_key, bucket),
                    None => {
                        drop(shared);
                        answer_with_new_reader::<BUCKETED>(retval, country, sticky_key, bucket)
                    }
                },
                None => answer_with_new_reader::<BUCKETED>(retval, country, sticky_key, bucket),
            },
        };
        self.answered = Some(revision);
    }
}

/// Moves the shared default reader to its source's current table, if another is in use.
/// The watcher's hook after a reload (set in MINIT), so that a worker idle between
/// requests does not keep the replaced table alive beside the new one (it is freed on the
/// watcher thread, off the request path). Never waits: a request holding the reader moves
/// it itself.
pub fn refresh_default_reader() {
    let Some(mut shared) = DEFAULT_READER.try_lock() else {
        return;
    };
    if let Some(reader) = shared.as_mut()
        && reader.source.version() != reader.version
    {
        (reader.version, reader.loaded) = reader.source.current();
    }
}

/// Takes the shared default reader's lock and keeps it until [`unlock_after_fork`]: from
/// the fork `prepare` handler, so that a child never inherits it held by a thread it does
/// not have.
pub fn lock_for_fork() {
    std::mem::forget(DEFAULT_READER.lock());
}

/// # Safety
/// Only after `lock_for_fork`, in the same thread (or in the child it forked).
pub unsafe fn unlock_after_fork() {
    // SAFETY: upheld by the caller.
    unsafe { DEFAULT_READER.force_unlock() }
}

/// `resolve()` for a default router when the shared reader does not exist yet (the first
/// call in a process) or another thread holds it.
#[cold]
#[inline(never)]
fn answer_with_new_reader<const BUCKETED: bool>(
    retval: &mut Zval,
    country: &[u8],
    sticky_key: Option<&[u8]>,
    bucket: u64,
) -> u64 {
    let open = || Reader::open(registry::default_source().clone());
    match DEFAULT_READER.try_lock() {
        Some(mut shared) => shared
            .get_or_insert_with(open)
            .answer::<BUCKETED>(retval, country, sticky_key, bucket),
        None => open().answer::<BUCKETED>(retval, country, sticky_key, bucket),
    }
}

impl Reader {
    /// Makes the source fresh and moves to its current table if another is in use. The
    /// version is read before the table (`Source::current`), so a reader never records a
    /// version newer than its table.
    #[inline(always)]
    fn sync(&mut self) {
        watch::ensure_fresh(&self.source);
        if self.source.version() != self.version {
            (self.version, self.loaded) = self.source.current();
        }
    }

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

    /// Sets `retval` to the route for `country` from the source's current table (see
    /// `RegionRouter::answer`); returns the revision of that table.
    #[inline(always)]
    fn answer<const BUCKETED: bool>(
        &mut self,
        retval: &mut Zval,
        country: &[u8],
        sticky_key: Option<&[u8]>,
        bucket: u64,
    ) -> u64 {
        self.sync();
        if BUCKETED {
            self.loaded
                .answer_with_bucket(retval, country, sticky_key, bucket);
        } else {
            self.loaded.answer(retval, country, sticky_key);
        }
        self.loaded.revision()
    }
}
