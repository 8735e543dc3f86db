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
/// FIFO, a device such as `/dev/zero`, a directory) is refused without being read, so
/// that nothing can block the command or grow it without bound ([`read_regular_file`]).
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
    if path == "-" {
        let mut bytes = Vec::new();
        std::io::stdin()
            .lock()
            .take(MAX_INPUT_BYTES + 1)
            .read_to_end(&mut bytes)
            .map_err(io_error)?;
        if bytes.len() as u64 > MAX_INPUT_BYTES {
            return Err(too_large());
        }
        return Ok(bytes);
    }
    read_regular_file(std::path::Path::new(path), MAX_INPUT_BYTES).map_err(
        |refused| match refused {
            Refused::Io(source) => io_error(source),
            Refused::TooLarge => too_large(),
            Refused::NotRegular(kind) => Error::Io {
                path: path.to_string(),
                source: std::io::Error::new(
                    std::io::ErrorKind::InvalidInput,
                    format!("is {kind}, not a regular file (use `-` to read stdin)"),
                ),
            },
        },
    )
}

/// Why [`read_regular_file`] returned no bytes; each caller words it.
#[derive(Debug)]
pub enum Refused {
    /// The file could not be looked at, opened or read.
    Io(std::io::Error),
    /// Not a regular file: `a FIFO`, `a device`, `a directory`, `a socket` or `a special
    /// file` (words that follow "is").
    NotRegular(&'static str),
    /// Longer than the limit the caller gave.
    TooLarge,
}

/// Reads the regular file at `path`, at most `limit` bytes (a file of exactly `limit` bytes
/// is read; one byte more is [`Refused::TooLarge`], after reading `limit + 1` bytes at
/// most): the one bounded file reader of dwctl (`apply` and the `--file` flags through
/// [`read_file`], `--traffic FILE`, `route --snapshot FILE`).
///
/// Nothing but a regular file is read, and nothing can block it: the path is checked
/// before it is opened (a device is not even opened), then opened with `O_NONBLOCK` (a FIFO
/// swapped in after the check opens at once instead of waiting for a writer) and checked
/// again on the descriptor itself (`fstat`), which is what is read.
pub fn read_regular_file(path: &std::path::Path, limit: u64) -> Result<Vec<u8>, Refused> {
    check_regular(std::fs::metadata(path).map_err(Refused::Io)?.file_type())
        .map_err(Refused::NotRegular)?;
    use std::os::unix::fs::OpenOptionsExt as _;
    // O_NONBLOCK, as Linux numbers it (asm-generic, x86 and arm alike); on a regular file
    // it changes nothing.
    const O_NONBLOCK: i32 = 0o4000;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(O_NONBLOCK)
        .open(path)
        .map_err(Refused::Io)?;
    check_regular(file.metadata().map_err(Refused::Io)?.file_type())
        .map_err(Refused::NotRegular)?;
    let mut bytes = Vec::new();
    file.take(limit.saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(Refused::Io)?;
    if bytes.len() as u64 > limit {
        return Err(Refused::TooLarge);
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

#[cfg(test)]
mod tests {
    use super::*;

    fn kind_of(refused: Result<Vec<u8>, Refused>) -> &'static str {
        match refused {
            Err(Refused::NotRegular(kind)) => kind,
            other => panic!("not refused as not regular: {other:?}"),
        }
    }

    #[test]
    fn reads_exactly_the_limit_and_refuses_one_byte_more() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("file");
        std::fs::write(&path, [7u8; 10]).unwrap();
        assert_eq!(read_regular_file(&path, 10).unwrap(), [7u8; 10]);
        assert!(matches!(
            read_regular_file(&path, 9),
            Err(Refused::TooLarge)
        ));
        // An empty file, and a limit of 0.
        std::fs::write(&path, []).unwrap();
        assert_eq!(read_regular_file(&path, 0).unwrap(), Vec::<u8>::new());
        std::fs::write(&path, [1]).unwrap();
        assert!(matches!(
            read_regular_file(&path, 0),
            Err(Refused::TooLarge)
        ));
        // The largest limit does not overflow.
        assert_eq!(read_regular_file(&path, u64::MAX).unwrap(), [1]);
    }

    #[test]
    fn refuses_fifos_devices_and_directories_without_blocking() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("fifo");
        let made = std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .expect("mkfifo");
        assert!(made.success());
        // No writer ever opens the FIFO: a blocking open would hang this test.
        assert_eq!(kind_of(read_regular_file(&fifo, 10)), "a FIFO");
        assert_eq!(
            kind_of(read_regular_file(std::path::Path::new("/dev/zero"), 10)),
            "a device"
        );
        assert_eq!(kind_of(read_regular_file(dir.path(), 10)), "a directory");
        assert!(matches!(
            read_regular_file(&dir.path().join("missing"), 10),
            Err(Refused::Io(error)) if error.kind() == std::io::ErrorKind::NotFound
        ));
    }
}
