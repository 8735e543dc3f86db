//! The Zend object handlers of the class: lean `create_object` and `free_obj` for
//! ext-php-rs's `ZendClassObject` layout, and a `get_constructor` that lets a bare `new`
//! skip the constructor call.
//!
//! They serve one class (their statics are not per class): `router` installs them for
//! `RegionRouter`, once, before any of its objects exists. Each is one of the engine
//! shortcuts of `engine` and stays out when that one is off.

use std::alloc::Layout;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicPtr, Ordering};

use ext_php_rs::class::RegisteredClass;
use ext_php_rs::ffi::{
    IS_OBJECT, ZEND_ACC_USE_GUARDS, ZEND_DO_FCALL, ZEND_INTERNAL_FUNCTION, ZEND_NEW,
    ext_php_rs_executor_globals, ext_php_rs_zend_object_alloc, object_properties_init,
    zend_class_entry, zend_function, zend_object, zend_object_handlers, zend_object_std_dtor,
    zend_object_std_init, zval,
};
use ext_php_rs::types::ZendClassObject;

use crate::engine::{self, Shortcut};

/// A class whose objects these handlers make and free.
pub trait LeanClass: RegisteredClass {
    /// What the constructor makes of a bare `new` (no argument), which then skips it.
    fn bare_new() -> Self;
}

/// The handler table of the class's objects (null until `install`, when no object exists
/// yet): an object with this table is a ZendClassObject of the class, whether our
/// create_object or ext-php-rs's made it.
static OUR_HANDLERS: AtomicPtr<zend_object_handlers> = AtomicPtr::new(std::ptr::null_mut());

type GetConstructor = unsafe extern "C" fn(*mut zend_object) -> *mut zend_function;

/// The engine's `zend_std_get_constructor`, which our handler defers to.
static STANDARD_GET_CONSTRUCTOR: OnceLock<GetConstructor> = OnceLock::new();

/// Records `T`'s handler table and puts in the handlers whose shortcut is on. Runs once
/// per process, before any object of `T` exists.
pub fn install<T: LeanClass>() {
    let metadata = T::get_metadata();
    let handlers = std::ptr::from_ref(metadata.handlers()).cast_mut();
    OUR_HANDLERS.store(handlers, Ordering::Relaxed);
    let ce = std::ptr::from_ref(metadata.ce()).cast_mut();
    // SAFETY: the handler table is the one ext-php-rs built for this class and gives
    // every object of it; no object exists yet, and the engine only reads the table
    // through raw pointers. Our create_object and free_obj make and free the same
    // ZendClassObject<T> layout as ext-php-rs's, without its generic checks.
    unsafe {
        if engine::enabled(Shortcut::BareNew)
            && let Some(standard) = (*handlers).get_constructor
        {
            let _ = STANDARD_GET_CONSTRUCTOR.set(standard);
            (*handlers).get_constructor = Some(get_constructor::<T>);
        }
        if engine::enabled(Shortcut::LeanObjects) {
            (*handlers).free_obj = Some(free_object::<T>);
            (*ce).__bindgen_anon_2.create_object = Some(create_object::<T>);
        }
    }
}

/// The class's `create_object`: a ZendClassObject<T> with no payload yet (the
/// constructor, or `get_constructor` for a bare `new`, gives it one).
unsafe extern "C" fn create_object<T: LeanClass>(ce: *mut zend_class_entry) -> *mut zend_object {
    // SAFETY: `ce` is this class's entry, passed by the engine. The block is sized as
    // zend_object_alloc sizes it (the object, whose `std` ends with one property slot,
    // adjusted to the class's declared properties and guard slot) and allocated with
    // emalloc, which bails out rather than return null for an 8-aligned layout (the
    // zeroing zend_object_alloc also does is left out: `obj` is written as None before
    // anything reads it, and zend_object_std_init initialises `std`).
    unsafe {
        let slots = i64::from((*ce).default_properties_count)
            - i64::from((*ce).ce_flags & ZEND_ACC_USE_GUARDS == 0);
        let size = std::mem::size_of::<ZendClassObject<T>>() as i64
            + slots * std::mem::size_of::<zval>() as i64;
        let allocated = usize::try_from(size)
            .ok()
            .and_then(|size| Layout::from_size_align(size, 8).ok())
            .map_or(std::ptr::null_mut(), ext_php_rs::alloc::emalloc);
        let this = if allocated.is_null() {
            ext_php_rs_zend_object_alloc(std::mem::size_of::<ZendClassObject<T>>(), ce)
        } else {
            allocated.cast()
        }
        .cast::<ZendClassObject<T>>();
        std::ptr::write(&raw mut (*this).obj, None);
        let object = &raw mut (*this).std;
        zend_object_std_init(object, ce);
        object_properties_init(object, ce);
        (*object).handlers = OUR_HANDLERS.load(Ordering::Relaxed);
        object
    }
}

