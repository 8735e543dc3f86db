//! What the fast paths assume about the Zend engine, and on which PHP versions that was
//! checked.
//!
//! `router` and `route_array` go past the extension API in four places: the bare-`new`
//! shortcut reads the executing frame and its oplines (`ZEND_NEW` followed by
//! `ZEND_DO_FCALL`, the result slot) from `get_constructor`; the lean `create_object` and
//! `free_obj` size and free the object as `zend_object_alloc` does; the raw constructor
//! and `resolve()` handlers read arguments straight from the frame; route arrays are
//! persistent immutable arrays flagged as opcache flags its literals.
//!
//! Numbers and layouts come from the headers of the PHP being built against: the structs
//! through ext-php-rs's bindgen, and the opcodes, type and GC flag values through
//! `ext_php_rs::ffi` too (`.cargo/config.toml` adds their names to the bindings). What no
//! header says is how the engine behaves around them (`ZEND_NEW` saves its opline before
//! it creates the object, asks `get_constructor`, and skips a following `ZEND_DO_FCALL`
//! when there is no constructor and no argument; how `zend_object_alloc` sizes an object;
//! that an immutable array is never refcounted or freed). That was read in each version's
//! `zend_vm_def.h`, `zend_objects_API.h` and `zend_types.h`, and is exercised by the phpt
//! suite (086: every form of `new`) on each version in `TESTED_API_VERSIONS`.
//!
//! Built against any other PHP API version, every shortcut is off and the ordinary paths
//! run: ext-php-rs's object handlers and constructor, the argument parsing of
//! `resolve()`'s general path, and route arrays built per call. PHP refuses to load an
//! extension built for another API version, so deciding at compile time is exact.

use ext_php_rs::ffi;

/// The PHP API versions (`ZEND_MODULE_API_NO`) the shortcuts were checked on: PHP 8.4
/// and PHP 8.5.
pub const TESTED_API_VERSIONS: [u32; 2] = [20240924, 20250925];

/// The API version of the PHP this build is for.
pub const API_VERSION: u32 = ffi::ZEND_MODULE_API_NO;

/// Whether the engine shortcuts are on in this build: the PHP is one they were checked
/// on, and the `no-engine-shortcuts` feature (which tests the ordinary paths) is off.
pub const SHORTCUTS: bool = tested(API_VERSION) && !cfg!(feature = "no-engine-shortcuts");

const fn tested(api: u32) -> bool {
    let mut i = 0;
    while i < TESTED_API_VERSIONS.len() {
        if TESTED_API_VERSIONS[i] == api {
            return true;
        }
        i += 1;
    }
    false
}

// From the headers (Zend/zend_vm_opcodes.h, zend_types.h, zend_compile.h, zend_API.h),
// narrowed to the width of the fields they are compared with; the asserts prove nothing
// is lost in the narrowing.
pub const ZEND_NEW: u8 = ffi::ZEND_NEW as u8;
pub const ZEND_DO_FCALL: u8 = ffi::ZEND_DO_FCALL as u8;
pub const IS_NULL: u8 = ffi::IS_NULL as u8;
pub const IS_STRING: u8 = ffi::IS_STRING as u8;
pub const IS_ARRAY: u8 = ffi::IS_ARRAY as u8;
pub const IS_OBJECT: u8 = ffi::IS_OBJECT as u8;
pub const ZEND_INTERNAL_FUNCTION: u8 = ffi::ZEND_INTERNAL_FUNCTION as u8;
pub const GC_NOT_COLLECTABLE: u32 = ffi::GC_NOT_COLLECTABLE;
pub const GC_IMMUTABLE: u32 = ffi::GC_IMMUTABLE;
pub const GC_PERSISTENT: u32 = ffi::GC_PERSISTENT;
pub const Z_EXPECTED_STRING: u32 = ffi::_zend_expected_type_Z_EXPECTED_STRING;
pub const Z_EXPECTED_STRING_OR_NULL: u32 = ffi::_zend_expected_type_Z_EXPECTED_STRING_OR_NULL;

const fn fits_u8(value: u32) -> bool {
    value <= u8::MAX as u32
}

const _: () = {
    assert!(fits_u8(ffi::ZEND_NEW));
    assert!(fits_u8(ffi::ZEND_DO_FCALL));
    assert!(fits_u8(ffi::IS_NULL));
    assert!(fits_u8(ffi::IS_STRING));
    assert!(fits_u8(ffi::IS_ARRAY));
    assert!(fits_u8(ffi::IS_OBJECT));
    assert!(fits_u8(ffi::ZEND_INTERNAL_FUNCTION));
};

/// For `php --ri dw_router`: whether the shortcuts are on, and for which API version.
pub fn describe() -> String {
    if SHORTCUTS {
        format!("on (PHP API {API_VERSION})")
    } else if tested(API_VERSION) {
        format!("off (built with no-engine-shortcuts, PHP API {API_VERSION})")
    } else {
        format!("off (PHP API {API_VERSION} not tested)")
    }
}
