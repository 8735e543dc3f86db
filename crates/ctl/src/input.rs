//! What commands read besides etcd: values given inline or in a file (or stdin), bounded
//! and refused when not a regular file, and JSON objects given as flags.

use std::io::Read;

use serde_json::Value;

use crate::error::Error;

/// A value given inline, or read from a file or stdin.
pub fn read_input(inline: Option<&str>, file: Option<&str>, what: &str) -> Result<Vec<u8>, Error> {
    match (inline, file) {
        (Some(text), _) => Ok(text.as_bytes().to_vec()),
        (None, Some(path)) => read_file(path),
        (None, None) => Err(Error::Usage(format!(
            "give the {what} as an argument or with --file"
        ))),
    }
}

/// The largest file (or stdin) `apply`, `region set --file` and `policy set --file` read:
/// 1 MiB, well under etcd's default request limit of 1.5 MiB, so that a file that is read
/// can also be written in one transaction.
pub const MAX_INPUT_BYTES: u64 = 1024 * 1024;

/// Reads a regular file, or stdin for `-`, up to [`MAX_INPUT_BYTES`]. Anything else (a
/// FIFO, a device such as `/dev/zero`, a directory) is refused without being opened, so
/// that nothing can block the command or grow it without bound.
pub fn read_file(path: &str) -> Result<Vec<u8>, Error> {
    let io_error = |source| Error::Io {
        path: path.to_string(),
        source,
    };
    let too_large = || Error::Io {
        path: path.to_string(),
        source: std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!(
                "larger than the input limit of {MAX_INPUT_BYTES} bytes (1 MiB); \
                 split the change into several files"
            ),
        ),
    };
    let not_regular = |kind: &str| Error::Io {
        path: path.to_string(),
        source: std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!("is {kind}, not a regular file (use `-` to read stdin)"),
        ),
    };
    let mut bytes = Vec::new();
    if path == "-" {
        std::io::stdin()
            .lock()
            .take(MAX_INPUT_BYTES + 1)
            .read_to_end(&mut bytes)
            .map_err(io_error)?;
    } else {
        check_regular(std::fs::metadata(path).map_err(io_error)?.file_type())
            .map_err(not_regular)?;
        // Opened without blocking (a FIFO swapped in after the check must not hang us),
        // and checked again on the descriptor itself.
        use std::os::unix::fs::OpenOptionsExt as _;
        const O_NONBLOCK: i32 = 0o4000;
        let file = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(O_NONBLOCK)
            .open(path)
            .map_err(io_error)?;
        check_regular(file.metadata().map_err(io_error)?.file_type()).map_err(not_regular)?;
        file.take(MAX_INPUT_BYTES + 1)
            .read_to_end(&mut bytes)
            .map_err(io_error)?;
    }
    if bytes.len() as u64 > MAX_INPUT_BYTES {
        return Err(too_large());
    }
    Ok(bytes)
}

fn check_regular(kind: std::fs::FileType) -> Result<(), &'static str> {
    use std::os::unix::fs::FileTypeExt as _;
    if kind.is_file() {
        Ok(())
    } else if kind.is_dir() {
        Err("a directory")
    } else if kind.is_fifo() {
        Err("a FIFO")
    } else if kind.is_char_device() || kind.is_block_device() {
        Err("a device")
    } else if kind.is_socket() {
        Err("a socket")
    } else {
        Err("a special file")
    }
}

/// [`read_file`] on a blocking thread, so that a signal can stop the command while it
/// waits for stdin.
pub async fn read_file_async(path: &str) -> Result<Vec<u8>, Error> {
    let owned = path.to_string();
    tokio::task::spawn_blocking(move || read_file(&owned))
        .await
        .map_err(|error| Error::Failed(format!("reading {path}: {error}")))?
}

/// A JSON object given on the command line (`--meta`); a usage error (exit 2) naming the
/// flag otherwise.
pub fn json_object_arg(field: &str, text: &str) -> Result<serde_json::Map<String, Value>, Error> {
    match serde_json::from_str::<Value>(text) {
        Ok(Value::Object(object)) => Ok(object),
        Ok(_) => Err(Error::Usage(format!("--{field} must be a JSON object"))),
        Err(error) => Err(Error::Usage(format!(
            "--{field} is not valid JSON: {error}"
        ))),
    }
}
