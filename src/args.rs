//! Arguments of the raw method handlers, checked and converted by the engine's own rules
//! and with its own error messages, as `ZEND_PARSE_PARAMETERS` would.

use ext_php_rs::exception::PhpException;
use ext_php_rs::ffi::{
    _zend_expected_type_Z_EXPECTED_LONG_OR_NULL, _zend_expected_type_Z_EXPECTED_STRING,
    _zend_expected_type_Z_EXPECTED_STRING_OR_NULL, IS_LONG, IS_STRING, zend_long,
    zend_parse_arg_long_slow, zend_parse_arg_str_slow, zend_string,
    zend_wrong_parameter_type_error, zend_wrong_parameters_count_error, zval,
};
use ext_php_rs::types::{ZendStr, Zval};
use ext_php_rs::zend::{ExecuteData, ExecutorGlobals, ce};

/// The engine has thrown (an argument error, or a deprecation turned into an exception).
pub struct Thrown;

/// Throws a `ValueError`.
pub fn throw_value_error(message: &str) -> Thrown {
    PhpException::new(message.into(), 0, ce::value_error()).throw();
    Thrown
}

/// Throws an `Error`.
pub fn throw_error(message: &str) -> Thrown {
    PhpException::new(message.into(), 0, ce::error()).throw();
    Thrown
}

/// Checks the argument count as ZEND_PARSE_PARAMETERS would, with the engine's message.
pub fn check_count(ex: &ExecuteData, min: u32, max: u32) -> Result<u32, Thrown> {
    // SAFETY: `This.u2.num_args` is the argument count the engine set for this frame.
    let num_args = unsafe { ex.This.u2.num_args };
    if num_args < min || num_args > max {
        // SAFETY: called from the internal function whose frame is current.
        unsafe { zend_wrong_parameters_count_error(min, max) };
        return Err(Thrown);
    }
    Ok(num_args)
}

/// The bytes of a string zval; None for any other type.
#[inline(always)]
pub fn string_bytes(arg: &Zval) -> Option<&[u8]> {
    // SAFETY: a zval of type IS_STRING holds a live zend_string.
    unsafe {
        if u32::from(arg.u1.v.type_) != IS_STRING {
            return None;
        }
        arg.value.str_.as_ref().map(ZendStr::as_bytes)
    }
}

/// A `string` (or `?string`) parameter, parsed by the engine's own rules: strings as
/// they are; in coercive mode ints, floats, bools, Stringable objects (and null, with
/// PHP's deprecation) converted; under strict_types only strings. Any byte string is
/// fine: no UTF-8 check. `Ok(None)` is a null for a nullable parameter.
pub fn string(
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
                _zend_expected_type_Z_EXPECTED_STRING_OR_NULL
            } else {
                _zend_expected_type_Z_EXPECTED_STRING
            };
            zend_wrong_parameter_type_error(number, expected, arg_ptr);
        }
    }
    Err(Thrown)
}

/// A `?int $bucket` parameter (`method` and its argument `number` name it in errors),
/// parsed by the engine's own rules (coercive mode converts `"3"` and `3.0`; under
/// strict_types only ints), then checked: a negative bucket is a programming error, a
/// `ValueError`. Any bucket from 0 up is accepted here; one at or past the table's N
/// answers as without a bucket. `Ok(None)` for null or an absent argument.
pub fn bucket(arg: Option<&mut Zval>, method: &str, number: u32) -> Result<Option<u64>, Thrown> {
    let Some(arg) = arg else {
        return Ok(None);
    };
    if arg.is_null() {
        return Ok(None);
    }
    let value: zend_long = if let Some(value) = arg.long() {
        value
    } else {
        let mut dest: zend_long = 0;
        let arg_ptr: *mut zval = std::ptr::from_mut(arg);
        // SAFETY: `arg` is a live argument slot of the current frame; the engine reads it
        // (converting a copy) and writes `dest`.
        unsafe {
            if !zend_parse_arg_long_slow(arg_ptr, &mut dest, number) {
                if !ExecutorGlobals::has_exception() {
                    zend_wrong_parameter_type_error(
                        number,
                        _zend_expected_type_Z_EXPECTED_LONG_OR_NULL,
                        arg_ptr,
                    );
                }
                return Err(Thrown);
            }
        }
        dest
    };
    u64::try_from(value).map(Some).map_err(|_| {
        throw_value_error(&format!(
            "{method}(): Argument #{number} ($bucket) must be greater than or equal to 0"
        ))
    })
}

/// The bucket of an int zval in a frame, for the frame-reading fast path: `Some(None)`
/// for null, `Some(Some(b))` for an int from 0; None (have the arguments parsed) for
/// anything else.
#[inline(always)]
pub fn frame_bucket(arg: &Zval) -> Option<Option<u64>> {
    // SAFETY: the type tag says which member of the value is live.
    unsafe {
        match u32::from(arg.u1.v.type_) {
            ext_php_rs::ffi::IS_NULL => Some(None),
            IS_LONG => u64::try_from(arg.value.lval).ok().map(Some),
            _ => None,
        }
    }
}