/// The objects' `free_obj`: drops the payload, then the standard part. A panic in the
/// drop cannot escape into the engine.
unsafe extern "C" fn free_object<T: LeanClass>(object: *mut zend_object) {
    // SAFETY: the engine frees a live object of ours, once; `class_object` checks it is
    // a ZendClassObject<T> before its payload is dropped in place.
    unsafe {
        if let Some(this) = object.as_mut().and_then(class_object::<T>) {
            let _ = catch_unwind(AssertUnwindSafe(|| {
                std::ptr::drop_in_place(&raw mut this.obj);
            }));
        }
        zend_object_std_dtor(object);
    }
}

/// The object handler the engine asks for a class's constructor, right after creating an
/// object in `new`.
///
/// For a bare `new` (no argument) it gives the object `T::bare_new()` on the spot and
/// answers "no constructor", so the engine skips the call: what the constructor would
/// have done costs no call frame. Anything else (arguments, Reflection's `newInstance()`,
/// `new` in a constant expression) gets the real constructor.
///
/// A bare `new` is recognised from the engine's state as ZEND_NEW leaves it: the current
/// frame is user code, its saved opline is a ZEND_NEW with no argument followed by the
/// constructor call, and that opline's result slot already holds this very object. When
/// any of that does not hold, the answer is the standard one, so a wrong guess can only
/// cost speed.
unsafe extern "C" fn get_constructor<T: LeanClass>(object: *mut zend_object) -> *mut zend_function {
    // SAFETY: the engine passes the object it is constructing.
    if unsafe { is_bare_new(object) } {
        let made = catch_unwind(AssertUnwindSafe(|| make_bare::<T>(object)));
        if matches!(made, Ok(true)) {
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
        if u32::from(function.type_) == ZEND_INTERNAL_FUNCTION {
            return false;
        }
        let Some(opline) = frame.opline.as_ref() else {
            return false;
        };
        // No positional argument, and the next opline is the constructor call itself:
        // exactly when ZEND_NEW skips that call for a class without a constructor. An
        // unpacked or named argument puts a SEND between them, so those are never skipped.
        if u32::from(opline.opcode) != ZEND_NEW
            || opline.extended_value != 0
            || u32::from((*std::ptr::from_ref(opline).add(1)).opcode) != ZEND_DO_FCALL
        {
            return false;
        }
        let result = std::ptr::from_ref(frame)
            .cast::<u8>()
            .add(opline.result.var as usize)
            .cast::<zval>();
        u32::from((*result).u1.v.type_) == IS_OBJECT && std::ptr::eq((*result).value.obj, object)
    }
}

/// Gives `object` what a bare `new` makes; false if it is not ours.
fn make_bare<T: LeanClass>(object: *mut zend_object) -> bool {
    // SAFETY: a live object the engine handed us.
    let Some(object) = (unsafe { object.as_mut() }) else {
        return false;
    };
    let Some(this) = class_object::<T>(object) else {
        return false;
    };
    if this.obj.is_none() {
        this.obj = Some(T::bare_new());
    }
    true
}

/// The `T` object around `object`, if `object` is one (its handler table is the class's),
/// initialised or not.
#[inline(always)]
pub fn class_object<T: RegisteredClass>(
    object: &mut zend_object,
) -> Option<&mut ZendClassObject<T>> {
    if !std::ptr::eq(object.handlers, OUR_HANDLERS.load(Ordering::Relaxed)) {
        return None;
    }
    let offset = std::mem::offset_of!(ZendClassObject<T>, std);
    // SAFETY: the handlers check above proves `object` is the `std` field of a
    // ZendClassObject<T>, which sits `offset` bytes into it.
    Some(unsafe {
        &mut *std::ptr::from_mut(object)
            .cast::<u8>()
            .sub(offset)
            .cast::<ZendClassObject<T>>()
    })
}
